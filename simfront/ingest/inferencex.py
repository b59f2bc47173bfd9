"""InferenceX's public results API: a JSON array of runs, one object per (deployment, concurrency).

Written by the InferenceX dashboard's ``/api/benchmarks`` endpoint (SemiAnalysisAI/InferenceX-app; a snapshot is
the app's test fixture ``packages/app/cypress/fixtures/api/benchmarks.json``). Keys per run: ``hardware`` (mi355x,
b200, ...), ``framework`` (sglang, trt, vllm, atom, dynamo-sglang, ...), ``model`` (the app's short key: dsr1,
gptoss, ...), ``precision`` (fp8, fp4), ``spec_method`` (mtp, none), ``disagg``, ``prefill_*`` / ``decode_*``
(``tp`` is the engine's TP flag, ``dp_attention`` attention DP over those GPUs, ``num_workers``), ``num_prefill_gpu``
/ ``num_decode_gpu`` (an aggregated run names its GPUs in both), ``isl``, ``osl``, ``conc``, ``image``, ``date`` and
``metrics``: latencies in seconds (``mean_ttft``, ``mean_tpot``, ``mean_e2el``; ``mean_itl`` is the gap between
streamed chunks, which the recipes send every 10-30 tokens, so it is not read), ``median_intvty``
(tok/s per user, 1 / median TPOT), ``output_tput_per_gpu`` (output tok/s per GPU; per DECODE GPU in a disaggregated
run, ``input_tput_per_gpu`` per prefill GPU) and ``tput_per_gpu`` (input + output tok/s per GPU).

The same conventions as the calibration set's InferenceMAX rows (calibration/README.md, whose rows were converted
from this API): TTFT and TPOT are the means, tok/s per user the median interactivity, output tok/s per GPU counts
every GPU of the deployment. The client is InferenceX's ``benchmark_serving.py`` on its random dataset: lengths
uniform in [0.8 L, L] and ``num_prompts = 10 x concurrency`` (calibration/README.md; InferenceX
benchmarks/benchmark_lib.sh), which the API does not repeat, so the reader sets both, each with a note.
"""

from __future__ import annotations

from .common import Record, RecordError, normalize_engine, set_attention_dp, set_measured_on, set_spec, to_bool, to_float, to_int

# the API's model keys -> simfront catalog ids, for the keys whose checkpoint is known: dsr1 is DeepSeek-R1-0528 (the
# calibration set's rows converted from this API name it). Any other key is kept as written: `validate` then names it
# as an unknown model and `--model` gives the checkpoint.
MODELS = {"dsr1": "deepseek-r1"}
# InferenceX benchmark client (calibration/README.md "InferenceMAX rows"): random lengths in [0.8 L, L], ten prompts
# per client
RANGE_RATIO = 0.8
PROMPTS_PER_CLIENT = 10
SECONDS = 1000.0  # the API's latencies are seconds; the canonical record holds milliseconds
MEANINGS = {
    "ttft_ms": "InferenceX API metrics.mean_ttft (s in source): mean time to first token",
    "tpot_ms": "InferenceX API metrics.mean_tpot (s in source): mean per-request (E2E - TTFT)/(OSL - 1)",
    "e2el_ms": "InferenceX API metrics.mean_e2el (s in source): mean request latency",
    "tok_s_per_user": "InferenceX API metrics.median_intvty: median interactivity, 1 / median TPOT",
}


def _engine(framework, image) -> tuple[str | None, str | None]:
    """(engine id, version): the engine the framework key names (dynamo-sglang, sglang-disagg and mori-sglang run
    SGLang; an engine simfront has no profile for, e.g. atom, keeps its key), the version from the image tag only when
    the image names that engine (an ATOM image's tag carries the ROCm release)."""
    raw = str(framework or "").strip().lower()
    engine = normalize_engine(raw)[0]
    image_engine, version = normalize_engine(image)
    return engine or (raw or None), version if engine and image_engine == engine else None


def _role(rec: Record, obj: dict, role: str) -> None:
    """prefill_* / decode_* sizes of a disaggregated run."""
    tp = to_int(obj.get(f"{role}_tp"), f"{role}_tp")
    set_attention_dp(rec, f"{role}_", tp, to_bool(obj.get(f"{role}_dp_attention"), f"{role}_dp_attention"),
                  f"{role}_dp_attention")
    rec.fields[f"{role}_ep"] = to_int(obj.get(f"{role}_ep"), f"{role}_ep")
    workers = to_int(obj.get(f"{role}_num_workers"), f"{role}_num_workers")
    if not workers:
        raise RecordError(f"disaggregated run with {role}_num_workers = {obj.get(f'{role}_num_workers')!r}: "
                          "the deployment cannot be sized")
    gpus = to_int(obj.get(f"num_{role}_gpu"), f"num_{role}_gpu")
    if tp and gpus != workers * tp:
        # the API writes some runs' worker sizes in other units (GB200 trays, attention-DP ranks); the per-worker
        # layout cannot be told from them, though the GPU count is what its per-GPU rates count
        raise RecordError(f"num_{role}_gpu = {gpus} is not {role}_num_workers x {role}_tp = {workers}x{tp}: "
                          f"the {role} workers' layout cannot be told")
    rec.fields[f"{role}_workers"] = workers
    rec.fields[f"{role}_gpus"] = gpus


def parse_record(obj: dict, line: int) -> Record:
    rec = Record(line)
    metrics = obj.get("metrics")
    if not isinstance(metrics, dict):
        raise RecordError("metrics is not an object")
    key = str(obj.get("model") or "").strip()
    rec.fields["model"] = MODELS.get(key.lower(), key or None)
    if key.lower() in MODELS:
        rec.notes["model"] = f"InferenceX model key {key!r}"
    rec.fields["gpu"] = obj.get("hardware")
    engine, version = _engine(obj.get("framework"), obj.get("image"))
    rec.fields.update(engine=engine, engine_version=version)
    rec.notes["engine"] = f"framework {obj.get('framework')!r}, image {obj.get('image')!r}"
    set_measured_on(rec, obj.get("date"), "date")
    rec.fields["precision"] = obj.get("precision")
    set_spec(rec, obj.get("spec_method"), "spec_method")
    rec.fields.update(isl=to_float(obj.get("isl"), "isl"), osl=to_float(obj.get("osl"), "osl"),
                      concurrency=to_float(obj.get("conc"), "conc"))
    disagg = bool(to_bool(obj.get("disagg"), "disagg"))
    rec.fields["mode"] = "disagg" if disagg else "agg"
    n_prefill = to_int(obj.get("num_prefill_gpu"), "num_prefill_gpu") or 0
    n_decode = to_int(obj.get("num_decode_gpu"), "num_decode_gpu") or 0
    if disagg:
        _role(rec, obj, "prefill")
        _role(rec, obj, "decode")
        gpus = n_prefill + n_decode
        if obj.get("workers") is not None:
            rec.warnings.append("per-worker layouts (workers) not read; the prefill_*/decode_* sizes are used")
            rec.extra["workers"] = obj["workers"]
    else:
        tp = to_int(obj.get("decode_tp"), "decode_tp")
        set_attention_dp(rec, "", tp, to_bool(obj.get("decode_dp_attention"), "decode_dp_attention"), "decode_dp_attention")
        rec.fields["ep"] = to_int(obj.get("decode_ep"), "decode_ep")
        # an aggregated replica runs on its TP flag's GPUs; the API's num_decode_gpu is tp x ep in some runs, while
        # their per-GPU rates count tp GPUs (Little's law on the run's own latencies says so)
        gpus = tp or n_decode
        if tp and n_decode and n_decode != tp:
            rec.notes["num_gpus"] = f"decode_tp = {tp} GPUs; the source's num_decode_gpu = {n_decode} (tp x ep) not used"
    rec.fields["num_gpus"] = gpus or None

    # mean_itl is not read: it is the gap between streamed chunks, and the recipes stream every 10-30 tokens
    for name, source in (("ttft_ms", "mean_ttft"), ("tpot_ms", "mean_tpot"), ("e2el_ms", "mean_e2el")):
        value = to_float(metrics.get(source), f"metrics.{source}")
        if value is not None:
            rec.set_metric(name, value * SECONDS, MEANINGS[name])
    rec.set_metric("tok_s_per_user", metrics.get("median_intvty"), MEANINGS["tok_s_per_user"])
    out = to_float(metrics.get("output_tput_per_gpu"), "metrics.output_tput_per_gpu")
    if out is not None and gpus:
        # output tok/s over every GPU: per decode GPU in a disaggregated run, per GPU in an aggregated one
        per_gpu = out * n_decode / gpus if disagg else out
        rec.set_metric("output_tok_s_per_gpu", per_gpu, "InferenceX API metrics.output_tput_per_gpu"
                       + (" (per decode GPU) x num_decode_gpu / all GPUs" if disagg else ""))
        rec.set_metric("output_tok_s_total", per_gpu * gpus, "output tok/s per GPU x all GPUs")
    rec.fields["random_range_ratio"] = RANGE_RATIO
    rec.notes["random_range_ratio"] = "InferenceX client: random dataset, --random-range-ratio 0.8 (calibration/README.md)"
    if rec.fields.get("concurrency"):
        rec.fields["num_prompts"] = PROMPTS_PER_CLIENT * rec.fields["concurrency"]
        rec.notes["num_prompts"] = "InferenceX client: num_prompts = 10 x concurrency (calibration/README.md)"
    rec.extra.update(run_url=obj.get("run_url"), image=obj.get("image"), framework=obj.get("framework"),
                     is_multinode=obj.get("is_multinode"))
    return rec

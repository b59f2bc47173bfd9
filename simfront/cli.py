"""simfront command line: a thin layer over the Python API (``simfront.api``).

Every command prints a human-readable table by default and one JSON document with ``--json``.
User errors print one line ``error: ...`` and exit with status 2, never a traceback.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
from typing import List, Optional

import typer

from . import __version__
from .errors import SimfrontError
from .format import print_table, progress

# The library (api, and through it numpy, pydantic and the search) is imported inside each command,
# so `simfront --help`, `--version` and shell completion start in a fraction of the time.

LAZY_MODULES = ("api", "inputs", "report")  # library modules the commands import when they run


def __getattr__(name: str):
    """``cli.api``, ``cli.inputs``, ``cli.report``: the modules the commands use, imported on first access
    (PEP 562), so code that reaches them through this module (tests patching ``cli.api.predict``) still can."""
    if name in LAZY_MODULES:
        import importlib

        return importlib.import_module(f"{__package__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PROG = "simfront"  # the command's name: help text, and the shell-completion variable _SIMFRONT_COMPLETE
COMPLETE_ENV = "_SIMFRONT_COMPLETE"  # set by the completion script the shell runs (typer / click protocol)

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="simfront: predict the latency-throughput frontier of LLM serving configurations from hardware and model specs.",
)

PrecisionOpt = typer.Option("native", "--precision", help="Weight precision: native, bf16, fp8, fp8_block, nvfp4, mxfp4, w4a16.")
KvOpt = typer.Option("native", "--kv-dtype", help="KV-cache dtype: native, bf16, fp8.")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document (stable interface, see README).")
CalOpt = typer.Option(None, "--calibration", help="Calibration profile YAML written by `simfront calibrate`.")
IslOpt = typer.Option(1024, "--isl", help="Mean input (prompt) tokens per request.")
OslOpt = typer.Option(1024, "--osl", help="Mean output (generated) tokens per request.")
PrefixOpt = typer.Option(0.0, "--prefix-hit", help="Share of input tokens served from the prefix cache (0-1).")
EngineOpt = typer.Option(None, "--engine", help="Engine overhead profile: trtllm, sglang, vllm (default: average).")
RangeRatioOpt = typer.Option(None, "--random-range-ratio", help="A benchmark whose lengths are uniform in [r x ISL, ISL] and [r x OSL, OSL] (SGLang bench_serving / InferenceX spelling; costed at the mean lengths; 1 = fixed lengths, which a prefill-first engine such as SGLang serves in waves). Default: lengths that vary, as a service's do.")
TtftOpt = typer.Option(None, "--ttft", help="SLA: max mean TTFT in ms.")
TpotOpt = typer.Option(None, "--tpot", help="SLA: max mean TPOT in ms.")
MinTokOpt = typer.Option(None, "--min-tok-s-user", help="SLA: min tokens/s per user.")
KvListOpt = typer.Option(None, "--kv-dtype", help="Comma list of KV dtypes (default: native, fp8 where supported).")
SpecListOpt = typer.Option(None, "--spec", help="Speculative decoding to search: none, mtp, eagle, ngram (comma list). Default: none + MTP if the model ships it.")
ModeOpt = typer.Option(None, "--mode", help="agg, disagg or agg,disagg (default both).")
MaxPpOpt = typer.Option(None, "--max-pp", help="Most pipeline stages per worker (1: no pipeline parallelism). Default: simfront's range (up to 9).")
LayoutOpt = typer.Option(None, "--layout", help="Layout classes to search, comma list: tp (tensor parallel), tp+ep (experts over GPUs by expert parallelism), dpa+ep (attention data-parallel with EP); pipeline stages may join any. Default: every class.")
RoutingSkewOpt = typer.Option(None, "--routing-skew", help="MoE routing: balanced, or a power-law exponent of tokens over experts (a measured skew; default 1.01, production-typical).")
TwoBatchOverlapOpt = typer.Option(False, "--two-batch-overlap", help="The engine runs two-batch overlap (SGLang --enable-two-batch-overlap, vLLM --enable-dbo): attention-DP + EP steps run as two micro-batches, each one's all-to-all hidden behind the other's compute. Default off, as engines ship it.")
SpecKOpt = typer.Option(None, "--spec-k", help="Draft tokens per step (default: each method searched at 1-4 drafts).")
ExplainSpecKOpt = typer.Option(None, "--spec-k", help="Draft tokens per step (default: 1 for MTP, 3 for EAGLE and n-gram).")
AcceptanceOpt = typer.Option(None, "--acceptance", help="Per-token draft acceptance probability (0-1).")
QuietOpt = typer.Option(False, "--quiet", "-q", help="No progress bar on stderr (there is none when stderr is not a terminal).")


def _complete_model(incomplete: str) -> list[str]:
    """Shell completion of --model: catalog ids."""
    from .models import catalog_ids

    return [m for m in catalog_ids() if m.startswith(incomplete.lower())]


def _complete_gpus(incomplete: str) -> list[str]:
    """Shell completion of --gpus: COUNTxGPU with the catalog's GPU ids (8x when no count is typed yet)."""
    from .hardware import catalog

    count, sep, gpu = incomplete.partition("x")
    if not sep:
        count, gpu = (incomplete, "") if incomplete.isdigit() else ("8", incomplete)
    return [f"{count}x{g}" for g in catalog() if g.startswith(gpu.lower())]


ModelOpt = typer.Option(..., "--model", "-m", help="Catalog id (kimi-k3), Hugging Face id (deepseek-ai/DeepSeek-R1) or path to a config.json.",
                        autocompletion=_complete_model)
GpusOpt = typer.Option(..., "--gpus", "-g", help="GPU set as COUNTxGPU, e.g. 8xB200, 16xH200, 72xGB200.", autocompletion=_complete_gpus)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"{PROG} {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                  help="Print the simfront version and exit.")) -> None:
    """simfront: predict the latency-throughput frontier of LLM serving configurations from hardware and model specs."""


def _finite(o):
    """``o`` with every non-finite float (NaN, +-Infinity) replaced by None: JSON has no such numbers."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _json_ready(o):
    """Plain JSON types throughout (numpy scalars and arrays, paths ... via api.json_default)."""
    if isinstance(o, dict):
        return {k: _json_ready(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_json_ready(v) for v in o]
    if o is None or isinstance(o, (str, bool, int, float)):
        return o
    from .api import json_default

    return _json_ready(json_default(o))


def _emit_json(obj) -> None:
    """One standard JSON document: non-finite numbers become null (``allow_nan=False`` guarantees no NaN token)."""
    sys.stdout.write(json.dumps(_finite(_json_ready(obj)), indent=2, allow_nan=False) + "\n")


def _load_calibration(path: Optional[str]) -> None:
    if path:
        from . import api

        api.use_calibration(path)


@app.command("models")
def models_cmd(as_json: bool = JsonOpt) -> None:
    """List the model catalog: parameters, architecture, native precision."""
    from . import api

    rows = api.list_models()
    if as_json:
        return _emit_json(rows)
    print_table(rows, ["name", ("total_params", "total", "{:.1f}B", 1e-9), ("active_params", "active", "{:.1f}B", 1e-9), "native_precision", "architecture"])


@app.command("hardware")
def hardware_cmd(as_json: bool = JsonOpt) -> None:
    """List the accelerator catalog: dense peaks, memory, links, power, price."""
    from . import api

    rows = api.list_hardware()
    if as_json:
        return _emit_json(rows)
    print_table(rows, ["id", "name", ("bf16_tflops", "BF16 TF", "{:,.0f}"), ("fp8_tflops", "FP8 TF", "{:,.0f}"), ("fp4_tflops", "FP4 TF", "{:,.0f}"),
                       ("hbm_gib", "HBM GiB", "{:,.0f}"), ("hbm_tb_s", "HBM TB/s", "{:.2f}"), ("scaleup_gb_s", "link GB/s/dir", "{:,.0f}"),
                       "scaleup_domain", ("power_w", "W", "{:,.0f}"), ("price_usd_per_hour", "$/h", "{:.2f}")])


@app.command("memory")
def memory_cmd(
    model: str = ModelOpt,
    gpus: str = GpusOpt,
    precision: str = PrecisionOpt,
    kv_dtype: str = KvOpt,
    isl: int = typer.Option(1024, "--isl", help="Input tokens per request."),
    osl: int = typer.Option(1024, "--osl", help="Output tokens per request."),
    tp: Optional[int] = typer.Option(None, "--tp", help="Tensor parallel size (default: best fit)."),
    pp: int = typer.Option(1, "--pp", help="Pipeline-parallel size."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel size (MoE)."),
    attention_dp: int = typer.Option(1, "--attention-dp", help="Attention data-parallel size."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Size the KV pool as this engine does (vllm, sglang, trtllm) with its release's default memory fraction, or --gpu-memory-fraction; default: the pool simfront's launch lines give."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="The --engine release whose default fraction applies (default: the newest simfront knows)."),
    gpu_memory_fraction: Optional[str] = typer.Option(None, "--gpu-memory-fraction", help="With --engine: the fraction the engine is launched with, in its own terms (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static, TensorRT-LLM free_gpu_memory_fraction), or 'default'."),
    as_json: bool = JsonOpt,
) -> None:
    """Does the model fit? Weights per GPU, KV bytes per token, KV capacity, fewest GPUs that fit."""
    from . import api, report

    v = api.memory(model, gpus, precision=precision, kv_dtype=kv_dtype, isl=isl, osl=osl, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp,
                   engine=engine, engine_version=engine_version, gpu_memory_fraction=gpu_memory_fraction)
    if as_json:
        return _emit_json(v)
    report.print_memory(v)


def _csv_list(s: Optional[str]) -> Optional[list]:
    return [x.strip() for x in s.split(",") if x.strip()] if s else None


def _values(flag: str, s: Optional[str]) -> Optional[list]:
    """A comma list the user gave: None when not given, an error for an empty item (nothing dropped silently)."""
    if s is None:
        return None
    vals = [x.strip() for x in s.split(",")]
    if not all(vals):
        raise SimfrontError(f"{flag} {s!r}: empty value in the comma list; give values such as {flag} a,b")
    return vals


def _settings(flag: str, s: Optional[str]) -> Optional[dict]:
    """``name=value,...`` the user gave as a dict (None when not given); a malformed item is an error."""
    items = _values(flag, s)
    if items is None:
        return None
    bad = [x for x in items if "=" not in x or not x.split("=", 1)[0].strip() or not x.split("=", 1)[1].strip()]
    if bad:
        raise SimfrontError(f"{flag} {s!r}: {bad[0]!r} is not name=value; give e.g. {flag} turns=12,tool_tokens=2048")
    return {k.strip(): v.strip() for k, v in (x.split("=", 1) for x in items)}


def _priced_release(engine: str | None, launch: str | None, version: str | None) -> tuple[str | None, str | None]:
    """(the release ``--engine`` is priced at, a note) for ``--engine-version``: it names the release of ``--engine``,
    and of ``--launch`` when that is the same engine or no profile engine is given; naming neither is an error."""
    from .inputs import check_engine

    if version is None:
        return None, None
    if engine is None and launch is None:
        raise SimfrontError(f"--engine-version {version}: name the engine it is a release of (--engine, or --launch)")
    if engine is None:
        return None, None  # the release of the --launch engine only: its flag spellings
    if launch is not None and check_engine(launch) != engine:
        return None, (f"--engine-version {version} spells --launch {launch}'s flags; the --engine {engine} profile is "
                      "priced at its newest release family")
    return version, None


@app.command("predict")
def predict_cmd(
    model: str = ModelOpt,
    gpus: str = GpusOpt,
    isl: Optional[int] = typer.Option(None, "--isl", help="Mean input tokens per request (default 1024, or set by --workload)."),
    osl: Optional[int] = typer.Option(None, "--osl", help="Mean output tokens per request (default 1024, or set by --workload)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Client concurrency: keep configurations with about this many requests in flight."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Request rate (req/s) the configuration must sustain."),
    ttft: Optional[float] = TtftOpt,
    tpot: Optional[float] = TpotOpt,
    min_tok_s_user: Optional[float] = MinTokOpt,
    precision: Optional[str] = typer.Option(None, "--precision", help="Comma list of weight precisions to search (default: native + cheaper ones the GPU supports)."),
    kv_dtype: Optional[str] = KvListOpt,
    spec: Optional[str] = SpecListOpt,
    spec_k: Optional[int] = SpecKOpt,
    acceptance: Optional[float] = AcceptanceOpt,
    mode: Optional[str] = ModeOpt,
    layout: Optional[str] = LayoutOpt,
    max_pp: Optional[int] = MaxPpOpt,
    price: Optional[float] = typer.Option(None, "--price", help="USD per GPU-hour (default: the catalog price)."),
    prefix_hit: Optional[float] = typer.Option(None, "--prefix-hit", help="Share of input tokens served from the prefix cache (0-1; default 0, or set by --workload)."),
    workload: Optional[str] = typer.Option(None, "--workload", help="Workload preset: agentic-coding (multi-turn sessions whose prompts grow by each turn's output and tool result; sets --isl, --osl and --prefix-hit)."),
    routing: Optional[str] = typer.Option(None, "--routing", help="With --workload: kv-aware (a session's turns go to the replica holding its KV; default) or round-robin."),
    replicas: Optional[int] = typer.Option(None, "--replicas", help="With --workload: engine replicas the router spreads sessions over (default 8; round-robin finds a session's KV 1 time in this many)."),
    workload_set: Optional[str] = typer.Option(None, "--workload-set", help="With --workload: session knobs, e.g. turns=12,first_prompt=8192,output_tokens=512,tool_tokens=2048."),
    routing_skew: Optional[str] = RoutingSkewOpt,
    two_batch_overlap: bool = TwoBatchOverlapOpt,
    engine: Optional[str] = EngineOpt,
    html: Optional[str] = typer.Option(None, "--html", help="Write a self-contained offline plotly page of the frontier."),
    csv_path: Optional[str] = typer.Option(None, "--csv", help="Write every frontier point as CSV."),
    show_all: bool = typer.Option(False, "--all", help="Print every frontier point, not a thinned 8-15."),
    launch: Optional[str] = typer.Option(None, "--launch", help="Print the engine launch and benchmark commands (vllm, sglang, trtllm) for the best point under the SLA, else the knee."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="Engine release (e.g. 0.5.12): the scheduler family --engine is priced with (SGLang >= 0.5.13 overlaps speculative decoding) and the flags --launch spells; default the newest release simfront knows."),
    prompts_per_client: Optional[float] = typer.Option(None, "--prompts-per-client", help="Predict a benchmark run instead of steady state: K prompts per client (e.g. 10 for num_prompts = 10 x concurrency), the first of each sent at once; throughput is the run's, over its wall time."),
    random_range_ratio: Optional[float] = RangeRatioOpt,
    tails: bool = typer.Option(False, "--tails", help="Add p50/p90/p99 TTFT and TPOT to the frontier points (step-level simulation; a few seconds, up to about 20 s where a point holds tens of thousands of clients, e.g. a small model on 64+ GPUs) and, with --ttft/--tpot, their goodput (requests/s whose own TTFT and TPOT meet the SLA)."),
    sla_percentile: Optional[int] = typer.Option(None, "--sla-percentile", help="Judge --ttft/--tpot at this percentile (50, 90 or 99) of the simulated frontier points instead of the mean."),
    quality: Optional[str] = typer.Option(None, "--quality", help="Quality as a third axis: your scores per weight format, KV dtype (kv:fp8) and speculative method, e.g. nvfp4=0.97,fp8_block=1.0,kv:fp8=0.995, or a YAML file; simfront never invents scores."),
    calibration: Optional[str] = CalOpt,
    as_json: bool = JsonOpt,
    quiet: bool = QuietOpt,
) -> None:
    """The predicted latency-throughput frontier of every sensible configuration (the main job)."""
    from . import api, inputs, report

    inputs.check_output_path("--html", html)
    inputs.check_output_path("--csv", csv_path)
    modes = _values("--mode", mode)
    inputs.check_modes(modes)
    engine = inputs.check_engine(engine)
    if launch is not None:
        from .hardware import parse_gpus

        inputs.check_engine_gpu(launch, parse_gpus(gpus).hardware, "--launch")  # an engine that cannot run there: before the search
    engine_version = inputs.check_engine_version(engine_version)
    price_version, version_note = _priced_release(engine, launch, engine_version)
    _load_calibration(calibration)
    # a search over a large GPU set, or the step-level simulation behind --tails, takes seconds: a pulsing bar on stderr
    with progress(f"predicting {model} on {gpus}" + (", simulating the frontier's tails" if tails or sla_percentile else ""),
                  quiet=quiet or as_json):
        res = api.predict(model, gpus, isl=isl, osl=osl, concurrency=concurrency, rate=rate, ttft_ms=ttft, tpot_ms=tpot,
                          min_tok_s_user=min_tok_s_user, precision=_values("--precision", precision), kv_dtype=_values("--kv-dtype", kv_dtype),
                          spec=spec, spec_k=spec_k, acceptance=acceptance, modes=modes, price=price, prefix_hit=prefix_hit, engine=engine,
                          quality=quality, tails=tails, sla_percentile=sla_percentile, prompts_per_client=prompts_per_client,
                          workload=workload, routing=routing, replicas=replicas, workload_set=_settings("--workload-set", workload_set),
                          routing_skew=routing_skew, random_range_ratio=random_range_ratio, engine_version=price_version,
                          layout=_values("--layout", layout), max_pp=max_pp, two_batch_overlap=two_batch_overlap)
    if version_note:
        res["notes"].append(version_note)
    isl, osl = res.workload.isl, res.workload.osl
    points = res.points
    if launch and res["fits"]:
        target, why = api.launch_target(res, launch, engine_version)
        res["launch"] = (api.launch_for(target, model, gpus, launch, isl, osl, engine_version, random_range_ratio,
                                        prompts_per_client, res.workload.prefix_hit or 0.0, engine or "default",
                                        two_batch_overlap=two_batch_overlap)
                         if target else None)
        if why:
            res["notes"].append(why)
    if html and res["fits"]:
        report.write_frontier_html(res, points, html)
    if csv_path and res["fits"]:
        report.write_csv(res["frontier"], csv_path)
    unwritten = [f for f, v in (("--html", html), ("--csv", csv_path)) if v and not res["fits"]]
    if unwritten:
        res["notes"].append(f"no configuration fits, so {' and '.join(unwritten)} {'was' if len(unwritten) == 1 else 'were'} not written")
    if not res["fits"]:  # the model fits on no layout of these GPUs: bad input, one error line and a non-zero exit
        if as_json:
            _emit_json(res)  # the document still says why (fits: false, memory), for scripts
        _fail(_no_fit_message(res, gpus))
    if as_json:
        return _emit_json(res)
    report.print_predict(res, show_all=show_all)
    if res.get("launch"):
        report.print_launch(res["launch"])
    if html and res["fits"]:
        print(f"wrote {html}")
    if csv_path and res["fits"]:
        print(f"wrote {csv_path}")


def _no_fit_message(res, gpus: str) -> str:
    """The one error line of a ``predict`` whose model fits on no layout of the GPU set: the memory verdict's
    reason (which names the GPU sets it does fit on), or the options that excluded every layout."""
    mem = res.get("memory") or {}
    if not mem.get("fits", True) and mem.get("reason"):
        also = mem.get("alternatives") or []
        more = f" (also on {', '.join(also[:4])}{' and more' if len(also) > 4 else ''})" if also else ""
        return f"--gpus {gpus}: {mem['reason']}{more}; 'simfront memory' shows the breakdown"
    from .api import no_frontier_reason

    return f"--gpus {gpus}: {res['model']}: {no_frontier_reason(res)}"  # a layout rule or the options, not the memory


@app.command("explain")
def explain_cmd(
    model: str = ModelOpt,
    gpus: str = GpusOpt,
    tp: int = typer.Option(1, "--tp", help="Attention tensor-parallel size."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel size (MoE)."),
    attention_dp: int = typer.Option(1, "--attention-dp", help="Attention data-parallel size."),
    pp: int = typer.Option(1, "--pp", help="Pipeline-parallel size."),
    batch: int = typer.Option(..., "--batch", help="Requests per attention-DP rank in the step (a frontier point's batch/rank)."),
    ctx: Optional[int] = typer.Option(None, "--ctx", help="Decode: cached context per request (a bare step). Prefill: prompt length."),
    isl: Optional[int] = typer.Option(None, "--isl", help="With --osl: the decode step of a serving point, costed exactly as predict does."),
    osl: Optional[int] = typer.Option(None, "--osl", help="Output tokens per request (with --isl)."),
    phase: str = typer.Option("decode", "--phase", help="decode or prefill."),
    mode: str = typer.Option("agg", "--mode", help="agg (decode-only and mixed prefill steps) or disagg (a decode worker's pure decode step)."),
    precision: str = PrecisionOpt,
    kv_dtype: str = KvOpt,
    spec: Optional[str] = typer.Option(None, "--spec", help="Speculative decoding: mtp, eagle, ngram (draft passes and accepted tokens enter the step)."),
    spec_k: Optional[int] = ExplainSpecKOpt,
    acceptance: Optional[float] = AcceptanceOpt,
    engine: Optional[str] = typer.Option(None, "--engine", help="Engine profile: trtllm, sglang, vllm (default: average)."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="With --engine: the release whose scheduler family is priced (e.g. 0.5.12); default the newest simfront knows."),
    chunk_tokens: Optional[int] = typer.Option(None, "--chunk-tokens", help="Engine token budget per step (a frontier point's chunk_tokens; default 8192)."),
    routing_skew: Optional[str] = RoutingSkewOpt,
    two_batch_overlap: bool = TwoBatchOverlapOpt,
    random_range_ratio: Optional[float] = RangeRatioOpt,
    calibration: Optional[str] = CalOpt,
    as_json: bool = JsonOpt,
) -> None:
    """One step, op by op (time, bound, FLOPs, bytes, intensity), and every term from the op sum to the step predict uses."""
    from . import api, inputs, report

    _load_calibration(calibration)
    res = api.explain(model, gpus, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, batch=batch, ctx=ctx, phase=phase,
                      precision=precision, kv_dtype=kv_dtype, spec=spec, spec_k=spec_k, acceptance=acceptance, isl=isl, osl=osl,
                      engine=engine, chunk_tokens=chunk_tokens, mode=mode, random_range_ratio=random_range_ratio,
                      engine_version=_priced_release(engine, None, inputs.check_engine_version(engine_version))[0],
                      routing_skew=routing_skew, two_batch_overlap=two_batch_overlap)
    if as_json:
        return _emit_json(res)
    report.print_explain(res)


@app.command("validate")
def validate_cmd(
    files: Optional[List[str]] = typer.Argument(None, help="Kernel CSVs (calibration format), serving CSVs, measured-point CSVs, or benchmark result files (vLLM, SGLang, AIPerf, genai-perf, GuideLLM, genai-bench, trtllm-bench, InferenceX results API JSON)."),
    builtin: bool = typer.Option(False, "--builtin", help="Validate against simfront's shipped measured dataset (measurements/)."),
    html: Optional[str] = typer.Option(None, "--html", help="Write a predicted-vs-measured report page."),
    model: Optional[str] = typer.Option(None, "--model", help="Model for rows that do not name one (rows that name their own keep it)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU type for rows that do not name one (rows that name their own keep it)."),
    num_gpus: Optional[int] = typer.Option(None, "--num-gpus", help="GPUs of the deployment for every row (a value the row gives is replaced, with a warning)."),
    tp: Optional[int] = typer.Option(None, "--tp", help="Tensor-parallel size for every row (a value the row gives is replaced, with a warning)."),
    pp: Optional[int] = typer.Option(None, "--pp", help="Pipeline-parallel size for every row (a value the row gives is replaced, with a warning)."),
    ep: Optional[int] = typer.Option(None, "--ep", help="Expert-parallel size for every row (a value the row gives is replaced, with a warning)."),
    attention_dp: Optional[int] = typer.Option(None, "--attention-dp", help="Attention data-parallel size for every row (a value the row gives is replaced, with a warning)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Engine (trtllm, sglang, vllm) for every row (a value the row gives is replaced, with a warning)."),
    precision: Optional[str] = typer.Option(None, "--precision", help="Weight precision for every row (a value the row gives is replaced, with a warning)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV-cache dtype for every row (a value the row gives is replaced, with a warning)."),
    gpu_memory_fraction: Optional[str] = typer.Option(None, "--gpu-memory-fraction", help="The engine's GPU memory fraction the run set (a number in (0, 1], read as its engine reads it), or 'default' for the engine release's own default, for rows that do not say; without it such rows get the KV pool simfront's launch lines give."),
    rows_out: bool = typer.Option(False, "--rows", help="Print every row, not just the summary."),
    frontier: bool = typer.Option(False, "--frontier", help="Also: median predicted/measured by knob bin, and measured Pareto frontiers against simfront's frontiers on the same GPU counts."),
    frontier_html: Optional[str] = typer.Option(None, "--frontier-html", help="With --frontier: write measured frontiers over predicted ones as an offline page."),
    quiet: bool = QuietOpt,
    calibration: Optional[str] = CalOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Measured vs predicted for every row and metric; error summary by model, GPU, engine and mode."""
    from . import api, inputs, report, report_fidelity

    inputs.check_output_path("--html", html)
    inputs.check_output_path("--frontier-html", frontier_html)
    _load_calibration(calibration)
    paths = list(files or [])
    if builtin:
        paths += api.builtin_measurements()
    if not paths:
        raise SimfrontError("give files to validate or --builtin")
    overrides = {k: v for k, v in dict(model=model, gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp,
                                       engine=engine, precision=precision, kv_dtype=kv_dtype,
                                       gpu_memory_fraction=gpu_memory_fraction).items() if v is not None}
    with progress(f"validating {len(paths)} file{'s' if len(paths) != 1 else ''}", quiet=quiet or as_json):
        res = api.validate(paths, overrides=overrides or None, frontier=frontier or bool(frontier_html))
    if html:
        report.write_validation_html(res, html)
    if frontier_html and res.get("fidelity"):
        report_fidelity.write_fidelity_html(res["fidelity"], frontier_html)
    if as_json:
        return _emit_json(api.validation_flat(res))
    report.print_validation(res, rows=rows_out)
    if res.get("fidelity"):
        report_fidelity.print_fidelity(res["fidelity"])
    if html:
        print(f"wrote {html}")


@app.command("frontier")
def frontier_cmd(
    model: str = ModelOpt,
    gpus: Optional[str] = typer.Option(None, "--gpus", "-g", help="GPU set (not needed with --compare gpus=...)."),
    compare: str = typer.Option(..., "--compare", help="KNOB=V1,V2,...: precision, kv_dtype, spec, mode, layout, two_batch_overlap or gpus (e.g. precision=fp8,nvfp4; layout=tp,tp+ep,dpa+ep; two_batch_overlap=off,on; gpus=8xH200,8xB200)."),
    isl: int = IslOpt,
    osl: int = OslOpt,
    prefix_hit: float = PrefixOpt,
    engine: Optional[str] = EngineOpt,
    precision: Optional[str] = typer.Option(None, "--precision", help="Comma list of weight precisions every frontier searches (not with --compare precision=...)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="Comma list of KV dtypes every frontier searches (not with --compare kv_dtype=...)."),
    spec: Optional[str] = typer.Option(None, "--spec", help="Speculative decoding every frontier searches: none, mtp, eagle, ngram (not with --compare spec=...)."),
    spec_k: Optional[int] = SpecKOpt,
    acceptance: Optional[float] = AcceptanceOpt,
    mode: Optional[str] = typer.Option(None, "--mode", help="agg, disagg or agg,disagg for every frontier (not with --compare mode=...)."),
    layout: Optional[str] = typer.Option(None, "--layout", help="Layout classes every frontier searches: tp, tp+ep, dpa+ep (not with --compare layout=...)."),
    max_pp: Optional[int] = MaxPpOpt,
    routing_skew: Optional[str] = RoutingSkewOpt,
    two_batch_overlap: bool = TwoBatchOverlapOpt,
    html: Optional[str] = typer.Option(None, "--html", help="Write the overlaid frontiers as an offline plotly page."),
    quality: Optional[str] = typer.Option(None, "--quality", help="Your quality scores (see predict --quality): the verdict then names the trade, throughput gained per quality point lost."),
    quiet: bool = QuietOpt,
    calibration: Optional[str] = CalOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Overlay frontiers for values of one knob and say whether it moves along or pushes out the frontier."""
    from . import api, inputs, report

    _load_calibration(calibration)
    if "=" not in compare:
        raise SimfrontError(f"--compare {compare!r}: expected KNOB=V1,V2 such as precision=fp8,nvfp4")
    knob, vals = compare.split("=", 1)
    values = [v.strip() for v in vals.split(",")]
    if not all(values) or len(values) < 2:
        raise SimfrontError(f"--compare {compare!r}: give at least two non-empty comma-separated values, e.g. {knob.strip() or 'precision'}=fp8,nvfp4")
    if knob.strip() != "gpus" and not gpus:
        raise SimfrontError("--gpus is required unless comparing gpus=...")
    inputs.check_output_path("--html", html)
    engine = inputs.check_engine(engine)
    modes = _values("--mode", mode)
    inputs.check_modes(modes)
    held = {"precision": _values("--precision", precision), "kv_dtype": _values("--kv-dtype", kv_dtype), "spec": spec,
            "modes": modes, "layout": _values("--layout", layout), "max_pp": max_pp}
    kw = {k: v for k, v in held.items() if v is not None}
    kw.update({k: v for k, v in (("spec_k", spec_k), ("acceptance", acceptance), ("routing_skew", routing_skew)) if v is not None})
    if two_batch_overlap:
        kw["two_batch_overlap"] = True
    with progress(f"predicting {len(values)} frontiers ({knob.strip()})", quiet=quiet or as_json):
        res = api.frontier_compare(model, gpus or "", knob.strip(), values, isl=isl, osl=osl, prefix_hit=prefix_hit, engine=engine,
                                   **({"quality": quality} if quality else {}), **kw)
    if html:
        report.write_knob_compare_html(res, html, title=f"{model}: {knob} comparison (ISL {isl} / OSL {osl})")
    if as_json:
        return _emit_json(res)
    report.print_compare(res)
    if html:
        print(f"wrote {html}")


@app.command("calibrate")
def calibrate_cmd(
    files: List[str] = typer.Argument(..., help="Measured serving results (any format `simfront validate` reads)."),
    output: str = typer.Option(..., "--output", "-o", help="Profile YAML to write."),
    folds: int = typer.Option(5, "--folds", help="k for k-fold cross-validation of the fit."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU type for every row (calibrate sets it on all rows; validate --gpu fills only rows without one)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model for every row."),
    tp: Optional[int] = typer.Option(None, "--tp", help="Tensor-parallel size for every row."),
    ep: Optional[int] = typer.Option(None, "--ep", help="Expert-parallel size for every row."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Engine (trtllm, sglang, vllm) for every row."),
    as_json: bool = JsonOpt,
) -> None:
    """Fit simfront's serving efficiency parameters to your measurements; report before/after error (k-fold CV)."""
    from . import api, inputs, report

    if folds < 2:
        raise SimfrontError(f"--folds {folds} must be at least 2")
    inputs.check_input_files(files)
    inputs.check_output_path("--output", output)
    overrides = {k: v for k, v in dict(gpu=gpu, model=model, tp=tp, ep=ep, engine=engine).items() if v is not None}
    rep = api.calibrate(files, output, folds=folds, overrides=overrides or None)
    if as_json:
        return _emit_json(rep)
    report.print_calibration(rep)


def _prices(items: Optional[List[str]]) -> Optional[dict]:
    if not items:
        return None
    out = {}
    for it in items:
        for part in it.split(","):
            if "=" not in part:
                raise SimfrontError(f"--price {part!r}: expected GPU=USD_PER_HOUR such as h200=3.5")
            k, v = part.split("=", 1)
            try:
                out[k.strip()] = float(v)
            except ValueError:
                raise SimfrontError(f"--price {part!r}: {v!r} is not a number of dollars per GPU-hour") from None
            if not (math.isfinite(out[k.strip()]) and out[k.strip()] >= 0):
                raise SimfrontError(f"--price {part!r}: {v.strip()!r} is not a price; give a finite, non-negative USD per GPU-hour")
    return out


@app.command("plan")
def plan_cmd(
    model: str = ModelOpt,
    rate: float = typer.Option(..., "--rate", help="Requests per second to serve."),
    isl: int = IslOpt,
    osl: int = OslOpt,
    ttft: Optional[float] = TtftOpt,
    tpot: Optional[float] = TpotOpt,
    min_tok_s_user: Optional[float] = MinTokOpt,
    hardware: Optional[str] = typer.Option(None, "--hardware", help="Comma list of GPU types (default h100,h200,b200,b300,gb200,mi355x)."),
    price: Optional[List[str]] = typer.Option(None, "--price", help="GPU=USD per GPU-hour overrides, e.g. --price h200=3.2 --price b200=5."),
    precision: Optional[str] = typer.Option(None, "--precision", help="Comma list of weight precisions to consider."),
    kv_dtype: Optional[str] = KvListOpt,
    spec: Optional[str] = SpecListOpt,
    spec_k: Optional[int] = SpecKOpt,
    acceptance: Optional[float] = AcceptanceOpt,
    mode: Optional[str] = ModeOpt,
    layout: Optional[str] = LayoutOpt,
    max_pp: Optional[int] = MaxPpOpt,
    routing_skew: Optional[str] = RoutingSkewOpt,
    two_batch_overlap: bool = TwoBatchOverlapOpt,
    prefix_hit: float = PrefixOpt,
    engine: Optional[str] = typer.Option(None, "--engine", help="Plan for an engine (its overhead profile and the layouts it can launch)."),
    max_gpus: Optional[int] = typer.Option(None, "--max-gpus", help="Largest deployment to consider, in GPUs (default 512)."),
    launch: Optional[str] = typer.Option(None, "--launch", help="Print launch + benchmark commands for the cheapest row (vllm, sglang, trtllm)."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="Engine release (e.g. 0.5.12): the scheduler family --engine is priced with and the flags --launch spells; default the newest release simfront knows."),
    quiet: bool = QuietOpt,
    calibration: Optional[str] = CalOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Capacity planning: the fewest GPUs of each type that serve the rate within the SLA, ranked by cost."""
    from . import api, inputs, report
    from .hardware import MAX_GPU_COUNT
    from .planning import DEFAULT_HARDWARE

    inputs.check_sla(ttft, tpot, min_tok_s_user)
    inputs.count("--max-gpus", max_gpus, lo=1, hi=MAX_GPU_COUNT, why_hi="the largest GPU set simfront searches")
    modes = _values("--mode", mode)
    inputs.check_modes(modes)
    if launch is not None:
        inputs.check_engine(launch)
    engine_version = inputs.check_engine_version(engine_version)
    price_version, version_note = _priced_release(inputs.check_engine(engine), launch, engine_version)
    _load_calibration(calibration)
    types = _csv_list(hardware) or list(DEFAULT_HARDWARE)
    with progress(f"planning {model} on {len(types)} GPU types", total=len(types), quiet=quiet or as_json) as bar:
        res = api.plan(model, rate, isl=isl, osl=osl, ttft_ms=ttft, tpot_ms=tpot, min_tok_s_user=min_tok_s_user,
                       hardware=_csv_list(hardware), prices=_prices(price), engine=engine, precision=_csv_list(precision),
                       max_gpus=max_gpus, progress=bar.step if bar.active else None, prefix_hit=prefix_hit,
                       engine_version=price_version, kv_dtype=_values("--kv-dtype", kv_dtype), spec=spec, spec_k=spec_k,
                       acceptance=acceptance, routing_skew=routing_skew, layout=_values("--layout", layout), max_pp=max_pp,
                       two_batch_overlap=two_batch_overlap, **({"modes": modes} if modes else {}))
    if version_note:
        res["notes"].append(version_note)
    if launch:
        best = next((r for r in res["rows"] if r.get("feasible", True) and r.get("point")), None)
        res["launch"] = (api.launch_for(best["point"], model, best["gpu"], launch, isl, osl, engine_version,
                                        prefix_hit=prefix_hit or 0.0, two_batch_overlap=two_batch_overlap) if best else None)
    if as_json:
        return _emit_json(res)
    report.print_plan(res)
    if res.get("launch"):
        report.print_launch(res["launch"])


@app.command("compare")
def compare_cmd(
    model: str = ModelOpt,
    gpus: List[str] = typer.Option(..., "--gpus", "-g", help="GPU sets to compare; repeat: --gpus 8xH200 --gpus 8xB200."),
    isl: int = IslOpt,
    osl: int = OslOpt,
    price: Optional[List[str]] = typer.Option(None, "--price", help="GPU=USD per GPU-hour overrides."),
    ttft: Optional[float] = TtftOpt,
    tpot: Optional[float] = TpotOpt,
    min_tok_s_user: Optional[float] = MinTokOpt,
    precision: Optional[str] = typer.Option(None, "--precision", help="Comma list of weight precisions to search on every set (default: native + cheaper ones each GPU supports)."),
    kv_dtype: Optional[str] = KvListOpt,
    spec: Optional[str] = SpecListOpt,
    spec_k: Optional[int] = SpecKOpt,
    acceptance: Optional[float] = AcceptanceOpt,
    mode: Optional[str] = ModeOpt,
    layout: Optional[str] = LayoutOpt,
    max_pp: Optional[int] = MaxPpOpt,
    routing_skew: Optional[str] = RoutingSkewOpt,
    two_batch_overlap: bool = TwoBatchOverlapOpt,
    prefix_hit: Optional[float] = typer.Option(None, "--prefix-hit", help="Share of input tokens served from the prefix cache (0-1; default 0)."),
    engine: Optional[str] = EngineOpt,
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="With --engine: the release whose scheduler family is priced (default the newest simfront knows)."),
    html: Optional[str] = typer.Option(None, "--html", help="Write the overlaid frontiers as an offline plotly page."),
    quiet: bool = QuietOpt,
    calibration: Optional[str] = CalOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Frontiers of several GPU sets, and throughput per GPU and per dollar at equal tok/s/user."""
    from . import api, inputs, report

    _load_calibration(calibration)
    inputs.check_output_path("--html", html)
    sets = [g for item in gpus for g in item.split(",") if g.strip()]
    if len(sets) < 2:
        raise SimfrontError("compare needs at least two --gpus sets")
    prices = _prices(price)
    modes = _values("--mode", mode)
    inputs.check_modes(modes)
    engine = inputs.check_engine(engine)
    price_version, _ = _priced_release(engine, None, inputs.check_engine_version(engine_version))
    with progress(f"predicting {len(sets)} GPU sets", quiet=quiet or as_json):
        res = api.compare_gpus(model, sets, isl=isl, osl=osl, prices=prices, ttft_ms=ttft, tpot_ms=tpot,
                               min_tok_s_user=min_tok_s_user, precision=_values("--precision", precision),
                               kv_dtype=_values("--kv-dtype", kv_dtype), spec=spec, spec_k=spec_k, acceptance=acceptance,
                               modes=modes, prefix_hit=prefix_hit, engine=engine, engine_version=price_version,
                               routing_skew=routing_skew, layout=_values("--layout", layout), max_pp=max_pp,
                               two_batch_overlap=two_batch_overlap)
    if html:
        report.write_compare_html(res, html)
    if as_json:
        return _emit_json(res)
    report.print_gpu_compare(res)
    if html:
        print(f"wrote {html}")


DEBUG_ENV = "SIMFRONT_TRACEBACK"  # set to 1 to get the full traceback of an unexpected error
EXIT_USAGE = 2  # bad input, and any failure the CLI reports as one error line
EXIT_INTERRUPTED = 130  # 128 + SIGINT: the shell convention for a command stopped by Ctrl-C
PYDANTIC_PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"  # pydantic's switch: "__all__" loads no plugins (pydantic docs, Plugins)
# glibc malloc's tuning for a short process (see _keep_freed_memory): mallopt parameter numbers from <malloc.h>
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 32 << 20  # a block above this still gets pages of its own (glibc's own largest dynamic threshold)
TRIM_THRESHOLD_BYTES = 256 << 20  # freed memory at the top of the heap is kept up to this much


def _keep_freed_memory() -> None:
    """Have glibc's malloc keep the memory a command frees for its next arrays instead of giving it back to the kernel.

    By default a block above 128 KiB (the starting mmap threshold) is mapped afresh and unmapped when freed, and a
    heap top past the trim threshold is returned: every new temporary array of a search (tens of thousands of
    0.1-10 MB arrays) is then fresh pages, one page fault per 4 KiB touched. A 576xGB200 predict took 173,000 page
    faults (0.44 s of system time) and a six-GPU plan 66,000 (0.2 s); with these thresholds 131,000 and 40,000, about
    0.15 s less wall time each. Where an array lives changes no number it holds. The setting lasts for the process (a
    command is one short process; a caller running ``main`` in-process keeps it too, which only holds its freed memory
    longer). Not glibc (macOS, musl, Windows): nothing is changed."""
    try:
        import ctypes  # numpy imports it anyway; a command that stops before numpy pays ~2 ms

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError, TypeError):  # no C library to ask, or one without mallopt
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    """One ``error:`` line on stderr (newlines folded so it stays one line), then exit."""
    sys.stderr.write("error: " + " ".join(str(message).split()) + "\n")
    sys.stderr.flush()
    sys.exit(code)


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (``| head``): stop quietly. stdout is pointed at /dev/null so the
    interpreter's final flush cannot raise again (Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (captured in-process)
        pass
    sys.exit(0)


def _is_click_error(e: BaseException) -> bool:
    """click's documented exception interface (``format_message()`` and ``exit_code``), whichever click
    typer ships: a vendored copy (typer >= 0.2x) or the click package (older typer)."""
    return callable(getattr(e, "format_message", None)) and isinstance(getattr(e, "exit_code", None), int)


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point (see :func:`_main`), run with Python's cyclic garbage collector paused.

    A command is a short process that allocates a few hundred thousand objects while importing (numpy,
    pydantic, the cost model) and computing, and almost none of them are cyclic garbage (numpy arrays
    are freed by reference counting): the collector's passes over them took 40-60 ms of a 0.4 s
    ``predict`` and freed next to nothing. Whatever cyclic garbage a command leaves is freed when the
    process ends; a caller's collector state (tests calling ``main`` in one process) is restored after."""
    collecting = gc.isenabled()
    gc.disable()
    _keep_freed_memory()
    # simfront's commands validate only simfront's own pydantic models, so pydantic is told not to look for
    # plugins (observability hooks other packages register): the look-up reads the entry points of every
    # installed distribution, ~10 ms with importlib.metadata. Pydantic's documented switch; a value the
    # user set is kept, and the variable is put back when the command ends.
    plugins = os.environ.get(PYDANTIC_PLUGINS_ENV)
    if plugins is None:
        os.environ[PYDANTIC_PLUGINS_ENV] = "__all__"
    try:
        _main(argv)
    finally:
        if collecting:
            gc.enable()
        if plugins is None:
            os.environ.pop(PYDANTIC_PLUGINS_ENV, None)


def _main(argv: Optional[List[str]] = None) -> None:
    """Parse and run one command: one-line errors with exit status 2, never a traceback.

    The command is parsed and run through click's public ``make_context`` / ``invoke`` on the command
    ``typer.main.get_command`` builds, so every exception arrives here unchanged:
    SimfrontError and usage errors -> ``error: ...`` (2); Ctrl-C -> ``error: interrupted`` (130);
    a closed pipe -> quiet exit (0); anything unexpected -> one ``error:`` line naming the exception
    and where to report it (2; ``SIMFRONT_TRACEBACK=1`` shows the traceback instead).
    """
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        cmd = typer.main.get_command(app)
        if os.environ.get(COMPLETE_ENV):  # the shell asks for completions: click's own entry answers and exits
            cmd.main(args=args, prog_name=PROG)
        with cmd.make_context(PROG, args) as ctx:
            cmd.invoke(ctx)
    except SimfrontError as e:
        _fail(str(e))
    except (KeyboardInterrupt, typer.Abort):
        _fail("interrupted", EXIT_INTERRUPTED)
    except typer.Exit as e:  # --help, or a command that ends early
        sys.exit(e.exit_code)
    except BrokenPipeError:
        _quiet_broken_pipe()
    except SystemExit:
        raise
    except Exception as e:
        if _is_click_error(e):
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `simfront`: show help, not an error
                sys.stdout.write(e.format_message() + "\n")
                sys.exit(0)
            _fail(e.format_message())
        if type(e).__name__ == "Exit" and isinstance(getattr(e, "exit_code", None), int):  # click's own Exit (older typer)
            sys.exit(e.exit_code)
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        if isinstance(e, OSError) and e.filename:
            _fail(f"{e.filename}: {e.strerror or e}")
        _fail(f"unexpected {type(e).__name__}: {e}. This is a simfront bug: please report it with the command line "
              f"(rerun with {DEBUG_ENV}=1 for the traceback)")
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


if __name__ == "__main__":
    main()

"""Bounds of user arguments, checked before any work starts.

Plain functions that raise :class:`~simfront.errors.SimfrontError` naming the bad value and what
would be valid; the CLI prints that as one ``error:`` line. ``simfront.api`` calls the ``check_*``
entry points first thing, so notebooks get the same checks as the command line. Nothing here
computes a prediction: a value either passes unchanged or is refused.
"""

from __future__ import annotations

import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from . import errors
from .errors import SimfrontError

# Longest request (input + output tokens) accepted for a model whose config.json states no context
# window: 16 Mi tokens, above the longest window any catalog model states (Llama 4 Scout,
# max_position_embeddings 10,485,760). Models that state one are held to their own window.
MAX_REQUEST_TOKENS = 16 * 2**20
# Most draft tokens per speculative step: the engines' documented speculative settings stay within
# this (vLLM num_speculative_tokens and SGLang speculative-num-draft-tokens examples use 1-8); with
# acceptance decaying by position (search.DEFAULT_POSITION_DECAY 0.85) a 16th draft is accepted
# with probability below 1e-4 even at acceptance 1, so longer drafts only add verify cost.
MAX_SPEC_K = 16
SPEC_METHODS = ("none", "mtp", "eagle", "ngram")  # speculative methods the search models (search.make_spec)
SERVING_MODES = ("agg", "disagg")  # aggregated and disaggregated prefill/decode serving

# serving-profile parameters of earlier releases, and where their effect lives now
RETIRED_SERVING_PARAMS = {
    "burst_fraction": "the share of requests in a benchmark's synchronised start-up wave is a property of the client now, "
                      "not the engine (measured rows carry it; predict takes --prompts-per-client)",
    "group_share": "retired in round 37: the measured TTFTs reject a mean-field arrival group whose prompts all stream at "
                   "its end (every fit put the share at 0), so a request's TTFT prefills its own prompt; the step-level "
                   "simulation (--tails) serves a group in arrival order",
}


# ---------------------------------------------------------------------------------------------
# Single values


def finite(name: str, value: Any, *, positive: bool = False, nonneg: bool = False, what: str = "a number") -> None:
    """``value`` must be a finite real number (and > 0 / >= 0 where asked); None passes."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise SimfrontError(f"{name} {value!r} is not {what}")
    v = float(value)
    if not math.isfinite(v):
        raise SimfrontError(f"{name} {value} is not {what}; give a finite value")
    if positive and not v > 0:
        raise SimfrontError(f"{name} {value} must be positive ({what} above 0)")
    if nonneg and v < 0:
        raise SimfrontError(f"{name} {value} must be zero or positive")


def count(name: str, value: Any, *, lo: int = 1, hi: int | None = None, why_hi: str = "") -> None:
    """``value`` must be a whole number in [lo, hi]; None passes."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise SimfrontError(f"{name} {value!r} must be a whole number")
    if value < lo:
        raise SimfrontError(f"{name} {value} must be at least {lo}")
    if hi is not None and value > hi:
        raise SimfrontError(f"{name} {value} is above the largest value simfront accepts, {hi:,}" + (f" ({why_hi})" if why_hi else ""))


def check_sla(ttft_ms: Any = None, tpot_ms: Any = None, min_tok_s_user: Any = None) -> None:
    """SLA bounds are finite and positive: a zero, negative or NaN bound is not a service level."""
    for flag, v, unit in (("--ttft", ttft_ms, "milliseconds"), ("--tpot", tpot_ms, "milliseconds"),
                          ("--min-tok-s-user", min_tok_s_user, "tokens per second")):
        finite(flag, v, positive=True, what=f"a number of {unit}")


def check_range_ratio(ratio: Any) -> None:
    """A benchmark's random range ratio r (lengths uniform in [r L, L]) is in (0, 1]; None: lengths that vary."""
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                              or not (math.isfinite(ratio) and 0.0 < ratio <= 1.0)):
        raise SimfrontError(f"--random-range-ratio {ratio}: give r in (0, 1] (lengths uniform in [r L, L]; 1 = fixed lengths)")


def check_lengths(isl: Any, osl: Any, model: Any = None) -> None:
    """Input and output lengths are at least one token (:func:`simfront.errors.check_lengths`); together within the
    model's context window."""
    errors.check_lengths(isl=isl, osl=osl)
    total = (isl or 0) + (osl or 0)
    window = int(getattr(getattr(model, "arch", None), "max_position", 0) or 0)
    if window and total > window:
        raise SimfrontError(f"--isl {isl} + --osl {osl} = {total:,} tokens exceed {model.id}'s context window of "
                            f"{window:,} tokens (max_position_embeddings in its config.json)")
    if total > MAX_REQUEST_TOKENS:
        raise SimfrontError(f"--isl {isl} + --osl {osl} = {total:,} tokens is above {MAX_REQUEST_TOKENS:,}, "
                            "longer than any model's context window")


def check_engine(engine: Any, *, canonical: bool = False) -> str | None:
    """The canonical engine id (vllm, sglang, trtllm) for ``engine``, or None for the average profile.

    With ``canonical`` the name must already be the id (the API passes it on as a profile key)."""
    if engine is None:
        return None
    from .launch import ENGINES, normalize_engine

    eng = normalize_engine(str(engine))
    if canonical and eng != engine:
        raise SimfrontError(f"engine {engine!r}: give the engine id {eng!r} (valid: {', '.join(ENGINES)})")
    return eng


VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD"}  # how a vendor id is written in messages


@lru_cache(maxsize=None)
def engine_vendors(engine: str) -> tuple[str, ...]:
    """GPU vendors ``engine`` (a canonical id) runs on (``vendors`` in simfront/engines/<engine>.yaml)."""
    from .launch import ENGINE_TABLES_DIR
    from . import yamlio

    return tuple(yamlio.load(ENGINE_TABLES_DIR / f"{engine}.yaml").get("vendors") or ("nvidia",))


def engine_gpu_refusal(engine: Any, hw, option: str = "--engine") -> str | None:
    """Why ``engine`` (given as ``option``) cannot run on GPU ``hw`` (its vendor is not one the engine is built for), or
    None."""
    eng = check_engine(engine)
    if eng is None:
        return None
    vendors = engine_vendors(eng)
    if hw.vendor in vendors:
        return None
    from .launch import ENGINES

    others = [e for e in ENGINES if hw.vendor in engine_vendors(e)]
    return (f"{option} {eng} runs on {' and '.join(VENDOR_NAMES.get(v, v) for v in vendors)} GPUs only, and {hw.id} is "
            f"an {VENDOR_NAMES.get(hw.vendor, hw.vendor)} GPU; engines for it: {', '.join(others) or 'none'}")


def check_engine_gpu(engine: Any, hw, option: str = "--engine") -> None:
    """Refuse an engine on a GPU it is not built for (TensorRT-LLM on an AMD GPU)."""
    if (why := engine_gpu_refusal(engine, hw, option)) is not None:
        raise SimfrontError(why)


# engines with a two-batch-overlap mode (SGLang --enable-two-batch-overlap, vLLM --enable-dbo); TensorRT-LLM has none
TWO_BATCH_OVERLAP_ENGINES = ("sglang", "vllm")


def check_two_batch_overlap(engine: Any, on: Any) -> None:
    """--two-batch-overlap only with an engine that has it (or no engine: the average profile)."""
    if not on or engine is None:
        return
    eng = check_engine(engine)
    if eng not in TWO_BATCH_OVERLAP_ENGINES:
        raise SimfrontError(f"--two-batch-overlap with --engine {engine}: {eng} has no two-batch overlap; engines that "
                            f"have it: {', '.join(TWO_BATCH_OVERLAP_ENGINES)}")


_RELEASE = re.compile(r"^v?\d+(\.\d+)*([.+-]?[0-9A-Za-z]+)*$")


def check_engine_version(version: Any) -> str | None:
    """A release number such as ``0.5.13``, ``v0.5.12.post1`` or ``1.2.0rc6`` (None passes)."""
    if version is None:
        return None
    v = str(version).strip()
    if not _RELEASE.match(v):
        raise SimfrontError(f"--engine-version {version!r}: give a release number such as 0.5.13 or 1.2.0rc6")
    return v


def check_spec(spec: Any, spec_k: Any, acceptance: Any) -> None:
    """--spec-k / --acceptance only with a speculative method, and within range."""
    methods = [{"off": "none"}.get(s.strip().lower(), s.strip().lower()) for s in str(spec).split(",")] if spec is not None else []
    if spec is not None and (not methods or any(m not in SPEC_METHODS for m in methods)):
        raise SimfrontError(f"--spec {spec!r}: unknown speculative method; valid: {', '.join(SPEC_METHODS)} (comma list)")
    drafting = [m for m in methods if m != "none"]
    for flag, v in (("--spec-k", spec_k), ("--acceptance", acceptance)):
        if v is not None and not drafting:
            raise SimfrontError(f"{flag} {v} needs a speculative method: add --spec mtp, eagle or ngram"
                                + (" (--spec none drafts nothing)" if methods else ""))
    count("--spec-k", spec_k, lo=1, hi=MAX_SPEC_K, why_hi="drafts beyond it are practically never accepted")
    finite("--acceptance", acceptance, what="a probability")
    if acceptance is not None and not 0.0 <= float(acceptance) <= 1.0:
        raise SimfrontError(f"--acceptance {acceptance} must be a probability between 0 and 1")


def check_modes(modes: Any) -> None:
    if modes is None:
        return
    vals = [modes] if isinstance(modes, str) else list(modes)
    if not vals or any(str(m).strip() not in SERVING_MODES for m in vals):
        raise SimfrontError(f"--mode {','.join(map(str, vals))!r}: valid values are agg, disagg (or agg,disagg)")


def check_output_path(flag: str, path: Any) -> None:
    """An output file can be written: its folder exists and is writable, the path is not a folder."""
    if path is None:
        return
    p = Path(str(path))
    if not str(path).strip():
        raise SimfrontError(f"{flag} needs a file name")
    if p.is_dir():
        raise SimfrontError(f"{flag} {str(path)!r} is a directory; give a file name inside it")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise SimfrontError(f"{flag} {str(path)!r}: directory {str(parent)!r} does not exist; create it first")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise SimfrontError(f"{flag} {str(path)!r}: no permission to write there")


def check_input_files(paths: Iterable[Any], what: str = "file") -> None:
    """Every input path exists and is a file, or a result folder a reader knows (an AIPerf artifact
    directory, a genai-bench experiment folder)."""
    from .ingest.detect import result_files_in

    for raw in paths:
        p = Path(str(raw))
        if not p.exists():
            raise SimfrontError(f"{what} not found: {raw}")
        if p.is_dir() and not result_files_in(p):
            raise SimfrontError(f"{raw} is a directory with no known result file (an AIPerf artifact directory or a "
                                f"genai-bench experiment folder); give the result files inside it (e.g. {raw}/*.json)")


def check_compare_values(knob: str, values: Any) -> None:
    vals = [v for v in (values or []) if str(v).strip()]
    if len(vals) < 2:
        raise SimfrontError(f"--compare {knob}={','.join(map(str, values or []))}: give at least two comma-separated values, "
                            f"e.g. {knob}=A,B")


def check_gpu_name(flag: str, name: Any) -> None:
    if name is None:
        return
    from .hardware import get_hardware

    get_hardware(str(name))  # unknown GPU: SimfrontError naming the nearest ids


def memory_fraction_value(flag: str, value: Any) -> float | str | None:
    """A GPU memory fraction as a run sets it: a number in (0, 1], or 'default' for the engine's own default."""
    from .ingest.schema import ENGINE_DEFAULT

    if value is None:
        return None
    if str(value).strip().lower() == ENGINE_DEFAULT:
        return ENGINE_DEFAULT
    try:
        f = float(value)
    except (TypeError, ValueError):
        f = float("nan")
    if not 0.0 < f <= 1.0:
        raise SimfrontError(f"{flag} {value!r} is not a memory fraction; valid: a number in (0, 1] or 'default' (the "
                            "engine release's own default)")
    return f


def engine_memory(engine: Any, engine_version: Any, gpu_memory_fraction: Any, model):
    """The :class:`simfront.engine_memory.EngineFraction` of ``--engine`` (its release's default fraction on each GPU,
    or ``--gpu-memory-fraction`` in its terms), or None (simfront's pool) without ``--engine``."""
    fraction = memory_fraction_value("--gpu-memory-fraction", gpu_memory_fraction)
    if engine is None:
        if fraction is not None:
            raise SimfrontError("--gpu-memory-fraction needs --engine: each engine reads its fraction its own way (vLLM of "
                                "the whole GPU, SGLang of weights + KV pool, TensorRT-LLM of the free memory)")
        if engine_version is not None:
            raise SimfrontError(f"--engine-version {engine_version} needs --engine (vllm, sglang, trtllm)")
        return None
    from dataclasses import replace

    from .engine_memory import engine_default
    from .ingest.schema import ENGINE_DEFAULT

    default = engine_default(check_engine(engine), check_engine_version(engine_version), mla=model.arch.attention.kind == "mla")
    return default if fraction in (None, ENGINE_DEFAULT) else replace(default, fraction=float(fraction))


def check_model_name(flag: str, name: Any) -> None:
    if name is None:
        return
    from .models import get_model

    get_model(str(name))


# ---------------------------------------------------------------------------------------------
# Entry points called by simfront.api (one line at the top of each public function)


def check_predict(model: Any, gpus: Any, isl: Any = 1024, osl: Any = 1024, concurrency: Any = None, rate: Any = None,
                  ttft_ms: Any = None, tpot_ms: Any = None, min_tok_s_user: Any = None, spec: Any = None, spec_k: Any = None,
                  acceptance: Any = None, modes: Any = None, price: Any = None, prefix_hit: Any = 0.0, engine: Any = None,
                  chunk_tokens: Any = None, **_: Any) -> None:
    """Every argument of :func:`simfront.api.predict` within bounds, before the model is searched."""
    from .hardware import parse_gpus
    from .models import get_model

    if isinstance(gpus, str):
        parse_gpus(gpus)
    m = get_model(model) if isinstance(model, str) else model
    check_lengths(isl, osl, m)
    count("--concurrency", concurrency, lo=1)
    finite("--rate", rate, positive=True, what="a request rate (requests/s)")
    finite("--price", price, nonneg=True, what="a price in USD per GPU-hour")
    finite("--prefix-hit", prefix_hit, what="a share")
    if prefix_hit is not None and not 0.0 <= float(prefix_hit) < 1.0:
        raise SimfrontError(f"--prefix-hit {prefix_hit} must be in [0, 1)")
    check_sla(ttft_ms, tpot_ms, min_tok_s_user)
    check_spec(spec, spec_k, acceptance)
    check_modes(modes)
    check_engine(engine, canonical=True)
    count("chunk_tokens", chunk_tokens, lo=1)


def check_memory(model: Any, gpus: Any, isl: Any = 1024, osl: Any = 1024, tp: Any = None, pp: Any = 1, ep: Any = 1,
                 attention_dp: Any = 1, **_: Any) -> None:
    """--pp / --ep / --attention-dp describe a layout only together with --tp; lengths within the window."""
    from .models import get_model

    given = [f"--{k.replace('_', '-')} {v}" for k, v in (("pp", pp), ("ep", ep), ("attention_dp", attention_dp)) if v not in (None, 1)]
    if tp is None and given:
        raise SimfrontError(f"{', '.join(given)} without --tp: give the whole layout (--tp with --pp/--ep/--attention-dp), "
                            "or none of it for the best fit")
    for flag, v in (("--tp", tp), ("--pp", pp), ("--ep", ep), ("--attention-dp", attention_dp)):
        count(flag, v, lo=1)
    check_lengths(isl, osl, get_model(model) if isinstance(model, str) else model)


def worker_layout(tp: int, pp: int, attention_dp: int, ep: int, n_gpus: int):
    """The :class:`simfront.layout.Layout` of workers of tp x pp x attention-dp GPUs replicated over ``n_gpus``, or a
    one-line error naming the worker size and the sizes that divide the GPU count."""
    from .layout import Layout

    worker = tp * pp * attention_dp
    if worker < 1 or n_gpus % worker:
        valid = ", ".join(str(d) for d in range(1, n_gpus + 1) if n_gpus % d == 0)
        raise SimfrontError(f"impossible parallelism: tp x pp x attention-dp = {worker} does not divide {n_gpus} GPUs "
                            f"(worker sizes that do: {valid})")
    return Layout(tp, pp, attention_dp, ep, n_gpus // worker)


def check_explain(model: Any, gpus: Any, tp: Any = 1, pp: Any = 1, ep: Any = 1, attention_dp: Any = 1, batch: Any = 1,
                  ctx: Any = 1024, phase: Any = "decode", precision: Any = "native", kv_dtype: Any = "native", **_: Any) -> None:
    """The step :func:`simfront.api.explain` would cost can run: a valid layout that holds the weights
    and the KV cache of ``batch`` requests of ``ctx`` tokens on every attention rank."""
    from .hardware import parse_gpus
    from .layout import check_layout
    from .models import apply_precision, get_model
    from .sizing import memory_verdict

    if phase not in ("decode", "prefill"):
        raise SimfrontError(f"--phase {phase!r}: valid values are decode, prefill")
    for flag, v in (("--tp", tp), ("--pp", pp), ("--ep", ep), ("--attention-dp", attention_dp), ("--batch", batch)):
        count(flag, v, lo=1)
    count("--ctx", ctx, lo=1)
    m = get_model(model) if isinstance(model, str) else model
    g = parse_gpus(gpus) if isinstance(gpus, str) else gpus
    window = int(m.arch.max_position or 0)
    if window and ctx > window:
        raise SimfrontError(f"--ctx {ctx:,} exceeds {m.id}'s context window of {window:,} tokens (max_position_embeddings)")
    if ctx > MAX_REQUEST_TOKENS:
        raise SimfrontError(f"--ctx {ctx:,} is above {MAX_REQUEST_TOKENS:,} tokens, longer than any model's context window")
    lay = worker_layout(tp, pp, attention_dp, ep, g.count)
    check_layout(m.arch, lay, g.count)
    prec = apply_precision(m, precision if precision != "native" else (m.name_precision or "native"), kv_dtype)
    v = memory_verdict(m, prec, g, ctx, 0, layout=lay, alternatives=False)
    if not v.fits:
        need = v.min_gpus  # the fewest GPUs of this type one worker of the model needs
        hint = ""
        if need and need <= g.count and need > lay.gpus_per_worker:
            # the set is big enough; the layout gives each worker too few of its GPUs (the defaults are TP 1, so
            # 8xB200 means eight one-GPU replicas)
            hint = (f"; a worker here spans {lay.gpus_per_worker} GPU{'s' if lay.gpus_per_worker > 1 else ''}, and {m.id} "
                    f"needs one of at least {need}: give --tp {need} (or --tp, --attention-dp, --pp whose product is {need} "
                    f"or more)")
        raise SimfrontError(f"layout {lay.label()} of {m.id} ({prec.label}) does not fit on {g.label}: {v.reason}{hint}; "
                            "`simfront memory` shows the layouts that do")
    cap = v.kv_capacity_tokens
    if cap is not None and math.isfinite(cap) and batch * ctx > cap:
        raise SimfrontError(f"--batch {batch} x --ctx {ctx:,} = {batch * ctx:,} KV tokens per attention rank exceed what layout "
                            f"{lay.label()} holds, {int(cap):,} tokens (at most --batch {max(int(cap // ctx), 0)} at this --ctx)")


def check_frontier_compare(model: Any, gpus: Any, knob: Any, values: Any, isl: Any = 1024, osl: Any = 1024, **kw: Any) -> None:
    check_compare_values(str(knob), values)


def check_calibrate(paths: Any, output: Any, folds: Any = 5, overrides: Mapping[str, Any] | None = None) -> None:
    """Result files exist, the profile can be written, --gpu / --model name known ones."""
    files = [paths] if isinstance(paths, (str, Path)) else list(paths or [])
    if not files:
        raise SimfrontError("give at least one measured result file to calibrate on")
    check_input_files(files)
    check_output_path("--output", output)
    count("--folds", folds, lo=2)
    check_gpu_name("--gpu", (overrides or {}).get("gpu"))
    check_model_name("--model", (overrides or {}).get("model"))


# ---------------------------------------------------------------------------------------------
# Calibration profiles (--calibration profile.yaml)

SERVING_KIND = "serving"  # efficiency kind whose blocks are engines, not GPU families


def _known_parameters() -> dict[str, dict[str, tuple[float, float] | None]]:
    """kind -> {parameter: (low, high) bounds, or None where the fit has no bounds}.

    Bounds come from the fit tables (calibration.PARAMS for serving, the op tables of
    kernel_ops.all_ops() for kernels); names also come from the shipped hardware/efficiency files."""
    import yaml

    from .calibration import PARAMS as SERVING_PARAMS
    from .efficiency import EFFICIENCY_DIR
    from .kernel_ops import all_ops

    known: dict[str, dict[str, tuple[float, float] | None]] = {}
    for path in sorted(EFFICIENCY_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        names = known.setdefault(path.stem, {})
        for block in (data.get("families") or {}).values():
            for k in block or {}:
                names.setdefault(k, None)
    for entry in all_ops().values():
        for k, v in entry["params"].items():
            # a parameter the fit holds fixed (low == high) has no fitted range: per-family values differ
            known.setdefault(entry["kind"], {})[k] = (float(v[1]), float(v[2])) if v[1] < v[2] else None
    for k, (_, lo, hi) in SERVING_PARAMS.items():
        known.setdefault(SERVING_KIND, {})[k] = (float(lo), float(hi))
    return known


def _block_names(kind: str) -> tuple[str, ...]:
    from typing import get_args

    from .hardware import Family
    from .launch import ENGINES

    return ("default", *ENGINES) if kind == SERVING_KIND else ("default", *get_args(Family))


def check_calibration_profile(path: Any) -> None:
    """A ``--calibration`` profile: YAML with ``efficiency: {kind: {engine or GPU family: {parameter: value}}}``,
    every kind, block and parameter known, every value a finite number within the fit's bounds."""
    import yaml

    p = Path(str(path))
    if not p.exists():
        raise SimfrontError(f"calibration profile not found: {path}")
    if p.is_dir():
        raise SimfrontError(f"--calibration {path} is a directory; give the profile YAML written by `simfront calibrate`")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise SimfrontError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    except UnicodeDecodeError:
        raise SimfrontError(f"{path}: not a text file; give the profile YAML written by `simfront calibrate`") from None
    if not isinstance(data, dict) or "efficiency" not in data:
        raise SimfrontError(f"{path}: not a simfront calibration profile (missing 'efficiency' section)")
    eff = data["efficiency"]
    shape = "efficiency: {kind: {engine or GPU family: {parameter: number}}}"
    if not isinstance(eff, dict):
        raise SimfrontError(f"{path}: efficiency = {eff!r} is not a mapping; expected {shape}")
    known = _known_parameters()
    for kind, blocks in eff.items():
        if kind not in known:
            raise SimfrontError(f"{path}: unknown efficiency kind {kind!r}; valid: {', '.join(sorted(known))}")
        if not isinstance(blocks, dict):
            raise SimfrontError(f"{path}: efficiency.{kind} = {blocks!r} is not a mapping; expected {shape}")
        for block, values in blocks.items():
            if str(block) not in _block_names(kind):
                raise SimfrontError(f"{path}: efficiency.{kind}.{block}: unknown {'engine' if kind == SERVING_KIND else 'GPU family'}; "
                                    f"valid: {', '.join(_block_names(kind))}")
            if not isinstance(values, dict):
                raise SimfrontError(f"{path}: efficiency.{kind}.{block} = {values!r} is not a mapping of parameter: number")
            for name, v in values.items():
                where = f"{path}: efficiency.{kind}.{block}.{name}"
                if kind == SERVING_KIND and name in RETIRED_SERVING_PARAMS:
                    raise SimfrontError(f"{where}: {RETIRED_SERVING_PARAMS[name]}; refit with `simfront calibrate`")
                if name not in known[kind]:
                    raise SimfrontError(f"{where}: unknown parameter; valid: {', '.join(sorted(known[kind]))}")
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise SimfrontError(f"{where} = {v!r} is not a finite number")
                bounds = known[kind][name]
                if bounds and not bounds[0] <= v <= bounds[1]:
                    raise SimfrontError(f"{where} = {v!r} is outside the range the fit allows, [{bounds[0]:g}, {bounds[1]:g}]")

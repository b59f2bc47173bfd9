"""Predict the metrics of measured serving points (one configuration each) for validation.

A measured point names its model, GPU, layout, precision, workload and load (client concurrency,
or an offline max-throughput run). Points that share model, GPU, precision, engine and workload
are predicted together as arrays. A point simfront cannot predict gets ``reason`` instead.

Load model (closed loop, C clients):
- aggregated: requests spread over workers x attention-DP ranks x PP micro-batches; a rank runs
  ``min(C_rank, max batch)`` at once and the rest wait in the engine queue (Little's law adds
  the wait to TTFT);
- disaggregated: decode ranks hold ``C / (decode workers x DP x PP)`` requests; prefill workers
  serve the resulting request rate with an M/D/1 queue in front (TTFT = wait + prefill + KV move);
- offline max-throughput rows: the best output rate over batch sizes that fit the KV cache
  (and the engine's max batch when the row gives one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

import numpy as np

from .bounds import decode_step_floor_s
from .clients import nominal_length
from .engine_memory import EngineFraction, engine_default
from .errors import SimfrontError
from .hardware import get_hardware
from .ingest.gpu_names import unresolved_reason
from .ingest.schema import CONFIGURED_LENGTHS, DERIVED_NOTE, ENGINE_DEFAULT
from .layout import layout_errors
from .memory import KV_CACHE_FRACTION, plan_memory
from .models import Model, apply_precision, get_model
from .precision import normalize_format as _normalize_kv, resolve_format
from .deployment import Layouts, evaluate_agg, evaluate_disagg, running_batch
from .scheduler import SchedulerSettings
from .step import DEFAULT_ROUTING_ALPHA, routing_alpha_of
from .search import BATCH_SIZES, kv_link_bytes_per_s, make_spec
from .serving import engine_constants, engine_settings, engine_workload, DEFAULT_CHUNK_TOKENS, NO_SPEC, Workload, aggregated_raw, decode_raw, engine_profile, finish_decode, finish_prefill, prefill_raw, slot_at_transfer

# prompts per client of a benchmark run that does not record its count: InferenceX / InferenceMAX and the
# vLLM and SGLang serving-benchmark recipes send num_prompts = 10 x concurrency (calibration README,
# InferenceX benchmarks/*.sh; modeling-notes §5)
BENCHMARK_PROMPTS_PER_CLIENT = 10.0
# A measured TPOT is read as contradicting its configuration only below this share of the HBM floor
# (simfront.bounds): the floor's mean context and checkpoint byte counts are estimates, so 10 % of
# slack keeps a row that merely sits near the floor (measured rows reach ~0.6-0.8 of it at best).
FLOOR_SLACK = 0.9
# A row's own Little's-law count of requests in decode is read as contradicting its batch cap only above this multiple of
# the cap (the count rests on mean TTFT and TPOT over a run with a start-up wave and random lengths)
CAP_SLACK = 1.1
# the KV pool simfront's launch lines give every engine (TensorRT-LLM's reading of its fraction), which prices a row that
# records no fraction
SIMFRONT_POOL = EngineFraction("free", KV_CACHE_FRACTION)
METRICS = ("ttft_ms", "tpot_ms", "tok_s_per_user", "output_tok_s_total", "output_tok_s_per_gpu", "request_throughput")


def _get(p: Any, key: str, default=None):
    if isinstance(p, dict):
        v = p.get(key, default)
    else:
        v = getattr(p, key, default)
    if v is None:
        return default
    if isinstance(v, float) and math.isnan(v):
        return default
    return v


def _int(p, key, default=1) -> int:
    v = _get(p, key)
    try:
        return int(round(float(v))) if v is not None and v != "" else default
    except (TypeError, ValueError):
        return default


@dataclass
class Resolved:
    model: Model
    hw: Any
    precision: Any
    engine: str | None
    isl: float  # the client's lengths as a workload names them: the longest of its range when it has one
    osl: float
    spec: Any
    token_budget: float  # engine token budget per step per attention rank
    wave_share: float  # share of the benchmark's requests in its synchronised start-up wave
    range_ratio: float | None = None  # the client's lengths uniform in [r L, L] (1: fixed); None: not recorded
    recv_interval: float = 1.0  # decode steps between the engine's intakes of new requests (scheduler_recv_interval)
    # the evaluator's scheduler constants of the engine release the row ran (its version, else the release out on
    # its measurement date, else the newest: simfront/engines/scheduler.yaml), as sorted (name, value) pairs
    constants: tuple = ()
    # the memory fraction the KV pool is sized with: the one the run recorded, read by its engine's rule; its engine
    # release's default where the row says it set none ("default"); not recorded, the pool simfront's launch lines give
    memory: EngineFraction = SIMFRONT_POOL
    # a row that records no fraction: its engine release's default, kept aside to say where the prediction rests on it
    unrecorded: EngineFraction | None = None
    # the scheduler settings of the engine release the row ran (simfront/engines/scheduler.yaml): its default cap on
    # running requests is said in ``assumptions``, not priced
    sched: SchedulerSettings | None = None
    # the row's TTFT is the median over its requests (``ttft_statistic``): a steady-state request's TTFT where the
    # start-up wave holds under half of them (:func:`steady_ttft`)
    ttft_median: bool = False
    two_batch_overlap: bool = False  # the engine ran two-batch overlap (the row's two_batch_overlap)
    routing_alpha: float | None = DEFAULT_ROUTING_ALPHA  # the MoE routing skew the run saw (routing_skew; None: balanced)

    def plan_memory(self, tp, pp, dp, ep, context_tokens):
        """:func:`simfront.memory.plan_memory` of the row's model, formats and GPU with its engine's KV pool."""
        return plan_memory(self.model, self.precision, self.hw, tp, pp, dp, ep, 1, context_tokens,
                           self.memory.fractions(self.hw.hbm_bytes, tp, pp, dp), self.memory.rule)

    def workload(self, **kw) -> Workload:
        """The row's workload: its lengths as the client drew them (ISL / OSL the longest when it recorded a
        range ratio; the cost model takes their means), its token budget and its engine's scheduler facts (engine_workload)."""
        return Workload(isl=self.isl, osl=self.osl, chunk_tokens=self.token_budget, length_range_ratio=self.range_ratio,
                        two_batch_overlap=self.two_batch_overlap, routing_alpha=self.routing_alpha,
                        **engine_workload(constants=self.constants), **kw)


def _precision_for(model: Model, p, hw=None) -> Any:
    """Per-component formats from the row's precision fields (gemm / moe quant modes, weights, KV);
    a generic name means what it means on ``hw`` (``fp4`` is MXFP4 on CDNA4, NVFP4 elsewhere)."""

    def on_gpu(name):  # the format a precision name means on this GPU
        return resolve_format(name, hw).name

    gemm = _get(p, "gemm_quant_mode")
    moe = _get(p, "moe_quant_mode")
    w = _get(p, "precision")
    kv = _get(p, "kv_dtype")
    if gemm or moe:
        base = apply_precision(model, on_gpu(moe or gemm))
        g = on_gpu(gemm or moe)
        base = replace(base, dense=g, attention=g if g not in ("nvfp4", "mxfp4", "w4a16") else base.attention)
    elif w:
        fmt = on_gpu(str(w))
        # the checkpoint's own format names the checkpoint as shipped (its BF16 attention or shared
        # experts included), not a requantisation of every layer; the generic "fp8" of a row names a
        # checkpoint shipped in block-scaled FP8 (DeepSeek-V3/R1) as that checkpoint, not per-tensor FP8
        same = fmt == model.native.label or (fmt == "fp8" and model.native.label == "fp8_block")
        base = model.native if same else apply_precision(model, fmt)
    else:
        base = model.precision
    if kv:
        base = apply_precision_kv(base, kv)
    elif (gemm or moe or w) and on_gpu(str(moe or gemm or w)) in ("fp8", "fp8_block", "nvfp4"):
        # Quantised serving recipes in these sources run an FP8 KV cache (TensorRT-LLM / SGLang
        # DeepSeek and Llama FP8/FP4 recipes, ecosystem.md §5); assumed when the row does not say.
        base = apply_precision_kv(base, "fp8")
    return base


def apply_precision_kv(prec, kv):
    k = _normalize_kv(str(kv))
    k = "fp8" if k.startswith("fp8") else ("bf16" if k in ("bf16", "fp16", "auto") else k)
    return replace(prec, kv=k)


def resolve(p) -> tuple[Resolved | None, str | None]:
    """Model, GPU, precision and workload of a point, or a reason it cannot be predicted."""
    if not _get(p, "model"):
        return None, "no model named in the file: give --model or a sidecar"
    if not _get(p, "gpu"):
        return None, "no GPU named in the file: give --gpu (and the layout: --tp/--ep/...) or a sidecar"
    try:
        model = get_model(str(_get(p, "model", "")))
    except SimfrontError as e:
        return None, f"model unresolved: {e}"
    try:
        hw = get_hardware(str(_get(p, "gpu", "")))
    except SimfrontError as e:
        return None, unresolved_reason(str(_get(p, "gpu", ""))) or f"GPU unresolved: {e}"
    isl, osl = _get(p, "isl"), _get(p, "osl")
    if isl is None or osl is None:
        return None, "no ISL/OSL (named dataset with unknown mean lengths)"
    try:
        prec = _precision_for(model, p, hw)
    except SimfrontError as e:
        return None, str(e)
    spec = NO_SPEC
    sd = _get(p, "spec_decoding")
    if sd and str(sd).lower() not in ("none", "false", "off"):
        try:
            spec = make_spec(str(sd).lower().replace("eagle3", "eagle").replace("nextn", "mtp"), _get(p, "spec_k"), None, model)
        except SimfrontError as e:
            return None, f"speculative decoding: {e}"
    budget = float(_get(p, "token_budget") or DEFAULT_CHUNK_TOKENS)
    ratio = _get(p, "random_range_ratio")
    consts = engine_constants(_get(p, "engine"), _get(p, "engine_version"), _get(p, "measured_on"))
    if _get(p, "spec_overlap") is not None:  # the run said whether its speculative decoding was overlapped
        consts["cpu_overlap_spec"] = float(bool(_get(p, "spec_overlap")))
    consts = tuple(sorted(consts.items()))
    frac = _get(p, "gpu_memory_fraction")
    default = engine_default(_get(p, "engine"), _get(p, "engine_version"), _get(p, "measured_on"), spec.k > 0,
                             model.arch.attention.kind == "mla")
    unrecorded = None
    if not frac:  # not recorded: the pool simfront's launch lines give every engine (the engine's own default kept aside)
        memory, unrecorded = SIMFRONT_POOL, default
    elif frac == ENGINE_DEFAULT:  # the run set none: its engine release's default
        memory = default
    else:  # the run's own fraction, read as its engine reads it
        memory = EngineFraction(default.rule, float(frac))
    ratio = None if ratio is None else float(ratio)
    # the workload names the longest of a client's range (Workload.isl): a measured-point CSV row's configured lengths
    # are that already; a client result's are the mean tokens its requests carried
    if _get(p, "format") not in CONFIGURED_LENGTHS | {None}:
        isl, osl = nominal_length(float(isl), ratio), nominal_length(float(osl), ratio)
    sched = engine_settings(_get(p, "engine"), _get(p, "engine_version"), _get(p, "measured_on"))
    try:
        alpha = routing_alpha_of(_get(p, "routing_skew"), "routing_skew")
    except SimfrontError as e:
        return None, str(e)
    return Resolved(model, hw, prec, _get(p, "engine"), float(isl), float(osl), spec, budget, wave_share(p), ratio,
                    float(_get(p, "scheduler_recv_interval") or 1), consts, memory, unrecorded, sched,
                    _get(p, "ttft_statistic") == "median", bool(_get(p, "two_batch_overlap")), alpha), None


def steady_ttft(r: Resolved) -> bool:
    """Whether the row's TTFT is priced as a steady-state request's, without the benchmark's start-up wave: its TTFT is
    the median over requests and the synchronised first wave holds under half of them, so the median request is not
    in it (a wave request waits for the prompts of its wave ahead of it and lands in the upper tail: InferenceMAX's
    time-series rows of 10 prompts per client record a p99 TTFT of 6.5 s beside a median of 0.29 s on a TensorRT-LLM
    NVFP4 TP 4 EP 4 server at 32 users of 8k prompts). The throughput keeps the wave: the run's wall time holds it."""
    return r.ttft_median and 0.0 < r.wave_share < 0.5


def wave_share(p) -> float:
    """Share of a benchmark run's requests in its synchronised start-up wave.

    A closed-loop benchmark of N prompts at concurrency C sends its first C at once: C / N of its
    requests. The row's own ``startup_wave_share`` wins, then C / ``num_prompts``; a client run that
    records neither gets the common harness setting, N = 10 C (BENCHMARK_PROMPTS_PER_CLIENT).
    """
    given = _get(p, "startup_wave_share")
    if given is not None:
        return float(given)
    c, n = _get(p, "concurrency"), _get(p, "num_prompts")
    if c and n:
        return float(min(1.0, float(c) / float(n)))
    return 1.0 / BENCHMARK_PROMPTS_PER_CLIENT


@dataclass
class PointGroup:
    """Points predicted together; ``metrics(profile)`` applies an engine profile to cached raw times."""

    idx: list[int]
    engine: str | None
    ok: np.ndarray
    why: list[str]
    metrics: Any  # callable(profile dict) -> {metric: array}
    mode: str
    # points predicted but whose measurement contradicts its own setup (point index -> why): they carry
    # ``measurement_flag`` and stay out of error statistics and fits (calibration README: flag, exclude, count)
    flags: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict)  # scheduler constants of the engine release the points ran
    # point index -> what its prediction assumes that the row does not record and that moves it (``assumptions``)
    notes: dict = field(default_factory=dict)


def build_groups(points: Iterable[Any]) -> tuple[list[PointGroup], list[dict]]:
    """Resolve and group points, computing raw step times once. Returns (groups, per-point base dicts)."""
    pts = list(points)
    out: list[dict] = [dict() for _ in pts]
    keyed: dict[tuple, list[int]] = {}
    resolved: dict[int, Resolved] = {}
    for i, p in enumerate(pts):
        r, why = resolve(p)
        if r is None:
            out[i]["reason"] = why
            continue
        resolved[i] = r
        n = measured_in_decode(p, r.workload().mean_osl)
        if n is not None:  # did the client's load reach the engine? (Little's law on the row's own latencies)
            out[i]["measured_in_decode"] = round(n, 1)
        mode = _get(p, "mode", "agg")
        # offline max-throughput runs (all requests queued at once): the measured-point CSV without a
        # client concurrency; rate-driven client runs (GuideLLM) are not offline
        offline = _get(p, "concurrency") is None and _get(p, "request_rate") is None and _get(p, "format") == "offline_csv"
        if mode != "disagg" and not offline and _get(p, "concurrency") is None:
            out[i]["reason"] = "no client concurrency (rate-driven runs are not predicted point by point)"
            continue
        lacks = [f for f in (("prefill_tp", "decode_tp") if mode == "disagg" else ("tp",)) if _get(p, f) is None]
        if lacks:  # a layout the file does not give is not guessed
            out[i]["reason"] = f"no {' / '.join(lacks)} in the file: give the layout (--tp/--ep/--attention-dp ...) or a sidecar"
            continue
        if mode == "disagg" and (_get(p, "prefill_workers") is None or _get(p, "decode_workers") is None):
            out[i]["reason"] = "disaggregated run without prefill/decode worker counts: the deployment cannot be sized"
            continue
        # a disaggregated row that gives its token budget chunks its prompts by it (disagg_rows); one that does not keeps
        # whole prompts: they are not one group even where the default budget equals the given one
        budget_given = mode == "disagg" and _get(p, "token_budget") is not None
        key = (r.model.id, r.hw.id, r.precision, r.engine, r.isl, r.osl, r.spec, mode, offline, r.token_budget, budget_given,
               r.wave_share, r.range_ratio, r.recv_interval, r.constants, r.memory, r.unrecorded, r.sched, steady_ttft(r),
               r.two_batch_overlap, r.routing_alpha)
        keyed.setdefault(key, []).append(i)
    groups = []
    for key, idx in keyed.items():
        r = resolved[idx[0]]
        mode, offline = key[7], key[8]
        try:
            if mode == "disagg":
                groups.append(_group_disagg(pts, idx, r))
            elif offline:
                groups.append(_group_offline(pts, idx, r))
            else:
                groups.append(_group_agg(pts, idx, r))
        except SimfrontError as e:
            for i in idx:
                out[i]["reason"] = str(e)
            continue
        groups[-1].constants = dict(r.constants)
        for i, why in groups[-1].flags.items():
            out[i]["measurement_flag"] = why
        for i, note in groups[-1].notes.items():
            out[i].setdefault("assumptions", []).append(note)
    return groups, out


def evaluate(groups: list[PointGroup], out: list[dict], profile_for=None) -> list[dict]:
    """Fill ``predicted_*`` (or ``reason``) for every grouped point under engine profiles."""
    if profile_for is None:
        profile_for = engine_profile
    else:  # fitted profiles carry the fitted parameters only: add the engine's scheduler constants
        fitted = profile_for
        profile_for = lambda e: {**engine_constants(e), **fitted(e)}  # noqa: E731
    res = [dict(o) for o in out]
    for g in groups:  # the engine's profile with the scheduler constants of the release its points ran
        m = g.metrics({**profile_for(g.engine), **g.constants})
        _finish(res, g.idx, g.ok, g.why, **m)
    return res


def predict_points(points: Iterable[Any]) -> list[dict]:
    """Predicted metrics for each point, in order: ``predicted_<metric>`` or ``reason``."""
    groups, out = build_groups(points)
    return evaluate(groups, out)


def _layout(pts, idx, prefix="", dense=False):
    tp = np.maximum([_int(pts[i], prefix + "tp") for i in idx], 1)
    pp = np.maximum([_int(pts[i], prefix + "pp") for i in idx], 1)
    dp = np.maximum([_int(pts[i], prefix + "attention_dp") for i in idx], 1)
    ep = np.maximum([_int(pts[i], prefix + "ep", _int(pts[i], prefix + "moe_ep")) for i in idx], 1)
    if dense:  # MoE fields carry no meaning for dense models (calibration README)
        ep = np.ones_like(ep)
    return tp, pp, dp, ep


def run_workers(p, r: Resolved) -> list[dict]:
    """The workers a measured point ran (``simfront.coverage.worker``): its aggregated worker, or its disaggregated
    prefill and decode workers (the drafts run on the decode side), read as the evaluator reads the layout."""
    from .coverage import worker

    dense = not r.model.arch.is_moe
    k = r.spec.k  # draft tokens per step (0 without speculative decoding)
    if _get(p, "mode", "agg") != "disagg":
        tp, pp, dp, ep = (int(v[0]) for v in _layout([p], [0], dense=dense))
        return [worker(tp, pp, ep, dp, k)]
    (ptp, ppp, pdp, pep), (dtp, dpp, ddp, dep) = ([int(v[0]) for v in _layout([p], [0], pre, dense=dense)]
                                                  for pre in ("prefill_", "decode_"))
    return [worker(ptp, ppp, pep, pdp), worker(dtp, dpp, dep, ddp, k)]


def measured_layout_ranges(points, rows: Iterable[int]) -> dict[str, list[int]]:
    """The knob ranges (``simfront.coverage.layout_ranges``) of the workers of ``points[i]`` for ``i`` in ``rows``: the
    layouts a serving fit on those runs covers (``scripts/calibrate_serving.py`` writes them to serving.yaml)."""
    from .coverage import layout_ranges

    return layout_ranges(w for i in rows for w in run_workers(points[i], resolve(points[i])[0]))


def measured_layout_ranges_by_family(points, rows: Iterable[int]) -> dict[str, dict[str, list[int]]]:
    """:func:`measured_layout_ranges` of each GPU family's runs among ``rows`` (``calibrated_layouts_by_family``)."""
    by: dict[str, list[int]] = {}
    for i in rows:
        by.setdefault(resolve(points[i])[0].hw.family, []).append(i)
    return {fam: measured_layout_ranges(points, idx) for fam, idx in sorted(by.items())}


def _finish(out, idx, ok, why, **metrics):
    for j, i in enumerate(idx):
        if not ok[j]:
            out[i]["reason"] = why[j] if isinstance(why, list) else why
            continue
        for k, v in metrics.items():
            val = float(np.ravel(v)[j] if np.size(v) > 1 else np.ravel(v)[0])
            out[i][f"predicted_{k}"] = val if math.isfinite(val) else None


def _group_agg(pts, idx, r: Resolved) -> PointGroup:
    tp, pp, dp, ep = _layout(pts, idx, dense=not r.model.arch.is_moe)
    bad = layout_errors(r.model.arch, tp, pp, dp, ep)
    lay = Layouts.of(tp, pp, dp, ep)
    worker = lay.gpus
    conc = np.array([float(_get(pts[i], "concurrency", 1) or 1) for i in idx])
    max_b = np.array([float(_get(pts[i], "batch_size", 0) or 0) for i in idx])
    given = np.array([_given_gpus(pts[i]) for i in idx])
    # Workers: from the GPU count when the row gives one (clients beyond their batch caps queue); else as many as the
    # client load needs at the engine's max batch per rank (rows with concurrency = workers x batch x DP).
    workers = agg_workers(conc, max_b, given, worker, lay.ranks)
    wl = r.workload(startup_wave_share=r.wave_share, recv_interval_steps=r.recv_interval)
    mem = r.plan_memory(tp, pp, dp, ep, wl.mean_isl + wl.mean_osl)
    kv_b = np.maximum(np.floor(mem.max_concurrency / dp / pp), 1)
    # the engine's max batch is per attention-DP rank (aiconfigurator convention)
    b = running_batch(conc, workers * lay.ranks, np.where(max_b > 0, max_b, np.inf), kv_b)
    raw = aggregated_raw(r.model, r.precision, r.hw, tp, pp, dp, ep, b, wl, r.spec)

    steady = replace(raw, wave_share=0.0) if steady_ttft(r) else None  # the same workers in steady state

    def metrics(prof):
        out = _metric_dict(evaluate_agg(raw, prof, workers, worker, conc))
        if steady is not None:  # a median TTFT: a steady-state request's
            out["ttft_ms"] = evaluate_agg(steady, prof, workers, worker, conc).ttft_s * 1e3
        return out

    ok = ~bad & mem.fits
    why = ["layout invalid for the model" if bad[j] else "does not fit in memory" for j in range(len(idx))]
    flags = {**_beyond_cap(pts, idx, r, workers * lay.ranks * max_b, ok), **_below_floor(pts, idx, r, tp, pp, dp, ep, b, ok)}
    load = running_batch(conc, workers * lay.ranks, np.where(max_b > 0, max_b, np.inf))  # per rank without the KV cap
    notes = _unrecorded_pool_notes(idx, r, tp, pp, dp, ep, wl.mean_isl + wl.mean_osl, kv_b, load, ok)
    for i, note in _unrecorded_cap_notes(idx, r, dp, np.minimum(load, kv_b), max_b, ok).items():
        notes[i] = notes[i] + "; " + note if i in notes else note
    return PointGroup(idx, r.engine, ok, why, metrics, "agg", flags, notes=notes)


def _unrecorded_cap_notes(idx, r: Resolved, dp, running, max_b, ok, field: str = "batch_size") -> dict:
    """{point index: note} for the predicted rows that record no running-request cap (``batch_size``) and run more
    requests per rank than their engine release's own default cap allows: SGLang with drafts runs at most 48 a server
    unless --max-running-requests is set, and a run that kept that default queued the rest."""
    sched, drafts = r.sched, r.spec.k > 0
    if sched is None:
        return {}
    cap, per_rank = sched.running_cap(drafts), np.broadcast_to(sched.running_cap_per_rank(dp, drafts), np.shape(dp))
    over = ok & (max_b <= 0) & (running > per_rank)
    with_drafts = " with drafts" if drafts and sched.max_running_with_spec < sched.max_running else ""
    return {i: (f"{running[j]:.0f} requests per rank run at once and the row records no cap ({field}), where "
                f"{sched.engine} by default runs at most {cap:g} a server{with_drafts}"
                f" ({per_rank[j]:.0f} per rank): priced with every client running, as a run that set its cap higher")
            for j, i in enumerate(idx) if over[j]}


def _given_gpus(p) -> int:
    """The GPU count a row's file (or sidecar, or option) gives; 0 where the reader derived it from one worker's layout."""
    notes = _get(p, "notes") or {}
    return 0 if str(notes.get("num_gpus", "")).startswith(DERIVED_NOTE) else _int(p, "num_gpus", 0)


def agg_workers(concurrency, max_batch, given_gpus, worker_gpus, ranks) -> np.ndarray:
    """Workers of aggregated rows: the GPU count over the worker's GPUs where the row gives one; else (a row that gives
    its engine's max batch per rank but no GPU count) as many as its client load needs at that batch."""
    need = np.where(max_batch > 0, np.ceil(concurrency / np.maximum(max_batch * ranks, 1)), 1)
    return np.where(given_gpus > 0, np.maximum(given_gpus // worker_gpus, 1), need)


def _beyond_cap(pts, idx, r: Resolved, cap, ok) -> dict:
    """{point index: why} for the predicted rows whose own TTFT and TPOT put more requests in decode at once (Little's
    law, :func:`measured_in_decode`) than their GPU count and batch cap allow: the ``batch_size`` the row gives is not the
    cap its engine ran with (a per-GPU figure, or a batch of another meaning), so the row is not that configuration."""
    out = {}
    for j, i in enumerate(idx):
        n = measured_in_decode(pts[i], r.workload().mean_osl)
        if ok[j] and cap[j] > 0 and n is not None and n > CAP_SLACK * cap[j]:
            out[i] = (f"its own TTFT and TPOT put {n:.0f} requests in decode at once (Little's law), above the {cap[j]:.0f} "
                      f"its GPUs x batch_size {_get(pts[i], 'batch_size'):g} per rank allow: batch_size is not the cap its "
                      "engine ran with")
    return out


def _unrecorded_pool_notes(idx, r: Resolved, tp, pp, dp, ep, context_tokens, kv_b, load, ok) -> dict:
    """{point index: note} for the predicted rows that record no memory fraction and whose KV pool binds at their load
    under simfront's pool or under their engine release's default (:mod:`simfront.engine_memory`) with a different
    number of requests per rank: the prediction rests on a fraction the row does not give."""
    if r.unrecorded is None or not r.engine:
        return {}
    alt = replace(r, memory=r.unrecorded).plan_memory(tp, pp, dp, ep, context_tokens)
    kv_alt = np.maximum(np.floor(alt.max_concurrency / dp / pp), 1)
    # binds under either pool and they differ; where the default would not even load the weights, the run set a
    # fraction of its own, and only simfront's pool binding matters
    binds = ok & np.where(alt.fits, (np.minimum(kv_b, kv_alt) < load) & (kv_alt != kv_b), kv_b < load)
    return {i: ("the KV pool binds at this load and the row records no GPU memory fraction: "
                f"{kv_b[j]:.0f} requests per rank in the pool simfront's launch lines give, "
                + (f"{kv_alt[j]:.0f} under {r.engine}'s default fraction (gpu_memory_fraction: default)" if alt.fits[j] else
                   f"and {r.engine}'s default fraction would not load the weights (the run set its own)")
                + "; its gpu_memory_fraction decides the queue")
            for j, i in enumerate(idx) if binds[j]}


def _below_floor(pts, idx, r: Resolved, tp, pp, dp, ep, batch, ok) -> dict:
    """{point index: why} for the predicted (``ok``) rows whose measured TPOT beats the least time of a decode
    step of the batch their concurrency, max batch and KV capacity put on a rank (simfront.bounds): fewer requests decoded together than the row
    says, so the row is not that configuration at that load (a client-side cap on requests in flight
    gives this pattern: calibration README, "flag and exclude rows you cannot interpret")."""
    wl = r.workload()
    ctx = wl.mean_isl + wl.mean_osl / 2.0  # mean context of a decoding request
    q = r.spec.k + 1.0  # tokens verified per request and step; at most all of them accepted
    # a row that does not name its KV-cache format is held to the smaller FP8 cache (the floor must stay a floor)
    prec = r.precision if _get(pts[idx[0]], "kv_dtype") else apply_precision_kv(r.precision, "fp8")
    floor_ms = decode_step_floor_s(r.model, prec, r.hw, tp, pp, dp, ep, batch, ctx, q) / q * 1e3
    meas = np.array([float(_get(pts[i], "tpot_ms") or np.nan) for i in idx])
    with np.errstate(invalid="ignore"):
        mask = meas < FLOOR_SLACK * floor_ms
    return {i: (f"measured TPOT {meas[j]:.3g} ms is below the {floor_ms[j]:.3g} ms a decode step of {batch[j]:.0f} requests "
            f"per rank needs at the datasheet HBM bandwidth (weights + KV): fewer requests decoded together than the "
            f"concurrency {_get(pts[i], 'concurrency')} says (a client-side cap on requests in flight?"
            + _in_decode_note(pts[i], wl.mean_osl) + ")")
            for j, i in enumerate(idx) if mask[j] and ok[j]}


def measured_in_decode(p, mean_osl: float) -> float | None:
    """Requests decoding at once by Little's law on the measurement alone: a closed loop of C clients, each cycle its
    TTFT plus decode time D = (mean OSL - 1) x TPOT, has C x D / (TTFT + D) of them decoding. None without all three."""
    c, ttft, tpot = (float(_get(p, k) or np.nan) for k in ("concurrency", "ttft_ms", "tpot_ms"))
    decode_ms = max(mean_osl - 1.0, 0.0) * tpot  # one request's decode time after its first token
    if not (np.isfinite(c) and np.isfinite(ttft) and np.isfinite(decode_ms)) or decode_ms <= 0 or ttft < 0:
        return None  # no decode to count (one output token) or no usable latencies
    return c * decode_ms / (ttft + decode_ms)


def _in_decode_note(p, mean_osl: float) -> str:
    """"; its own TTFT and TPOT put N requests in decode at once (Little's law)", or "" (:func:`measured_in_decode`)."""
    n = measured_in_decode(p, mean_osl)
    return "" if n is None else f"; its own TTFT and TPOT put {n:.0f} requests in decode at once (Little's law)"


def _metric_dict(m) -> dict:
    """The validated metrics of a :class:`simfront.deployment.Metrics`."""
    return dict(ttft_ms=m.ttft_s * 1e3, tpot_ms=m.tpot_s * 1e3, tok_s_per_user=m.tok_s_user, output_tok_s_total=m.output_tok_s,
                output_tok_s_per_gpu=m.tok_s_gpu(), request_throughput=m.requests_s)


def _group_offline(pts, idx, r: Resolved) -> PointGroup:
    """Offline max-throughput rows: every request queued at once, so the engine runs its largest batch
    that fits (and the row's max batch when it gives one); the best output rate over those batches."""
    tp, pp, dp, ep = _layout(pts, idx, dense=not r.model.arch.is_moe)
    bad = layout_errors(r.model.arch, tp, pp, dp, ep)
    lay = Layouts.of(tp[:, None], pp[:, None], dp[:, None], ep[:, None])
    worker = lay.gpus
    n_gpus = np.array([_int(pts[i], "num_gpus", 0) or worker[j, 0] for j, i in enumerate(idx)])
    workers = np.maximum(n_gpus // worker[:, 0], 1)[:, None]
    max_b = np.array([float(_get(pts[i], "batch_size", 0) or 0) for i in idx])
    wl = r.workload()
    mem = r.plan_memory(tp, pp, dp, ep, wl.mean_isl + wl.mean_osl)
    cap = np.floor(mem.max_concurrency / dp / pp)[:, None]
    B = BATCH_SIZES[None, :].astype(float)
    lim = np.where(max_b[:, None] > 0, np.minimum(cap, max_b[:, None] / dp[:, None]), cap)
    raw = aggregated_raw(r.model, r.precision, r.hw, lay.tp, lay.pp, lay.dp, lay.ep, B, wl, r.spec)
    conc = B * lay.ranks * workers  # every slot busy

    def metrics(prof):
        m = evaluate_agg(raw, prof, workers, worker, conc)
        tok = np.where(B <= np.maximum(lim, 1), m.output_tok_s, 0.0).max(axis=1)
        return dict(output_tok_s_total=tok, output_tok_s_per_gpu=tok / n_gpus)

    ok = ~bad & mem.fits
    return PointGroup(idx, r.engine, ok, ["layout invalid or does not fit in memory"] * len(idx), metrics, "offline")


@dataclass
class DisaggRows:
    """The disaggregated deployments of measured rows ``idx``: each role's layout, workers and batch cap,
    the decode workers' memory, the GPUs in all, the KV link, and the rows whose layouts are invalid."""

    prefill: Layouts
    decode: Layouts
    prefill_workers: np.ndarray
    decode_workers: np.ndarray
    prefill_batch: np.ndarray  # prompts a prefill worker steps with (prefill_prompts)
    # the per-rank token budget the rows give (token_budget), below which a prompt is prefilled in chunks; None: whole
    # prompts per step, as the search prices them
    prefill_chunk_tokens: float | None
    decode_batch: np.ndarray  # the decode engines' batch cap (0 when absent)
    decode_memory: Any
    total_gpus: np.ndarray
    link_bytes_per_s: np.ndarray
    bad: np.ndarray


def prefill_prompts(pts, idx, r: Resolved, prefill_dp) -> np.ndarray:
    """Prompts a prefill worker of each row steps with: the row's ``prefill_batch``; else as many whole prompts as fill
    each attention-DP rank's token budget (the row's ``token_budget``, else its engine's default: TensorRT-LLM's
    ``max_num_tokens`` per rank, SGLang's ``--max-prefill-tokens`` and ``--chunked-prefill-size`` over the DP size,
    vLLM's ``max_num_batched_tokens``; simfront/engines/scheduler.yaml), at least one per rank. A prompt longer than a
    budget the row gives is prefilled in chunks (:func:`simfront.serving.prefill_chunks`); a default budget is not
    taken to chunk it (recipes set their own)."""
    from .scheduler import scheduler_settings

    out = np.empty(len(idx))
    gib = r.hw.hbm_bytes / 2**30
    dps = np.broadcast_to(np.ravel(np.asarray(prefill_dp, dtype=float)), (len(idx),))
    for j, i in enumerate(idx):  # rows of one measured group: a handful
        given = _get(pts[i], "prefill_batch")
        dp = float(dps[j])
        if given:
            out[j] = float(given)
            continue
        budget = _get(pts[i], "token_budget")
        if budget is None:
            budget = float(scheduler_settings(r.engine, _get(pts[i], "engine_version"), gib,
                                              _get(pts[i], "measured_on")).prefill_tokens_per_rank(dp))
        out[j] = max(math.floor(float(budget) / r.isl), 1) * dp  # whole prompts per rank x ranks
    return out


def disagg_rows(pts, idx, r: Resolved) -> DisaggRows:
    """:class:`DisaggRows` of the disaggregated measured points ``idx`` (one resolved model, GPU and precision)."""
    dense = not r.model.arch.is_moe
    ptp, ppp, pdp, pep = _layout(pts, idx, "prefill_", dense=dense)
    dtp, dpp, ddp, dep = _layout(pts, idx, "decode_", dense=dense)
    pw = np.array([_int(pts[i], "prefill_workers") for i in idx])
    dw = np.array([_int(pts[i], "decode_workers") for i in idx])
    arch = r.model.arch
    play, dlay = Layouts.of(ptp, ppp, pdp, pep), Layouts.of(dtp, dpp, ddp, dep)
    total = pw * play.gpus + dw * dlay.gpus
    wl = r.workload()
    given_budget = _get(pts[idx[0]], "token_budget") is not None  # the same for every row of the group (its key)
    return DisaggRows(play, dlay, pw, dw, prefill_prompts(pts, idx, r, pdp), r.token_budget if given_budget else None,
                      np.array([float(_get(pts[i], "decode_batch", 0) or 0) for i in idx]),
                      r.plan_memory(dtp, dpp, ddp, dep, wl.mean_isl + wl.mean_osl), total,
                      kv_link_bytes_per_s(r.hw, total, play.gpus),
                      layout_errors(arch, ptp, ppp, pdp, pep) | layout_errors(arch, dtp, dpp, ddp, dep))


def disagg_workload(r: Resolved) -> Workload:
    """The workload a disaggregated row is priced with: its lengths as its client drew them and its engine release's
    scheduler facts (:func:`engine_workload`: the fused kernels, the two-batch overlap split, ...), as the search's
    disaggregated workers take them; the token budgets are the workers' own (:func:`disagg_rows`), not the row's one."""
    return Workload(isl=r.isl, osl=r.osl, length_range_ratio=r.range_ratio, two_batch_overlap=r.two_batch_overlap,
                    routing_alpha=r.routing_alpha,
                    **engine_workload(constants=r.constants))


def disagg_prefill_raw(d: DisaggRows, r: Resolved) -> tuple:
    """:func:`simfront.serving.prefill_raw` of the rows' prefill workers: their layout, the prompts a busy worker steps
    with per rank, the rows' token budget and the deployment's KV link (what :func:`_group_disagg` prices)."""
    play = d.prefill
    return prefill_raw(r.model, r.precision, r.hw, play.tp, play.pp, play.dp, play.ep, np.maximum(d.prefill_batch / play.dp, 1),
                       disagg_workload(r), d.link_bytes_per_s, chunk_tokens=d.prefill_chunk_tokens)


def _group_disagg(pts, idx, r: Resolved) -> PointGroup:
    d = disagg_rows(pts, idx, r)
    dlay, pw, dw, dmem = d.decode, d.prefill_workers, d.decode_workers, d.decode_memory
    conc = np.array([float(_get(pts[i], "concurrency", 0) or 0) for i in idx])
    bad = d.bad | (conc <= 0)
    conc = np.maximum(conc, 1.0)
    # a busy prefill worker steps with the prompts waiting for it, so with at most its share of the clients, however
    # large the batch its engine would take (a recipe's cap sized for a heavier load)
    with np.errstate(divide="ignore"):  # a row without prefill workers is bad already
        d = replace(d, prefill_batch=np.minimum(d.prefill_batch, np.ceil(conc / pw)))
    b = running_batch(conc, dw * dlay.ranks, np.where(d.decode_batch > 0, d.decode_batch, np.inf),
                      np.maximum(np.floor(dmem.max_concurrency / dlay.dp / dlay.pp), 1))
    slots = b * dlay.ranks * dw  # decode slots the clients occupy
    wl = disagg_workload(r)
    d_raw = decode_raw(r.model, r.precision, r.hw, dlay.tp, dlay.pp, dlay.dp, dlay.ep, b, wl, r.spec)
    total_gpus = d.total_gpus
    p_raw = disagg_prefill_raw(d, r)

    def metrics(prof):
        pre, dec, at_transfer = finish_prefill(*p_raw, prof), finish_decode(*d_raw, wl.mean_osl, prof), slot_at_transfer(prof)

        def deployment(wave_share):  # the rows' deployment under a client whose start-up wave holds this share
            return evaluate_disagg(pre, pw, dec, slots, conc, wl.mean_osl, total_gpus, wave_share, slot_at_transfer=at_transfer,
                                   range_ratio=wl.length_range_ratio)

        out = _metric_dict(deployment(r.wave_share))
        if steady_ttft(r):  # a median TTFT: a steady-state request's
            out["ttft_ms"] = deployment(0.0).ttft_s * 1e3
        return out

    ok = ~bad & dmem.fits
    notes = _unrecorded_cap_notes(idx, r, dlay.dp, b, d.decode_batch, ok, "decode_batch")  # the decode servers' cap
    return PointGroup(idx, r.engine, ok, ["layout invalid, no concurrency, or decode worker does not fit in memory"] * len(idx), metrics,
                      "disagg", notes=notes)

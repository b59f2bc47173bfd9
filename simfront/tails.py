"""Tail latencies of frontier points from the step-level simulation (:mod:`simfront.simulate`).

The analytical evaluator gives means (validated against measurements); a user's SLA is often a
percentile. The simulation gives the spread: a point's percentile is the evaluator's mean times the
simulated percentile over the simulated mean (:func:`scaled_tails`). ``simulate_points`` replays
each chosen configuration as a closed loop of its own concurrency (fixed lengths, clients spread, the
first request of each client as warm-up) through the engine loop, with step times from the same cost
model and serving profile, and returns p50 / p90 / p99 of TTFT and TPOT per point. All aggregated
points are one vectorised run and all disaggregated ones another (precision, speculation and token
budget per point); these requests are identical, so they run on the fast loop (:func:`simfront.engine_fast.run_fast`).
"""

from __future__ import annotations


import numpy as np

from . import clients as cl
from .deployment import Layouts
from .hardware import GpuSet
from .models import Model
from .scheduler import scheduler_settings
from .search import SearchSpace, kv_link_bytes_per_s, precision_options, spec_from_label
from .serving import Workload
from .sim_metrics import request_latencies
from .simulate import simulate_agg, simulate_disagg

TAIL_FIELDS = ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms")
SHAPE_FIELDS = ("ttft_mean_ms", "tpot_mean_ms")  # the simulated means the percentiles are relative to
# Requests each simulated client sends: the first is warm-up, the second is counted, and the third keeps the
# load up while the second ones run (the loop stops once every counted request has finished); with two, the
# counted requests would decode in a batch that drains as clients stop, not at the point's concurrency.
PROMPTS_PER_CLIENT = 3.0
COUNTED_PER_CLIENT = 1.0


def simulate_points(model: Model, gpus: GpuSet, wl: Workload, points: dict, idx, profile: dict, engine: str | None = None,
                    space: SearchSpace | None = None) -> dict[str, np.ndarray]:
    """``{field: array over idx}`` of simulated tail latencies (ms) for search points ``idx`` (and the
    simulated ``requests_s``). All aggregated points are one simulation, all disaggregated ones another
    (per-point precision, speculation and token budget; one step table per distinct setting), each split into groups
    of similar concurrency where one run would be mostly padding (:func:`_similar_loads`)."""
    idx = np.asarray(idx, dtype=int)
    hw = gpus.hardware
    sched = scheduler_settings(engine, space.engine_version if space else None, hw.hbm_bytes / 2**30)
    precs = {(q.label, q.kv): q for q in precision_options(model, gpus, space or SearchSpace())}
    out = {k: np.full(idx.size, np.nan) for k in TAIL_FIELDS + SHAPE_FIELDS + ("requests_s",)}
    # each point's counted requests: (TTFT, TPOT) over the point's simulated means (for goodput at an SLA)
    out["requests_rel"] = [None] * idx.size
    out["unsimulated"] = {}  # point position -> why the simulation left it out (its fields stay NaN)
    # the workload's length spread when it names one (a benchmark's --random-range-ratio), else fixed lengths
    ratio = 1.0 if wl.length_range_ratio is None else wl.length_range_ratio
    # the workload's prefix-cache hits: each prompt's cached share (the plan) and the step tables' prompt tokens to compute
    client = cl.ClosedLoop(1.0, cl.Lengths(wl.isl, wl.osl, ratio), num_prompts=PROMPTS_PER_CLIENT, first_wave=False, warmup=1,
                           prefix_hit=wl.prefix_hit)
    prefix = wl.isl * wl.prefix_hit  # cached tokens of a nominal prompt
    specs: dict[str, object] = {}

    def spec_of(label: str):  # one Speculation per label, built once
        if label not in specs:
            specs[label] = spec_from_label(label, model)
        return specs[label]

    for mode in ("agg", "disagg"):
        js_mode = [j for j, i in enumerate(idx) if str(points["mode"][i]) == mode
                   and (str(points["precision"][i]), str(points["kv_dtype"][i])) in precs]
        for js in _similar_loads(js_mode, np.asarray(points["concurrency"][idx[js_mode]], dtype=float)):
            _simulate_group(model, gpus, wl, points, idx, js, mode, precs, spec_of, client, prefix, sched, profile, out)
    return out


# A simulation's per-request arrays are (points x the most requests any point sends): where one point holds tens of
# thousands of clients and the others a few hundred, most of them is padding that every pass over the trace fills and
# reads. Points are then simulated in groups of similar concurrency, each group's arrays as wide as its own largest
# point, once the padding passes PADDED_REQUESTS_MAX requests and half of the arrays; below that one simulation of all
# points costs less than several (each builds its own step tables and runs its own loop).
PADDED_REQUESTS_MAX = 4_000_000
PADDED_SHARE_MAX = 0.5
LOAD_GROUP_SPREAD = 4.0  # a group's largest concurrency over its smallest


def _similar_loads(js: list[int], conc: np.ndarray) -> list[list[int]]:
    """``js`` (positions of points of concurrency ``conc``) as one group, or as groups of similar concurrency where one
    simulation of all of them would be mostly padding (requests simulated: PROMPTS_PER_CLIENT per client)."""
    if not js:
        return []
    sent = PROMPTS_PER_CLIENT * np.maximum(np.ceil(conc), 1.0)  # requests each point's clients send, at most
    pad = float(len(js) * sent.max() - sent.sum())
    if pad <= PADDED_REQUESTS_MAX or pad <= PADDED_SHARE_MAX * len(js) * sent.max():
        return [list(js)]
    order = np.argsort(sent, kind="stable")
    groups, start = [], 0
    for k in range(1, order.size + 1):  # one pass over the chosen points (at most a few hundred)
        if k == order.size or sent[order[k]] > LOAD_GROUP_SPREAD * sent[order[start]]:
            groups.append(sorted(js[o] for o in order[start:k]))
            start = k
    return groups


def _simulate_group(model: Model, gpus: GpuSet, wl: Workload, points: dict, idx: np.ndarray, js: list[int], mode: str, precs: dict,
                    spec_of, client, prefix: float, sched, profile: dict, out: dict) -> None:
    """Simulate the points at positions ``js`` of ``idx`` (all of one mode) as one run and write their fields of ``out``."""
    hw = gpus.hardware
    ii = idx[js]
    prec = [precs[(str(points["precision"][i]), str(points["kv_dtype"][i]))] for i in ii]
    spec = [spec_of(str(points["spec"][i])) for i in ii]
    conc = np.asarray(points["concurrency"][ii], dtype=float)

    def plan_fn(users, D):
        return cl.plan_closed(client, users, D, prompts=np.ceil(PROMPTS_PER_CLIENT * users), counted=COUNTED_PER_CLIENT)

    def col(k):
        return np.asarray(points[k][ii], dtype=float)

    lay = Layouts.of(col("tp"), col("pp"), col("attention_dp"), col("ep"))
    if mode == "agg":
        chunk = col("chunk_tokens")
        r = simulate_agg(model, prec, hw, lay, col("replicas"), conc, plan_fn, sched=sched, profile=profile, spec=spec,
                         max_batch=col("batch"), token_budget=np.where(chunk > 0, chunk, sched.token_budget),
                         isl=wl.isl, osl=wl.osl, prefix=prefix, routing_alpha=wl.routing_alpha, recv_interval=wl.recv_interval_steps,
                         two_batch_overlap=wl.overlap)
    else:
        play = Layouts.of(col("prefill_tp"), 1, col("prefill_attention_dp"), col("prefill_ep"))
        link = kv_link_bytes_per_s(hw, gpus.count, play.gpus)
        r = simulate_disagg(model, prec, hw, play, col("prefill_workers"), lay, col("decode_workers"), conc, plan_fn,
                            sched=sched, profile=profile, spec=spec, link_bytes_per_s=link, decode_max_batch=col("batch"),
                            isl=wl.isl, osl=wl.osl, prefix=prefix, routing_alpha=wl.routing_alpha, two_batch_overlap=wl.overlap)
    for q in ("p50", "p90", "p99", "mean"):
        out[f"ttft_{q}_ms"][js] = np.asarray(r.ttft_s[q]) * 1e3
        out[f"tpot_{q}_ms"][js] = np.asarray(r.tpot_s[q]) * 1e3
    out["requests_s"][js] = r.requests_s
    if r.skipped is not None:
        out["unsimulated"].update((js[d], r.skipped_why) for d in np.flatnonzero(r.skipped))
    ttft, tpot = request_latencies(r.trace)
    with np.errstate(divide="ignore", invalid="ignore"):
        ttft_rel = ttft / np.asarray(r.ttft_s["mean"])[:, None]  # each request's TTFT over its point's simulated mean
        tpot_rel = tpot / np.asarray(r.tpot_s["mean"])[:, None]  # and its TPOT
    for d, j in enumerate(js):
        m = r.trace.counted[d]
        out["requests_rel"][j] = (ttft_rel[d][m], tpot_rel[d][m])


def simulated_workload(wl: Workload) -> str:
    """What :func:`simulate_points`' clients send, in words (for the note beside the percentiles)."""
    r = wl.length_range_ratio
    lengths = "fixed lengths" if r is None or r >= 1.0 else f"lengths uniform in [{r:g} L, L]"
    return lengths + (f", {wl.prefix_hit:.0%} of each prompt from the prefix cache" if wl.prefix_hit else "")


def goodput_requests_s(sim: dict, ttft_mean_ms, tpot_mean_ms, requests_s, ttft_ms: float | None = None,
                       tpot_ms: float | None = None) -> np.ndarray:
    """Requests/s of each point that meet the SLA (TTFT at most ``ttft_ms`` and TPOT at most ``tpot_ms``;
    DistServe's goodput): the point's requests/s times the share of its requests within both bounds, each
    request's latency being the evaluator's mean times its simulated latency over the simulated mean (the
    spread of :func:`scaled_tails`). NaN where a point was not simulated."""
    ttft_mean, tpot_mean, rate = (np.asarray(x, float) for x in (ttft_mean_ms, tpot_mean_ms, requests_s))
    out = np.full(rate.shape, np.nan)
    for j, rel in enumerate(sim["requests_rel"]):
        if rel is None or rel[0].size == 0:
            continue
        ok = np.ones(rel[0].shape, bool)
        if ttft_ms is not None:
            ok &= ttft_mean[j] * rel[0] <= ttft_ms  # this request's TTFT within the bound
        if tpot_ms is not None:
            ok &= tpot_mean[j] * rel[1] <= tpot_ms  # and its TPOT
        out[j] = rate[j] * ok.mean()  # requests/s that meet the SLA
    return out


def scaled_tails(sim: dict[str, np.ndarray], ttft_mean_ms, tpot_mean_ms) -> dict[str, np.ndarray]:
    """Percentiles with the evaluator's (validated) means and the simulation's spread: each simulated
    percentile over the simulated mean, times the evaluator's mean of the same metric."""
    out = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for metric, mean in (("ttft", np.asarray(ttft_mean_ms, float)), ("tpot", np.asarray(tpot_mean_ms, float))):
            for q in ("p50", "p90", "p99"):
                out[f"{metric}_{q}_ms"] = mean * sim[f"{metric}_{q}_ms"] / sim[f"{metric}_mean_ms"]
    return out

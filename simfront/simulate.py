"""Step-level simulation of serving deployments: continuous batching, vectorised over deployments.

The analytical evaluator (:mod:`simfront.deployment`) is the fast first pass; this module refines
the points it keeps by running each deployment's engine loop step by step against a client model
(:mod:`simfront.clients`), so that TTFT under load, tail latencies (p50/p90/p99) and goodput come out
of the scheduling itself: the synchronised first wave, random lengths, the token budget per step,
chunked prefill, prefill-first or mixed steps, max running requests, KV-cache capacity with
preemption and recompute, prefix-cache hits, and for disaggregated deployments the prefill queue
and the KV transfer.

Step times come from the same cost model as everything else: :func:`simfront.step_table.build_step_table`
evaluates :func:`simfront.step.forward_step` under the serving profile (:func:`simfront.serving.step_terms`)
on a grid of (decode requests, prompt tokens, mean context) per deployment, once per group, and the
loop interpolates in it.

Reduction (mean field across identical servers): a deployment of ``S`` identical engine servers
(workers x attention-DP ranks x pipeline micro-batches) under ``C`` clients is simulated as one
representative server with ``C / S`` clients (rounded up: attention-DP ranks step together, so the
busiest rank sets the step), and its throughput is scaled by ``C`` over its clients. A disaggregated
deployment is simulated as one prefill worker with its share ``C / x`` of the clients and the share
``y / x`` of the decode ranks, pooled (decode ranks step in parallel).

Loops: :func:`simfront.engine_loop.run_engine` keeps arrays of shape (deployments, request slots); the
Python loop runs over engine steps, and a step without prompt tokens stands for every decode step up to
the next event (a request finishing, an arrival, the KV cache filling), so the loop count is about the
number of requests plus prefill steps. :func:`simfront.engine_fast.run_fast` gives the same times
(``tests/test_simulate_fast.py``) for closed-loop clients of identical requests whose KV cache cannot
fill (what refining search points needs) with (deployments,) counters instead of slots and runs of
identical prefill steps skipped too; :func:`simulate_trace` sends each deployment to the loop that can
take it.

Modules: this one holds the entry points (:func:`simulate_agg`, :func:`simulate_disagg`: the
representative server's clients, KV capacity, step tables and engine arrays) and the dispatch
(:func:`simulate_trace`); :mod:`simfront.step_table` the step-time tables, :mod:`simfront.engine_loop`
the request-slot loop, :mod:`simfront.engine_fast` the loop for identical closed-loop requests, and
:mod:`simfront.sim_metrics` the trace and its statistics (:class:`~simfront.sim_metrics.SimMetrics`).
"""

from __future__ import annotations

import numpy as np

from .clients import RequestPlan
from .deployment import Layouts
from .engine_fast import fast_rows, run_fast
from .engine_loop import MAX_LOOP_ITERATIONS, EngineArrays, run_engine
from .memory import kv_bytes_per_token, plan_memory
from .scheduler import SchedulerSettings
from .serving import NO_SPEC, Speculation, mixed_steps
from .sim_metrics import SimMetrics, SimTrace, summarise
from .step import DEFAULT_ROUTING_ALPHA
from .step_table import StepTable, other_ranks_prefill_share, per_row, step_tables, with_other_ranks_prefill

# Shortest context a decode step table spans, as a share of the nominal ISL: a benchmark's shortest prompts (the
# InferenceX / SGLang bench_serving spelling, --random-range-ratio 0.8; calibration README). The table is linear in the
# context between its two ends (StepTable.parts: a slope per context token), so shorter contexts extrapolate that line.
TABLE_CTX_LO_SHARE = 0.8
# The general engine loop steps arrays of (deployments x the most users any of them has): deployments whose users
# differ by more than this factor run as separate groups (each deployment's simulation is its own, so only the cost
# changes: a frontier from 9 to 32,768 clients no longer steps every point on 32,768-wide arrays)
USERS_BAND_FACTOR = 4.0
# ... once the arrays are this large (deployments x request slots); below it the loop's fixed cost per step, which each
# group pays again, outweighs what the narrower arrays save (measured: 16 deployments of 32-3,072 users ran 1.1 s as one
# loop and 2.2 s as four; 19 deployments of 9-32,768 clients 28 s as one and 21 s in bands)
BAND_MIN_SLOTS = 65536


def _take_plan(plan: RequestPlan, rows) -> RequestPlan:
    f = {k: (v[rows] if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == plan.isl.shape[0] else v)
         for k, v in vars(plan).items() if k not in ("extra", "count_until")}
    f["count_until"] = None if plan.count_until is None else np.asarray(plan.count_until)[rows]
    return RequestPlan(**f, extra={k: (v[rows] if isinstance(v, np.ndarray) and v.ndim >= 1 else v) for k, v in plan.extra.items()})


def _merge(parts: list[tuple[np.ndarray, SimTrace]], D: int, R: int) -> SimTrace:
    """One trace of ``D`` deployments from traces of row groups (ITL columns padded with zero weight)."""
    full = lambda: np.full((D, R), np.nan)  # noqa: E731
    t_send, t_first, t_end, isl, osl = full(), full(), full(), full(), full()
    counted = np.zeros((D, R), bool)
    I = max(tr.itl()[0].shape[1] for _, tr in parts)
    itl_s, itl_w = np.zeros((D, I)), np.zeros((D, I))
    ov, pre, comp = np.zeros(D), np.zeros(D), np.zeros(D)
    for rows, tr in parts:
        c = tr.t_send.shape[1]
        for dst, src in ((t_send, tr.t_send), (t_first, tr.t_first), (t_end, tr.t_end), (isl, tr.isl), (osl, tr.osl)):
            dst[rows, :c] = src
        counted[rows, :c] = tr.counted
        step_s, tokens = tr.itl()
        itl_s[rows, : step_s.shape[1]] = step_s
        itl_w[rows, : tokens.shape[1]] = tokens
        ov[rows], pre[rows], comp[rows] = tr.ttft_overhead_s, tr.preemptions, tr.prompt_tokens_computed
    return SimTrace(t_send, t_first, t_end, isl, osl, counted, itl_s, itl_w, ov, sum(tr.iterations for _, tr in parts), pre, comp)


def simulate_trace(table, plan: RequestPlan, eng: EngineArrays, decode_table=None, disagg: dict | None = None,
                   max_iterations: int = MAX_LOOP_ITERATIONS) -> SimTrace:
    """Simulate every deployment: those :func:`~simfront.engine_fast.fast_rows` accepts on the fast loop
    (:func:`~simfront.engine_fast.run_fast`), the rest (random lengths, open loop, agentic sessions, a KV cache that
    can fill) on :func:`~simfront.engine_loop.run_engine`; one trace in the deployments' order."""
    D, R = plan.isl.shape
    fast = fast_rows(plan, eng, disagg)
    groups = [(np.nonzero(fast)[0], run_fast)]
    slow = np.nonzero(~fast)[0]
    users = np.maximum(np.asarray(plan.users, float)[slow], 1.0)
    if slow.size and slow.size * users.max() >= BAND_MIN_SLOTS:
        # the general loop's arrays span the most users of its rows: rows of far fewer users run apart
        band = np.floor(np.log(users) / np.log(USERS_BAND_FACTOR))
        groups += [(slow[band == b], run_engine) for b in np.unique(band)]
    else:  # small arrays: one loop, as each group's loop pays its own per-step overhead
        groups.append((slow, run_engine))
    parts = []
    for rows, runner in groups:
        if rows.size == 0:
            continue
        if rows.size == D:
            return runner(table, plan, eng, decode_table, disagg, max_iterations)
        sub = None if disagg is None else {k: np.asarray(v)[rows] for k, v in disagg.items()}
        parts.append((rows, runner(table.take(rows), _take_plan(plan, rows), eng.take(rows),
                                   None if decode_table is None else decode_table.take(rows), sub, max_iterations)))
    return _merge(parts, D, R)


# --------------------------------------------------------------------------------------------------
# deployments
# --------------------------------------------------------------------------------------------------


def _col(x, D) -> np.ndarray:
    return np.broadcast_to(np.asarray(x, float).reshape(-1) if np.ndim(x) else np.asarray(x, float), (D,)).copy()


def kv_tokens_per_rank(model, precision, hw, lay: Layouts, context_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """(context tokens one engine server, i.e. one attention-DP rank's micro-batch, holds in its KV
    cache; whether the layout fits), from :func:`simfront.memory.plan_memory` at ``context_tokens``
    per sequence (fixed per-sequence state of linear-attention layers included)."""
    mem = plan_memory(model, precision, hw, lay.tp, lay.pp, lay.dp, lay.ep, 1, context_tokens)
    return kv_tokens_of(mem, lay.dp, lay.pp, context_tokens), mem.fits


def kv_tokens_of(mem, dp, pp, context_tokens: float) -> np.ndarray:
    """Context tokens one attention-DP rank's KV pool holds under the memory plan ``mem`` (sequences of
    ``context_tokens``), for layouts of ``dp`` ranks and ``pp`` stages."""
    return np.floor(mem.max_concurrency / np.asarray(dp, float) / np.asarray(pp, float)) * context_tokens


def _spec_arrays(spec, D: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens emitted per decode step, tokens a decode request puts through a step) per deployment."""
    al, q = np.ones(D), np.ones(D)
    for rows, sp in per_row(spec, D):
        al[rows], q[rows] = sp.accepted_per_step, sp.k + 1
    return al, q


def _kv_per_rank(model, precision, hw, lay: Layouts, context_tokens: float, D: int) -> np.ndarray:
    out = np.zeros(D)
    for rows, prec in per_row(precision, D):
        out[rows] = kv_tokens_per_rank(model, prec, hw, lay.take(rows), context_tokens)[0]
    return out


def simulate_agg(model, precision, hw, lay: Layouts, workers, concurrency, plan_fn, *, sched: SchedulerSettings,
                 profile: dict, spec: Speculation = NO_SPEC, max_batch=None, token_budget=None, isl: float, osl: float,
                 prefix: float = 0.0, kv_tokens=None, table: StepTable | None = None,
                 routing_alpha=DEFAULT_ROUTING_ALPHA, recv_interval=1.0, two_batch_overlap: tuple | None = None) -> SimMetrics:
    """Simulate aggregated deployments (arrays of length D): ``workers`` copies of a worker with
    layout ``lay`` under ``concurrency`` clients. ``plan_fn(users, D)`` returns the
    :class:`~simfront.clients.RequestPlan` of one representative server with ``users`` clients
    (see :func:`simfront.clients.plan_closed`). ``max_batch``: the engine's max running requests per
    rank (default the scheduler's); ``isl``/``osl``: nominal lengths (the table's range); ``recv_interval``: decode
    steps between the engine's intakes of new requests (SGLang's --scheduler-recv-interval, 1: every step);
    ``two_batch_overlap``: the engine's two-batch overlap (:attr:`simfront.serving.Workload.overlap`; None: off).
    ``precision`` and ``spec`` are one setting for all deployments or a sequence of D (one step table
    per distinct setting, one simulation for all)."""
    D = np.asarray(lay.tp).reshape(-1).size
    L = Layouts(*(_col(a, D) for a in (lay.tp, lay.pp, lay.dp, lay.ep)))
    servers = _col(workers, D) * L.dp * L.pp
    C = _col(concurrency, D)
    users = np.maximum(np.ceil(C / servers - 1e-9), 1.0)
    maxrun = np.minimum(_col(sched.max_running if max_batch is None else max_batch, D), sched.max_running if max_batch is None else np.inf)
    if kv_tokens is None:
        kv_tokens = _kv_per_rank(model, precision, hw, L, isl + osl, D)
    budget = _col(sched.token_budget if token_budget is None else token_budget, D)
    eng = EngineArrays.of(D, sched, kv_tokens, NO_SPEC, profile, max_running=maxrun, token_budget=budget)
    eng.al, eng.q = _spec_arrays(spec, D)
    eng.adp_ranks = L.dp.copy()  # the worker's attention-DP ranks wait for each other at the engine's balance gate
    # the representative rank is stepped alone, but attention-DP ranks step together: how often the others prefill, and
    # how many prefill in a step with prompt tokens, as the evaluator's mixed steps take them at the rank's running batch
    adp = L.dp > 1
    isl_new, running = max(isl - prefix, 1.0), np.minimum(users, maxrun)  # prompt tokens to compute; requests per rank
    ms = mixed_steps(L.dp, running, isl_new, osl, budget, eng.al, np.where(eng.gated(), eng.adp_gate_iters, 0.0),
                     np.where(eng.prefill_first, 0.0, eng.q))
    if table is None:
        table = step_tables(model, precision, hw, L, profile, spec, D, isl_new=isl_new, prefix=prefix,
                        ctx_lo=TABLE_CTX_LO_SHARE * isl, ctx_hi=isl + osl, b_max=float(np.max(running)) + 1,
                        p_max=float(np.max(budget)), routing_alpha=routing_alpha, two_batch_overlap=two_batch_overlap,
                        allreduce_norm_fusion=sched.allreduce_norm_fusion, mla_native_heads=sched.mla_native_heads,
                        prefill_ranks=np.where(adp, ms.prefill_ranks, L.dp) if adp.any() else None)
    if adp.any():
        table = with_other_ranks_prefill(table, np.where(adp, other_ranks_prefill_share(ms.mixed_share, ms.rank_share), 0.0),
                                         ms.mixed_tokens)
    plan = plan_fn(users, D)
    eng.recv_interval = _col(recv_interval, D)
    tr = simulate_trace(table, plan, eng)
    return summarise(tr, C / users, C, _col(workers, D) * L.gpus)


def simulate_disagg(model, precision, hw, prefill: Layouts, prefill_workers, decode: Layouts, decode_workers, concurrency,
                    plan_fn, *, sched: SchedulerSettings, profile: dict, spec: Speculation = NO_SPEC, link_bytes_per_s,
                    decode_max_batch=None, prefill_budget=None, isl: float, osl: float, prefix: float = 0.0,
                    decode_kv_tokens=None, routing_alpha=DEFAULT_ROUTING_ALPHA, two_batch_overlap: tuple | None = None) -> SimMetrics:
    """Simulate disaggregated deployments (arrays of length D): ``prefill_workers`` x prefill layout,
    ``decode_workers`` x decode layout, KV moved over ``link_bytes_per_s``; ``decode_kv_tokens``: context tokens a decode
    rank's KV pool holds (default simfront's pool); see :func:`simulate_agg`."""
    D = np.asarray(decode.tp).reshape(-1).size
    P = Layouts(*(_col(a, D) for a in (prefill.tp, prefill.pp, prefill.dp, prefill.ep)))
    Dl = Layouts(*(_col(a, D) for a in (decode.tp, decode.pp, decode.dp, decode.ep)))
    x = np.maximum(_col(prefill_workers, D), 1.0)
    y = np.maximum(_col(decode_workers, D), 1.0)
    C = _col(concurrency, D)
    users = np.maximum(np.ceil(C / x - 1e-9), 1.0)
    dranks = y * Dl.dp * Dl.pp / x  # decode ranks per representative prefill worker
    dmax = _col(sched.max_running if decode_max_batch is None else decode_max_batch, D)
    dkv = _kv_per_rank(model, precision, hw, Dl, isl + osl, D) if decode_kv_tokens is None else _col(decode_kv_tokens, D)
    pkv = _kv_per_rank(model, precision, hw, P, isl + osl, D)
    pbudget = _col(sched.token_budget if prefill_budget is None else prefill_budget, D) * P.dp  # every prefill rank's budget
    ptable = step_tables(model, precision, hw, P, profile, NO_SPEC, D, isl_new=max(isl - prefix, 1.0), prefix=prefix, ctx_lo=isl,
                     ctx_hi=isl + 1, b_max=1, p_max=float(np.max(pbudget)), routing_alpha=routing_alpha, worker_prompts=True,
                     two_batch_overlap=two_batch_overlap, allreduce_norm_fusion=sched.allreduce_norm_fusion,
                     mla_native_heads=sched.mla_native_heads)
    b_top = float(np.max(np.minimum(users / np.maximum(dranks, 1e-9), dmax))) + 1
    dtable = step_tables(model, precision, hw, Dl, profile, spec, D, isl_new=max(isl - prefix, 1.0), prefix=prefix, ctx_lo=TABLE_CTX_LO_SHARE * isl,
                     ctx_hi=isl + osl, b_max=b_top, p_max=1, routing_alpha=routing_alpha, two_batch_overlap=two_batch_overlap,
                     allreduce_norm_fusion=sched.allreduce_norm_fusion, mla_native_heads=sched.mla_native_heads)
    kv_bytes = np.zeros(D)
    for rows, prec in per_row(precision, D):
        kv_bytes[rows] = kv_bytes_per_token(model, prec.kv)
    plan = plan_fn(users, D)
    # the representative prefill worker's share of the decode slots: under one slot (fewer slots in the deployment than
    # prefill workers) it cannot hold a request, and the workers' sharing of slots is not what the loop represents; such
    # deployments are left out (NaN statistics, SimMetrics.skipped) rather than simulated as never finishing
    dslots = np.floor(dmax * dranks)
    skipped = dslots < 1.0
    if skipped.any():
        plan.n = np.where(skipped, 0, plan.n)
    eng = EngineArrays.of(D, sched, pkv * P.dp, NO_SPEC, profile, max_running=sched.max_running * P.dp, token_budget=pbudget)
    eng.al, eng.q = _spec_arrays(spec, D)
    eng.prefill_first[:] = True
    # the profile's per-request time of a disaggregated hand-off (router, KV bootstrap), as the evaluator adds it to TTFT
    eng.ttft_overhead_s = eng.ttft_overhead_s + float(profile.get("disagg_overhead_s", 0.0))
    dis = {"transfer_s": kv_bytes / _col(link_bytes_per_s, D), "decode_scale": dranks,
           "decode_slots": dslots, "decode_kv_tokens": dkv * dranks,
           "slot_at_prefill": np.full(D, sched.decode_slot_at == "prefill")}
    tr = simulate_trace(ptable, plan, eng, decode_table=dtable, disagg=dis)
    gpus = x * P.gpus + y * Dl.gpus
    out = summarise(tr, C / users, C, gpus)
    out.skipped, out.skipped_why = skipped, FEWER_SLOTS_THAN_PREFILL_WORKERS
    return out


# why simulate_disagg leaves a deployment out (SimMetrics.skipped)
FEWER_SLOTS_THAN_PREFILL_WORKERS = ("fewer decode slots than prefill workers: the simulation represents one prefill "
                                    "worker with its share of the decode slots, under one here")


__all__ = ["simulate_trace", "simulate_agg", "simulate_disagg", "kv_tokens_per_rank", "kv_tokens_of"]

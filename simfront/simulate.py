"""Step-level simulation of serving deployments: continuous batching, vectorised over deployments.

The analytical evaluator (:mod:`simfront.deployment`) is the fast first pass; this module refines
the points it keeps by running each deployment's engine loop step by step against a client model
(:mod:`simfront.clients`), so that TTFT under load, tail latencies (p50/p90/p99) and goodput come out
of the scheduling itself: the synchronised first wave, random lengths, the token budget per step,
chunked prefill, prefill-first or mixed steps, max running requests, KV-cache capacity with
preemption and recompute, prefix-cache hits, and for disaggregated deployments the prefill queue
and the KV transfer.

Step times come from the same cost model as everything else: :func:`build_step_table` evaluates
:func:`simfront.step.forward_step` under the serving profile (:func:`simfront.serving.step_terms`)
on a grid of (decode requests, prompt tokens, mean context) per deployment, once per group, and the
loop interpolates in it.

Reduction (mean field across identical servers): a deployment of ``S`` identical engine servers
(workers x attention-DP ranks x pipeline micro-batches) under ``C`` clients is simulated as one
representative server with ``C / S`` clients (rounded up: attention-DP ranks step together, so the
busiest rank sets the step), and its throughput is scaled by ``C`` over its clients. A disaggregated
deployment is simulated as one prefill worker with its share ``C / x`` of the clients and the share
``y / x`` of the decode ranks, pooled (decode ranks step in parallel).

Loops: :func:`run_engine` keeps arrays of shape (deployments, request slots); the Python loop runs
over engine steps, and a step without prompt tokens stands for every decode step up to the next event
(a request finishing, an arrival, the KV cache filling), so the loop count is about the number of
requests plus prefill steps. :func:`run_fast` gives the same times (``tests/test_simulate_fast.py``)
for closed-loop clients of identical requests whose KV cache cannot fill (what refining search points
needs) with (deployments,) counters instead of slots and runs of identical prefill steps skipped too;
:func:`simulate_trace` sends each deployment to the loop that can take it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .clients import RequestPlan
from .deployment import Layouts
from .errors import SimfrontError
from .memory import kv_bytes_per_token, plan_memory
from .scheduler import SchedulerSettings
from .serving import NO_SPEC, Speculation, _drafted_pair, _drafts, _pipelined, step_terms
from .step import DEFAULT_ROUTING_ALPHA, StepBatch, forward_step

# Decode-batch grid points of the step table (requests per rank); prompt-token grid points below.
# Step time is close to piecewise linear between them (memory-bound decode, tile steps in MoE).
B_GRID = np.array([0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096], float)
P_GRID = np.array([0, 16, 128, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144], float)
CTX_POINTS = 2  # decode attention is linear in context: two points (shortest, longest) interpolate it
# Above this many decode steps per request the loop would run long; the caller is told (SimfrontError).
MAX_LOOP_ITERATIONS = 2_000_000
PERCENTILES = (50, 90, 99)

# 0-d float64 operands for the fast loops' per-iteration arithmetic: a ufunc converts a Python float anew on every
# call, which costs about as much as the operation itself on a few hundred deployments (same values either way)
_ZERO, _ONE, _TOL, _TINY, _INF = (np.array(x) for x in (0.0, 1.0, 1e-9, 1e-12, np.inf))

# phases of a request slot
_PENDING, _QUEUED, _PREFILL, _DECODE, _DONE = 0, 1, 2, 3, 4


@dataclass
class StepTable:
    """Engine step seconds per deployment on a grid: ``t[d, i_b, i_p, i_c]`` for ``b_grid[i_b]`` decode
    requests per rank, ``p_grid[i_p]`` prompt tokens in the step and context ``ctx_lo + (ctx_hi -
    ctx_lo) i_c / (n_c - 1)``; :meth:`__call__` interpolates (multilinear, linear beyond the grid)."""

    b_grid: np.ndarray
    p_grid: np.ndarray
    ctx_lo: np.ndarray  # (D,)
    ctx_hi: np.ndarray  # (D,)
    t: np.ndarray  # (D, nb, np, nc) seconds

    def take(self, rows) -> "StepTable":
        return StepTable(self.b_grid, self.p_grid, self.ctx_lo[rows], self.ctx_hi[rows], self.t[rows])

    @classmethod
    def stack(cls, parts: list[tuple[np.ndarray, "StepTable"]], D: int) -> "StepTable":
        """One table of ``D`` deployments from tables of row groups (same grids): ``[(rows, table), ...]``."""
        first = parts[0][1]
        t = np.zeros((D,) + first.t.shape[1:])
        lo, hi = np.zeros(D), np.zeros(D)
        for rows, tab in parts:
            t[rows], lo[rows], hi[rows] = tab.t, tab.ctx_lo, tab.ctx_hi
        return cls(first.b_grid, first.p_grid, lo, hi, t)

    def __call__(self, b, p, ctx, rows=None) -> np.ndarray:
        t = self.t if rows is None else self.t[rows]
        D, nb, npp, nc = t.shape
        lo = self.ctx_lo if rows is None else self.ctx_lo[rows]
        hi = self.ctx_hi if rows is None else self.ctx_hi[rows]
        ib, wb = _locate(self.b_grid, b)
        ip, wp = _locate(self.p_grid, p)
        u = (np.asarray(ctx, float) - lo) / np.maximum(hi - lo, 1.0) * (nc - 1)
        ic = np.clip(np.floor(u), 0, max(nc - 2, 0)).astype(int)
        wc = u - ic if nc > 1 else 0.0 * u
        flat = t.reshape(-1)
        base = np.arange(D) * (nb * npp * nc)
        out = 0.0
        for db, fb in ((0, 1 - wb), (1, wb)):
            for dp_, fp in ((0, 1 - wp), (1, wp)):
                for dc, fc in ((0, 1 - wc), (1, wc)):
                    if nc == 1 and dc:
                        continue
                    k = base + ((ib + db) * npp + (ip + dp_)) * nc + np.minimum(ic + dc, nc - 1)
                    out = out + flat[k] * fb * fp * (fc if nc > 1 else 1.0)
        return np.maximum(out, 0.0)



class _Cells:
    """A :class:`StepTable` for the fast loop: per deployment and grid cell the eight coefficients of
    the multilinear form (``1, wb, wp, wb wp`` and the same times the context fraction), so one
    evaluation is one gather (same values as :meth:`StepTable.__call__`; needs ``CTX_POINTS`` = 2)."""

    def __init__(self, tab: StepTable):
        t = tab.t
        D, nb, npp, nc = t.shape
        if nc != 2:
            raise ValueError("_Cells needs a step table with two context points")
        t00, t10, t01, t11 = t[:, :-1, :-1], t[:, 1:, :-1], t[:, :-1, 1:], t[:, 1:, 1:]
        a = np.stack([t00, t10 - t00, t01 - t00, t11 - t10 - t01 + t00], axis=-1)  # (D, nb-1, np-1, 2 ctx, 4)
        c = np.concatenate([a[..., 0, :], a[..., 1, :] - a[..., 0, :]], axis=-1)  # (D, nb-1, np-1, 8)
        # cell-major (cells, 8): a deployment's evaluation reads one cache line of eight coefficients
        self.coef = c.reshape(-1, 8)
        # the decode-only ones (1, wb at the shortest context; the same per context span) and the prefill-only ones
        # (1, wp at the shortest context) apart, for their own gathers
        self.coef_dec = np.ascontiguousarray(self.coef[:, [0, 1, 4, 5]])
        self.coef_pre = np.ascontiguousarray(self.coef[:, [0, 2]])
        self.b_grid, self.p_grid = tab.b_grid, tab.p_grid
        self.row = np.arange(D) * (nb - 1) * (npp - 1)  # each deployment's first cell
        self.b_off = np.arange(nb - 1) * (npp - 1)  # a batch cell's first cell within the deployment's
        self.ctx_lo, self.ctx_hi = tab.ctx_lo, tab.ctx_hi
        self.inv_span = 1.0 / np.maximum(tab.ctx_hi - tab.ctx_lo, 1.0)
        self.b_inv, self.p_inv = 1.0 / np.diff(tab.b_grid), 1.0 / np.diff(tab.p_grid)
        # a point's cell: the interior grid points at or below it (0 below the grid, the last cell above it)
        self.b_inner, self.p_inner = tab.b_grid[1:-1], tab.p_grid[1:-1]
        self.finite = bool(np.isfinite(self.coef).all())

    def parts(self, b, p, ctx, whole_b=None, whole_p=None) -> tuple[np.ndarray, np.ndarray]:
        """(step seconds before the clip at 0, their slope per context token) at (b, p, ctx); ``b`` >= 0.
        ``whole_b`` / ``whole_p``: :meth:`whole_batches` / :meth:`whole_prompts` covering ``b`` / ``p``, where those
        hold whole numbers (the same cells and weights, looked up)."""
        if whole_b is None:
            cell, wb = self._b_cell(b)
        else:
            bi = b.astype(np.intp)
            cell, wb = self.row + whole_b[0][bi], whole_b[1][bi]
        if whole_p is None:
            ip, wp = self._p_cell(p)
        else:
            pi = p.astype(np.intp)
            ip, wp = whole_p[0][pi], whole_p[1][pi]
        c0, c1, c2, c3, c4, c5, c6, c7 = self.coef.take(cell + ip, axis=0).T
        bw = wb * wp
        slope = (c4 + c5 * wb + c6 * wp + c7 * bw) * self.inv_span  # step seconds per context token
        return c0 + c1 * wb + c2 * wp + c3 * bw + (ctx - self.ctx_lo) * slope, slope

    def prefill_only(self, p) -> np.ndarray:
        """Seconds of a step with ``p`` prompt tokens and no decode requests (b = 0, shortest context)."""
        ip, wp = self._p_cell(p)
        c0, c2 = self.coef_pre.take(self.row + ip, axis=0).T
        return np.maximum(c0 + c2 * wp, _ZERO)

    def decode_only(self, b, ctx) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`parts` of a decode-only step (p = 0); ``b`` >= 0."""
        cell, wb = self._b_cell(b)
        c0, c1, c4, c5 = self.coef_dec.take(cell, axis=0).T
        slope = (c4 + c5 * wb) * self.inv_span  # step seconds per context token
        return c0 + c1 * wb + (ctx - self.ctx_lo) * slope, slope

    def whole_batches(self, top: int) -> tuple[np.ndarray, np.ndarray]:
        """(cell offset within a deployment's cells, weight) of the batch cell of each whole batch size 0 .. ``top``,
        worked out as :meth:`_b_cell` does."""
        b = np.arange(top + 1, dtype=float)
        i = self.b_inner.searchsorted(b, side="right")
        return self.b_off[i], (b - self.b_grid[i]) * self.b_inv[i]

    def whole_prompts(self, top: int) -> tuple[np.ndarray, np.ndarray]:
        """(cell, weight) of the prompt-token cell of each whole token count 0 .. ``top``, as :meth:`_p_cell` gives."""
        return self._p_cell(np.arange(top + 1, dtype=float))

    def _b_cell(self, b) -> tuple[np.ndarray, np.ndarray]:
        """(first cell of the batch cell of ``b`` decode requests, weight of ``b`` in it). Decode requests are never
        below the grid's first point (0), so the weight needs no clip there."""
        i = self.b_inner.searchsorted(b, side="right")  # the cell, clipped to the grid's last
        return self.row + self.b_off[i], (b - self.b_grid[i]) * self.b_inv[i]

    def _p_cell(self, p) -> tuple[np.ndarray, np.ndarray]:
        """(prompt-token cell of ``p``, weight of ``p`` in it; 0 below the grid)."""
        i = self.p_inner.searchsorted(p, side="right")  # the cell, clipped to the grid's first and last
        return i, np.maximum((p - self.p_grid[i]) * self.p_inv[i], _ZERO)

    def __call__(self, b, p, ctx) -> np.ndarray:
        b = np.maximum(np.asarray(b, float), 0.0)  # below the grid: its first point's value, as StepTable gives
        return np.maximum(self.parts(b, np.asarray(p, float), np.asarray(ctx, float))[0], 0.0)


def _locate(grid: np.ndarray, x) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, float)
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
    w = (x - grid[i]) / (grid[i + 1] - grid[i])
    return i, np.maximum(w, 0.0)  # linear extrapolation above the last point


def _grid(grid: np.ndarray, top: float) -> np.ndarray:
    """Grid points up to the first one at or above ``top`` (at least two points)."""
    k = int(np.searchsorted(grid, max(top, 1.0), side="left")) + 1
    return grid[: max(min(k, grid.size), 2)]


def build_step_table(model, precision, hw, lay: Layouts, profile: dict, *, isl_new: float, prefix: float, ctx_lo, ctx_hi,
                     b_max: float, p_max: float, spec=NO_SPEC, routing_alpha=DEFAULT_ROUTING_ALPHA,
                     worker_prompts: bool = False, memo: dict | None = None) -> StepTable:
    """Engine step times of the deployments' workers (``lay`` holds (D,) layout arrays) on the
    (decode requests, prompt tokens, context) grid, with the serving profile applied exactly as
    :mod:`simfront.serving` does (:func:`simfront.serving.step_terms`). ``isl_new`` sets how many
    sequences a step's prompt tokens belong to and ``prefix`` their cached prefix, as in
    :func:`simfront.serving.aggregated_raw`. ``spec``: one speculation setting or one per deployment
    (one forward pass with each row's draft tokens per request). ``routing_alpha``: the workload's MoE routing
    skew (:class:`simfront.serving.Workload`), as the evaluator takes it. ``worker_prompts``: the prompt-token axis
    is the whole worker's (a disaggregated prefill worker), dealt to its attention-DP ranks a whole prompt at a time
    (:func:`worker_prompt_ranks`), rather than every rank's. ``memo``: :func:`simfront.step.forward_step`'s op memo
    (ops repeated with the same inputs, as the attention of a model's dense and MoE layer groups, are costed once)."""
    bg = _grid(B_GRID, b_max)
    pg = _grid(P_GRID, p_max)
    D = np.asarray(lay.tp).reshape(-1).size
    col = lambda a: np.broadcast_to(np.asarray(a, float).reshape(-1), (D,))[:, None, None, None]  # noqa: E731
    tp, pp, dp, ep = (col(a) for a in (lay.tp, lay.pp, lay.dp, lay.ep))
    lo = np.broadcast_to(np.asarray(ctx_lo, float), (D,)).copy()
    hi = np.maximum(np.broadcast_to(np.asarray(ctx_hi, float), (D,)), lo + 1.0)
    ctx = lo[:, None, None, None] + (hi - lo)[:, None, None, None] * np.linspace(0.0, 1.0, CTX_POINTS)[None, None, None, :]
    B = bg[None, :, None, None]
    P = pg[None, None, :, None]
    ranks = None
    if worker_prompts:
        P, ranks = worker_prompt_ranks(P, isl_new, dp)
    seqs = np.where(P > 0, np.maximum(P / max(isl_new, 1.0), 1.0), 0.0)
    groups = _per_row(spec, D)  # one forward pass; the drafts' cost per speculation setting
    q = np.ones(D)
    for rows, sp in groups:
        q[rows] = sp.k + 1
    sb = StepBatch(decode_reqs=B, decode_ctx=ctx, q_tokens=q[:, None, None, None] if len(groups) > 1 else q[0],
                   prefill_tokens=P, prefill_seqs=seqs, prefill_prefix=prefix, prefill_ranks=ranks)
    st = forward_step(model, precision, hw, tp, pp, dp, ep, sb, routing_alpha=routing_alpha, memo={} if memo is None else memo)
    # every row's draft passes on the one forward pass (serving._split per speculation, its sums taken once)
    draft_layers, k, drafts = np.zeros(D), np.zeros(D), np.zeros(D, bool)
    for rows, sp in groups:
        draft_layers[rows], k[rows], drafts[rows] = sp.k * sp.draft_layers, sp.k, _drafts(sp)
    col4 = lambda a: a[:, None, None, None] if len(groups) > 1 else a[0]  # noqa: E731
    both = _drafted_pair(st, model, col4(draft_layers), col4(k), col4(drafts), _pipelined(st))
    both = np.broadcast_to(both, (2, D, bg.size, pg.size, CTX_POINTS))
    t = np.zeros((D, bg.size, pg.size, CTX_POINTS))
    for rows, sp in groups:
        split = both[:, rows]
        # per-request CPU overhead counts the decode requests, and overlaps the GPU step or not, as serving does
        # a pipelined worker's round schedules one micro-batch per stage, each with its own CPU work
        t[rows] = step_terms(split, profile, B, sp.accepted_per_step > 1.0, pp[rows])["engine_s"]
    return StepTable(bg, pg, lo, hi, t)


def worker_prompt_ranks(worker_tokens, isl_new: float, dp):
    """(prompt tokens on the busiest attention-DP rank, ranks that carry prompt tokens) of a step whose ``worker_tokens``
    prompt tokens are dealt to the worker's ``dp`` ranks a whole prompt of ``isl_new`` tokens at a time: up to one prompt
    it runs on one rank, up to ``dp`` prompts on as many ranks, beyond that on all of them evenly (mean field, so a
    fraction of a prompt or of a rank is allowed); the experts see all ``worker_tokens``."""
    w, dp = np.asarray(worker_tokens, float), np.asarray(dp, float)
    per_rank = np.maximum(w / dp, np.minimum(w, max(isl_new, 1.0)))  # the busiest rank's share
    ranks = np.where(per_rank > 0, w / np.maximum(per_rank, 1e-300), 1.0)
    return per_rank, ranks


# --------------------------------------------------------------------------------------------------
# the engine loop
# --------------------------------------------------------------------------------------------------


@dataclass
class EngineArrays:
    """Per-deployment engine parameters of the representative server (all (D,) arrays)."""

    token_budget: np.ndarray  # tokens per step per rank
    max_running: np.ndarray  # requests one rank runs at once
    kv_tokens: np.ndarray  # context tokens the rank's KV cache holds
    prefill_first: np.ndarray  # bool: a step with prompts carries no decode tokens
    reserve: np.ndarray  # bool: admission reserves prompt + output; no preemption
    lag_steps: np.ndarray  # steps after the last prefill step by whose end its first token streams (each the running decode step)
    al: np.ndarray  # tokens emitted per decode step per request (speculation)
    q: np.ndarray  # tokens a decode request puts through the step (1 + drafts)
    ttft_overhead_s: np.ndarray  # per-request API / tokenisation time

    def take(self, rows) -> "EngineArrays":
        return EngineArrays(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))

    @classmethod
    def of(cls, D: int, sched: SchedulerSettings, kv_tokens, spec: Speculation = NO_SPEC, profile: dict | None = None,
           max_running=None, token_budget=None) -> "EngineArrays":
        f = lambda v: np.broadcast_to(np.asarray(v, float), (D,)).copy()  # noqa: E731
        return cls(f(sched.token_budget if token_budget is None else token_budget),
                   f(sched.max_running if max_running is None else max_running), f(kv_tokens),
                   f(sched.policy == "prefill_first").astype(bool), f(sched.admission == "reserve").astype(bool),
                   f(sched.first_token_lag_steps), f(spec.accepted_per_step), f(spec.k + 1),
                   f((profile or {}).get("ttft_overhead_s", 0.0)))


@dataclass
class SimTrace:
    """Per-request times of a simulation (deployments x requests; NaN where a request did not run)."""

    t_send: np.ndarray
    t_first: np.ndarray
    t_end: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    counted: np.ndarray  # bool: request inside the statistics window (after warm-up)
    itl_s: np.ndarray  # (D, iterations) step seconds seen by decode tokens
    itl_w: np.ndarray  # (D, iterations) decode tokens emitted at that step time
    ttft_overhead_s: np.ndarray
    iterations: int
    preemptions: np.ndarray  # (D,)
    prompt_tokens_computed: np.ndarray  # (D,) prompt tokens prefilled (recompute included)


def _push(Q, tail, qlen, mask, key=None):
    """Append the slots in ``mask`` (D, N) to each deployment's ring queue, in slot order or, with
    ``key`` (D, N), in the order of the key (send times: first come, first served)."""
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        return
    if key is None:
        rank = np.cumsum(mask, axis=1)[rows, cols] - 1
    else:
        order = np.argsort(np.where(mask, key, np.inf), axis=1, kind="stable")
        pos = np.empty_like(order)
        np.put_along_axis(pos, order, np.arange(mask.shape[1])[None, :].repeat(mask.shape[0], 0), axis=1)
        rank = pos[rows, cols]
    Nq = Q.shape[1]
    Q[rows, (tail[rows] + rank) % Nq] = cols
    add = mask.sum(axis=1)
    tail += add
    qlen += add


def _window(Q, head, qlen, W):
    D, Nq = Q.shape
    ar = np.arange(W)[None, :]
    s = Q[np.arange(D)[:, None], (head[:, None] + ar) % Nq]
    return s, ar < qlen[:, None]


def run_engine(table: StepTable, plan: RequestPlan, eng: EngineArrays, decode_table: StepTable | None = None,
               disagg: dict | None = None, max_iterations: int = MAX_LOOP_ITERATIONS) -> SimTrace:
    """Simulate the representative server of every deployment until all its requests finished.

    Aggregated (``disagg`` None): one engine prefills and decodes. Disaggregated: ``table`` is the
    prefill worker, ``decode_table`` the decode pool, ``disagg`` holds (D,) arrays ``transfer_s``
    (KV move per input token), ``decode_scale`` (decode ranks per representative: per-rank batch =
    pooled decode requests / scale), ``decode_slots`` and ``decode_kv_tokens``.
    """
    D, R = plan.isl.shape
    N = int(np.max(plan.users)) if plan.users.size else 1
    N = max(min(N, R), 1)
    d_ix = np.arange(D)
    rows = d_ix[:, None]
    isl, osl, cached = plan.isl, plan.osl, np.minimum(plan.cached, plan.isl - 1)
    n_req = np.minimum(plan.n, R)
    users = np.minimum(np.ceil(plan.users), N).astype(int)
    # slot state
    slot = np.arange(N)[None, :]
    live = slot < np.minimum(users, n_req)[:, None]
    rq = np.where(live, slot, 0)
    ph = np.where(live, _PENDING, _DONE).astype(np.int8)
    t_send = np.where(live, plan.arrival_s[rows, rq], np.inf)
    if not plan.first_wave and not plan.open_loop:
        # steady state: users start spread over one request's life (estimated from the table)
        life = _life_s(table, plan, eng, users.astype(float), decode_table, disagg)
        t_send = np.where(live, slot * (life / np.maximum(users, 1))[:, None], np.inf)
    need = np.where(live, isl[rows, rq] - cached[rows, rq], 0.0)
    done_p = np.zeros((D, N))
    left = np.zeros((D, N))
    kv = np.zeros((D, N))
    tick = np.zeros((D, N))
    issued = np.minimum(users, n_req).astype(int)
    fin = np.zeros(D, int)
    now = np.zeros(D)
    next_tick = np.ones(D)
    # ring queue of slots waiting for / in prefill (engine FCFS order)
    Nq = N + 1
    Q = np.zeros((D, Nq), int)
    head = np.zeros(D, int)
    tail = np.zeros(D, int)
    qlen = np.zeros(D, int)
    # per-request records
    t_first = np.full((D, R), np.nan)
    t_end = np.full((D, R), np.nan)
    t_req = np.full((D, R), np.nan)
    lr, lc = np.nonzero(live)
    t_req[lr, rq[lr, lc]] = t_send[lr, lc]
    budget = eng.token_budget
    min_need = max(float(np.min(np.where(np.isfinite(isl - cached), isl - cached, np.inf))), 1.0)
    W = int(min(Nq, max(8, np.ceil(float(np.max(budget)) / min_need) + 2)))
    itl_s, itl_w = [], []
    preempt = np.zeros(D)
    computed = np.zeros(D)
    dis = disagg is not None
    if dis:
        # decode pool: its own clock, its own FCFS admission queue of prefilled requests
        dnow = np.zeros(D)
        ready = np.full((D, N), np.inf)  # time a prefilled request's KV is at the decode pool
        dscale = np.maximum(disagg["decode_scale"], 1e-9)
        dslots = disagg["decode_slots"]
        dkv = disagg["decode_kv_tokens"]
        xfer = disagg["transfer_s"]
    it = 0
    while True:
        active = fin < n_req
        if not active.any():
            break
        it += 1
        if it > max_iterations:
            raise SimfrontError(f"simulation did not finish within {max_iterations} steps; simulate fewer prompts")
        # ---------------- prefill side (the whole engine when aggregated) ----------------
        pclock = now
        arr = (ph == _PENDING) & (t_send <= pclock[:, None])
        if arr.any():
            ph[arr] = _QUEUED
            _push(Q, tail, qlen, arr, t_send)
        s, valid = _window(Q, head, qlen, W)
        phs = ph[rows, s]
        started = valid & (phs == _PREFILL)
        new = valid & (phs == _QUEUED)
        dec = ph == _DECODE
        n_dec = dec.sum(axis=1)
        if dis:
            n_run = (ph == _PREFILL).sum(axis=1)
            cap_run = eng.max_running
            kv_used = (kv * (ph == _PREFILL)).sum(axis=1)
        else:
            n_run = n_dec + (ph == _PREFILL).sum(axis=1)
            cap_run = eng.max_running
            kv_used = kv.sum(axis=1)
        rem = np.where(valid, need[rows, s] - done_p[rows, s], 0.0)
        kv_new = np.where(new, rem + np.where(eng.reserve[:, None], osl[rows, rq[rows, s]], 0.0), 0.0)
        ok_new = new & (n_run[:, None] + np.cumsum(new, axis=1) <= cap_run[:, None]) & (
            kv_used[:, None] + np.cumsum(kv_new, axis=1) <= eng.kv_tokens[:, None])
        elig = started | ok_new
        dec_tok = 0.0 if dis else n_dec * eng.q
        bud = np.where(eng.prefill_first | dis, budget, np.maximum(budget - dec_tok, 0.0))
        r = np.where(elig, rem, 0.0)
        cum = np.cumsum(r, axis=1)
        alloc = np.clip(bud[:, None] - (cum - r), 0.0, r)
        p_tok = alloc.sum(axis=1) * active
        has_p = p_tok > 0
        if dis:
            dec_in = np.zeros(D)
        else:
            dec_in = np.where(eng.prefill_first & has_p, 0, n_dec).astype(float)
        # ---------------- how many steps this iteration stands for ----------------
        pend = np.where(ph == _PENDING, t_send, np.inf).min(axis=1)
        ctx_sum = (kv * dec).sum(axis=1)
        ctx_mean = np.where(n_dec > 0, ctx_sum / np.maximum(n_dec, 1), table.ctx_lo)
        if dis:
            # the two clocks advance in time order: while the decode pool is behind the prefill clock with requests to
            # run before it, the prefill worker holds (else it would take the requests the pool sends back late, each
            # as if it had waited for the skew between the clocks, and the skew would grow with every step)
            dec_due = (ph == _DECODE) & ((left > 0) | (ready <= now[:, None]))
            held = (dnow < now) & dec_due.any(axis=1)
            k = np.where(has_p & ~held, 1.0, 0.0)
            t_step = table(0 * p_tok, p_tok, table.ctx_lo)
        else:
            k_left = np.where(dec, left, np.inf).min(axis=1)
            t_est = table(dec_in, 0 * p_tok, ctx_mean)
            k_arr = np.where(np.isfinite(pend), np.ceil(np.maximum(pend - now, 0.0) / np.maximum(t_est, 1e-12)), np.inf)
            k_kv = np.where(eng.reserve, np.inf, np.floor((eng.kv_tokens - kv_used) / np.maximum(n_dec * eng.al, 1e-9)))
            k = np.where(has_p, 1.0, np.maximum(np.minimum(np.minimum(k_left, k_arr), k_kv), 1.0))
            k = np.where(n_dec > 0, k, np.where(has_p, 1.0, 0.0))
            t_step = table(dec_in, p_tok, ctx_mean + np.where(has_p, 0.0, np.maximum(k - 1.0, 0.0) * eng.al / 2.0))  # step i at ctx + i al
            # the step after this one decodes the running requests (a prompt finished now joins the batch after it):
            # an overlap scheduler hands out this step's first tokens by its end (EngineArrays.lag_steps)
            t_next = table(n_dec.astype(float), 0 * p_tok, ctx_mean)
        k = k * active
        dt = k * t_step
        idle = active & (k == 0)
        new_now = np.where(idle, np.where(np.isfinite(pend), np.maximum(now, pend), now), now + dt)
        if dis:
            # an idle prefill worker waits for the next arrival; none pending: for the decode pool
            new_now = np.where(idle & ~np.isfinite(pend), np.maximum(now, dnow), new_now)
            new_now = np.where(held, now, new_now)
        step_mask = (k > 0)[:, None]
        # ---------------- apply the prefill part ----------------
        got = (alloc > 0) & step_mask
        if got.any():
            rr, cc = np.nonzero(got)
            ss = s[rr, cc]
            first = ph[rr, ss] == _QUEUED
            tick[rr[first], ss[first]] = next_tick[rr[first]] + np.arange(first.sum())
            next_tick += np.bincount(rr[first], minlength=D)
            ph[rr, ss] = _PREFILL
            done_p[rr, ss] += alloc[rr, cc]
            kv[rr, ss] += alloc[rr, cc] + np.where(first, cached[rr, rq[rr, ss]], 0.0)
            computed += np.bincount(rr, weights=alloc[rr, cc], minlength=D)
            fin_p = done_p[rr, ss] >= need[rr, ss] - 1e-9
            fr, fs = rr[fin_p], ss[fin_p]
            head += np.bincount(fr, minlength=D)
            qlen -= np.bincount(fr, minlength=D)
            req = rq[fr, fs]
            if dis:
                ph[fr, fs] = _DECODE  # handed to the decode pool (waits there until admitted)
                ready[fr, fs] = new_now[fr] + xfer[fr] * isl[fr, req]
                kv[fr, fs] = 0.0
                left[fr, fs] = -1.0  # not yet admitted to a decode rank
            else:
                tf = new_now[fr] + eng.lag_steps[fr] * t_next[fr]
                setf = np.isnan(t_first[fr, req])
                t_first[fr[setf], req[setf]] = tf[setf]
                ph[fr, fs] = _DECODE
                fresh = left[fr, fs] <= 0
                left[fr[fresh], fs[fresh]] = np.ceil(np.maximum(osl[fr[fresh], req[fresh]] - 1.0, 0.0) / eng.al[fr[fresh]])
        # ---------------- decode part (aggregated) ----------------
        if not dis:
            stepping = dec & ((dec_in > 0) & (k > 0))[:, None]
            left = np.where(stepping, left - k[:, None], left)
            kv = np.where(stepping, kv + k[:, None] * eng.al[:, None], kv)
            done = (ph == _DECODE) & (left <= 0)
            itl_s.append(np.where(dec_in > 0, t_step, 0.0))
            itl_w.append(dec_in * k)
            now = new_now
            _finish(done, now, ph, rq, t_end, t_send, kv, need, done_p, left, isl, cached, plan, issued, fin, n_req, t_req)
            if not eng.reserve.all():
                _preempt(kv, ph, tick, need, done_p, isl, cached, rq, osl, left, eng, Q, head, qlen, preempt, rows)
            continue
        now = new_now
        # ---------------- decode pool (disaggregated): advance it up to the prefill clock ----------------
        waiting = (ph == _DECODE) & (left < 0) & (ready <= dnow[:, None])
        running = (ph == _DECODE) & (left > 0)
        n_r = running.sum(axis=1)
        room = np.maximum(np.minimum(dslots - n_r, np.floor((dkv - (kv * running).sum(axis=1)) /
                                                             np.maximum(np.mean(isl + osl, axis=1), 1.0))), 0)
        # admit the longest-waiting ready requests first (FCFS by ready time)
        order = np.argsort(np.where(waiting, ready, np.inf), axis=1, kind="stable")[:, :W]
        wsel = waiting[rows, order] & (np.arange(order.shape[1])[None, :] < room[:, None])
        admitted = np.zeros((D, N), bool)
        if wsel.any():
            ar_, ac_ = np.nonzero(wsel)
            sl = order[ar_, ac_]
            req = rq[ar_, sl]
            left[ar_, sl] = np.ceil(np.maximum(osl[ar_, req] - 1.0, 0.0) / eng.al[ar_])
            kv[ar_, sl] = isl[ar_, req]
            admitted[ar_, sl] = True
            running = (ph == _DECODE) & (left > 0)
        n_r = running.sum(axis=1)
        # the next KV to arrive (requests already there wait for a slot, which a finish frees: not an event)
        nxt_ready = np.where((ph == _DECODE) & (left < 0) & (ready > dnow[:, None]), ready, np.inf).min(axis=1)
        pend = np.where(ph == _PENDING, t_send, np.inf).min(axis=1)
        h_p = np.where(qlen > 0, now, pend)  # next event of the prefill side
        horizon = np.minimum(h_p, nxt_ready)
        b_rank = n_r / dscale
        dctx = np.where(n_r > 0, (kv * running).sum(axis=1) / np.maximum(n_r, 1), decode_table.ctx_lo)
        td = decode_table(b_rank, 0 * b_rank, dctx)
        td_first = td  # the run's first step: the admitted requests' first token
        k_left = np.where(running, left, np.inf).min(axis=1)
        k_h = np.where(np.isfinite(horizon), np.ceil(np.maximum(horizon - dnow, 0.0) / np.maximum(td, 1e-12)), np.inf)
        kd = np.where(n_r > 0, np.maximum(np.minimum(k_left, k_h), 1.0), 0.0) * active
        td = decode_table(b_rank, 0 * b_rank, dctx + np.maximum(kd - 1.0, 0.0) * eng.al / 2.0)
        # the first token streams with the decode pool's first step of the request (one-token outputs at admission)
        fr_, fs_ = np.nonzero(admitted)
        t_first[fr_, rq[fr_, fs_]] = dnow[fr_] + np.where(left[fr_, fs_] > 0, td_first[fr_], 0.0)
        left = np.where(running, left - kd[:, None], left)
        kv = np.where(running, kv + kd[:, None] * eng.al[:, None], kv)
        itl_s.append(np.where(kd > 0, td, 0.0))
        itl_w.append(b_rank * kd)
        done = (ph == _DECODE) & (left == 0) & (running | admitted)
        when = dnow + kd * td
        # an empty pool waits for its next ready request, or (nothing in flight) for the prefill clock
        idle_to = np.where(np.isfinite(nxt_ready), np.minimum(nxt_ready, np.where(np.isfinite(h_p), np.maximum(h_p, dnow), nxt_ready)),
                           np.maximum(dnow, now))
        dnow = np.where(kd > 0, when, np.maximum(dnow, idle_to))
        _finish(done, when, ph, rq, t_end, t_send, kv, need, done_p, left, isl, cached, plan, issued, fin, n_req, t_req)
    pos = np.broadcast_to(np.arange(R)[None, :], (D, R))
    counted = np.isfinite(t_end) & (pos >= plan.warmup[:, None]) & (pos < n_req[:, None]) & _in_window(pos, plan)
    return SimTrace(t_req, t_first, t_end, isl, osl, counted, np.array(itl_s).T if itl_s else np.zeros((D, 0)),
                    np.array(itl_w).T if itl_w else np.zeros((D, 0)), eng.ttft_overhead_s, it, preempt, computed)


def _finish(done, when, ph, rq, t_end, t_send, kv, need, done_p, left, isl, cached, plan, issued, fin, n_req, t_req):
    """Record finished requests and give their users the next request (closed loop: in order)."""
    if not done.any():
        return
    D = done.shape[0]
    fr, fs = np.nonzero(done)
    req = rq[fr, fs]
    t_end[fr, req] = when[fr]
    nd = np.bincount(fr, minlength=D)
    fin += nd
    rank = np.cumsum(done, axis=1)[fr, fs] - 1
    nid = issued[fr] + rank
    issued += nd
    ok = nid < n_req[fr]
    kv[fr, fs] = 0.0
    done_p[fr, fs] = 0.0
    left[fr, fs] = 0.0
    ph[fr, fs] = _DONE
    fr2, fs2, nid2 = fr[ok], fs[ok], nid[ok]
    old = req[ok]
    rq[fr2, fs2] = nid2
    ts = np.maximum(plan.arrival_s[fr2, nid2], when[fr2] + plan.after_s[fr2, old])
    t_send[fr2, fs2] = ts
    t_req[fr2, nid2] = ts
    need[fr2, fs2] = isl[fr2, nid2] - np.minimum(cached[fr2, nid2], isl[fr2, nid2] - 1)
    ph[fr2, fs2] = _PENDING
    issued -= np.bincount(fr[~ok], minlength=D)  # ids past the plan were not issued
    np.maximum(issued, 0, out=issued)


def _preempt(kv, ph, tick, need, done_p, isl, cached, rq, osl, left, eng, Q, head, qlen, preempt, rows):
    """When the KV cache overflows, preempt the latest-admitted decoding request (recompute later:
    its prompt plus generated tokens are prefilled again); one per deployment per step."""
    over = (~eng.reserve) & (kv.sum(axis=1) > eng.kv_tokens)
    if not over.any():
        return
    dec = ph == _DECODE
    cand = np.where(dec, tick, -1.0)
    victim = np.argmax(cand, axis=1)
    ok = over & (cand.max(axis=1) >= 0) & (dec.sum(axis=1) > 1)
    d = np.nonzero(ok)[0]
    if d.size == 0:
        return
    v = victim[d]
    req = rq[d, v]
    gen = np.maximum(osl[d, req] - 1.0 - left[d, v] * eng.al[d], 0.0)
    need[d, v] = isl[d, req] + gen  # recompute prompt + generated tokens (no prefix-cache credit)
    done_p[d, v] = 0.0
    kv[d, v] = 0.0
    ph[d, v] = _QUEUED
    Nq = Q.shape[1]
    head[d] -= 1
    Q[d, head[d] % Nq] = v
    qlen[d] += 1
    preempt[d] += 1


# --------------------------------------------------------------------------------------------------
# the fast engine loop: identical requests, pointers instead of request slots
# --------------------------------------------------------------------------------------------------
#
# When every request of a deployment has the same lengths (and cached prefix and think time), a
# closed-loop client issues no open-loop arrivals and the KV cache cannot bind, FCFS prefill and
# lockstep decode keep the requests in one order: the m-th request to arrive is the m-th prefilled,
# the m-th to start decoding and the m-th to finish. The loop then needs no (deployments x slots)
# state: counters (arrived, admitted, prefill tokens done, prefilled, finished), the decode steps
# run so far, the sum of the decode entry steps (for the mean context), and per-deployment batches
# of requests that arrived / finished prefill / started decoding / finished together. One numpy
# iteration is a run of identical engine steps for every deployment at once: it ends at the next
# event that changes a step (a prompt finishing its prefill, a decode finishing, an arrival that
# finds the engine with room and nothing to prefill). Step times of a run of k steps whose decode
# context grows by ``al`` a step are k times the step at its mean context (the step table is linear
# in context), so a run is exactly the sum of its steps. Per-request times are read back from the
# batches at the end. :func:`fast_rows` says which deployments qualify; the rest run on
# :func:`run_engine`.

_BIG_ROWS = 1 << 40  # row offset that keeps per-row batch boundaries sorted when flattened


def _const_rows(a: np.ndarray, n: np.ndarray) -> np.ndarray:
    cols = np.arange(a.shape[1])[None, :] < n[:, None]
    return np.all(np.where(cols, a == a[:, :1], True), axis=1)


def fast_rows(plan: RequestPlan, eng: EngineArrays, decode: dict | None = None) -> np.ndarray:
    """(D,) bool: deployments the fast loop simulates exactly (closed loop, identical requests, no
    arrival times of their own, KV cache large enough for every user's full context)."""
    D, R = plan.isl.shape
    if plan.open_loop or R == 0:
        return np.zeros(D, bool)
    n = np.minimum(plan.n, R)
    ok = (_const_rows(plan.isl, n) & _const_rows(plan.osl, n) & _const_rows(plan.cached, n) & _const_rows(plan.after_s, n)
          & np.all(plan.arrival_s == 0.0, axis=1))
    users = np.minimum(np.ceil(plan.users), n)
    isl, osl = plan.isl[:, 0], plan.osl[:, 0]
    if decode is None:
        ok &= np.minimum(eng.max_running, users) * (isl + osl) <= eng.kv_tokens
    else:
        # a prefill worker holds only the prompts its budget reaches (head, full ones, the last partial one)
        need = isl - np.minimum(plan.cached[:, 0], isl - 1)
        in_prefill = np.minimum(np.minimum(eng.max_running, users), np.ceil(eng.token_budget / need) + 2)
        ok &= in_prefill * (isl + np.where(eng.reserve, osl, 0.0)) <= eng.kv_tokens  # reserve: output reserved too
        ok &= np.minimum(decode["decode_slots"], users) * (isl + osl) <= decode["decode_kv_tokens"]
    return ok


def _rows_of(hi: np.ndarray, R: int) -> np.ndarray:
    """(D, R): per row, the index of the first batch whose cumulative end ``hi[d, i]`` (non-decreasing along the row)
    exceeds position m = 0 .. R - 1, clipped to the row's last batch."""
    D, I = hi.shape
    if np.array_equal(hi, np.floor(hi)):
        # whole ends (request counts): the batches ending at or below m are the ends counted by value up to m
        at = np.clip(hi, 0, R).astype(np.intp) + (np.arange(D) * (R + 1))[:, None]
        i = np.cumsum(np.bincount(at.ravel(order="K"), minlength=D * (R + 1)).reshape(D, R + 1)[:, :R], axis=1)
    else:  # a sorted search of every row at once (rows kept apart by a large offset)
        off = (np.arange(D) * _BIG_ROWS)[:, None]
        m = np.arange(R, dtype=float)[None, :] + off
        i = np.searchsorted((hi + off).ravel(), m.ravel(), side="right").reshape(D, R) - (np.arange(D) * I)[:, None]
    return np.clip(i, 0, I - 1)


class _Fast:
    """State of the fast loop (see the section comment): (D,) counters; per row flat arrays of the decode groups
    (cumulative, entry step, finish time) of width ``W`` (row ``d`` at ``d W``), whose pointers (``ng``, ``gp``,
    ``bg``) are flat indices (row ``d``'s count plus ``d W``); and per-iteration logs of the arrivals (cumulative
    arrived, first-round arrived) and first tokens (cumulative, time), which only :meth:`trace` reads."""

    def __init__(self, plan: RequestPlan, eng: EngineArrays, spacing: np.ndarray):
        D, R = plan.isl.shape
        self.D, self.R, self.W = D, R, R + 2
        self.off = np.arange(D) * self.W
        self.n = np.minimum(plan.n, R).astype(float)
        # the loop runs until the last counted request has finished (requests after it only keep the load up)
        self.stop = self.n if plan.count_until is None else np.minimum(np.asarray(plan.count_until, float), self.n)
        self.U = np.minimum(np.minimum(np.ceil(plan.users), max(min(int(np.max(plan.users)), R), 1)), self.n)
        self.nB = self.n - self.U  # requests issued when an earlier one finishes
        self.isl, self.osl = plan.isl[:, 0].astype(float), plan.osl[:, 0].astype(float)
        self.need = self.isl - np.minimum(plan.cached[:, 0], self.isl - 1)
        self.think = plan.after_s[:, 0].astype(float)
        self.K = np.ceil(np.maximum(self.osl - 1.0, 0.0) / eng.al)  # decode steps of one request
        self.k_pos = self.K > 0
        self.all_k_pos = bool(self.k_pos.all())
        self.spacing = spacing
        self.inv_sp = np.where(spacing > 0, 1.0 / np.where(spacing > 0, spacing, 1.0), 0.0)
        self.a_base = np.where(spacing > 0, 1.0, np.inf)  # a synchronised first wave arrives at once
        N, top = D * self.W, float(R + 1)
        self.arr_log, self.a_log, self.first_log, self.t_first_log = [], [], [], []
        self.g_hi, self.g_in, self.g_end = np.full(N, top), np.zeros(N), np.zeros(N)
        z = lambda: np.zeros(D)  # noqa: E731
        self.now, self.G, self.s_in, self.ptok, self.arr, self.c, self.e = z(), z(), z(), z(), z(), z(), z()
        self.a_ptr, self.b_ptr = z(), z()
        self.ng, self.gp, self.bg = (self.off.copy() for _ in range(3))
        self.think0 = not bool(np.any(self.think > 0))
        self.first_round = True  # first-round requests still to be sent (somewhere)
        self.itl_s, self.itl_w = [], []

    def arrive(self) -> None:
        """Requests sent by ``now`` join the queue: first-round ones, then those of users whose last
        request finished (at once without think time)."""
        if self.first_round:  # once every row has sent them all, a_ptr stays U (the clocks do not go back)
            self.a_ptr = np.minimum(np.floor(self.now * self.inv_sp + 1e-9) + self.a_base, self.U)
            self.first_round = bool(np.count_nonzero(self.a_ptr < self.U))
        if self.think0:
            self.b_ptr = np.minimum(self.e, self.nB)
        else:
            while True:
                gi = self.bg
                waiting = (gi < self.gp) & (self.b_ptr < self.nB)  # a finished group's users not all sent again
                t_back = self.g_end[gi] + self.think  # when they send (after their think time)
                due = waiting & (t_back <= self.now)
                if not np.count_nonzero(due):
                    break
                self.b_ptr = np.where(due, np.minimum(self.g_hi[gi], self.nB), self.b_ptr)
                self.bg = gi + due
            # the next such request's send time, for next_arrival (no state it reads changes before it is called)
            self.t_back = np.where(waiting, t_back, _INF)
        self.arr = arr = self.a_ptr + self.b_ptr
        self.arr_log.append(arr)
        self.a_log.append(self.a_ptr)

    def arrivals_pending(self) -> bool:
        """Whether a request can be sent other than at a finish: a first-round one, or one after think time."""
        return self.first_round or not self.think0

    def next_arrival(self) -> np.ndarray:
        """Send time of the next request (inf where it comes only at a finish)."""
        # the next first-round request (none left anywhere once first_round is False)
        t = np.where(self.a_ptr < self.U, self.a_ptr * self.spacing, np.inf) if self.first_round else None
        if not self.think0:  # the next request of a user whose last one finished, after its think time (arrive)
            t = self.t_back if t is None else np.minimum(t, self.t_back)
        return np.full(self.D, np.inf) if t is None else t

    def enter(self, upto, t_first=None, running=None) -> None:
        """Requests up to position ``upto`` decode from step ``G`` on (requests entering at the same step
        form one group); their first token at ``t_first`` (or given later with :meth:`first_token`).
        ``running``: where a group still decodes (c > e), when the caller has it."""
        c, ng, G = self.c, self.ng, self.G
        new = upto > c
        if t_first is not None:
            self.first_token(upto, t_first)
        # joins the last group where that one still decodes (ng > gp, i.e. c > e: group ends only grow, so the
        # index ng - 1 is read only there) and entered at this step
        merge = new & (ng > self.gp if running is None else running) & (self.g_in[ng - 1] == G)
        if not self.all_k_pos:
            merge &= self.k_pos
        i = ng - merge  # the group's index: the last one's where merged, else the next
        self.g_in[i] = G
        self.g_hi[i] = upto
        self.ng = i + new
        self.s_in = self.s_in + (upto - c) * G
        self.c = upto

    def first_token(self, upto, t_first) -> None:
        """The requests up to position ``upto`` have their first token by ``t_first`` (those before: already)."""
        self.first_log.append(upto)
        self.t_first_log.append(t_first)

    def finish(self, when) -> None:
        """The oldest decode group finishes once the decode steps reach its entry step + K."""
        gi = self.gp
        g0 = self.g_in[gi]
        due = (gi < self.ng) & (self.G >= g0 + self.K)
        hi = self.g_hi[gi]
        self.g_end[gi] = when  # read only once the group has finished
        e = self.e
        self.e = e_new = np.where(due, hi, e)
        self.s_in = self.s_in - (e_new - e) * g0  # the finished requests' entry steps (0 where none finished)
        self.gp = gi + due

    def k_finish(self) -> np.ndarray:
        """Decode steps until the oldest running group finishes: read only where a group runs (c > e; elsewhere
        ``gp`` is the next group's slot)."""
        return self.g_in[self.gp] + self.K - self.G

    def trace(self, eng: EngineArrays, plan: RequestPlan, iterations: int) -> SimTrace:
        D, R, W = self.D, self.R, self.W
        m = np.broadcast_to(np.arange(R, dtype=float)[None, :], (D, R))
        valid = m < self.n[:, None]
        rows = np.arange(D)[:, None]
        v = lambda a: a.reshape(D, W)  # noqa: E731
        t_end = np.where(valid, v(self.g_end)[rows, _rows_of(v(self.g_hi), R)], np.nan)
        # first tokens and arrivals from their logs, by iteration: a request's batch is the first iteration whose
        # cumulative count passes its position (a count stays put between the iterations where it grows, so the
        # iteration before holds the previous batch's counts; the column after the last stands for none)
        fb_hi, fb_t = _by_row(self.first_log, D, R + 1), _by_row(self.t_first_log, D, 0.0)
        t_first = np.where(valid, fb_t[rows, _rows_of(fb_hi, R)], np.nan)
        ab_hi, ab_a = _by_row(self.arr_log, D, R + 1), _by_row(self.a_log, D, 0.0)
        i = _rows_of(ab_hi, R)
        prev = np.maximum(i - 1, 0)
        before = np.where(i > 0, ab_hi[rows, prev], 0.0)
        a_lo = np.where(i > 0, ab_a[rows, prev], 0.0)
        n_a = ab_a[rows, i] - a_lo
        off = m - before
        is_a = off < n_a
        j = a_lo + off  # first-round request j
        kb = np.clip(off - n_a + (before - a_lo), 0, R - 1).astype(int)  # B requests of earlier batches: before - a_lo
        t_send = np.where(is_a, j * self.spacing[:, None], np.take_along_axis(t_end, kb, axis=1) + self.think[:, None])
        rid = np.where(is_a, j, self.U[:, None] + kb)
        # requests that joined the queue in the same step are served in the order they were sent: a stable sort by
        # (batch, send time), of the rows not in that order already (closed loops without think time are)
        t_send, rid = _in_send_order(t_send, rid, i)
        t_send = np.where(valid, t_send, np.nan)
        counted = valid & (rid >= plan.warmup[:, None]) & np.isfinite(t_end) & _in_window(rid, plan)
        full = lambda x: np.broadcast_to(x[:, None], (D, R)).copy()  # noqa: E731
        return SimTrace(t_send, t_first, t_end, full(self.isl), full(self.osl), counted,
                        np.array(self.itl_s).T if self.itl_s else np.zeros((D, 0)),
                        np.array(self.itl_w).T if self.itl_w else np.zeros((D, 0)), eng.ttft_overhead_s, iterations,
                        np.zeros(D), self.ptok.copy())


def _by_row(log: list, D: int, last: float) -> np.ndarray:
    """(D, iterations + 1): a per-iteration log of (D,) arrays, row by row, and ``last`` after the last iteration
    (a transposed view of the log)."""
    return np.array(log + [np.full(D, last)]).T


def _in_send_order(t_send: np.ndarray, rid: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t_send, rid) with each row's entries stably sorted by (batch, t_send) (NaN send times last), as
    ``np.lexsort((t_send, batch))`` orders them; rows already in that order are left as they are."""
    t0, t1, b0, b1 = t_send[:, :-1], t_send[:, 1:], batch[:, :-1], batch[:, 1:]
    # an entry the sort moves: after a later batch, or in the same batch after a later send (NaN counts as latest)
    out_of_order = (b1 < b0) | ((b1 == b0) & ((t1 < t0) | (np.isnan(t0) & ~np.isnan(t1))))
    rows = np.nonzero(out_of_order.any(axis=1))[0]
    if rows.size:
        t_send, rid = t_send.copy(), rid.copy()
        o = np.lexsort((t_send[rows], batch[rows]), axis=-1)
        t_send[rows] = np.take_along_axis(t_send[rows], o, axis=1)
        rid[rows] = np.take_along_axis(rid[rows], o, axis=1)
    return t_send, rid


def _in_window(rid, plan: RequestPlan) -> np.ndarray:
    """Requests (by sending order ``rid``) inside the plan's statistics window (all without ``count_until``)."""
    if plan.count_until is None:
        return np.ones(np.shape(rid), bool)
    return rid < np.asarray(plan.count_until, float)[:, None]


def _prefill_run(p, avail, rem_head) -> np.ndarray:
    """Identical steps of ``p`` prompt tokens until the head prompt (``rem_head`` tokens left) finishes,
    as long as the queue (``avail`` tokens) fills every step; one step when it empties; 0 without prompts."""
    return np.where(p <= _ZERO, _ZERO, _prefill_steps(p, avail, rem_head))


def _prefill_steps(p, avail, rem_head) -> np.ndarray:
    """:func:`_prefill_run` where ``p`` > 0 (elsewhere at least 1, for callers that mask it themselves)."""
    ps = np.maximum(p, _TOL)
    # where p takes all of avail, k is 1: floor(avail / p) <= 1
    return np.maximum(np.minimum(np.ceil(rem_head / ps - _TOL), np.floor(avail / ps + _TOL)), _ONE)


def _life_s(table, plan: RequestPlan, eng: EngineArrays, users, decode_table=None, disagg: dict | None = None) -> np.ndarray:
    """One request's life (prefill, then its decode steps at the users' running batch), estimated from the
    step tables: the steady-state spread of the users' first requests. Disaggregated: the decode steps
    are the decode workers' at the requests each decode rank holds, the prefill the prefill worker's."""
    u = np.asarray(users, float)
    steps = np.ceil(np.mean(plan.osl, axis=1) / eng.al)
    prefill_s = table(0 * u, np.mean(plan.isl, axis=1), table.ctx_lo)
    if disagg is None:
        return table(np.minimum(u, eng.max_running), 0 * u, table.ctx_lo) * steps + prefill_s
    per_rank = np.minimum(u, disagg["decode_slots"]) / np.maximum(disagg["decode_scale"], 1e-9)  # decode requests per rank
    return decode_table(np.maximum(per_rank, 1.0), 0 * u, decode_table.ctx_lo) * steps + prefill_s


def _spacing(table, plan: RequestPlan, eng: EngineArrays, decode_table=None, disagg: dict | None = None) -> np.ndarray:
    """Gap between the first requests of the users: 0 for a synchronised first wave, else the users
    spread over one request's life at its running batch (as :func:`run_engine` does)."""
    D, R = plan.isl.shape
    if plan.first_wave:
        return np.zeros(D)
    N = max(min(int(np.max(plan.users)), R), 1)
    users = np.minimum(np.ceil(plan.users), N)
    return _life_s(table, plan, eng, users, decode_table, disagg) / np.maximum(users, 1)


def run_fast(table, plan: RequestPlan, eng: EngineArrays, decode_table=None, disagg: dict | None = None,
             max_iterations: int = MAX_LOOP_ITERATIONS) -> SimTrace:
    """The engine loop of :func:`run_engine` for deployments :func:`fast_rows` accepts (every row of
    ``plan``), one numpy iteration per run of identical steps of all deployments at once."""
    st = _Fast(plan, eng, _spacing(table, plan, eng, decode_table, disagg))
    if disagg is None:
        it = _loop_agg(st, _Cells(table), eng, max_iterations)
    else:
        pre = _Cells(table)
        st.think0 = False  # two clocks: a finished user's next request reaches the prefill queue by its send time
        it = _loop_disagg(st, pre, _Cells(decode_table), eng, disagg, max_iterations)
    return st.trace(eng, plan, it)


def _too_long(max_iterations):
    raise SimfrontError(f"simulation did not finish within {max_iterations} steps; simulate fewer prompts")


def _iterations(st: _Fast, max_iterations: int):
    """(iteration number, deployments still running) of an engine loop, arrivals taken at each; stops when
    every deployment's requests are done, fails past ``max_iterations``."""
    it = 0
    while np.count_nonzero(act := st.e < st.stop):
        it += 1
        if it > max_iterations:
            _too_long(max_iterations)
        st.arrive()
        yield it, act


_LOOKUP_TOKENS = 1 << 16  # the largest token budget whose prompt-token cells the aggregated loop tabulates


def _whole(x) -> bool:
    """Whether every value of ``x`` is a whole number (or infinite)."""
    return np.array_equal(x, np.floor(x))


def _loop_agg(st: _Fast, tab: "_Cells", eng: EngineArrays, max_iterations: int) -> int:
    pf, mixed = eng.prefill_first, ~eng.prefill_first
    any_pf = bool(pf.any())  # without prefill-first rows every step carries the running requests' decode tokens
    qm = eng.q * mixed  # decode tokens take budget only in mixed steps
    budget, maxrun, half_al, al, lag = eng.token_budget, eng.max_running, eng.al / 2.0, eng.al, eng.lag_steps
    finite = tab.finite  # finite step times (the shortcuts below rely on it)
    # first tokens wait for the next decode step only on an overlap scheduler (lag 0 adds 0 s to finite step times)
    lagged = bool(np.any(lag != 0)) or not finite
    need, isl, ctx_lo = st.need, st.isl, tab.ctx_lo
    # whole users, caps of running requests and returning users keep every request count whole (sums, floors and
    # minima of whole numbers), so the decode batch (c - e, at most min(U, max running)) looks its cell up
    whole = all(_whole(x) for x in (st.U, st.nB, maxrun))
    whole_b = tab.whole_batches(int(np.max(np.minimum(st.U, maxrun)))) if whole else None
    # with whole prompts, token budgets and decode tokens too, steps and prompt tokens stay whole, and a step's prompt
    # tokens are at most the budget and never below 0 (a run of k steps takes k p <= avail tokens: the 1e-9 in
    # _prefill_steps cannot lift floor(avail / p) for whole numbers below 1e9), so they look their cell up as well
    p_top = float(np.max(budget))
    whole_p = (tab.whole_prompts(int(p_top)) if whole and p_top <= _LOOKUP_TOKENS and all(_whole(x) for x in (need, budget, qm))
               else None)
    it = 0
    for it, act in _iterations(st, max_iterations):
        c, e, ptok, G, now = st.c, st.e, st.ptok, st.G, st.now
        adm = np.minimum(st.arr, e + maxrun)  # admitted (FCFS) while the engine has room
        n_dec = c - e
        running = n_dec > _ZERO
        avail = adm * need - ptok
        p = np.minimum(avail, np.maximum(budget - n_dec * qm, _ZERO))
        has_p = p > _ZERO
        # decode requests in the step: none in a prefill-first step with prompts
        dec_in = np.where(has_p & pf, _ZERO, n_dec) if any_pf else n_dec
        k_p = _prefill_steps(p, avail, need - (ptok - c * need))  # read only where has_p
        ctx = np.where(running, isl + al * (G - st.s_in / np.maximum(n_dec, _ONE)), ctx_lo)
        k_fin = st.k_finish()
        v, slope = tab.parts(dec_in, p, ctx, whole_b, whole_p)
        quiet = finite and not st.arrivals_pending()
        if quiet:
            # requests come only at finishes, where runs end anyway (k_arr would be inf: inf / finite v), and an
            # idle row has nothing to wait for
            k_dec, idle_to = np.maximum(k_fin, _ONE), now
        else:
            nxt = st.next_arrival()
            # decode steps until the next arrival (while the engine has room for it)
            k_arr = np.where(adm - e < maxrun, np.ceil(np.maximum(nxt - now, _ZERO) / np.maximum(v, _TINY)), _INF)
            k_dec, idle_to = np.maximum(np.minimum(k_fin, k_arr), _ONE), np.where(nxt < _INF, np.maximum(now, nxt), now)
        # a run with prompts stops where the head prompt finishes, or a mixed step's decode group does
        k = np.where(has_p, np.where(mixed & running if any_pf else running, np.minimum(k_p, k_fin), k_p),
                     np.where(running, k_dec, _ZERO)) * act
        adv = dec_in > _ZERO if any_pf else running  # decode tokens in the step
        t_step = np.maximum(v + slope * (np.maximum(k - _ONE, _ZERO) * half_al * adv), _ZERO)  # the run's mean context
        # idle and finished rows (k = 0) stay at their clock (0 x a finite step adds 0 s), or wait for the next arrival
        new_now = now + k * t_step if quiet else np.where(act & (k == _ZERO), idle_to, now + k * t_step)
        st.ptok = ptok = ptok + k * p
        st.G = G + k * adv
        # first tokens: by the end of the next step, the running requests' decode step (see run_engine)
        t_first = new_now + lag * np.maximum(tab.decode_only(n_dec, ctx)[0], _ZERO) if lagged else new_now
        st.enter(np.minimum(np.floor(ptok / need + _TOL), adm), t_first, running)
        st.finish(new_now)
        st.itl_s.append(t_step)  # zero weight where no decode request stepped
        st.itl_w.append(dec_in * k)
        st.now = new_now
    return it


def _loop_disagg(st: _Fast, ptab: "_Cells", dtab: "_Cells", eng: EngineArrays, dis: dict, max_iterations: int) -> int:
    D, W, off = st.D, st.W, st.off
    need, isl = st.need, st.isl
    budget, maxrun, half_al, al = eng.token_budget, eng.max_running, eng.al / 2.0, eng.al
    inv_scale = 1.0 / np.maximum(dis["decode_scale"], 1e-9)
    dslots, ready_after = dis["decode_slots"], dis["transfer_s"] * isl
    d_ctx_lo, k_pos = dtab.ctx_lo, st.k_pos
    # prefill-done batches (cumulative prefilled, KV ready at); the decode pool's own pointers (flat indices, as _Fast's)
    top = float(st.R + 1)
    rb_hi, rb_t, nrb = np.full(D * W, top), np.zeros(D * W), off.copy()
    rb, rp, pre_c = off.copy(), np.zeros(D), np.zeros(D)
    dnow = np.zeros(D)
    it = 0
    for it, act in _iterations(st, max_iterations):
        now, c, e, ptok = st.now, st.c, st.e, st.ptok
        # ---- prefill worker (clock now): prefill-only steps of the queued prompts (arrivals taken) ----
        adm = np.minimum(st.arr, pre_c + maxrun)
        avail = adm * need - ptok
        p = np.minimum(avail, budget)
        # the two clocks advance in time order: the worker holds while the pool is behind it with requests to run
        # before its clock (run_engine)
        pool_due = (c > e) | (rp > c) | ((rb < nrb) & (rb_t[rb] <= now))
        held = (dnow < now) & pool_due
        k = np.where(held, _ZERO, _prefill_run(p, avail, need - (ptok - pre_c * need)))
        t_step = ptab.prefill_only(p)
        nxt = st.next_arrival()
        new_now = np.where(act & (k == _ZERO), np.where(nxt < _INF, np.maximum(now, nxt), np.maximum(now, dnow)),
                           now + k * t_step)
        new_now = np.where(held, now, new_now)
        st.ptok = ptok = ptok + k * p
        c_new = np.minimum(np.floor(ptok / need + _TOL), adm)
        rb_hi[nrb] = c_new
        rb_t[nrb] = new_now + ready_after
        nrb = nrb + (c_new > pre_c)
        pre_c = c_new
        st.now = now = new_now
        # ---- decode pool (clock dnow): admit ready requests FCFS, run to the next event ----
        while True:
            pending, t_ready = rb < nrb, rb_t[rb]  # the oldest prefilled batch not yet at the pool, its KV ready at
            due = pending & (t_ready <= dnow)
            if not np.count_nonzero(due):
                break
            rp = np.where(due, rb_hi[rb], rp)
            rb = rb + due
        n_r = c - e
        upto = c + np.maximum(np.minimum(rp - c, dslots - n_r), _ZERO)
        n_r = upto - e
        running = n_r > _ZERO
        nxt_ready = np.where(pending, t_ready, _INF)  # the next KV to arrive
        h_p = np.where(st.arr > pre_c, now, nxt)
        horizon = np.minimum(h_p, nxt_ready)
        b_rank = n_r * inv_scale
        st.enter(upto)  # entering requests count from this step
        G = st.G
        ctx = np.where(running, isl + al * (G - st.s_in / np.maximum(n_r, _ONE)), d_ctx_lo)
        v, slope = dtab.decode_only(b_rank, ctx)
        k_h = np.ceil(np.maximum(horizon - dnow, _ZERO) / np.maximum(v, _TINY))
        kd = np.where(running, np.maximum(np.minimum(st.k_finish(), k_h), _ONE), _ZERO)
        td = np.maximum(v + slope * (np.maximum(kd - _ONE, _ZERO) * half_al), _ZERO)
        # first token: the run's first step (at admission where the request has no decode step)
        st.first_token(upto, dnow + (np.maximum(v, _ZERO) if st.all_k_pos else np.maximum(v, _ZERO) * k_pos))
        st.G = G + kd
        when = dnow + kd * td
        st.itl_s.append(td)  # zero weight where the pool did not step
        st.itl_w.append(b_rank * kd)
        idle_to = np.where(nxt_ready < _INF, np.minimum(nxt_ready, np.where(h_p < _INF, np.maximum(h_p, dnow), nxt_ready)),
                           np.maximum(dnow, now))
        dnow = np.where(kd > 0, when, np.maximum(dnow, idle_to))
        st.finish(when)
    return it


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
    I = max(tr.itl_s.shape[1] for _, tr in parts)
    itl_s, itl_w = np.zeros((D, I)), np.zeros((D, I))
    ov, pre, comp = np.zeros(D), np.zeros(D), np.zeros(D)
    for rows, tr in parts:
        c = tr.t_send.shape[1]
        for dst, src in ((t_send, tr.t_send), (t_first, tr.t_first), (t_end, tr.t_end), (isl, tr.isl), (osl, tr.osl)):
            dst[rows, :c] = src
        counted[rows, :c] = tr.counted
        itl_s[rows, : tr.itl_s.shape[1]] = tr.itl_s
        itl_w[rows, : tr.itl_w.shape[1]] = tr.itl_w
        ov[rows], pre[rows], comp[rows] = tr.ttft_overhead_s, tr.preemptions, tr.prompt_tokens_computed
    return SimTrace(t_send, t_first, t_end, isl, osl, counted, itl_s, itl_w, ov, sum(tr.iterations for _, tr in parts), pre, comp)


def simulate_trace(table, plan: RequestPlan, eng: EngineArrays, decode_table=None, disagg: dict | None = None,
                   max_iterations: int = MAX_LOOP_ITERATIONS) -> SimTrace:
    """Simulate every deployment: those :func:`fast_rows` accepts on the fast loop (:func:`run_fast`),
    the rest (random lengths, open loop, agentic sessions, a KV cache that can fill) on
    :func:`run_engine`; one trace in the deployments' order."""
    D, R = plan.isl.shape
    fast = fast_rows(plan, eng, disagg)
    parts = []
    for rows, runner in ((np.nonzero(fast)[0], run_fast), (np.nonzero(~fast)[0], run_engine)):
        if rows.size == 0:
            continue
        if rows.size == D:
            return runner(table, plan, eng, decode_table, disagg, max_iterations)
        sub = None if disagg is None else {k: np.asarray(v)[rows] for k, v in disagg.items()}
        parts.append((rows, runner(table.take(rows), _take_plan(plan, rows), eng.take(rows),
                                   None if decode_table is None else decode_table.take(rows), sub, max_iterations)))
    return _merge(parts, D, R)


# --------------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------------


def _nanpcts(x: np.ndarray, mask: np.ndarray, qs) -> list[np.ndarray]:
    """Per-row percentiles ``qs`` of ``x`` where ``mask`` (linear interpolation, as ``np.nanpercentile``;
    NaN for a row without values), vectorised over rows; one sort serves every percentile."""
    ok = mask & ~np.isnan(x)
    y = np.sort(np.where(ok, x, np.inf), axis=1)
    cnt = ok.sum(axis=1)
    r = np.arange(y.shape[0])
    hi_max = np.maximum(cnt - 1, 0)
    outs = []
    for q in qs:
        pos = (np.maximum(cnt, 1) - 1) * (float(q) / 100.0)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, hi_max)
        a, b = y[r, lo], y[r, hi]
        with np.errstate(invalid="ignore"):
            out = a + (b - a) * (pos - lo)
        outs.append(np.where(cnt > 0, np.where(hi == lo, a, out), np.nan))
    return outs


def _nanpct(x: np.ndarray, mask: np.ndarray, q) -> np.ndarray:
    """Per-row percentile ``q`` of ``x`` where ``mask`` (see :func:`_nanpcts`)."""
    return _nanpcts(x, mask, (q,))[0]


def _nanmean(x, mask):
    n = mask.sum(axis=1)
    return np.where(n > 0, np.where(mask, x, 0.0).sum(axis=1) / np.maximum(n, 1), np.nan)


def _weighted_pcts(v: np.ndarray, w: np.ndarray, qs) -> list[np.ndarray]:
    """Per-row weighted percentiles ``qs`` (rows of values ``v`` with weights ``w``); one sort serves
    every percentile."""
    if v.shape[1] == 0:
        return [np.full(v.shape[0], np.nan) for _ in qs]
    o = np.argsort(v, axis=1)
    vs = np.take_along_axis(v, o, axis=1)
    c = np.cumsum(np.take_along_axis(w, o, axis=1), axis=1)
    tot = c[:, -1:]
    r = np.arange(v.shape[0])
    outs = []
    for q in qs:
        i = np.argmax(c >= q / 100.0 * np.maximum(tot, 1e-30), axis=1)
        outs.append(np.where(tot[:, 0] > 0, vs[r, i], np.nan))
    return outs


@dataclass
class SimMetrics:
    """Serving metrics of simulated deployments (every field a (D,) array; seconds, per second)."""

    ttft_s: dict  # {"mean", "p50", "p90", "p99"}
    tpot_s: dict
    e2e_s: dict
    requests_s: np.ndarray  # the whole deployment
    output_tok_s: np.ndarray
    concurrency: np.ndarray
    gpus: np.ndarray
    preemptions: np.ndarray  # on the representative server
    iterations: int
    trace: SimTrace = field(repr=False, default=None)
    scale: np.ndarray = field(repr=False, default=None)  # deployment requests/s over the representative's
    _itl: dict | None = field(repr=False, default=None)

    @property
    def itl_s(self) -> dict:
        """Inter-token latency {"mean", "p50", "p90", "p99"}: the step times decode tokens saw, weighted by the
        tokens (computed from the trace on first use: a sort over every step of every deployment)."""
        if self._itl is None:
            self._itl = itl_stats(self.trace)
        return self._itl

    def goodput(self, ttft_s: float | None = None, tpot_s: float | None = None, percentile: float | None = None) -> np.ndarray:
        """Requests/s of the deployment that meet the SLA (TTFT and TPOT each at most the bound).

        Without ``percentile``: the rate of requests that meet both bounds (DistServe's goodput).
        With ``percentile`` p: the whole throughput where the p-th percentile of TTFT and TPOT meets
        the bounds, else 0 (an SLA stated on p90/p99)."""
        tr = self.trace
        ttft, tpot = request_latencies(tr)
        ok = tr.counted.copy()
        if percentile is None:
            if ttft_s is not None:
                ok &= ttft <= ttft_s
            if tpot_s is not None:
                ok &= tpot <= tpot_s
            share = ok.sum(axis=1) / np.maximum(tr.counted.sum(axis=1), 1)
            return self.requests_s * share
        meets = np.ones(self.requests_s.shape, bool)
        if ttft_s is not None:
            meets &= _nanpct(ttft, tr.counted, percentile) <= ttft_s
        if tpot_s is not None:
            meets &= _nanpct(tpot, tr.counted, percentile) <= tpot_s
        return np.where(meets, self.requests_s, 0.0)

    def meets_sla(self, ttft_s=None, tpot_s=None, percentile: float = 50.0) -> np.ndarray:
        return self.goodput(ttft_s, tpot_s, percentile) > 0

    def as_columns(self, prefix: str = "sim_") -> dict:
        """Flat columns in milliseconds (``sim_ttft_p90_ms`` ...) and rates, for frontier points."""
        out = {}
        for name, d in (("ttft", self.ttft_s), ("tpot", self.tpot_s), ("itl", self.itl_s), ("e2e", self.e2e_s)):
            for k, v in d.items():
                out[f"{prefix}{name}_{k}_ms"] = v * 1e3
        out[f"{prefix}requests_s"] = self.requests_s
        out[f"{prefix}output_tok_s"] = self.output_tok_s
        return out


def request_latencies(tr: SimTrace) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, TPOT) in seconds of every request slot of a trace (deployments x requests; NaN where none ran)."""
    ov = tr.ttft_overhead_s[:, None]
    ttft = tr.t_first - tr.t_send + ov
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(tr.osl > 1, (tr.t_end - tr.t_first) / np.maximum(tr.osl - 1.0, 1.0), 0.0)
    return ttft, tpot


def itl_stats(tr: SimTrace) -> dict:
    """Mean and percentiles of the inter-token latency of a trace (step seconds weighted by decode tokens)."""
    w = tr.itl_w.sum(axis=1)
    itl = {"mean": np.where(w > 0, (tr.itl_s * tr.itl_w).sum(axis=1) / np.maximum(w, 1e-30), np.nan)}
    itl.update((f"p{q}", p) for q, p in zip(PERCENTILES, _weighted_pcts(tr.itl_s, tr.itl_w, PERCENTILES)))
    return itl


def summarise(tr: SimTrace, scale, concurrency, gpus) -> SimMetrics:
    """Statistics of a trace; ``scale`` = deployment requests/s per representative-server request/s."""
    m = tr.counted
    ttft, tpot = request_latencies(tr)
    e2e = tr.t_end - tr.t_send + tr.ttft_overhead_s[:, None]

    def stats(x):
        out = {"mean": _nanmean(x, m)}
        out.update((f"p{q}", p) for q, p in zip(PERCENTILES, _nanpcts(x, m, PERCENTILES)))
        return out

    # throughput: counted requests over the time from the first counted send to the last counted end
    start = np.nanmin(np.where(m, tr.t_send, np.nan), axis=1) if m.any() else np.zeros(m.shape[0])
    # warm-up: finished requests left out that were sent before the first counted one (those sent after
    # it only kept the load up); measure from the warm-up's end
    before = tr.t_send <= np.where(np.isfinite(start), start, np.inf)[:, None]
    warmups = np.isfinite(tr.t_end) & ~m & before
    warm = warmups.any(axis=1)
    end_warm = np.nanmax(np.where(warmups, tr.t_end, -np.inf), axis=1)
    start = np.where(warm & np.isfinite(end_warm), end_warm, start)
    done_in = (m & (tr.t_end >= start[:, None])).sum(axis=1)
    span = np.nanmax(np.where(m, tr.t_end, np.nan), axis=1) - start
    with np.errstate(invalid="ignore", divide="ignore"):
        x_rep = done_in / span
        tok_rep = (np.where(m & (tr.t_end >= start[:, None]), tr.osl, 0.0)).sum(axis=1) / span
    sc = np.asarray(scale, float)
    return SimMetrics(stats(ttft), stats(tpot), stats(e2e), x_rep * sc, tok_rep * sc,
                      np.broadcast_to(np.asarray(concurrency, float), x_rep.shape).copy(),
                      np.broadcast_to(np.asarray(gpus, float), x_rep.shape).copy(), tr.preemptions, tr.iterations, tr, sc)


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


def _per_row(x, D: int) -> list[tuple[np.ndarray, object]]:
    """Row groups of a per-deployment setting given once for all or as a sequence of ``D`` values
    (precisions, speculation settings): ``[(rows, value), ...]``, one group per distinct value."""
    if isinstance(x, (list, tuple)) and not isinstance(x, Speculation):
        if len(x) != D:
            raise SimfrontError(f"{len(x)} per-deployment settings for {D} deployments")
        uniq: list = []
        rows: list[list[int]] = []
        for i, v in enumerate(x):
            for j, u in enumerate(uniq):
                if u is v or u == v:
                    rows[j].append(i)
                    break
            else:
                uniq.append(v)
                rows.append([i])
        return [(np.asarray(r), u) for r, u in zip(rows, uniq)]
    return [(np.arange(D), x)]


def _tables(model, precision, hw, lay: Layouts, profile, spec, D: int, **kw) -> StepTable:
    """Step tables of the deployments on common grids: one forward pass per precision over the distinct
    (layout, speculation, context range) rows (search candidates share layouts across batch sizes)."""
    spec_id = np.zeros(D)
    for j, (rows, _) in enumerate(_per_row(spec, D)):
        spec_id[rows] = j
    ctx = {k: np.broadcast_to(np.asarray(kw[k], float), (D,)) for k in ("ctx_lo", "ctx_hi")}
    key = np.stack([lay.tp, lay.pp, lay.dp, lay.ep, spec_id, ctx["ctx_lo"], ctx["ctx_hi"]], axis=1)
    parts = []
    memo: dict = {}  # one op memo for this call's forward passes (precisions that differ only in the KV format share ops)
    for rows, prec in _per_row(precision, D):
        uniq, first, inv = np.unique(key[rows], axis=0, return_index=True, return_inverse=True)
        u = rows[first]  # one representative row per distinct key
        sp = [spec[i] for i in u] if isinstance(spec, (list, tuple)) else spec
        tab = build_step_table(model, prec, hw, lay.take(u), profile, spec=sp, memo=memo,
                               **{**kw, "ctx_lo": ctx["ctx_lo"][u], "ctx_hi": ctx["ctx_hi"][u]})
        parts.append((rows, tab.take(np.asarray(inv).reshape(-1))))
    return StepTable.stack(parts, D)


def _spec_arrays(spec, D: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens emitted per decode step, tokens a decode request puts through a step) per deployment."""
    al, q = np.ones(D), np.ones(D)
    for rows, sp in _per_row(spec, D):
        al[rows], q[rows] = sp.accepted_per_step, sp.k + 1
    return al, q


def _kv_per_rank(model, precision, hw, lay: Layouts, context_tokens: float, D: int) -> np.ndarray:
    out = np.zeros(D)
    for rows, prec in _per_row(precision, D):
        out[rows] = kv_tokens_per_rank(model, prec, hw, lay.take(rows), context_tokens)[0]
    return out


def simulate_agg(model, precision, hw, lay: Layouts, workers, concurrency, plan_fn, *, sched: SchedulerSettings,
                 profile: dict, spec: Speculation = NO_SPEC, max_batch=None, token_budget=None, isl: float, osl: float,
                 prefix: float = 0.0, kv_tokens=None, table: StepTable | None = None,
                 routing_alpha=DEFAULT_ROUTING_ALPHA) -> SimMetrics:
    """Simulate aggregated deployments (arrays of length D): ``workers`` copies of a worker with
    layout ``lay`` under ``concurrency`` clients. ``plan_fn(users, D)`` returns the
    :class:`~simfront.clients.RequestPlan` of one representative server with ``users`` clients
    (see :func:`simfront.clients.plan_closed`). ``max_batch``: the engine's max running requests per
    rank (default the scheduler's); ``isl``/``osl``: nominal lengths (the table's range).
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
    if table is None:
        table = _tables(model, precision, hw, L, profile, spec, D, isl_new=max(isl - prefix, 1.0), prefix=prefix,
                        ctx_lo=0.8 * isl, ctx_hi=isl + osl, b_max=float(np.max(np.minimum(users, maxrun))) + 1,
                        p_max=float(np.max(budget)), routing_alpha=routing_alpha)
    plan = plan_fn(users, D)
    eng = EngineArrays.of(D, sched, kv_tokens, NO_SPEC, profile, max_running=maxrun, token_budget=budget)
    eng.al, eng.q = _spec_arrays(spec, D)
    tr = simulate_trace(table, plan, eng)
    return summarise(tr, C / users, C, _col(workers, D) * L.gpus)


def simulate_disagg(model, precision, hw, prefill: Layouts, prefill_workers, decode: Layouts, decode_workers, concurrency,
                    plan_fn, *, sched: SchedulerSettings, profile: dict, spec: Speculation = NO_SPEC, link_bytes_per_s,
                    decode_max_batch=None, prefill_budget=None, isl: float, osl: float, prefix: float = 0.0,
                    decode_kv_tokens=None, routing_alpha=DEFAULT_ROUTING_ALPHA) -> SimMetrics:
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
    ptable = _tables(model, precision, hw, P, profile, NO_SPEC, D, isl_new=max(isl - prefix, 1.0), prefix=prefix, ctx_lo=isl,
                     ctx_hi=isl + 1, b_max=1, p_max=float(np.max(pbudget)), routing_alpha=routing_alpha, worker_prompts=True)
    b_top = float(np.max(np.minimum(users / np.maximum(dranks, 1e-9), dmax))) + 1
    dtable = _tables(model, precision, hw, Dl, profile, spec, D, isl_new=max(isl - prefix, 1.0), prefix=prefix, ctx_lo=0.8 * isl,
                     ctx_hi=isl + osl, b_max=b_top, p_max=1, routing_alpha=routing_alpha)
    kv_bytes = np.zeros(D)
    for rows, prec in _per_row(precision, D):
        kv_bytes[rows] = kv_bytes_per_token(model, prec.kv)
    plan = plan_fn(users, D)
    eng = EngineArrays.of(D, sched, pkv * P.dp, NO_SPEC, profile, max_running=sched.max_running * P.dp, token_budget=pbudget)
    eng.al, eng.q = _spec_arrays(spec, D)
    eng.prefill_first[:] = True
    dis = {"transfer_s": kv_bytes / _col(link_bytes_per_s, D), "decode_scale": dranks,
           "decode_slots": np.floor(dmax * dranks), "decode_kv_tokens": dkv * dranks}
    tr = simulate_trace(ptable, plan, eng, decode_table=dtable, disagg=dis)
    gpus = x * P.gpus + y * Dl.gpus
    return summarise(tr, C / users, C, gpus)


__all__ = ["StepTable", "build_step_table", "EngineArrays", "SimTrace", "SimMetrics", "run_engine", "run_fast", "fast_rows",
           "simulate_trace", "summarise",
           "simulate_agg", "simulate_disagg", "kv_tokens_per_rank", "kv_tokens_of", "B_GRID", "P_GRID"]

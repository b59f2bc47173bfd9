"""The fast engine loop of the step-level simulation (:mod:`simfront.simulate`): closed-loop clients of identical
requests whose KV cache cannot fill.

:func:`fast_rows` says which deployments qualify; :func:`run_fast` gives them the times of
:func:`simfront.engine_loop.run_engine` (``tests/test_simulate_fast.py``) with (deployments,) counters instead of
request slots, one numpy iteration per run of identical engine steps (the comment below).
"""

from __future__ import annotations

import numpy as np

from .clients import RequestPlan
from .engine_loop import (CONTEXT_ONLY_OUTPUT_TOKENS, MAX_LOOP_ITERATIONS, STALL_CHECK_ITERATIONS, BalanceGate, EngineArrays,
                          check_moving, in_window, life_s)
from .errors import SimfrontError
from .sim_metrics import SimTrace
from .step_table import INF, ONE, TINY, TOL, ZERO, Cells

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
# :func:`simfront.engine_loop.run_engine`.

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
        ok &= eng.recv_interval <= 1.0  # an intake interval holds prompts back: the request-slot loop
    else:
        # a prefill worker's KV at an admission (run_engine's check): the prompt a step left part-done (its cached prefix
        # and computed tokens, at most a whole prompt; FCFS steps leave at most one) and each new prompt the step's
        # budget reaches at its uncomputed tokens; reserve: each one's first token reserved too (a context server's output)
        need = isl - np.minimum(plan.cached[:, 0], isl - 1)
        out_kv = np.where(eng.reserve, CONTEXT_ONLY_OUTPUT_TOKENS, 0.0)
        reach = np.minimum(np.minimum(eng.max_running, users), np.ceil(eng.token_budget / need) + 1)  # new prompts a step takes
        ok &= isl + out_kv + reach * (need + out_kv) <= eng.kv_tokens
        ok &= np.minimum(decode["decode_slots"], users) * (isl + osl) <= decode["decode_kv_tokens"]
        # (a decode slot reserved before the prefill, SGLang's, is the fast loop's too: _loop_disagg's slot cap)
    return ok


def _rows_of(hi: np.ndarray, R: int) -> np.ndarray:
    """(D, R): per row, the index of the first batch whose cumulative end ``hi[d, i]`` (non-decreasing along the row)
    exceeds position m = 0 .. R - 1, clipped to the row's last batch. ``hi`` may be a transposed view (a log's
    (iterations, D) array): the arithmetic keeps its memory order."""
    D, I = hi.shape
    at = hi.astype(np.intp)  # the request counts as integers (compared with hi below: whole only where equal)
    if np.array_equal(at, hi):
        # whole ends (request counts): the batches ending at or below m are the ends counted by value up to m
        np.clip(at, 0, R, out=at)
        at += (np.arange(D) * (R + 1))[:, None]  # each row's counts in its own R + 1 bins
        i = np.cumsum(np.bincount(at.ravel(order="K"), minlength=D * (R + 1)).reshape(D, R + 1)[:, :R], axis=1)
    else:  # a sorted search of every row at once (rows kept apart by a large offset)
        off = (np.arange(D) * _BIG_ROWS)[:, None]
        m = np.arange(R, dtype=float)[None, :] + off
        i = np.searchsorted((hi + off).ravel(), m.ravel(), side="right").reshape(D, R) - (np.arange(D) * I)[:, None]
    return np.clip(i, 0, I - 1, out=i)


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
            self.t_back = np.where(waiting, t_back, INF)
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
        # gathers by flat index: a group's slot is row d's count plus d W; a log entry of iteration i is at i D + d
        t_end = np.where(valid, self.g_end.take(_rows_of(self.g_hi.reshape(D, W), R) + self.off[:, None]), np.nan)
        # first tokens and arrivals from their logs, by iteration: a request's batch is the first iteration whose
        # cumulative count passes its position (a count stays put between the iterations where it grows, so the
        # iteration before holds the previous batch's counts; the row after the last stands for none)
        fb_hi, fb_t = _log(self.first_log, D, R + 1), _log(self.t_first_log, D, 0.0)
        t_first = np.where(valid, fb_t.take(_rows_of(fb_hi.T, R) * D + rows), np.nan)
        ab_hi, ab_a = _log(self.arr_log, D, R + 1), _log(self.a_log, D, 0.0)
        i = _rows_of(ab_hi.T, R)
        at = i * D + rows
        prev = np.maximum(at - D, rows)  # the iteration before's entry (the first iteration's own where i = 0)
        first = i == 0
        before = np.where(first, 0.0, ab_hi.take(prev))
        a_lo = np.where(first, 0.0, ab_a.take(prev))
        n_a = ab_a.take(at) - a_lo
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
        counted = valid & (rid >= plan.warmup[:, None]) & np.isfinite(t_end) & in_window(rid, plan)
        # every request of a row has the row's lengths: read-only views, not (deployments x requests) copies
        full = lambda x: np.broadcast_to(x[:, None], (D, R))  # noqa: E731
        return SimTrace(t_send, t_first, t_end, full(self.isl), full(self.osl), counted,
                        self.itl_s, self.itl_w, eng.ttft_overhead_s, iterations,
                        np.zeros(D), self.ptok.copy())


def _log(log: list, D: int, last: float) -> np.ndarray:
    """(iterations + 1, D): a per-iteration log of (D,) arrays and a row of ``last`` after the last iteration."""
    return np.array(log + [np.full(D, last)])


def _in_send_order(t_send: np.ndarray, rid: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t_send, rid) with each row's entries stably sorted by (batch, t_send) (NaN send times last), as
    ``np.lexsort((t_send, batch))`` orders them; rows already in that order are left as they are."""
    t0, t1, b0, b1 = t_send[:, :-1], t_send[:, 1:], batch[:, :-1], batch[:, 1:]
    # an entry the sort moves: in the same batch after a later send (NaN counts as latest), or after a later batch
    late = (b1 == b0) & ((t1 < t0) | (np.isnan(t0) & ~np.isnan(t1)))
    if (b1 < b0).any():  # batches out of order (the trace's are not): sort the rows that need it whole
        rows = np.nonzero(late.any(axis=1) | (b1 < b0).any(axis=1))[0]
        t_send, rid = t_send.copy(), rid.copy()
        o = np.lexsort((t_send[rows], batch[rows]), axis=-1)
        t_send[rows] = np.take_along_axis(t_send[rows], o, axis=1)
        rid[rows] = np.take_along_axis(rid[rows], o, axis=1)
        return t_send, rid
    r, c = np.nonzero(late)
    if not r.size:
        return t_send, rid
    # batches in order along each row: each batch is a run of entries, and only the runs that hold a late entry move,
    # each within itself; their entries, in the rows' order, sorted by (row, batch, send time) stay in their runs
    R = batch.shape[1]
    width = np.int64(np.max(batch)) + 1
    key = (np.arange(batch.shape[0], dtype=np.int64)[:, None] * width + batch).ravel()  # (row, batch): sorted, row-major
    bad = np.unique(key[r * R + c + 1])
    lo, hi = np.searchsorted(key, bad, side="left"), np.searchsorted(key, bad, side="right")  # each such run's entries
    n = hi - lo
    at = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(n.sum())  # flat positions of those runs, in order
    o = np.lexsort((t_send.ravel()[at], key[at]))
    t_send, rid = t_send.copy(), rid.copy()
    t_send.ravel()[at] = t_send.ravel()[at][o]
    rid.ravel()[at] = rid.ravel()[at][o]
    return t_send, rid


def _prefill_run(p, avail, rem_head) -> np.ndarray:
    """Identical steps of ``p`` prompt tokens until the head prompt (``rem_head`` tokens left) finishes,
    as long as the queue (``avail`` tokens) fills every step; one step when it empties; 0 without prompts."""
    return np.where(p <= ZERO, ZERO, _prefill_steps(p, avail, rem_head))


def _prefill_steps(p, avail, rem_head) -> np.ndarray:
    """:func:`_prefill_run` where ``p`` > 0 (elsewhere at least 1, for callers that mask it themselves)."""
    ps = np.maximum(p, TOL)
    # where p takes all of avail, k is 1: floor(avail / p) <= 1
    return np.maximum(np.minimum(np.ceil(rem_head / ps - TOL), np.floor(avail / ps + TOL)), ONE)


def _spacing(table, plan: RequestPlan, eng: EngineArrays, decode_table=None, disagg: dict | None = None) -> np.ndarray:
    """Gap between the first requests of the users: 0 for a synchronised first wave, else the users
    spread over one request's life at its running batch (as :func:`simfront.engine_loop.run_engine` does)."""
    D, R = plan.isl.shape
    if plan.first_wave:
        return np.zeros(D)
    N = max(min(int(np.max(plan.users)), R), 1)
    users = np.minimum(np.ceil(plan.users), N)
    return life_s(table, plan, eng, users, decode_table, disagg) / np.maximum(users, 1)


def run_fast(table, plan: RequestPlan, eng: EngineArrays, decode_table=None, disagg: dict | None = None,
             max_iterations: int = MAX_LOOP_ITERATIONS) -> SimTrace:
    """The engine loop of :func:`simfront.engine_loop.run_engine` for deployments :func:`fast_rows` accepts (every row
    of ``plan``), one numpy iteration per run of identical steps of all deployments at once."""
    st = _Fast(plan, eng, _spacing(table, plan, eng, decode_table, disagg))
    if disagg is None:
        balance = BalanceGate.of(table, plan, eng, st.U) if eng.gated().any() else None
        it = _loop_agg(st, Cells(table), eng, max_iterations, balance)
    else:
        pre = Cells(table)
        st.think0 = False  # two clocks: a finished user's next request reaches the prefill queue by its send time
        it = _loop_disagg(st, pre, Cells(decode_table), eng, disagg, max_iterations)
    return st.trace(eng, plan, it)


def _too_long(max_iterations):
    raise SimfrontError(f"simulation did not finish within {max_iterations} steps; simulate fewer prompts")


def _iterations(st: _Fast, max_iterations: int):
    """(iteration number, deployments still running) of an engine loop, arrivals taken at each; stops when
    every deployment's requests are done, fails past ``max_iterations`` or when a running deployment has not moved in
    ``STALL_CHECK_ITERATIONS`` (its clock, prompt tokens, decode steps and request counters all where they were)."""
    it = 0
    seen = None
    while np.count_nonzero(act := st.e < st.stop):
        it += 1
        if it > max_iterations:
            _too_long(max_iterations)
        if it % STALL_CHECK_ITERATIONS == 0:
            seen = check_moving(np.stack([st.now, st.ptok, st.G, st.c, st.e]), seen, act)
        st.arrive()
        yield it, act


_LOOKUP_TOKENS = 1 << 16  # the largest token budget whose prompt-token cells the aggregated loop tabulates


def _whole(x) -> bool:
    """Whether every value of ``x`` is a whole number (or infinite)."""
    return np.array_equal(x, np.floor(x))


def _loop_agg(st: _Fast, tab: "Cells", eng: EngineArrays, max_iterations: int, balance: BalanceGate | None = None) -> int:
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
    gate = eng.gated()
    gated = balance is not None
    if gated:  # the attention-DP balance gate (BalanceGate)
        gate_open = np.full(st.D, INF)
        passed = np.zeros(st.D)  # requests the gate has let through
    it = 0
    for it, act in _iterations(st, max_iterations):
        c, e, ptok, G, now = st.c, st.e, st.ptok, st.G, st.now
        arr = st.arr
        shut = None
        if gated:
            # a round starts when a request waits at a closed gate (seen at the iteration that takes it in: at its send
            # time when it follows a finish, within one step of it otherwise); at its opening every waiting request passes
            waiting = gate & (arr > passed)
            opens = waiting & ~(gate_open < INF)
            if opens.any():
                n_d = c - e
                ctx0 = np.where(n_d > ZERO, isl + al * (G - st.s_in / np.maximum(n_d, ONE)), ctx_lo)
                gate_open = np.where(opens, now + balance.wait_s(tab.decode_only(n_d, ctx0)[0]), gate_open)
            shut = waiting & (now < gate_open)
            passed = np.where(gate & ~shut, arr, passed)
            gate_open = np.where(gate & ~shut & ~(gate_open > now), INF, gate_open)  # the round ends at its opening
            arr = np.where(gate, passed, arr)
        adm = np.minimum(arr, e + maxrun)  # admitted (FCFS) while the engine has room
        n_dec = c - e
        running = n_dec > ZERO
        avail = adm * need - ptok
        p = np.minimum(avail, np.maximum(budget - n_dec * qm, ZERO))
        has_p = p > ZERO
        # decode requests in the step: none in a prefill-first step with prompts
        dec_in = np.where(has_p & pf, ZERO, n_dec) if any_pf else n_dec
        k_p = _prefill_steps(p, avail, need - (ptok - c * need))  # read only where has_p
        ctx = np.where(running, isl + al * (G - st.s_in / np.maximum(n_dec, ONE)), ctx_lo)
        k_fin = st.k_finish()
        v, slope = tab.parts(dec_in, p, ctx, whole_b, whole_p)
        quiet = finite and not st.arrivals_pending() and not (shut is not None and shut.any())
        if quiet:
            # requests come only at finishes, where runs end anyway (k_arr would be inf: inf / finite v), and an
            # idle row has nothing to wait for
            k_dec, idle_to = np.maximum(k_fin, ONE), now
        else:
            nxt = st.next_arrival()
            if shut is not None:  # a shut gate: its opening is the next event
                nxt = np.where(shut, np.minimum(nxt, gate_open), nxt)
            # decode steps until the next arrival (while the engine has room for it)
            k_arr = np.where(adm - e < maxrun, np.ceil(np.maximum(nxt - now, ZERO) / np.maximum(v, TINY)), INF)
            k_dec, idle_to = np.maximum(np.minimum(k_fin, k_arr), ONE), np.where(nxt < INF, np.maximum(now, nxt), now)
        # a run with prompts stops where the head prompt finishes, or a mixed step's decode group does
        k = np.where(has_p, np.where(mixed & running if any_pf else running, np.minimum(k_p, k_fin), k_p),
                     np.where(running, k_dec, ZERO)) * act
        adv = dec_in > ZERO if any_pf else running  # decode tokens in the step
        t_step = np.maximum(v + slope * (np.maximum(k - ONE, ZERO) * half_al * adv), ZERO)  # the run's mean context
        # idle and finished rows (k = 0) stay at their clock (0 x a finite step adds 0 s), or wait for the next arrival
        new_now = now + k * t_step if quiet else np.where(act & (k == ZERO), idle_to, now + k * t_step)
        st.ptok = ptok = ptok + k * p
        st.G = G + k * adv
        # first tokens: by the end of the next step, the running requests' decode step (see run_engine)
        t_first = new_now + lag * np.maximum(tab.decode_only(n_dec, ctx)[0], ZERO) if lagged else new_now
        st.enter(np.minimum(np.floor(ptok / need + TOL), adm), t_first, running)
        st.finish(new_now)
        st.itl_s.append(t_step)  # zero weight where no decode request stepped
        st.itl_w.append(dec_in * k)
        st.now = new_now
    return it


def _loop_disagg(st: _Fast, ptab: "Cells", dtab: "Cells", eng: EngineArrays, dis: dict, max_iterations: int) -> int:
    D, W, off = st.D, st.W, st.off
    need, isl = st.need, st.isl
    budget, maxrun, half_al, al = eng.token_budget, eng.max_running, eng.al / 2.0, eng.al
    inv_scale = 1.0 / np.maximum(dis["decode_scale"], 1e-9)
    dslots, ready_after = dis["decode_slots"], dis["transfer_s"] * isl
    # a decode slot reserved before the prefill starts (SGLang's prealloc queue): the prompts started and not finished
    # hold at most the pool's slots
    slot_cap = np.where(np.broadcast_to(np.asarray(dis.get("slot_at_prefill", False), bool), (D,)), dslots, INF)
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
        adm = np.minimum(np.minimum(st.arr, pre_c + maxrun), st.e + slot_cap)
        avail = adm * need - ptok
        p = np.minimum(avail, budget)
        # the two clocks advance in time order: the worker holds while the pool is behind it with requests to run
        # before its clock (run_engine)
        pool_due = (c > e) | (rp > c) | ((rb < nrb) & (rb_t[rb] <= now))
        held = (dnow < now) & pool_due
        k = np.where(held, ZERO, _prefill_run(p, avail, need - (ptok - pre_c * need)))
        t_step = ptab.prefill_only(p)
        nxt = st.next_arrival()
        new_now = np.where(act & (k == ZERO), np.where(nxt < INF, np.maximum(now, nxt), np.maximum(now, dnow)),
                           now + k * t_step)
        new_now = np.where(held, now, new_now)
        st.ptok = ptok = ptok + k * p
        c_new = np.minimum(np.floor(ptok / need + TOL), adm)
        rb_hi[nrb] = c_new
        rb_t[nrb] = new_now + ready_after
        nrb = nrb + (c_new > pre_c)
        pre_c = c_new
        st.now = now = new_now
        # queued prompts that no prefill step could take (each waits for a decode slot reserved before its prefill:
        # SGLang) wait for the pool to free one: the pool runs on to its own next event, and the prefill clock follows it
        blocked = (st.arr > pre_c) & ~(p > ZERO)
        # ---- decode pool (clock dnow): admit ready requests FCFS, run to the next event ----
        while True:
            pending, t_ready = rb < nrb, rb_t[rb]  # the oldest prefilled batch not yet at the pool, its KV ready at
            due = pending & (t_ready <= dnow)
            if not np.count_nonzero(due):
                break
            rp = np.where(due, rb_hi[rb], rp)
            rb = rb + due
        n_r = c - e
        upto = c + np.maximum(np.minimum(rp - c, dslots - n_r), ZERO)
        n_r = upto - e
        running = n_r > ZERO
        nxt_ready = np.where(pending, t_ready, INF)  # the next KV to arrive
        h_p = np.where((st.arr > pre_c) & ~blocked, now, nxt)
        horizon = np.minimum(h_p, nxt_ready)
        b_rank = n_r * inv_scale
        st.enter(upto)  # entering requests count from this step
        G = st.G
        ctx = np.where(running, isl + al * (G - st.s_in / np.maximum(n_r, ONE)), d_ctx_lo)
        v, slope = dtab.decode_only(np.where(running, np.maximum(b_rank, ONE), ZERO), ctx)  # a lone request runs a batch of one
        k_h = np.ceil(np.maximum(horizon - dnow, ZERO) / np.maximum(v, TINY))
        kd = np.where(running, np.maximum(np.minimum(st.k_finish(), k_h), ONE), ZERO)
        td = np.maximum(v + slope * (np.maximum(kd - ONE, ZERO) * half_al), ZERO)
        # first token: the run's first step (at admission where the request has no decode step)
        st.first_token(upto, dnow + (np.maximum(v, ZERO) if st.all_k_pos else np.maximum(v, ZERO) * k_pos))
        st.G = G + kd
        when = dnow + kd * td
        st.itl_s.append(td)  # zero weight where the pool did not step
        st.itl_w.append(b_rank * kd)
        idle_to = np.where(nxt_ready < INF, np.minimum(nxt_ready, np.where(h_p < INF, np.maximum(h_p, dnow), nxt_ready)),
                           np.maximum(dnow, now))
        dnow = np.where(kd > 0, when, np.maximum(dnow, idle_to))
        # a blocked prefill side can do nothing before the pool's next event: a prompt starts no earlier than the finish
        # that frees its slot
        st.now = np.where(blocked & act, np.maximum(st.now, dnow), st.now)
        st.finish(when)
    return it


__all__ = ["run_fast", "fast_rows"]

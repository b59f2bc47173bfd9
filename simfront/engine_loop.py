"""The request-slot engine loop of the step-level simulation (:mod:`simfront.simulate`).

:func:`run_engine` steps the representative server of every deployment on arrays of shape (deployments, request
slots): any request plan (random lengths, open loop, agentic sessions), a KV cache that fills (preemption and
recompute), and a disaggregated deployment's decode pool on its own clock. :class:`EngineArrays` holds the
per-deployment engine parameters both loops read (this one and :mod:`simfront.engine_fast`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .clients import RequestPlan
from .errors import SimfrontError
from .scheduler import SchedulerSettings
from .serving import NO_SPEC, Speculation, adp_cover_s
from .sim_metrics import SimTrace
from .step_table import StepTable

# Above this many decode steps per request the loop would run long; the caller is told (SimfrontError).
MAX_LOOP_ITERATIONS = 2_000_000
# Output tokens a disaggregated prefill (context) server is asked for and so reserves beside the prompt: one, the first
# token; the decode server generates the rest. TensorRT-LLM's disaggregated server sends the context request with
# max_tokens 1 (tensorrt_llm/serve/openai_disagg_server.py, _process_context_server_request).
CONTEXT_ONLY_OUTPUT_TOKENS = 1.0
# iterations between checks that every running deployment moves (a deadlock fails there rather than after
# MAX_LOOP_ITERATIONS); a deployment that moves changes a clock, a counter or a request's progress every iteration
STALL_CHECK_ITERATIONS = 4096


def check_moving(state: np.ndarray, seen: np.ndarray | None, active: np.ndarray) -> np.ndarray:
    """Fail when a running deployment's ``state`` ((quantities, D): its clocks, counters and progress) is where it was
    at the last check (``seen``, None at the first); return ``state`` for the next check."""
    if seen is not None:
        stuck = int(np.count_nonzero(active & np.all(state == seen, axis=0)))
        if stuck:
            raise SimfrontError(f"simulation stalled: {stuck} deployment(s) made no progress in {STALL_CHECK_ITERATIONS} steps")
    return state

# seed of the draws that place the representative rank's prompts in the attention-DP balance gate's rounds
GATE_SEED = 0

# phases of a request slot
_PENDING, _QUEUED, _PREFILL, _DECODE, _DONE = 0, 1, 2, 3, 4


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
    adp_ranks: np.ndarray  # attention-DP ranks whose prompts the engine's balance gate waits for (1: no gate)
    adp_gate_iters: np.ndarray  # most steps a new prompt waits at the gate (TensorRT-LLM attention_dp_config timeout_iters)
    recv_interval: np.ndarray  # decode steps between the engine's intakes of new requests (SGLang --scheduler-recv-interval)

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
                   f((profile or {}).get("ttft_overhead_s", 0.0)), f(1.0), f(sched.adp_balance_timeout_iters), f(1.0))

    def gated(self) -> np.ndarray:
        """(D,) bool: deployments whose new prompts wait at an attention-DP balance gate."""
        return (self.adp_ranks > 1.0) & (self.adp_gate_iters > 0.0)


class BalanceGate:
    """The attention-DP balance gate (TensorRT-LLM ``attention_dp_config``) as both engine loops run it, on arrays of
    the deployments. The ranks share one gate, which the first new prompt on any rank starts and which holds every rank's
    new prompts until each rank holds one (the coupon-collector time at the ranks' arrival rate, ``cover_s``) or for the
    engine's timeout in steps. The representative rank's first prompt of a round finds the gate already started by
    another rank's prompt with the probability a Poisson arrival sees it counting, lambda_o G / (1 + lambda_o G)
    (lambda_o = ``others_s``, the other ranks' prompts per second), and then waits the rest of it (seeded draws)."""

    def __init__(self, cover_s, others_s, gate_iters):
        self.cover_s, self.others_s, self.gate_iters = cover_s, others_s, gate_iters
        self.rng = np.random.default_rng(GATE_SEED)

    @classmethod
    def of(cls, table, plan: RequestPlan, eng: EngineArrays, users) -> "BalanceGate":
        """The gate of deployments whose representative rank serves ``users`` clients (arrival rate from one request's
        life in the step tables, :func:`life_s`)."""
        per_rank_s = users / np.maximum(life_s(table, plan, eng, users), 1e-12)  # prompts per second a rank gets
        return cls(adp_cover_s(eng.adp_ranks, eng.adp_ranks * per_rank_s), (eng.adp_ranks - 1.0) * per_rank_s,
                   eng.adp_gate_iters)

    def wait_s(self, step_s) -> np.ndarray:
        """(D,) wait of a round's first waiting prompt of the representative rank, at the running step ``step_s``."""
        D = np.shape(self.cover_s)[0]
        g_s = np.minimum(self.gate_iters * step_s, self.cover_s)  # the gate's full wait
        joined = self.rng.random(D) < self.others_s * g_s / (1.0 + self.others_s * g_s)  # another rank's prompt started it
        return np.where(joined, self.rng.random(D) * g_s, g_s)


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


def _pop_finished(Q, head, tail, qlen, fr, pos, D):
    """Take the prompts that finished prefill (deployment ``fr``, place ``pos`` in its queue window) out of the
    ring queues. They are usually the head of the queue (prefill in FCFS order), but a preempted request goes back
    to the head ahead of prompts already in prefill and may wait there (no KV room) while those behind it finish:
    such a deployment's queue is compacted, keeping every other slot in its order."""
    if fr.size == 0:
        return
    n = np.bincount(fr, minlength=D)
    top = np.zeros(D, int)
    np.maximum.at(top, fr, pos + 1)
    prefix = top == n  # the finished places are exactly 0..n-1: pop the head
    head += np.where(prefix, n, 0)
    qlen -= np.where(prefix, n, 0)
    c = np.nonzero((n > 0) & ~prefix)[0]
    if c.size == 0:
        return
    Nq = Q.shape[1]
    ar = np.arange(Nq)[None, :]
    at = (head[c, None] + ar) % Nq
    ring = Q[c[:, None], at]
    drop = np.zeros((D, Nq), bool)
    drop[fr, pos] = True
    keep = (ar < qlen[c, None]) & ~drop[c]
    order = np.argsort(~keep, axis=1, kind="stable")  # kept slots first, in queue order
    Q[c[:, None], at] = np.take_along_axis(ring, order, axis=1)
    qlen[c] = keep.sum(axis=1)
    tail[c] = head[c] + qlen[c]


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
    pooled decode requests / scale), ``decode_slots`` and ``decode_kv_tokens``, and optionally ``slot_at_prefill``
    (a request reserves its decode slot before its prefill starts; default at its KV transfer).
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
        life = life_s(table, plan, eng, users.astype(float), decode_table, disagg)
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
        slot_first = np.broadcast_to(np.asarray(disagg.get("slot_at_prefill", False), bool), (D,))
    # attention-DP balance (aggregated; BalanceGate): a round opens at its first waiting prompt's send time
    gate = eng.gated() & (not dis)
    gate_open = np.full(D, np.inf)
    if gate.any():
        balance = BalanceGate.of(table, plan, eng, users.astype(float))
    # request intake (aggregated; SGLang's SchedulerRecvSkipper): the engine takes in new requests after a step with prompt
    # tokens (or idle), and during pure decode every recv_interval steps: it counts decode steps since its last intake
    recv_gated = (eng.recv_interval > 1.0) & (not dis)
    recv_ct = eng.recv_interval.copy()  # an idle engine takes in at once
    it = 0
    seen = None  # the running deployments' state at the last stall check
    while True:
        active = fin < n_req
        if not active.any():
            break
        it += 1
        if it > max_iterations:
            raise SimfrontError(f"simulation did not finish within {max_iterations} steps; simulate fewer prompts")
        if it % STALL_CHECK_ITERATIONS == 0:
            seen = check_moving(np.stack([now, dnow if dis else now, fin, done_p.sum(axis=1), left.sum(axis=1),
                                          kv.sum(axis=1)]), seen, active)
        # ---------------- prefill side (the whole engine when aggregated) ----------------
        pclock = now
        arr = (ph == _PENDING) & (t_send <= pclock[:, None])
        busy = ((ph == _DECODE) | (ph == _PREFILL) | (ph == _QUEUED)).any(axis=1)
        intake = ~recv_gated | (recv_ct >= eng.recv_interval) | ~busy  # an idle engine polls for requests
        held_out = arr & ~intake[:, None]  # arrived, taken in at the engine's next intake
        arr &= intake[:, None]
        recv_ct = np.where(intake, 0.0, recv_ct)
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
        # a reserving engine holds each new request's output too; a disaggregated prefill server only its first token
        out_kv = CONTEXT_ONLY_OUTPUT_TOKENS if dis else osl[rows, rq[rows, s]]
        kv_new = np.where(new, rem + np.where(eng.reserve[:, None], out_kv, 0.0), 0.0)
        ok_new = new & (n_run[:, None] + np.cumsum(new, axis=1) <= cap_run[:, None]) & (
            kv_used[:, None] + np.cumsum(kv_new, axis=1) <= eng.kv_tokens[:, None])
        if dis and slot_first.any():
            # the decode pool reserves a request's slot before its prefill starts (SGLang's prealloc queue): a prompt
            # starts only while a slot is free for it (slots held by requests in prefill, in transfer and decoding)
            held = ((ph == _PREFILL) | (ph == _DECODE)).sum(axis=1)
            ok_new &= ~slot_first[:, None] | (held[:, None] + np.cumsum(new, axis=1) <= dslots[:, None])
        shut = np.zeros(D, bool)
        if gate.any():
            waiting = gate & new.any(axis=1)
            opens = waiting & ~np.isfinite(gate_open)  # a new round: from its first prompt's arrival
            if opens.any():
                first_s = np.where(new, t_send[rows, s], np.inf).min(axis=1)
                n_d = dec.sum(axis=1).astype(float)
                step_s = table(n_d, 0.0 * n_d, np.where(n_d > 0, (kv * dec).sum(axis=1) / np.maximum(n_d, 1), table.ctx_lo))
                gate_open = np.where(opens, first_s + balance.wait_s(step_s), gate_open)
            shut = waiting & (pclock < gate_open)
            ok_new &= ~shut[:, None]
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
        pend = np.where((ph == _PENDING) & ~held_out, t_send, np.inf).min(axis=1)  # the next arrival (held ones: k_recv)
        pend = np.where(shut, np.minimum(pend, gate_open), pend)  # a shut gate opens: the next event too
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
            k_recv = np.where(held_out.any(axis=1), np.maximum(eng.recv_interval - recv_ct, 1.0), np.inf)  # to the next intake
            k = np.where(has_p, 1.0, np.maximum(np.minimum(np.minimum(np.minimum(k_left, k_arr), k_kv), k_recv), 1.0))
            k = np.where(n_dec > 0, k, np.where(has_p, 1.0, 0.0))
            t_step = table(dec_in, p_tok, ctx_mean + np.where(has_p, 0.0, np.maximum(k - 1.0, 0.0) * eng.al / 2.0))  # step i at ctx + i al
            # the step after this one decodes the running requests (a prompt finished now joins the batch after it):
            # an overlap scheduler hands out this step's first tokens by its end (EngineArrays.lag_steps)
            t_next = table(n_dec.astype(float), 0 * p_tok, ctx_mean)
        k = k * active
        dt = k * t_step
        idle = active & (k == 0)
        # the intake counter (decode steps since the last intake, in (0, N]; N: an intake at the next step): a step with
        # prompt tokens counts past the interval, an idle engine takes in at once, and a run of k decode steps passes an
        # intake every N steps, after which the count starts again
        recv_ct = np.where(has_p | (k == 0), eng.recv_interval,
                           np.mod(recv_ct + k - 1.0, np.maximum(eng.recv_interval, 1.0)) + 1.0)
        if not dis and (idle & ~np.isfinite(pend)).any():
            # nothing decodes, nothing is admitted and no request is on its way: the deployment can never finish
            d0 = int(np.argmax(idle & ~np.isfinite(pend)))
            why = (f"a prompt of {rem[d0, 0]:.0f} tokens waits for a KV cache of {eng.kv_tokens[d0]:.0f} tokens"
                   if qlen[d0] > 0 else f"{int(n_req[d0] - fin[d0])} requests lost by the engine loop")
            raise SimfrontError(f"simulation stalled after {it} steps: {why}")
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
            _pop_finished(Q, head, tail, qlen, fr, cc[fin_p], D)
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
        if gate.any():  # a round ends when the gate has opened and no new prompt waits
            gate_open = np.where(gate & (pclock >= gate_open) & ~(ph == _QUEUED).any(axis=1), np.inf, gate_open)
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
        # the prefill side's next event: now while it has prompt tokens to step (or holds for this pool to catch up);
        # queued prompts that no prefill step can take (each waits for a decode slot reserved before its prefill:
        # SGLang) wait for this pool to free one, so the pool runs on to its own next event (a finish frees a slot)
        blocked = (qlen > 0) & ~has_p
        h_p = np.where((qlen > 0) & ~blocked, now, pend)
        horizon = np.minimum(h_p, nxt_ready)
        b_rank = n_r / dscale  # requests per decode rank (mean field)
        b_step = np.where(n_r > 0, np.maximum(b_rank, 1.0), 0.0)  # the busiest rank's batch: a lone request runs one
        dctx = np.where(n_r > 0, (kv * running).sum(axis=1) / np.maximum(n_r, 1), decode_table.ctx_lo)
        td = decode_table(b_step, 0 * b_step, dctx)
        td_first = td  # the run's first step: the admitted requests' first token
        k_left = np.where(running, left, np.inf).min(axis=1)
        k_h = np.where(np.isfinite(horizon), np.ceil(np.maximum(horizon - dnow, 0.0) / np.maximum(td, 1e-12)), np.inf)
        kd = np.where(n_r > 0, np.maximum(np.minimum(k_left, k_h), 1.0), 0.0) * active
        td = decode_table(b_step, 0 * b_step, dctx + np.maximum(kd - 1.0, 0.0) * eng.al / 2.0)
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
        # a blocked prefill side can do nothing before the pool's next event: its clock follows the pool's, so a prompt
        # starts no earlier than the finish that frees its slot
        now = np.where(blocked & active, np.maximum(now, dnow), now)
        _finish(done, when, ph, rq, t_end, t_send, kv, need, done_p, left, isl, cached, plan, issued, fin, n_req, t_req)
    pos = np.broadcast_to(np.arange(R)[None, :], (D, R))
    counted = np.isfinite(t_end) & (pos >= plan.warmup[:, None]) & (pos < n_req[:, None]) & in_window(pos, plan)
    return SimTrace(t_req, t_first, t_end, isl, osl, counted, itl_s, itl_w, eng.ttft_overhead_s, it, preempt, computed)


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


def in_window(rid, plan: RequestPlan) -> np.ndarray:
    """Requests (by sending order ``rid``) inside the plan's statistics window (all without ``count_until``)."""
    if plan.count_until is None:
        return np.ones(np.shape(rid), bool)
    return rid < np.asarray(plan.count_until, float)[:, None]


def life_s(table, plan: RequestPlan, eng: EngineArrays, users, decode_table=None, disagg: dict | None = None) -> np.ndarray:
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


__all__ = ["BalanceGate", "EngineArrays", "run_engine"]

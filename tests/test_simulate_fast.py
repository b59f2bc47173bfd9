"""The fast engine loop (simfront.engine_fast.run_fast) against the request-slot loop (simfront.engine_loop.run_engine):
same deployments, same plans, same per-request times; and the dispatch between them."""

import numpy as np
import pytest

from simfront import clients as cl
from simfront.deployment import Layouts
from simfront.engine_fast import fast_rows, run_fast
from simfront.engine_loop import EngineArrays, run_engine
from simfront.hardware import get_hardware
from simfront.models import get_model
from simfront.scheduler import scheduler_settings
from simfront.serving import NO_SPEC, Speculation, engine_profile
from simfront.sim_metrics import SimTrace, summarise
from simfront.simulate import kv_tokens_per_rank, simulate_agg, simulate_trace
from simfront.step_table import build_step_table

MODEL = get_model("llama-3.1-8b")
HW = get_hardware("h100_sxm")
MTP = Speculation("mtp", k=2, acceptance=0.7, draft_layers=1.0)


def _agg_inputs(engine, users, isl, osl, *, first_wave, prompts=3, think=0.0, prefix=0.0, spec=NO_SPEC, budget=None, tp=(1, 2, 1)):
    D = len(users)
    lay = Layouts.of(np.array(tp[:D], float))
    sched = scheduler_settings(engine)
    prof = engine_profile(engine)
    budget = np.full(D, float(budget or sched.token_budget))
    table = build_step_table(MODEL, MODEL.precision, HW, lay, prof, isl_new=isl * (1 - prefix), prefix=isl * prefix, ctx_lo=0.8 * isl,
                             ctx_hi=isl + osl, b_max=max(users) + 1, p_max=float(budget.max()), spec=spec)
    c = cl.ClosedLoop(1, cl.Lengths(isl, osl), num_prompts=prompts, first_wave=first_wave, think_s=think, warmup=1, prefix_hit=prefix)
    plan = cl.plan_closed(c, np.array(users, float), D)
    kv, _ = kv_tokens_per_rank(MODEL, MODEL.precision, HW, lay, isl + osl)
    eng = EngineArrays.of(D, sched, kv, spec, prof, token_budget=budget)
    return table, plan, eng


def _disagg_inputs(engine, users, isl, osl, *, scale, slots, kv_ranks, first_wave=True, ratio=1.0, prompts=3, prefix=0.0):
    """(prefill table, decode table, plan, engine arrays, disagg dict) of one-GPU prefill workers and decode pools of
    ``scale`` ranks holding ``slots`` requests (per deployment) and ``kv_ranks`` ranks' KV, ``users`` closed-loop
    clients each sending ``prompts`` prompts (the first a warm-up), lengths in [ratio L, L], ``prefix`` of each prompt
    from the prefix cache."""
    D = len(users)
    sched, prof = scheduler_settings(engine), engine_profile(engine)
    lay = Layouts.of(np.ones(D))
    ptable = build_step_table(MODEL, MODEL.precision, HW, lay, prof, isl_new=isl * (1 - prefix), prefix=isl * prefix, ctx_lo=isl,
                              ctx_hi=isl + 1, b_max=1, p_max=8192)
    dtable = build_step_table(MODEL, MODEL.precision, HW, lay, prof, isl_new=isl, prefix=0.0, ctx_lo=0.8 * isl, ctx_hi=isl + osl,
                              b_max=float(np.max(np.asarray(slots) / np.asarray(scale))) + 1, p_max=1)
    c = cl.ClosedLoop(1, cl.Lengths(isl, osl, ratio), num_prompts=prompts, first_wave=first_wave, warmup=1, prefix_hit=prefix)
    plan = cl.plan_closed(c, np.array(users, float), D)
    kv, _ = kv_tokens_per_rank(MODEL, MODEL.precision, HW, lay, isl + osl)
    eng = EngineArrays.of(D, sched, kv, NO_SPEC, prof)
    eng.prefill_first[:] = True
    dis = {"transfer_s": np.full(D, 1e-6), "decode_scale": np.broadcast_to(np.asarray(scale, float), (D,)).copy(),
           "decode_slots": np.asarray(slots, float), "decode_kv_tokens": kv * kv_ranks}
    return ptable, dtable, plan, eng, dis


def _same(a, b):
    for f in ("t_send", "t_first", "t_end"):
        x, y = np.sort(getattr(a, f), axis=1), np.sort(getattr(b, f), axis=1)  # the request order may differ, the times not
        assert np.allclose(x, y, rtol=1e-9, atol=1e-9, equal_nan=True), f
    assert np.array_equal(a.counted.sum(axis=1), b.counted.sum(axis=1))
    # which of two requests sent at the same moment is the warm-up one is arbitrary: statistics over all
    every = lambda tr: SimTrace(**{**vars(tr), "counted": np.isfinite(tr.t_end)})  # noqa: E731
    ma, mb = summarise(every(a), 1.0, 1.0, 1.0), summarise(every(b), 1.0, 1.0, 1.0)
    for k in ("mean", "p50", "p90", "p99"):
        assert np.allclose(ma.ttft_s[k], mb.ttft_s[k], rtol=1e-9) and np.allclose(ma.tpot_s[k], mb.tpot_s[k], rtol=1e-9)
    assert np.allclose(ma.itl_s["mean"], mb.itl_s["mean"], rtol=1e-9)


@pytest.mark.parametrize("engine,first_wave,kw", [
    ("vllm", True, {}),  # mixed steps, synchronised first wave
    ("vllm", False, {}),  # users spread (steady state)
    ("sglang", True, {}),  # prefill-first steps, one-step first-token lag
    ("trtllm", False, {"spec": MTP}),  # reserve admission, speculative decoding
    ("vllm", True, {"budget": 512}),  # prompts chunked over several steps
    ("sglang", False, {"think": 0.05, "prefix": 0.5}),  # think time between requests, prefix-cache hits
])
def test_fast_loop_equals_the_request_slot_loop_aggregated(engine, first_wave, kw):
    table, plan, eng = _agg_inputs(engine, [1, 7, 24], 1024, 128, first_wave=first_wave, **kw)
    assert fast_rows(plan, eng).all()
    _same(run_fast(table, plan, eng), run_engine(table, plan, eng))


@pytest.mark.parametrize("first_wave", [True, False])
def test_fast_loop_equals_the_request_slot_loop_disaggregated(first_wave):
    ptable, dtable, plan, eng, dis = _disagg_inputs("vllm", [2, 16, 48], 2048, 256, scale=[1.0, 2.0, 1.0], slots=[64, 64, 32],
                                                    kv_ranks=2, first_wave=first_wave)
    assert fast_rows(plan, eng, dis).all()
    _same(run_fast(ptable, plan, eng, dtable, dis), run_engine(ptable, plan, eng, dtable, dis))


def test_rows_the_fast_loop_cannot_take_run_on_the_slot_loop():
    """Random lengths, or a KV cache too small for every user's context, go to run_engine; the merged
    trace keeps each deployment's rows."""
    table, plan, eng = _agg_inputs("vllm", [4, 8], 1024, 128, first_wave=True)
    c = cl.ClosedLoop(1, cl.Lengths(1024, 128, 0.8), num_prompts=3, warmup=1)
    rnd = cl.plan_closed(c, np.array([4.0, 8.0]), 2)
    mixed_plan = cl.RequestPlan(**{**vars(plan), "isl": np.vstack([plan.isl[0], rnd.isl[1]]), "osl": np.vstack([plan.osl[0], rnd.osl[1]])})
    assert fast_rows(mixed_plan, eng).tolist() == [True, False]
    small = EngineArrays(**{**vars(eng), "kv_tokens": np.array([4 * 1152.0, 2 * 1152.0])})
    assert fast_rows(plan, small).tolist() == [True, False]
    _same(simulate_trace(table, mixed_plan, eng), run_engine(table, mixed_plan, eng))


def test_one_simulation_for_several_precisions_and_speculation_settings():
    """Per-deployment precision and speculation: one call equals one call per setting."""
    specs = [NO_SPEC, MTP, NO_SPEC]
    c = cl.ClosedLoop(8, cl.Lengths(1024, 128), num_prompts=16, first_wave=False, warmup=8)
    kw = dict(sched=scheduler_settings("vllm"), profile=engine_profile("vllm"), isl=1024, osl=128)
    together = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1, 1, 2]), 1, [8, 8, 8], lambda u, D: cl.plan_closed(c, u, D),
                            spec=specs, **kw)
    for j, sp in enumerate(specs):
        alone = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([[1, 1, 2][j]]), 1, 8, lambda u, D: cl.plan_closed(c, u, D), spec=sp, **kw)
        assert together.tpot_s["mean"][j] == pytest.approx(alone.tpot_s["mean"][0], rel=1e-6)
        assert together.ttft_s["p90"][j] == pytest.approx(alone.ttft_s["p90"][0], rel=1e-6)
    assert together.tpot_s["mean"][1] < together.tpot_s["mean"][0]  # MTP emits more tokens per step


def test_counted_window_keeps_the_load_up():
    """With ``count_until`` the requests after the window only keep the clients sending: the counted requests
    decode at the full batch (not in a batch draining as clients stop), the loop stops once they finished,
    and the fast loop and the request-slot loop count the same requests."""
    users = [8, 32]
    table, plan, eng = _agg_inputs("vllm", users, 1024, 256, first_wave=False, prompts=3)
    drained = summarise(run_fast(table, plan, eng), 1.0, 1.0, 1.0)  # warm-up, then rounds 2 and 3 counted
    plan.count_until = plan.warmup + np.array(users, float)  # round 2 counted, round 3 keeps the load
    fast, slow = run_fast(table, plan, eng), run_engine(table, plan, eng)
    assert np.array_equal(fast.counted.sum(axis=1), np.array(users)) and np.array_equal(slow.counted.sum(axis=1), np.array(users))
    steady = summarise(fast, 1.0, 1.0, 1.0)
    # the counted requests ran beside a full batch: their TPOT is at least the full batch's decode-only step
    # (the next round's prompts add mixed steps), above the drained statistics (which also count requests
    # decoding in the emptying batch at the end)
    full_step = np.array([table(np.array([u], float), np.array([0.0]), np.array([1024 + 128.0]), rows=[i])[0] for i, u in enumerate(users)])
    assert np.all(steady.tpot_s["mean"] > drained.tpot_s["mean"])
    assert np.all(steady.tpot_s["mean"] >= 0.99 * full_step)
    assert fast.iterations <= run_fast(table, cl.plan_closed(cl.ClosedLoop(1, cl.Lengths(1024, 256), num_prompts=3, first_wave=False,
                                                                          warmup=1), np.array(users, float), 2), eng).iterations


def test_fast_loop_equals_the_request_slot_loop_disaggregated_with_hundreds_of_users():
    """Hundreds of users on one prefill worker and one decode pool (the pool's runs, to its next finish, far shorter
    than a prefill step): both loops hold the prefill worker while the pool is behind its clock, and agree."""
    ptable, dtable, plan, eng, dis = _disagg_inputs("sglang", [256, 512], 1024, 256, scale=1.0, slots=[256, 512], kv_ranks=8)
    assert fast_rows(plan, eng, dis).all()
    _same(run_fast(ptable, plan, eng, dtable, dis), run_engine(ptable, plan, eng, dtable, dis))


@pytest.mark.parametrize("first_wave", [True, False])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_fast_loop_equals_the_request_slot_loop_with_decode_slots_reserved_before_the_prefill(engine, first_wave):
    """SGLang's decode server reserves a request's slot before its prefill (the prealloc queue). With more users than
    slots the prompts that find no free slot wait, the pool runs on to the finish that frees one, and the prefill clock
    follows it: the fast loop takes these rows (it once sent them to the request-slot loop, 10 s for one
    `predict --tails` of ministral-8b on 32xB200 with 30,000 users) and agrees with the slot loop."""
    ptable, dtable, plan, eng, dis = _disagg_inputs(engine, [8, 40, 300], 1024, 128, scale=1.0, slots=[4, 16, 64], kv_ranks=8,
                                                    first_wave=first_wave)
    dis["slot_at_prefill"] = np.full(3, True)
    assert fast_rows(plan, eng, dis).all()
    late = run_fast(ptable, plan, eng, dtable, dis)
    _same(late, run_engine(ptable, plan, eng, dtable, dis))
    # the cap binds: with the slot held through the prefill the same users finish later than with it given at the transfer
    dis["slot_at_prefill"] = np.full(3, False)
    early = run_fast(ptable, plan, eng, dtable, dis)
    assert np.all(np.nanmax(late.t_end, axis=1) > np.nanmax(early.t_end, axis=1))


def test_fast_loop_runs_the_attention_dp_balance_gate_as_the_request_slot_loop():
    """TensorRT-LLM's attention-DP balance gate (engine_loop.run_engine) in the fast loop: predict --tails' attention-DP
    points stay on it (with the gate only on the request-slot loop, --engine trtllm --tails took 3.8 s instead of 1.1 s
    for deepseek-r1 on 8xB200). The gate's rounds start where each loop sees the waiting request, so the two agree in
    the mean, not request by request: a request that reaches the gate just before or just after a round opens waits a
    round more or less (up to about a second here), which moves a 12-request mean by a few per cent either way, and by
    how much changes chaotically with the profile and the prompt count (with round 45's profile: +5.4 / +1.4 % at 16
    prompts, +2.2 / 0.0 % at 32, +4.2 / -5.9 % at 48, +4.9 / -2.7 % at 64; with round 44's shipped profile 0.15 / 0.1 % at
    16). At two users per rank the fast loop runs about 4 % high in all four: it sees a request at the gate at the
    iteration that takes it in, within a step or two (19 ms each here) of its send time. So the runs at four prompt
    counts are compared together: their mean log ratio of TTFT within 5 %, each run within 10 %, TPOT within 1 % each."""
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    isl = osl = 1024
    lay = Layouts.of([1, 1], dp=[8, 8], ep=[8, 8])
    sched, prof = scheduler_settings("trtllm"), engine_profile("trtllm")
    users = np.array([2.0, 8.0])  # per rank: 16 and 64 users of the worker
    table = build_step_table(m, m.precision, hw, lay, prof, isl_new=isl, prefix=0.0, ctx_lo=0.8 * isl, ctx_hi=isl + osl,
                             b_max=float(users.max()) + 1, p_max=float(sched.token_budget))
    kv, _ = kv_tokens_per_rank(m, m.precision, hw, lay, isl + osl)
    eng = EngineArrays.of(2, sched, kv, NO_SPEC, prof)
    eng.adp_ranks = np.array([8.0, 8.0])
    logs = []
    for prompts in (16, 32, 48, 64):
        plan = cl.plan_closed(cl.ClosedLoop(1, cl.Lengths(isl, osl), num_prompts=prompts, first_wave=False, warmup=4), users, 2)
        assert eng.gated().all() and fast_rows(plan, eng).all()
        mf, ms = (summarise(run(table, plan, eng), 1.0, 1.0, 1.0) for run in (run_fast, run_engine))
        logs.append(np.log(mf.ttft_s["mean"] / ms.ttft_s["mean"]))
        assert np.allclose(mf.tpot_s["mean"], ms.tpot_s["mean"], rtol=0.01), prompts
    logs = np.array(logs)
    assert np.all(np.abs(logs) < np.log(1.10)), logs
    assert np.all(np.abs(logs.mean(axis=0)) < np.log(1.05)), logs.mean(axis=0)
    no_gate = EngineArrays(**{**vars(eng), "adp_gate_iters": np.zeros(2)})
    assert np.all(summarise(run_fast(table, plan, no_gate), 1.0, 1.0, 1.0).ttft_s["mean"] < 0.5 * mf.ttft_s["mean"])


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_fast_loop_takes_prefix_cached_prompts_whose_kv_cannot_bind(engine):
    """95 % of each 2k prompt from the prefix cache: a prefill step's budget reaches some 80 prompts of about 100 new
    tokens each, and every one that finishes hands its KV on, so a prefill worker of 30k KV tokens never refuses a
    prompt, though 80 whole prompts would need 160k. The fast loop takes these rows (it took none before, and the
    request-slot loop spent tens of seconds on such points: 13,824 users of kimi-k2.5 on 32xMI300X with 99 % hits)
    and gives run_engine's times; with a KV too small for one prompt beside a step's new ones, they stay on run_engine."""
    ptable, dtable, plan, eng, dis = _disagg_inputs(engine, [64, 200], 2048, 128, scale=1.0, slots=[64, 200], kv_ranks=8,
                                                    first_wave=False, prefix=0.95)
    eng = EngineArrays(**{**vars(eng), "kv_tokens": np.full(2, 30_000.0)})
    assert fast_rows(plan, eng, dis).all()
    _same(run_fast(ptable, plan, eng, dtable, dis), run_engine(ptable, plan, eng, dtable, dis))
    tight = EngineArrays(**{**vars(eng), "kv_tokens": np.full(2, 4_000.0)})
    assert not fast_rows(plan, tight, dis).any()


def test_send_order_sorts_only_the_batches_that_need_it_and_matches_a_full_sort():
    """The trace's rows are in batch order already; the requests of a batch are put in send order (NaN last, stable)
    by sorting only the batches that hold a late entry. Against a full stable sort of every row by (batch, send time),
    on random rows with ties and missing send times, and on rows whose batches are out of order too."""
    from simfront.engine_fast import _in_send_order

    rng = np.random.default_rng(7)
    for _ in range(200):
        D, R = int(rng.integers(1, 6)), int(rng.integers(2, 60))
        batch = np.sort(rng.integers(0, int(rng.integers(1, 12)), (D, R)), axis=1)
        if rng.random() < 0.2:
            batch = batch[:, ::-1].copy()  # batches out of order: the whole-row sort
        t = np.round(rng.random((D, R)) * rng.choice([1, 5]), 1)
        t[rng.random((D, R)) < 0.2] = np.nan
        rid = np.arange(D * R).reshape(D, R)
        got_t, got_r = _in_send_order(t, rid, batch)
        o = np.lexsort((t, batch), axis=-1)
        assert np.array_equal(got_t, np.take_along_axis(t, o, axis=1), equal_nan=True)
        assert np.array_equal(got_r, np.take_along_axis(rid, o, axis=1))


def test_a_reserving_prefill_server_holds_each_prompt_and_its_first_token_only():
    """TensorRT-LLM reserves a request's prompt and output at admission, but its disaggregated server asks the context
    server for one token (max_tokens 1), so a prefill worker reserves the first token, not the decode's 2k: a 20k-token
    KV pool holds a step's five 2k prompts beside the part-done one. Both loops admit them alike."""
    ptable, dtable, plan, eng, dis = _disagg_inputs("trtllm", [8, 24], 2048, 2048, scale=1.0, slots=[8, 24], kv_ranks=8)
    assert eng.reserve.all()
    eng = EngineArrays(**{**vars(eng), "kv_tokens": np.full(2, 20_000.0)})
    assert fast_rows(plan, eng, dis).all()
    _same(run_fast(ptable, plan, eng, dtable, dis), run_engine(ptable, plan, eng, dtable, dis))

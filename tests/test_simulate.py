"""Step-level simulation (simfront.simulate) against the analytical evaluator where it is exact,
plus invariants (load, Little's law, no NaN) and the agentic workload's routing closed form."""

import numpy as np
import pytest

from simfront import clients as cl
from simfront.deployment import Layouts, evaluate_agg, evaluate_disagg
from simfront.engine_fast import fast_rows
from simfront.engine_loop import run_engine
from simfront.errors import SimfrontError
from simfront.hardware import get_hardware
from simfront.models import get_model
from simfront.scheduler import scheduler_settings
from simfront.serving import NEUTRAL_PROFILE, NO_SPEC, Workload, aggregated_raw, decode_raw, engine_profile, finish_decode, finish_prefill, prefill_raw
from simfront.simulate import simulate_agg, simulate_disagg
from simfront.step_table import build_step_table
from test_simulate_fast import _disagg_inputs

MODEL = get_model("llama-3.1-8b")
HW = get_hardware("h100_sxm")
ISL, OSL = 1024, 1024


def _closed(C, first_wave=False, prompts=6, warm=2, ratio=1.0, isl=ISL, osl=OSL):
    c = cl.ClosedLoop(C, cl.Lengths(isl, osl, ratio), num_prompts=prompts * C, first_wave=first_wave, warmup=warm * C)
    return lambda users, D: cl.plan_closed(c, users, D)


@pytest.mark.parametrize("C", [1, 4])
@pytest.mark.parametrize("prof", [dict(NEUTRAL_PROFILE), engine_profile("vllm")])
def test_agg_agrees_with_analytical_evaluator_in_steady_state(C, prof):
    """Low load, fixed lengths, no first wave: the mean-field evaluator is exact up to the mixed step
    it averages into TPOT (one prompt per request lifetime); within 3 % on TPOT and requests/s."""
    wl = Workload(isl=ISL, osl=OSL, chunk_tokens=8192)
    ana = evaluate_agg(aggregated_raw(MODEL, MODEL.precision, HW, 1, 1, 1, 1, C, wl), prof, 1, 1, C)
    sim = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, C, _closed(C), sched=scheduler_settings("vllm"),
                       profile=prof, isl=ISL, osl=OSL)
    assert sim.tpot_s["mean"][0] == pytest.approx(float(ana.tpot_s), rel=0.03)
    assert sim.requests_s[0] == pytest.approx(float(ana.requests_s), rel=0.03)


@pytest.mark.parametrize("C, rel", [(64, 0.05), (256, 0.10)])
def test_attention_dp_steps_carry_the_other_ranks_prefills(C, rel):
    """DPA 8 / EP 8 under SGLang's scheduler (no balance gate), fixed lengths: the ranks step together, so the
    representative rank's steps also take the other ranks' prompts (the evaluator's 1 - (1 - s)^8 mixed steps).
    Mean TPOT and requests/s within 5 % of the evaluator's at 64 users, 10 % at 256: there the evaluator prices a
    mixed step at an arrival group's prompt tokens on every prefilling rank, where the simulated rank's own steps
    carry the prompts that actually arrive (one at a time), so the two differ by more than the mean field's error.
    Before, the simulated rank saw only its own prompts: TPOT 0.77x (64 users) and 0.57x (256 users) of the
    evaluator's, requests/s 1.36x and 1.84x."""
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    isl, osl = 1024, 256
    sched, prof = scheduler_settings("sglang"), dict(NEUTRAL_PROFILE)
    wl = Workload(isl=isl, osl=osl, chunk_tokens=sched.token_budget, decode_in_budget=sched.policy != "prefill_first")
    ana = evaluate_agg(aggregated_raw(m, m.precision, hw, 1, 1, 8, 8, C // 8, wl), prof, 1, 8, C)
    sim = simulate_agg(m, m.precision, hw, Layouts.of([1], dp=[8], ep=[8]), 1, C, _closed(C, prompts=8, warm=3, isl=isl, osl=osl),
                       sched=sched, profile=prof, isl=isl, osl=osl)
    assert sim.tpot_s["mean"][0] == pytest.approx(float(ana.tpot_s), rel=rel)
    assert sim.requests_s[0] == pytest.approx(float(ana.requests_s), rel=rel)


def test_other_ranks_prefill_prices_the_steps_without_own_prompt_tokens():
    """with_other_ranks_prefill: share 0 leaves the table as it is; share 1 makes every step with fewer prompt tokens of
    the rank's own than the others' (decode-only steps included) the step with the others' prompt tokens, and leaves the
    steps with more as they are; a share between mixes the two."""
    from simfront.step_table import other_ranks_prefill_share, with_other_ranks_prefill
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    tab = build_step_table(m, m.precision, hw, Layouts.of([1, 1], dp=[8, 8], ep=[8, 8]), dict(NEUTRAL_PROFILE), isl_new=ISL,
                           prefix=0, ctx_lo=0.8 * ISL, ctx_hi=ISL + OSL, b_max=64, p_max=8192)
    out = with_other_ranks_prefill(tab, np.array([0.0, 1.0]), np.array([1024.0, 1024.0]))
    assert np.array_equal(out.t[0], tab.t[0])
    j = int(np.flatnonzero(tab.p_grid == 1024)[0])
    for i in range(j):  # fewer own prompt tokens: the others' step
        assert np.allclose(out.t[1, :, i], tab.t[1, :, j])
    assert np.array_equal(out.t[1, :, j:], tab.t[1, :, j:])
    half = with_other_ranks_prefill(tab, np.array([0.0, 0.5]), np.array([1024.0, 1024.0]))
    assert np.allclose(half.t[1, :, 0], 0.5 * (tab.t[1, :, 0] + tab.t[1, :, j]))
    assert (np.diff(out.t[1], axis=1) >= -1e-12).all()  # more own prompt tokens never make a step shorter
    # the share of the steps without own prompt tokens in which another rank prefills: (mixed - own) / (1 - own)
    assert other_ranks_prefill_share(0.5, 0.2) == pytest.approx(0.3 / 0.8)
    assert other_ranks_prefill_share(0.2, 0.2) == 0.0 and other_ranks_prefill_share(1.0, 1.0) == 0.0


@pytest.mark.parametrize("C", [1, 4])
def test_disagg_agrees_with_analytical_evaluator_at_low_load(C):
    prof = dict(NEUTRAL_PROFILE)
    wl = Workload(isl=ISL, osl=OSL)
    link = HW.scaleup.bandwidth_bytes_per_s
    pre = finish_prefill(*prefill_raw(MODEL, MODEL.precision, HW, 1, 1, 1, 1, 1, wl, link), prof)
    dec = finish_decode(*decode_raw(MODEL, MODEL.precision, HW, 1, 1, 1, 1, C, wl), OSL, prof)
    ana = evaluate_disagg(pre, 1, dec, C, C, OSL, 2)
    sim = simulate_disagg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, Layouts.of([1]), 1, C, _closed(C),
                          sched=scheduler_settings("vllm"), profile=prof, link_bytes_per_s=link, isl=ISL, osl=OSL)
    assert sim.tpot_s["mean"][0] == pytest.approx(float(ana.tpot_s), rel=0.03)
    assert sim.requests_s[0] == pytest.approx(float(ana.requests_s), rel=0.03)


def test_disagg_attention_dp_prefill_agrees_with_analytical_evaluator_at_low_load():
    """One client of an attention-DP prefill worker: its prompt is prefilled alone, on one rank, in the simulation (the
    worker's prompt tokens dealt a whole prompt per rank) as in the evaluator (the lone prompt's step); TTFT within 5 %
    (the evaluator's utilisation-weighted share of the batch step is the rest). Before, the simulation spread the prompt
    over the eight ranks (a step of 1,024 tokens per rank) and the evaluator priced eight prompts: about 0.2x and 1.5x
    of this."""
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    prof = dict(NEUTRAL_PROFILE)
    isl, osl = 8192, 256
    wl = Workload(isl=isl, osl=osl)
    link = hw.scaleup.bandwidth_bytes_per_s
    pre = finish_prefill(*prefill_raw(m, m.precision, hw, 1, 1, 8, 8, 1, wl, link), prof)
    dec = finish_decode(*decode_raw(m, m.precision, hw, 8, 1, 1, 1, 1, wl), osl, prof)
    ana = evaluate_disagg(pre, 1, dec, 1, 1, osl, 16)
    sim = simulate_disagg(m, m.precision, hw, Layouts.of([1], dp=[8], ep=[8]), 1, Layouts.of([8]), 1, 1,
                          _closed(1, prompts=3, warm=1, isl=isl, osl=osl), sched=scheduler_settings("trtllm"), profile=prof,
                          link_bytes_per_s=link, isl=isl, osl=osl)
    assert sim.ttft_s["mean"][0] == pytest.approx(float(ana.ttft_s), rel=0.05)
    assert float(pre.shared_extra_s) > 0.2 * float(pre.ttft_base_s)  # the batch step is much longer than the lone one


def test_step_table_reproduces_the_evaluator_step_times():
    prof = engine_profile("sglang")
    wl = Workload(isl=ISL, osl=OSL)
    raw = aggregated_raw(MODEL, MODEL.precision, HW, 2, 1, 1, 1, 16, wl)
    tab = build_step_table(MODEL, MODEL.precision, HW, Layouts.of([2]), prof, isl_new=ISL, prefix=0, ctx_lo=0.8 * ISL,
                           ctx_hi=ISL + OSL, b_max=64, p_max=8192)
    from simfront.serving import step_terms
    want = step_terms(raw.decode_step_s, prof, raw.batch)["engine_s"]  # per-request CPU overhead of the 16 requests included
    got = tab([16], [0], [ISL + OSL / 2])
    assert got[0] == pytest.approx(float(want), rel=0.01)


def test_step_table_of_mixed_speculations_equals_one_table_per_speculation():
    """Rows with different draft settings share one forward pass; each row's step is the one a table built
    for its speculation alone gives (pipelined rows included)."""
    from simfront.serving import Speculation
    specs = [NO_SPEC, Speculation("mtp", 1, 0.7, 1.0), Speculation("mtp", 3, 0.7, 1.0), Speculation("ngram", 2, 0.5)]
    lay = Layouts.of([1, 2, 2, 4], [1, 2, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1])
    kw = dict(isl_new=ISL, prefix=0, ctx_lo=0.8 * ISL, ctx_hi=ISL + OSL, b_max=64, p_max=8192)
    prof = engine_profile("sglang")
    mixed = build_step_table(MODEL, MODEL.precision, HW, lay, prof, spec=specs, **kw)
    for i, sp in enumerate(specs):
        alone = build_step_table(MODEL, MODEL.precision, HW, lay.take([i]), prof, spec=sp, **kw)
        np.testing.assert_array_equal(mixed.t[i], alone.t[0])
    assert len({float(mixed.t[i].sum()) for i in range(4)}) == 4


def test_first_token_lag_is_the_running_decode_step_not_another_prefill_step():
    """An overlap scheduler (TensorRT-LLM: one lag step) hands out a prompt's first token by the end of the next
    step, which decodes the requests already running: a lone request's TTFT is its prefill step plus an empty
    step, not two prefill steps."""
    prof, sched = engine_profile("trtllm"), scheduler_settings("trtllm")
    assert sched.first_token_lag_steps == 1
    tab = build_step_table(MODEL, MODEL.precision, HW, Layouts.of([1]), prof, isl_new=ISL, prefix=0, ctx_lo=0.8 * ISL,
                           ctx_hi=ISL + OSL, b_max=4, p_max=8192)
    prefill_s, empty_s = float(tab([0], [ISL], [ISL])[0]), float(tab([0], [0], [ISL])[0])
    assert empty_s < 0.5 * prefill_s
    m = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, 1, _closed(1), sched=sched, profile=prof, isl=ISL, osl=OSL)
    assert m.ttft_s["mean"][0] - prof["ttft_overhead_s"] == pytest.approx(prefill_s + empty_s, rel=0.02)


def test_disaggregated_prefill_worker_never_runs_ahead_of_the_decode_pool():
    """Random lengths spread the finishes, so the decode pool's runs (to its next finish) last a step or two while a
    prefill step lasts many: a prefill worker that stepped every iteration ran ahead of the pool's clock and took each
    request the pool sent back as if it had queued for the skew, which grew with every step (a 1,024-user DeepSeek-R1
    deployment of InferenceMAX simulated at 34 s TTFT where it measured 0.7 s). Here the prefill worker is lightly
    loaded in steady state (1,024 users of 256-token prompts and 512-token outputs on eight decode ranks), so a
    request waits about one prefill step: before the clocks were ordered the mean was 2.1 s, now 0.56 s."""
    isl, osl, users, ranks = 256, 512, 1024.0, 8.0
    ptable, dtable, plan, eng, dis = _disagg_inputs("sglang", [users], isl, osl, scale=ranks, slots=[users], kv_ranks=ranks,
                                                    ratio=0.8, prompts=4)
    assert not fast_rows(plan, eng, dis).any()  # random lengths: the request-slot loop
    tr = run_engine(ptable, plan, eng, dtable, dis)
    full_step_s = float(ptable([0], [8192], [isl])[0])  # a prefill step of the whole token budget (32 prompts)
    decode_step_s = float(dtable([users / ranks], [0], [isl])[0])
    ttft = (tr.t_first - tr.t_send)[tr.counted]
    assert np.mean(ttft) < 4.0 * (full_step_s + decode_step_s)


def test_more_load_never_lowers_p90_ttft_and_littles_law_holds():
    Cs = np.array([1, 4, 16, 64, 128])
    m = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of(np.ones(5)), 1, Cs, _closed(1, first_wave=True, prompts=4, warm=0, ratio=0.8, osl=256),
                     sched=scheduler_settings("sglang"), profile=engine_profile("sglang"), isl=ISL, osl=256)
    for k in ("mean", "p50", "p90", "p99"):
        assert np.all(np.isfinite(m.ttft_s[k])) and np.all(np.isfinite(m.tpot_s[k])) and np.all(np.isfinite(m.e2e_s[k]))
    assert np.all(np.diff(m.ttft_s["p90"]) >= -1e-9)
    assert np.all(m.ttft_s["p99"] >= m.ttft_s["p90"]) and np.all(m.ttft_s["p90"] >= m.ttft_s["p50"])
    # Little's law on the simulated run: users in flight = throughput x time in system (first wave to
    # last completion; the users idle only after their last request, which the tail of the run shows)
    tr = m.trace
    busy = np.nansum(np.where(tr.counted, tr.t_end - tr.t_send, 0.0), axis=1)
    span = np.nanmax(tr.t_end, axis=1)
    users = np.ceil(Cs / 1.0)
    in_flight = busy / span  # time-average requests in the system on the representative server
    assert np.all(in_flight <= users + 1e-6) and np.all(in_flight >= 0.85 * users)
    x_rep = m.requests_s / m.scale
    assert np.allclose(x_rep * (busy / tr.counted.sum(axis=1)), in_flight, rtol=0.15)


def test_kv_cache_limit_preempts_and_recomputes():
    """A KV cache that holds only a few requests: the engine preempts and still finishes everything."""
    from simfront.clients import plan_closed
    c = cl.ClosedLoop(16, cl.Lengths(1024, 512), num_prompts=32)
    m = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, 16, lambda u, D: plan_closed(c, u, D),
                     sched=scheduler_settings("vllm"), profile=engine_profile("vllm"), isl=1024, osl=512, kv_tokens=np.array([6 * 1536.0]))
    assert m.preemptions[0] > 0 and np.isfinite(m.requests_s[0])
    assert m.trace.counted.sum() == 32
    roomy = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, 16, lambda u, D: plan_closed(c, u, D),
                         sched=scheduler_settings("vllm"), profile=engine_profile("vllm"), isl=1024, osl=512)
    assert roomy.preemptions[0] == 0 and roomy.requests_s[0] > m.requests_s[0]


def test_goodput_with_percentile_sla():
    m = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of(np.ones(2)), 1, [2, 64], _closed(1, first_wave=True, prompts=3, warm=0, osl=128),
                     sched=scheduler_settings("vllm"), profile=engine_profile("vllm"), isl=ISL, osl=128)
    loose = m.goodput(ttft_s=100.0, tpot_s=1.0)
    assert np.allclose(loose, m.requests_s)
    tight = m.goodput(ttft_s=float(m.ttft_s["p50"][1]), tpot_s=1.0, percentile=99)
    assert tight[1] == 0.0  # p99 TTFT above the p50 bound
    share = m.goodput(ttft_s=float(m.ttft_s["p50"][1]), tpot_s=1.0)
    assert 0.3 * m.requests_s[1] < share[1] < 0.75 * m.requests_s[1]


def test_agentic_kv_aware_routing_beats_round_robin_by_the_hit_rate_closed_form():
    """R = 4 replicas, one session per replica at a time, prefill-dominated turns. KV-aware routing
    reuses the previous context on every later turn; round-robin on 1/R of them. The simulated
    prompt tokens computed per request follow the closed form, and so does the prefill-time gain."""
    R = 4
    res = {}
    for routing in ("kv-aware", "round-robin"):
        a = cl.AgenticCoding(sessions=1, turns=6, first_prompt=2048, output_tokens=64, tool_tokens=256, think_s=0.5,
                             routing=routing, replicas=R, num_sessions=20)
        m = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, 1, lambda u, D, a=a: cl.plan_agentic(a, u, D, seed=5),
                         sched=scheduler_settings("vllm"), profile=engine_profile("vllm"), isl=float(a.turn_prompt(5)), osl=64)
        tr = m.trace
        n = tr.counted.sum()
        computed = m.trace.prompt_tokens_computed[0] / n
        want = float(np.mean(a.turn_prompt(np.arange(6)))) - a.expected_hit_tokens()
        res[routing] = (computed, want, m.ttft_s["mean"][0], m.requests_s[0])
    for routing, (computed, want, _, _) in res.items():
        assert computed == pytest.approx(want, rel=0.08), routing
    # At this load a turn's TTFT is one prefill step of its computed tokens (no decode batch beside
    # it): closed form from the same step table, each later turn a hit with probability route_hit.
    a = cl.AgenticCoding(sessions=1, turns=6, first_prompt=2048, output_tokens=64, tool_tokens=256)
    tab = build_step_table(MODEL, MODEL.precision, HW, Layouts.of([1]), engine_profile("vllm"), isl_new=float(a.turn_prompt(5)),
                           prefix=0.0, ctx_lo=0.8 * float(a.turn_prompt(5)), ctx_hi=float(a.turn_prompt(5)) + 64, b_max=2, p_max=8192)
    t = np.arange(6)
    full = a.turn_prompt(t)
    new_tok = np.where(t > 0, full - (a.turn_prompt(t - 1) + 64), full)
    t_full = tab(np.zeros(6), full, np.zeros(6) + tab.ctx_lo)
    t_new = tab(np.zeros(6), new_tok, np.zeros(6) + tab.ctx_lo)

    def closed_form(p_hit):
        return float(np.mean(np.where(t > 0, p_hit * t_new + (1 - p_hit) * t_full, t_full)))

    gain = res["round-robin"][2] - res["kv-aware"][2]
    want_gain = closed_form(1 / R) - closed_form(1.0)
    assert gain == pytest.approx(want_gain, rel=0.2)
    assert res["kv-aware"][3] > res["round-robin"][3]


@pytest.mark.parametrize("C", [16, 64])
def test_disagg_steady_state_obeys_littles_law_under_load(C):
    """Users spread over one request's life (the decode ranks' step, not the prefill worker's table read at
    a decode batch) keep the concurrency in flight: in steady state the simulated requests/s times the
    simulated request life is the clients in flight."""
    prof = engine_profile("sglang")
    link = HW.scaleup.bandwidth_bytes_per_s
    m = simulate_disagg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, Layouts.of([1]), 2, C, _closed(C, prompts=4, warm=1),
                        sched=scheduler_settings("sglang"), profile=prof, link_bytes_per_s=link, isl=ISL, osl=OSL)
    life_s = m.ttft_s["mean"][0] + (OSL - 1) * m.tpot_s["mean"][0]
    assert m.requests_s[0] * life_s == pytest.approx(C, rel=0.15)
    first = m.trace.t_send[0][np.isfinite(m.trace.t_send[0])]
    assert np.sort(first)[C - 1] <= 1.5 * life_s  # every user has started within about one request's life


@pytest.mark.parametrize("isl,osl,C,tp", [(2048, 256, 64, 4), (4096, 512, 16, 2)])
def test_prefill_first_waves_of_fixed_length_clients_match_the_simulation(isl, osl, C, tp):
    """SGLang-style prefill-first scheduling with closed-loop clients of fixed lengths runs in waves: the batch's
    prompts are prefilled in one burst, then the batch decodes with no prompt tokens. The evaluator's wave form
    (Workload.length_range_ratio = 1) matches the step-level simulation of that scheduler where the mixed-step form, built
    for lengths that vary, puts the burst into TPOT instead of TTFT."""
    m, hw = get_model("qwen3-32b"), get_hardware("h100_sxm")
    prof = dict(NEUTRAL_PROFILE, prefill_first=1.0, adp_balance_timeout_iters=0.0, ttft_extra_steps=1.0)
    sched = scheduler_settings("sglang").with_overrides(token_budget=8192)
    c = cl.ClosedLoop(C, cl.Lengths(isl, osl, 1.0), num_prompts=8 * C, first_wave=True, warmup=2 * C)
    sim = simulate_agg(m, m.precision, hw, Layouts.of([tp]), 1, C, lambda users, D: cl.plan_closed(c, users, D), sched=sched,
                       profile=prof, isl=isl, osl=osl, max_batch=np.array([float(C)]))
    wave, mixed = (evaluate_agg(aggregated_raw(m, m.precision, hw, tp, 1, 1, 1, C, Workload(isl, osl, chunk_tokens=8192, length_range_ratio=f)),
                                prof, 1, tp, C) for f in (1.0, None))
    assert float(wave.tpot_s) == pytest.approx(sim.tpot_s["mean"][0], rel=0.10)
    assert float(wave.requests_s) == pytest.approx(sim.requests_s[0], rel=0.05)
    assert float(wave.ttft_s) == pytest.approx(sim.ttft_s["mean"][0], rel=0.25)
    assert float(mixed.ttft_s) < 0.3 * sim.ttft_s["mean"][0]  # the mixed-step form misses the burst in TTFT
    # an engine that mixes prompt chunks into decode steps does not run in waves: fixed lengths change nothing
    vprof = engine_profile("vllm")
    a, b = (evaluate_agg(aggregated_raw(m, m.precision, hw, tp, 1, 1, 1, C, Workload(isl, osl, length_range_ratio=f)), vprof, 1, tp, C)
            for f in (1.0, None))
    assert float(a.ttft_s) == float(b.ttft_s) and float(a.tpot_s) == float(b.tpot_s)


def test_a_smaller_decode_kv_pool_holds_fewer_requests_and_queues_the_rest():
    """``decode_kv_tokens``: the context tokens a decode rank's pool holds (a measured run's own pool). Room for
    8 whole requests on one decode rank at 64 users keeps the others waiting for KV, a pool that holds them all
    does not, and the default is simfront's own pool."""
    C = 64
    link = HW.scaleup.bandwidth_bytes_per_s
    kw = dict(sched=scheduler_settings("sglang"), profile=engine_profile("sglang"), link_bytes_per_s=link, isl=ISL, osl=OSL)
    run = lambda kv: simulate_disagg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, Layouts.of([1]), 1, C,  # noqa: E731
                                     _closed(C, prompts=4, warm=1), decode_kv_tokens=kv, **kw)
    small, large, default = run(8 * (ISL + OSL)), run(4 * C * (ISL + OSL)), run(None)
    assert small.ttft_s["mean"][0] > 3 * large.ttft_s["mean"][0]
    assert small.tpot_s["mean"][0] < large.tpot_s["mean"][0]  # a smaller decode batch
    assert default.ttft_s["mean"][0] == pytest.approx(large.ttft_s["mean"][0], rel=0.05)  # llama-3.1-8b holds 64 here


def test_preempted_request_back_at_the_queue_head_is_not_lost():
    """A KV cache that holds a few of many random-length prompts in chunked prefill: a preempted request goes back to
    the head of the queue ahead of prompts already in prefill, and may wait there while those behind it finish. The
    loop took the queue's head for the finished prompt, so the waiting request left the queue without running and
    the deployment never finished (InferenceMAX's SGLang TP8 run at 512 users of 8k prompts spun to the step limit)."""
    c = cl.ClosedLoop(64, cl.Lengths(ISL, OSL, 0.8), num_prompts=256, first_wave=True)
    sched = scheduler_settings("vllm").with_overrides(token_budget=2048)
    m = simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, 64, lambda u, D: cl.plan_closed(c, u, D),
                     sched=sched, profile=engine_profile("vllm"), isl=ISL, osl=OSL, kv_tokens=np.array([12 * 2048.0]))
    assert m.preemptions[0] > 0
    assert m.trace.counted.sum() == 256 and np.all(np.isfinite(m.trace.t_end[0, :256]))
    assert m.trace.iterations < 20_000


def test_a_prompt_larger_than_the_kv_cache_stops_the_loop_with_a_reason():
    """A deployment that can never finish (its next prompt needs more KV than the rank holds, nothing running) stops at
    once with the reason instead of spinning to the step limit."""
    c = cl.ClosedLoop(2, cl.Lengths(ISL, 64), num_prompts=4)
    with pytest.raises(SimfrontError, match="stalled.*prompt of 1024 tokens waits for a KV cache of 512 tokens"):
        simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, 2, lambda u, D: cl.plan_closed(c, u, D),
                     sched=scheduler_settings("vllm"), profile=engine_profile("vllm"), isl=ISL, osl=64, kv_tokens=np.array([512.0]))


@pytest.mark.parametrize("C", [16, 64, 256])
def test_attention_dp_balance_gate_waits_as_the_evaluator_prices_it(C):
    """TensorRT-LLM's attention-DP balance (attention_dp_config, 60 steps in InferenceMAX's recipes) holds a new prompt
    until every rank holds one or the timeout passes: DeepSeek-R1 DPA8 EP8 on B200 in steady state measured about 1.4 s
    median TTFT at 64 users of 1k prompts (InferenceMAX), where a lone prefill step takes 0.1 s. The simulation's gate
    (one shared by the ranks, started by the first new prompt on any rank) adds to the mean TTFT what the evaluator's
    closed form (serving.adp_balance_wait_s) adds, within 20 %; with the gate off it adds nothing."""
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    isl = osl = 1024
    prof = {**NEUTRAL_PROFILE, "adp_balance_timeout_iters": 60.0}
    raw = aggregated_raw(m, m.precision, hw, 1, 1, 8, 8, C / 8, Workload(isl=isl, osl=osl, chunk_tokens=8192))
    ana_wait = float(evaluate_agg(raw, prof, 1, 8, C).ttft_s - evaluate_agg(raw, {**prof, "adp_balance_timeout_iters": 0.0}, 1, 8, C).ttft_s)
    c = cl.ClosedLoop(C, cl.Lengths(isl, osl), num_prompts=12 * C, first_wave=False, warmup=2 * C)
    sched = scheduler_settings("trtllm")
    assert sched.adp_balance_timeout_iters == 60
    sim = {iters: simulate_agg(m, m.precision, hw, Layouts.of([1], dp=[8], ep=[8]), 1, C, lambda u, D: cl.plan_closed(c, u, D),
                               sched=sched.with_overrides(adp_balance_timeout_iters=iters), profile=prof, isl=isl, osl=osl)
           for iters in (0, 60)}
    sim_wait = sim[60].ttft_s["mean"][0] - sim[0].ttft_s["mean"][0]
    assert ana_wait > 0.5
    assert sim_wait == pytest.approx(ana_wait, rel=0.2)
    no_dp = simulate_agg(m, m.precision, hw, Layouts.of([8], ep=[8]), 1, C, lambda u, D: cl.plan_closed(c, u, D),
                         sched=sched, profile=prof, isl=isl, osl=osl)
    assert no_dp.ttft_s["mean"][0] < 0.3 * sim[60].ttft_s["mean"][0]  # one attention rank: no gate


@pytest.mark.parametrize("C", [4, 32])
def test_request_intake_interval_waits_as_the_evaluator_prices_it(C):
    """SGLang's --scheduler-recv-interval N (InferenceMAX's recipes: 30 at 16 users and more): during pure decode the
    engine takes in new requests every N steps, after a step with prompt tokens at once
    (sglang/srt/managers/scheduler_recv_skipper.py). A request that arrives while the engine decodes waits for the next
    intake, (N - 1) / 2 decode steps on average: at low load the simulated mean TTFT grows by what the evaluator adds,
    within 20 %. Under load the prompts an intake takes in together are prefilled together, which the evaluator's
    closed form leaves out: the simulated wait is then longer, by at most the prefill of the prompts that arrive in
    one interval."""
    osl = 256
    wl = {n: Workload(isl=ISL, osl=osl, chunk_tokens=8192, recv_interval_steps=n) for n in (1, 30)}
    prof = engine_profile("sglang")
    ana = {n: float(evaluate_agg(aggregated_raw(MODEL, MODEL.precision, HW, 1, 1, 1, 1, C, w), prof, 1, 1, C).ttft_s)
           for n, w in wl.items()}
    c = cl.ClosedLoop(C, cl.Lengths(ISL, osl, 0.8), num_prompts=16 * C, first_wave=False, warmup=4 * C)
    runs = {n: simulate_agg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, C, lambda u, D: cl.plan_closed(c, u, D),
                            sched=scheduler_settings("sglang"), profile=prof, isl=ISL, osl=osl, recv_interval=n) for n in (1, 30)}
    sim = {n: r.ttft_s["mean"][0] for n, r in runs.items()}
    # a request held for the next intake is one event, not one loop iteration per decode step
    assert runs[30].trace.iterations < 1.5 * runs[1].trace.iterations
    assert ana[30] - ana[1] > 0.5 * ana[1]
    if C <= 4:
        assert sim[30] - sim[1] == pytest.approx(ana[30] - ana[1], rel=0.2)
    else:
        t_dec = (ana[30] - ana[1]) / 14.5  # the evaluator's (N - 1) / 2 decode steps
        life_s = ana[1] + osl * t_dec  # one request's life, at about the decode step of the batch
        bunch_s = C / life_s * 30 * t_dec * sim[1]  # the prompts arriving in one interval, each about a lone prefill (sim[1])
        assert ana[30] - ana[1] <= sim[30] - sim[1] <= ana[30] - ana[1] + bunch_s


def test_disaggregated_hand_off_overhead_adds_to_every_simulated_ttft():
    """The serving profile's per-request hand-off time of a disaggregated deployment (disagg_overhead_s, which the
    evaluator adds to TTFT) adds the same to each simulated request's TTFT and leaves TPOT alone."""
    link = HW.scaleup.bandwidth_bytes_per_s
    out = {}
    for ov in (0.0, 0.1):
        prof = {**NEUTRAL_PROFILE, "disagg_overhead_s": ov}
        out[ov] = simulate_disagg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, Layouts.of([1]), 1, 4, _closed(4),
                                  sched=scheduler_settings("vllm"), profile=prof, link_bytes_per_s=link, isl=ISL, osl=OSL)
    assert out[0.1].ttft_s["mean"][0] - out[0.0].ttft_s["mean"][0] == pytest.approx(0.1, rel=1e-6)
    assert out[0.1].tpot_s["mean"][0] == pytest.approx(out[0.0].tpot_s["mean"][0], rel=1e-9)


def test_busy_prefill_worker_steps_at_the_profile_prefill_pace():
    """A disaggregated prefill worker's step of several prompts takes the profile's prefill_scale times its cost, as the
    evaluator's prefill queue takes it (serving.finish_prefill); a lone prompt's step is left as it is. Without it the
    simulation's TensorRT-LLM prefill workers (prefill_scale 0.82) ran 1.2x slower than the evaluator's and saturated
    where the runs did not (InferenceMAX line 26, 10,860 users: simulated TTFT 19.4 s, measured 6.2 s; now 6.0 s)."""
    tables = {}
    for scale in (1.0, 0.5):
        prof = {**NEUTRAL_PROFILE, "prefill_scale": scale}
        tables[scale] = build_step_table(MODEL, MODEL.precision, HW, Layouts.of([1]), prof, isl_new=ISL, prefix=0.0,
                                         ctx_lo=ISL, ctx_hi=ISL + 1, b_max=1, p_max=8192, worker_prompts=True)
    lone = [float(tables[s]([0], [ISL], [ISL])[0]) for s in (1.0, 0.5)]
    busy = [float(tables[s]([0], [8 * ISL], [ISL])[0]) for s in (1.0, 0.5)]
    assert lone[1] == pytest.approx(lone[0], rel=1e-9)
    assert busy[1] == pytest.approx(0.5 * busy[0], rel=1e-9)


@pytest.mark.parametrize("C,slots", [(8, 4), (16, 4), (2, 1), (3, 1)])
def test_decode_slot_taken_before_prefill_or_at_transfer_agrees_with_the_evaluator(C, slots):
    """More users than decode slots: the rest wait. SGLang's decode server reserves a request's slot before its
    prefill (the prealloc queue), so a slot is held through the prefill and the transfer too; TensorRT-LLM and vLLM give
    it when the KV arrives. The simulation's TTFT and requests/s agree with the evaluator's closed form in both, within
    2 %, and holding the slot through the prefill serves fewer requests. With one slot the decode pool sits empty while
    the one request's KV is in flight and the next prompt waits for that slot: the loop once stood still there (both
    clocks waiting for each other; `predict --tails` hung on llama-2-70b, 16xMI325X, SGLang, disaggregated)."""
    osl = 256
    prof = dict(NEUTRAL_PROFILE)
    link = HW.scaleup.bandwidth_bytes_per_s
    wl = Workload(isl=ISL, osl=osl)
    pre = finish_prefill(*prefill_raw(MODEL, MODEL.precision, HW, 1, 1, 1, 1, 1, wl, link), prof)
    dec = finish_decode(*decode_raw(MODEL, MODEL.precision, HW, 1, 1, 1, 1, slots, wl), osl, prof)
    c = cl.ClosedLoop(C, cl.Lengths(ISL, osl), num_prompts=8 * C, first_wave=False, warmup=2 * C)
    out = {}
    for at in ("prefill", "transfer"):
        ana = evaluate_disagg(pre, 1, dec, slots, C, osl, 2, slot_at_transfer=at == "transfer")
        sim = simulate_disagg(MODEL, MODEL.precision, HW, Layouts.of([1]), 1, Layouts.of([1]), 1, C,
                              lambda u, D: cl.plan_closed(c, u, D), sched=scheduler_settings("sglang").with_overrides(decode_slot_at=at),
                              profile=prof, link_bytes_per_s=link, decode_max_batch=slots, isl=ISL, osl=osl)
        out[at] = (ana, sim)
    for ana, sim in out.values():
        assert sim.ttft_s["mean"][0] == pytest.approx(float(ana.ttft_s), rel=0.02)
        assert sim.requests_s[0] == pytest.approx(float(ana.requests_s), rel=0.02)
    assert out["prefill"][1].requests_s[0] < out["transfer"][1].requests_s[0]


def test_lone_request_on_an_attention_dp_decode_pool_runs_a_batch_of_one():
    """One client on an attention-DP decode pool of eight ranks: its rank decodes a batch of one, as the evaluator prices
    it (deployment.running_batch: at least one). The pool's mean-field batch per rank (requests / ranks, 1/8 here)
    priced the step of a fraction of a request: simulated TPOT 0.7 of the evaluator's on InferenceMAX's H100 DPA 16
    decode at one to four users (13.3 ms against 19.6 ms; measured 17-19 ms)."""
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    prof = dict(NEUTRAL_PROFILE)
    isl, osl = 1024, 256
    wl = Workload(isl=isl, osl=osl)
    link = hw.scaleup.bandwidth_bytes_per_s
    dec = finish_decode(*decode_raw(m, m.precision, hw, 1, 1, 8, 8, 1, wl), osl, prof)
    sim = simulate_disagg(m, m.precision, hw, Layouts.of([8]), 1, Layouts.of([1], dp=[8], ep=[8]), 1, 1,
                          _closed(1, prompts=3, warm=1, isl=isl, osl=osl), sched=scheduler_settings("sglang"), profile=prof,
                          link_bytes_per_s=link, isl=isl, osl=osl)
    assert sim.tpot_s["mean"][0] == pytest.approx(float(dec.tpot_s), rel=0.03)


def test_fewer_decode_slots_than_prefill_workers_is_left_out_not_run_forever():
    """A deployment with fewer decode slots than prefill workers (one request per rank on one decode rank, two prefill
    workers: the search puts such points at the frontier's low-latency end) gives its representative prefill worker
    under one slot. The loop cannot represent that sharing; it leaves the deployment out (NaN statistics, ``skipped``
    with a reason) and simulates the others, where before it never finished (`predict --tails` hung on phi-4,
    4xMI355X, disaggregated)."""
    link = HW.scaleup.bandwidth_bytes_per_s
    for engine in ("vllm", "sglang"):  # the slot given at the KV transfer, and reserved before the prefill
        sim = simulate_disagg(MODEL, MODEL.precision, HW, Layouts.of([1, 1]), [2, 1], Layouts.of([1, 1]), [1, 1], [2, 2],
                              _closed(2), sched=scheduler_settings(engine), profile=dict(NEUTRAL_PROFILE),
                              link_bytes_per_s=link, decode_max_batch=[1, 4], isl=ISL, osl=64)
        assert list(sim.skipped) == [True, False] and "fewer decode slots than prefill workers" in sim.skipped_why
        assert np.isnan(sim.ttft_s["mean"][0]) and np.isnan(sim.requests_s[0])
        assert np.isfinite(sim.ttft_s["mean"][1]) and sim.requests_s[1] > 0


@pytest.mark.parametrize("fast", [True, False])
def test_a_deployment_that_cannot_move_fails_as_stalled_at_once(fast):
    """No decode slot at all (a dict built by hand; simulate_disagg leaves such deployments out): the prompts are
    prefilled and then nothing can move. Both loops say so after STALL_CHECK_ITERATIONS steps instead of running to
    MAX_LOOP_ITERATIONS (two million steps, minutes)."""
    from simfront.engine_fast import run_fast
    from simfront.engine_loop import STALL_CHECK_ITERATIONS

    ptable, dtable, plan, eng, dis = _disagg_inputs("vllm", [2], ISL, 64, scale=1.0, slots=[0.0], kv_ranks=1.0)
    runner = run_fast if fast else run_engine
    with pytest.raises(SimfrontError, match="stalled"):
        runner(ptable, plan, eng, dtable, dis, max_iterations=10 * STALL_CHECK_ITERATIONS)

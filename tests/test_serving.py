"""Serving-model details: speculative acceptance, TTFT/TPOT structure."""

import numpy as np
import pytest

from simfront.hardware import get_hardware
from simfront.models import apply_precision, get_model
from simfront.deployment import evaluate_agg
from simfront.serving import NO_SPEC, Speculation, Workload, adp_gate_iters, aggregated_raw, decode_in_budget, engine_profile


def aggregated(model, precision, hw, tp, pp, dp, ep, batch, wl, spec=NO_SPEC):
    """One aggregated worker with every batch slot busy, through the deployment evaluator."""
    raw = aggregated_raw(model, precision, hw, tp, pp, dp, ep, batch, wl, spec)
    return evaluate_agg(raw, engine_profile(None), 1, tp * dp * pp, raw.slots)


def test_acceptance_length_iid_matches_leviathan_and_decay_lowers_it():
    a, k = 0.8, 3
    iid = Speculation("mtp", k, a)
    assert iid.accepted_per_step == pytest.approx((1 - a ** (k + 1)) / (1 - a))
    decayed = Speculation("mtp", k, a, position_decay=0.85)
    assert 1.0 < decayed.accepted_per_step < iid.accepted_per_step
    assert NO_SPEC.accepted_per_step == 1.0
    assert Speculation("mtp", 2, 1.0).accepted_per_step == 3.0


def test_more_load_never_lowers_ttft_or_tpot():
    m = get_model("llama-3.1-70b")
    res = aggregated(m, m.native, get_hardware("h100"), 8, 1, 1, 1, [1, 4, 16, 64, 256], Workload(2048, 512))
    assert all(res.tpot_s[i] <= res.tpot_s[i + 1] for i in range(4))
    # TTFT within 3%: a lone prompt is priced at the per-token rate of the arrival group's mixed step, which
    # is a little cheaper per token than a one-prompt step (a known approximation of the mean-field model); from 4
    # requests on, the group is the 3 whole 2,048-token prompts that the 8,192-token budget less the decode tokens
    # holds (2.2 % below the one-prompt step here; 4 prompts and under 1 % while the prompts had the whole budget)
    assert all(res.ttft_s[i] <= res.ttft_s[i + 1] * 1.03 for i in range(4))
    assert res.ttft_s[-1] > 1.5 * res.ttft_s[0]
    assert all(res.output_tok_s[i] < res.output_tok_s[i + 1] for i in range(4))


def test_prefix_hit_cuts_ttft_and_spec_cuts_tpot_at_low_batch():
    m = get_model("deepseek-r1")
    hw = get_hardware("h200")
    base = aggregated(m, m.native, hw, 8, 1, 1, 8, 4, Workload(8192, 1024))
    hit = aggregated(m, m.native, hw, 8, 1, 1, 8, 4, Workload(8192, 1024, prefix_hit=0.8))
    assert hit.ttft_s < base.ttft_s
    mtp = aggregated(m, m.native, hw, 8, 1, 1, 8, 4, Workload(8192, 1024), Speculation("mtp", 1, 0.8, draft_layers=1.0))
    assert mtp.tpot_s < base.tpot_s


def test_arrival_group_is_what_one_step_budget_holds():
    from simfront.serving import arrival_group

    assert list(arrival_group([1, 4, 8, 64], 1024.0, 8192)) == [1, 4, 8, 8]
    assert float(arrival_group(64, 8192.0, 8192)) == 1.0  # a prompt as long as the budget comes alone
    assert float(arrival_group(64, 16384.0, 8192)) == 1.0  # never below one prompt


def test_a_steady_request_prefills_its_own_prompt_and_a_start_up_wave_waits_for_half_the_rest():
    """No arrival-group term (retired in round 37: the measured TTFTs reject a group whose prompts all stream at its
    end): at 8 clients with room for 8 prompts in a step, a steady-state TTFT stays near a lone prompt's (its own
    prefill, the running step, the budget's queue), while a synchronised start-up wave waits for half of the other
    seven prompts, several times a lone prompt."""
    from simfront.serving import NEUTRAL_PROFILE, aggregated_raw, finish_aggregated

    m = get_model("llama-3.1-8b")
    hw = get_hardware("h100")
    steady = finish_aggregated(aggregated_raw(m, m.native, hw, 1, 1, 1, 1, [1, 8], Workload(1024, 128, chunk_tokens=8192)),
                               NEUTRAL_PROFILE).ttft_s
    assert 1.0 < steady[1] / steady[0] < 1.5
    wave = finish_aggregated(aggregated_raw(m, m.native, hw, 1, 1, 1, 1, [1, 8],
                                            Workload(1024, 128, chunk_tokens=8192, startup_wave_share=1.0)), NEUTRAL_PROFILE).ttft_s
    assert wave[0] == pytest.approx(steady[0])  # a lone client has no wave ahead of it
    assert 2.5 < wave[1] / steady[1] < 4.5  # its own prompt plus half of the seven others


def test_adp_balance_wait_closed_forms():
    """Attention-DP balance (TensorRT-LLM attention_dp_config): no wait with one rank or no timeout; a rare
    prompt waits the whole timeout; under heavy arrivals the gate opens once every rank holds a prompt."""
    import math

    from simfront.serving import adp_balance_wait_s

    assert float(adp_balance_wait_s(1, 10.0, 0.02, 60)) == 0.0
    assert float(adp_balance_wait_s(8, 10.0, 0.02, 0)) == 0.0
    slow = float(adp_balance_wait_s(8, 1e-6, 0.02, 60))  # one prompt per ~12 days: the timeout binds, nobody follows
    assert math.isclose(slow, 60 * 0.02, rel_tol=1e-4)
    lam = 1e4  # prompts/s: every rank holds one long before the timeout
    h8 = sum(1.0 / i for i in range(1, 9))
    gate = (8 * h8 - 1.0) / lam
    fast = float(adp_balance_wait_s(8, lam, 0.02, 60))
    assert math.isclose(fast, gate * (1 + lam * gate / 2) / (1 + lam * gate), rel_tol=0.01)
    # more ranks wait longer; a longer timeout never shortens the wait
    assert adp_balance_wait_s(16, 100.0, 0.02, 60) > adp_balance_wait_s(8, 100.0, 0.02, 60)  # cover time binds
    assert adp_balance_wait_s(8, 5.0, 0.02, 120) >= adp_balance_wait_s(8, 5.0, 0.02, 60)


def test_trtllm_attention_dp_ttft_carries_the_balance_wait():
    """The TensorRT-LLM profile carries the recipes' 60-iteration balance timeout; with attention DP its TTFT
    is longer than the same worker's without the gate, by the closed-form wait; TP workers are unaffected."""
    from simfront.models import get_model
    from simfront.hardware import get_hardware
    from simfront.serving import Workload, adp_balance_wait_s, aggregated_raw, engine_profile, finish_aggregated

    prof = engine_profile("trtllm")
    assert prof["adp_balance_timeout_iters"] == 60 and engine_profile("sglang")["adp_balance_timeout_iters"] == 0
    m = get_model("deepseek-r1")
    hw = get_hardware("b200_sxm")
    wl = Workload(isl=1024, osl=1024)
    dpa = aggregated_raw(m, m.native, hw, 1, 1, 8, 8, 8, wl)
    tp = aggregated_raw(m, m.native, hw, 8, 1, 1, 8, 8, wl)
    off = dict(prof, adp_balance_timeout_iters=0.0)
    gated, plain = finish_aggregated(dpa, prof), finish_aggregated(dpa, off)
    assert float(gated.ttft_s) > float(plain.ttft_s) and float(gated.tpot_s) == float(plain.tpot_s)
    rate = dpa.slots / (plain.ttft_s + (dpa.osl - 1) * plain.tpot_s)
    assert np.isclose(float(gated.ttft_s - plain.ttft_s), float(adp_balance_wait_s(8, rate, plain.step_s, 60)), rtol=1e-6)
    assert float(finish_aggregated(tp, prof).ttft_s) == float(finish_aggregated(tp, off).ttft_s)


def test_token_budget_caps_the_running_batch():
    """An aggregated worker whose prompts need more tokens per step than the engine's budget cannot keep its
    batch full: the running batch is what the budget turns over (prompt tokens per step <= budget), every
    step carries prompts, and the worker's throughput is capped accordingly."""
    m = get_model("deepseek-r1")
    hw = get_hardware("h200")
    wl = Workload(8192, 1024, chunk_tokens=2048)
    raw = aggregated_raw(m, m.native, hw, 8, 1, 1, 8, [4, 64, 512], wl)
    steps_per_life = np.ceil(1023 / raw.al) + np.ceil(8192 / 2048)
    prompt_tokens_per_step = raw.batch * 8192 / steps_per_life
    assert np.all(prompt_tokens_per_step <= 2048 * (1 + 1e-9))
    assert raw.batch[0] == 4 and raw.batch[2] < 512  # a small batch runs as asked; a large one is capped
    assert raw.mixed_share[2] == pytest.approx(1.0)
    big = aggregated_raw(m, m.native, hw, 8, 1, 1, 8, [512], Workload(8192, 1024, chunk_tokens=65536))
    assert big.batch[0] == 512  # a budget that holds the prompts leaves the batch alone
    res = evaluate_agg(raw, engine_profile(None), 1, 8, 8 * 512)
    # requests/s can never beat the budget: prompt tokens per second <= budget per mixed step
    assert res.requests_s[2] * 8192 <= 2048 / (res.tpot_s[2] * raw.al) * (1 + 1e-6)


def test_attention_dp_balance_aligns_prefill_steps():
    """With TensorRT-LLM's attention-DP balance the ranks prefill in the same steps: at a load where every rank
    has a prompt within the gate, mixed steps are about as frequent as one rank's prompt steps (not 1 - (1-s)^dp
    of them) and carry every rank's prompts; without a gate, or with one rank, nothing changes."""
    m = get_model("deepseek-r1")
    hw = get_hardware("b200")
    prec = apply_precision(m, "nvfp4")
    loose = Workload(8192, 1024)
    gated = Workload(8192, 1024, adp_gate_iters=adp_gate_iters("trtllm"))
    assert gated.adp_gate_iters > 0 and adp_gate_iters("sglang") == 0 and adp_gate_iters(None) == 0
    b = [2, 64]
    free = aggregated_raw(m, prec, hw, 1, 1, 4, 4, b, loose)
    bal = aggregated_raw(m, prec, hw, 1, 1, 4, 4, b, gated)
    # one rank's share of steps with prompt tokens at batch 64: its prompt tokens per step over what a step carries, the
    # token budget less the batch's 64 decode tokens
    s = 64 * 8192 / (np.ceil(1023 / bal.al) + 1) / (8192 - 64)
    assert free.mixed_share[1] == pytest.approx(1 - (1 - s) ** 4, rel=1e-6)
    assert bal.mixed_share[1] < 1.1 * s  # nearly every rank prefills in the same steps
    assert np.all(bal.mixed_share <= free.mixed_share + 1e-12)  # the gate never adds mixed steps
    assert np.all(bal.mixed_step_s >= free.mixed_step_s - 1e-12)  # but a mixed step carries more ranks' prompts
    one = aggregated_raw(m, prec, hw, 8, 1, 1, 8, b, gated)
    same = aggregated_raw(m, prec, hw, 8, 1, 1, 8, b, loose)
    assert np.allclose(one.mixed_share, same.mixed_share) and np.allclose(one.mixed_step_s, same.mixed_step_s)
    # the aligned worker is faster per output token at high load (fewer steps wait on one rank's prompt)
    tb = evaluate_agg(bal, engine_profile("trtllm"), 1, 4, 4 * 64).tpot_s[1]
    tf = evaluate_agg(free, engine_profile("trtllm"), 1, 4, 4 * 64).tpot_s[1]
    assert tb < tf


def test_decode_tokens_take_the_token_budget_of_a_mixed_step():
    """An engine whose token budget also carries the running requests' decode tokens (policy mixed: vLLM V1,
    TensorRT-LLM) leaves a step's prompt chunk what they do not take: the batch it can keep full is
    budget / (ISL / steps per request + 1 + drafts), and a mixed step's prompt and decode tokens fit the budget. A
    prefill-first engine (SGLang) gives its prompts steps of their own, so the whole budget. Before, the evaluator gave
    prompts the whole budget on every engine; the simulation did not (at 256 requests of 8k prompts per DPA 8 rank with
    a 2,048-token budget its mean TTFT was 7x the evaluator's)."""
    from dataclasses import replace
    m, hw = get_model("llama-3.1-8b"), get_hardware("H100")
    wl = Workload(isl=8192, osl=1024, chunk_tokens=2048)
    assert decode_in_budget("vllm") and decode_in_budget("trtllm") and not decode_in_budget("sglang") and wl.decode_in_budget
    mixed = aggregated_raw(m, m.precision, hw, 1, 1, 1, 1, [16, 256], wl)
    apart = aggregated_raw(m, m.precision, hw, 1, 1, 1, 1, [16, 256], replace(wl, decode_in_budget=False))
    n_life = 1023 + 4  # decode steps after the first token, and the 8,192-token prompt's steps at 2,048 tokens
    assert mixed.batch[1] == pytest.approx(2048 / (8192 / n_life + 1), rel=1e-9)  # 228 of the 256 stay busy
    assert apart.batch[1] == 256 and mixed.batch[0] == apart.batch[0] == 16
    assert np.all(mixed.mixed_tokens + mixed.batch * 1 <= 2048 + 1e-9)  # prompt + decode tokens within the budget
    np.testing.assert_allclose(apart.chunk, 2048)
    np.testing.assert_allclose(mixed.chunk, 2048 - mixed.batch)
    # the evaluator's TTFT then queues the clients the budget cannot keep running
    prof = engine_profile("vllm")
    assert evaluate_agg(mixed, prof, 1, 1, 256).ttft_s[1] > 2 * evaluate_agg(apart, prof, 1, 1, 256).ttft_s[1]


def test_an_engine_that_takes_in_requests_every_n_decode_steps_adds_half_of_them_to_ttft():
    """SGLang --scheduler-recv-interval N: a request arriving during decode waits on average (N - 1) / 2 decode steps
    for the next intake; TPOT and the step are untouched, and N = 1 changes nothing."""
    from dataclasses import replace

    from simfront.serving import finish_aggregated, mean_step_s

    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    prof = engine_profile("sglang")
    base = Workload(isl=1024, osl=1024, length_range_ratio=0.8)
    raws = {n: aggregated_raw(m, m.precision, hw, 8, 1, 1, 8, np.array([16.0, 64.0]), replace(base, recv_interval_steps=n))
            for n in (1, 10, 30)}
    res = {n: finish_aggregated(r, prof) for n, r in raws.items()}
    t_dec = mean_step_s(raws[1], prof)[0]
    for n in (10, 30):
        assert np.allclose(res[n].ttft_s - res[1].ttft_s, 0.5 * (n - 1) * t_dec)
        assert np.allclose(res[n].tpot_s, res[1].tpot_s)


def test_a_request_decodes_beside_the_other_requests_prompts_only():
    """A request's own prompt is prefilled before its first token (inside TTFT); between its tokens only the other
    requests' prompts pass. Alone on its worker it decodes at the decode-only step; with b requests in flight the
    mixed steps it sees are (b - 1) / b of the worker's; and each client's cycle (TTFT + decode) then holds its
    own prefill once, so the worker's request rate obeys Little's law."""
    from simfront.serving import finish_aggregated, mean_step_s, others_mixed_share

    m = get_model("llama-3.1-70b")
    hw = get_hardware("h100")
    prof = engine_profile(None)
    wl = Workload(8192, 128)
    lone = aggregated_raw(m, m.native, hw, 8, 1, 1, 1, 1, wl)
    t_dec, t_mix, _ = mean_step_s(lone, prof)
    assert float(lone.mixed_share) > 0  # the worker does prefill some steps...
    assert float(finish_aggregated(lone, prof).tpot_s) == pytest.approx(float(t_dec))  # ...but never between its tokens
    raw = aggregated_raw(m, m.native, hw, 8, 1, 1, 1, 8, wl)
    t_dec, t_mix, _ = mean_step_s(raw, prof)
    seen = float(others_mixed_share(raw))
    assert seen == pytest.approx(float(raw.mixed_share) * 7 / 8)
    assert float(finish_aggregated(raw, prof).tpot_s) == pytest.approx(float((1 - seen) * t_dec + seen * t_mix))
    res = aggregated(m, m.native, hw, 8, 1, 1, 1, 8, wl)
    assert float(res.requests_s) == pytest.approx(8.0 / float(res.ttft_s + (wl.osl - 1) * res.tpot_s), rel=1e-6)

"""Serving-model details: speculative acceptance, TTFT/TPOT structure."""

import pytest

from simfront.hardware import get_hardware
from simfront.models import get_model
from simfront.deployment import evaluate_agg
from simfront.serving import NO_SPEC, Speculation, Workload, aggregated_raw, engine_profile


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
    # TTFT within 1%: a lone prompt is priced at the per-token rate of the arrival group's mixed step, which
    # is a little cheaper per token than a one-prompt step (a known approximation of the mean-field model)
    assert all(res.ttft_s[i] <= res.ttft_s[i + 1] * 1.01 for i in range(4))
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


def test_grouped_arrivals_share_one_prefill_step():
    """Closed-loop clients that return together are prefilled together: with room for 8 prompts in
    the step budget, TTFT at 8 clients is about one step of 8 prompts, several times a lone prompt."""
    from simfront.serving import NEUTRAL_PROFILE, aggregated_raw, finish_aggregated

    m = get_model("llama-3.1-8b")
    hw = get_hardware("h100")
    raw = aggregated_raw(m, m.native, hw, 1, 1, 1, 1, [1, 8], Workload(1024, 128, chunk_tokens=8192))
    ttft = finish_aggregated(raw, NEUTRAL_PROFILE).ttft_s
    assert 4.0 < ttft[1] / ttft[0] < 9.0
    small = aggregated_raw(m, m.native, hw, 1, 1, 1, 1, [8], Workload(1024, 128, chunk_tokens=2048))
    assert finish_aggregated(small, NEUTRAL_PROFILE).ttft_s[0] < ttft[1]  # a smaller budget splits the group

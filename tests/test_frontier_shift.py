"""simfront.pareto.frontier_shift: the verdict rule `frontier --compare` and scripts/compare_arms.py share."""

from __future__ import annotations

import numpy as np

from simfront.pareto import frontier_shift

X = np.array([10.0, 20.0, 40.0, 80.0])
Y = np.array([800.0, 400.0, 200.0, 100.0])


def test_uniform_gain_pushes_out_and_loss_pulls_in():
    up = frontier_shift(X, Y, X, 1.5 * Y)
    assert up["verdict"] == "pushes the frontier out" and np.isclose(up["median_gain"], 0.5)
    down = frontier_shift(X, Y, X, 0.5 * Y)
    assert down["verdict"] == "pulls the frontier in" and np.isclose(down["median_gain"], -0.5)


def test_noise_is_the_same_frontier_and_crossing_is_a_trade():
    assert frontier_shift(X, Y, X, 1.02 * Y)["verdict"] == "moves configurations along the same frontier"
    crossing = frontier_shift(X, Y, X, Y * np.array([2.0, 2.0, 0.5, 0.5]))
    assert crossing["verdict"].startswith("trades")


def test_disjoint_ranges_have_no_verdict():
    assert frontier_shift(X, Y, X * 100, Y)["verdict"] == "disjoint"


def test_compare_arms_pairs_one_deployment_at_one_load_with_and_without_mtp():
    """scripts/compare_arms.py's paired table: two runs of one deployment and load, one with MTP, give the measured and the
    predicted TPOT speedup of MTP; a run with no MTP twin is not paired; the trend bins them by concurrency."""
    import importlib.util
    from pathlib import Path

    from simfront.ingest.schema import MeasuredPoint

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("compare_arms", root / "scripts" / "compare_arms.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = dict(model="deepseek-ai/DeepSeek-R1", gpu="B200", num_gpus=8, engine="trtllm", mode="agg", tp=8, ep=8, attention_dp=1,
                precision="fp8", isl=1024, osl=1024, concurrency=4, source_file="test.csv", line=1, format="offline_csv")
    stp = MeasuredPoint(**base, tpot_ms=15.0)
    mtp = MeasuredPoint(**base, tpot_ms=7.5, spec_decoding="mtp", spec_k=3)
    lone = MeasuredPoint(**{**base, "concurrency": 64}, tpot_ms=30.0)
    pairs = mod.paired_spec([stp, mtp, lone])
    assert len(pairs) == 1 and pairs[0]["concurrency"] == 4 and pairs[0]["spec_k"] == 3
    assert pairs[0]["measured_speedup"] == 2.0 and 1.0 < pairs[0]["predicted_speedup"] < 4.0
    assert np.isclose(pairs[0]["predicted_over_measured"], pairs[0]["predicted_speedup"] / 2.0, atol=1e-3)
    assert pairs[0]["same_campaign"] and pairs[0]["runs_with"] == [("?", "?")]  # no date or release given: one unknown campaign
    trend = mod.paired_trend(pairs)
    assert [r["concurrency"] for r in trend] == ["1-8"] and trend[0]["pairs"] == 1


def test_compare_arms_pairs_experts_spread_against_sliced_at_one_load():
    """scripts/compare_arms.py's EP table: two aggregated runs of one load that differ only in EP give TPOT(EP) / TPOT(TP)
    measured and predicted; a disaggregated run or one with no twin is not paired; the summary groups by engine and
    precision."""
    import importlib.util
    from pathlib import Path

    from simfront.ingest.schema import MeasuredPoint

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("compare_arms", root / "scripts" / "compare_arms.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = dict(model="deepseek-ai/DeepSeek-R1", gpu="B200", num_gpus=8, engine="trtllm", mode="agg", tp=8, attention_dp=1,
                precision="fp8", isl=1024, osl=1024, concurrency=4, source_file="test.csv", line=1, format="offline_csv")
    tp = MeasuredPoint(**base, ep=1, tpot_ms=10.0)
    ep = MeasuredPoint(**base, ep=8, tpot_ms=15.0)
    lone = MeasuredPoint(**{**base, "concurrency": 64}, ep=8, tpot_ms=30.0)
    mtp = MeasuredPoint(**base, ep=1, tpot_ms=6.0, spec_decoding="mtp", spec_k=3)  # another deployment: drafts differ
    pairs = mod.paired_ep([tp, ep, lone, mtp])
    assert len(pairs) == 1 and pairs[0]["concurrency"] == 4 and pairs[0]["measured"] == 1.5
    assert 0.5 < pairs[0]["predicted"] < 2.0
    assert np.isclose(pairs[0]["predicted_over_measured"], pairs[0]["predicted"] / 1.5, atol=1e-3)
    [summary] = mod.pair_summary(pairs)
    assert (summary["engine"], summary["precision"], summary["pairs"]) == ("trtllm", "fp8", 1)


def test_compare_arms_groups_layout_classes_of_one_engines_aggregated_runs():
    """scripts/compare_arms.py's layout arms: aggregated runs of one engine, GPU, precision and ISL/OSL measured with TP,
    with TP+EP and with attention-DP + EP are compared class against class (TP the baseline); disaggregated runs carry
    no layout class, and another engine's runs form their own pair."""
    import importlib.util
    from pathlib import Path

    from simfront.ingest.schema import MeasuredPoint

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("compare_arms", root / "scripts" / "compare_arms.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = dict(model="deepseek-ai/DeepSeek-R1", gpu="B200", num_gpus=8, engine="trtllm", mode="agg", tp=8, attention_dp=1,
                precision="fp8", isl=1024, osl=1024, source_file="test.csv", line=1, format="offline_csv")
    pts = [MeasuredPoint(**{**base, "concurrency": c}, ep=1, tok_s_per_user=u, output_tok_s_per_gpu=g)
           for c, u, g in ((4, 100.0, 50.0), (64, 50.0, 400.0))]
    pts += [MeasuredPoint(**{**base, "concurrency": c}, ep=8, tok_s_per_user=u, output_tok_s_per_gpu=g)
            for c, u, g in ((4, 90.0, 40.0), (64, 45.0, 300.0))]  # EP below TP at every tok/s/user: pulls the frontier in
    pts += [MeasuredPoint(**{**base, "concurrency": 64, "mode": "disagg"}, ep=8, tok_s_per_user=80.0, output_tok_s_per_gpu=900.0)]
    pts += [MeasuredPoint(**{**base, "concurrency": 64, "engine": "sglang"}, ep=1, tok_s_per_user=50.0, output_tok_s_per_gpu=400.0)]
    assert [mod._arm_of(p, "layout") for p in pts] == ["tp", "tp", "tp+ep", "tp+ep", None, "tp"]
    arms = [a for a in mod.measured_arms(pts, "b200_sxm") if a["knob"] == "layout"]
    assert len(arms) == 1 and arms[0]["values"] == ("tp", "tp+ep") and arms[0]["engine"] == "trtllm"
    assert arms[0]["measured"]["verdict"] == "pulls the frontier in" and arms[0]["measured_points"] == [2, 2]

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

"""Tail latencies of frontier points (step-level simulation spread around the evaluator's means)."""

from __future__ import annotations

import numpy as np
import pytest

from simfront import api
from simfront.errors import SimfrontError
from simfront.tails import scaled_tails


def test_tails_on_frontier_points_are_ordered_and_centred_on_the_means():
    res = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], tails=True)
    for p in res.frontier:
        assert p.ttft_p50_ms <= p.ttft_p90_ms <= p.ttft_p99_ms
        assert p.tpot_p50_ms <= p.tpot_p90_ms <= p.tpot_p99_ms
        assert p.tpot_p99_ms >= 0.95 * p.tpot_ms  # the tail sits at or above the mean, not below it
    assert any("simulation" in n for n in res.notes)


def test_sla_percentile_is_stricter_than_the_mean():
    mean = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], tpot_ms=12.5)
    p99 = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], tpot_ms=12.5, sla_percentile=99)
    assert mean.best_under_sla is not None
    if p99.best_under_sla is not None:
        assert p99.best_under_sla.tpot_p99_ms <= 12.5
        assert p99.best_under_sla.tok_s_gpu <= mean.best_under_sla.tok_s_gpu * 1.0001


def test_scaled_tails_keep_the_evaluator_mean():
    sim = {"ttft_mean_ms": np.array([100.0]), "tpot_mean_ms": np.array([10.0]), "ttft_p50_ms": np.array([90.0]),
           "ttft_p90_ms": np.array([150.0]), "ttft_p99_ms": np.array([300.0]), "tpot_p50_ms": np.array([9.0]),
           "tpot_p90_ms": np.array([12.0]), "tpot_p99_ms": np.array([20.0])}
    out = scaled_tails(sim, [200.0], [5.0])
    assert out["ttft_p99_ms"][0] == pytest.approx(600.0) and out["tpot_p50_ms"][0] == pytest.approx(4.5)


def test_bad_percentile_is_one_line_error():
    with pytest.raises(SimfrontError, match="50, 90, 99"):
        api.predict("llama-3.1-8b", "1xH100", sla_percentile=95)


def test_tails_run_every_frontier_point_on_the_fast_loop(monkeypatch):
    """predict --tails simulates its points (fixed lengths, closed loop, a KV cache that holds every user)
    without the request-slot loop: one vectorised fast simulation per serving mode."""
    import simfront.simulate as sim

    calls = []
    real_fast = sim.run_fast

    def no_slots(*a, **k):
        raise AssertionError("run_engine called for a tails point")

    def counting_fast(*a, **k):
        calls.append(a[1].isl.shape[0])
        return real_fast(*a, **k)

    monkeypatch.setattr(sim, "run_engine", no_slots)
    monkeypatch.setattr(sim, "run_fast", counting_fast)
    res = api.predict("llama-3.1-70b", "8xH100", tails=True)
    assert len(calls) <= 2 and sum(calls) == len(res.frontier)
    assert all(p.ttft_p99_ms is not None and p.tpot_p99_ms is not None for p in res.frontier)


def test_goodput_counts_the_requests_within_the_sla_and_never_exceeds_the_throughput():
    """goodput_requests_s: the whole requests/s when every request meets loose bounds, none when the TPOT bound is
    below every point's TPOT, never more than the point's requests/s, and no less for a looser bound."""
    from simfront import api

    def points(**sla):
        res = api.predict("llama-3.1-8b", "1xH100", modes=["agg"], tails=True, **sla)
        return [(p.requests_s, p.goodput_requests_s, p.ttft_ms, p.tpot_ms) for p in res.frontier]

    loose = points(ttft_ms=1e7, tpot_ms=1e7)
    assert all(g == pytest.approx(r, rel=1e-3) for r, g, _, _ in loose)
    none = points(tpot_ms=0.1)
    assert all(g == 0.0 for _, g, _, _ in none)
    tight, looser = points(ttft_ms=120, tpot_ms=8), points(ttft_ms=240, tpot_ms=16)
    assert all(0.0 <= g <= r * (1 + 1e-9) for r, g, _, _ in tight + looser)
    assert all(b[1] >= a[1] - 1e-9 for a, b in zip(tight, looser))
    # a point whose mean TPOT is well inside the bound serves (nearly) all of its requests within it
    inside = [(r, g) for r, g, t, p in looser if p < 0.5 * 16 and t < 0.5 * 240]
    assert inside and all(g == pytest.approx(r, rel=0.05) for r, g in inside)
    # without an SLA the field stays null
    assert all(p.goodput_requests_s is None for p in api.predict("llama-3.1-8b", "1xH100", modes=["agg"], tails=True).frontier)


def test_predict_table_shows_tail_and_goodput_columns_only_when_computed(capsys):
    from cli_runner import run_cli

    base = ["predict", "-m", "llama-3.1-8b", "-g", "1xH100", "--mode", "agg"]
    code, out, _ = run_cli(base + ["--tails", "--tpot", "12"], capsys)
    assert code == 0 and "TPOT p99" in out and "goodput req/s" in out
    code, out, _ = run_cli(base + ["--tails"], capsys)
    assert code == 0 and "TPOT p99" in out and "goodput" not in out
    code, out, _ = run_cli(base, capsys)
    assert code == 0 and "p99" not in out


def test_predict_table_says_when_it_thins_the_frontier(capsys):
    """The table shows a thinned 8-15 rows of a longer frontier and says how many of how many; --all shows every one."""
    import re

    from cli_runner import run_cli

    base = ["predict", "-m", "kimi-k3", "-g", "16xB200"]
    code, out, _ = run_cli(base, capsys)
    total = int(re.search(r"(\d+) on the frontier", out).group(1))
    shown = re.search(r"(\d+) of the (\d+) frontier points \(--all shows every one\)", out)
    assert code == 0 and shown and int(shown.group(2)) == total and int(shown.group(1)) < total
    code, out, _ = run_cli(base + ["--all"], capsys)
    assert code == 0 and "frontier points (--all" not in out
    assert sum(1 for line in out.splitlines() if re.match(r"^[ *][ ~](TP|\d+P\[)", line)) == total


def test_points_the_simulation_leaves_out_are_named_in_a_note(monkeypatch):
    """A frontier point the simulation cannot represent keeps no tails (None in the JSON) and predict says how many
    and why (simulate_disagg leaves out deployments with fewer decode slots than prefill workers)."""
    import simfront.tails as tails

    real = tails.simulate_points

    def leave_first_out(*a, **k):
        out = real(*a, **k)
        for f in tails.TAIL_FIELDS:
            out[f][0] = np.nan
        out["unsimulated"] = {0: "a reason"}
        return out

    monkeypatch.setattr(tails, "simulate_points", leave_first_out)
    res = api.predict("llama-3.1-8b", "1xH100", modes=["agg"], tails=True)
    assert res.frontier[0].ttft_p99_ms is None and res.frontier[-1].ttft_p99_ms is not None
    assert any(n.startswith(f"1 of the {len(res.frontier)} frontier points has no simulated tails: a reason") for n in res.notes)


@pytest.mark.parametrize("mode,gpus", [("agg", "1xH100"), ("disagg", "2xH100")])
def test_tails_simulate_the_workloads_prefix_cache_hits(mode, gpus):
    """The simulation behind --tails computes only the uncached share of each prompt, as the evaluator does: with 90 %
    of every 8k prompt cached, a lone request's simulated TTFT falls about as much as the evaluator's (before, the
    simulation prefilled whole prompts and its spread was a different workload's)."""
    from simfront.hardware import parse_gpus
    from simfront.models import get_model
    from simfront.serving import Workload, engine_profile
    from simfront.tails import simulate_points

    ttft = {}
    for hit in (0.0, 0.9):
        res = api.predict("llama-3.1-8b", gpus, isl=8192, osl=256, prefix_hit=hit, modes=[mode])
        pts = res.points
        i = int(np.nonzero((pts["concurrency"] == 1) & (pts["precision"] == "bf16"))[0][0])
        out = simulate_points(get_model("llama-3.1-8b"), parse_gpus(gpus), Workload(isl=8192, osl=256, prefix_hit=hit),
                              pts, [i], engine_profile(None))
        ttft[hit] = (out["ttft_mean_ms"][0], pts["ttft_ms"][i])  # (simulated, evaluator)
    sim_ratio = ttft[0.9][0] / ttft[0.0][0]
    eval_ratio = ttft[0.9][1] / ttft[0.0][1]
    assert sim_ratio < 0.6  # a tenth of the prompt computed (attention over the cached part and the hand-off still cost)
    assert 0.5 < sim_ratio / eval_ratio < 2.0


def test_tails_note_names_the_simulated_workload():
    """The note beside the percentiles says what the simulated clients sent: fixed lengths by default, a benchmark's
    length spread and the prefix-cache share where the workload has them."""
    plain = api.predict("llama-3.1-8b", "1xH100", modes=["agg"], tails=True)
    note = next(n for n in plain.notes if "step-level simulation" in n)
    assert "fixed lengths" in note and "prefix cache" not in note
    spread = api.predict("llama-3.1-8b", "1xH100", modes=["agg"], tails=True, prefix_hit=0.5, random_range_ratio=0.8)
    note = next(n for n in spread.notes if "step-level simulation" in n)
    assert "lengths uniform in [0.8 L, L]" in note and "50% of each prompt from the prefix cache" in note


def test_points_of_very_different_loads_are_simulated_in_groups_with_the_same_results(monkeypatch):
    """Where one simulation of all chosen points would be mostly padding (one point's clients send far more requests
    than the others'), the points run in groups of similar concurrency; each point's percentiles are those of the one
    run (the points of a run never interact). The padding bound is lowered here so that a small search shows it."""
    import simfront.tails as tails
    from simfront.hardware import parse_gpus
    from simfront.models import get_model
    from simfront.serving import Workload, engine_profile

    res = api.predict("llama-3.1-8b", "2xH100", isl=1024, osl=128)
    pts = res.points
    conc = np.asarray(pts["concurrency"], float)
    idx = [int(np.argmin(conc)), int(np.argmax(conc)), *np.nonzero((conc > 8) & (conc < 64))[0][:6].tolist()]
    assert len(set(idx)) == len(idx) == 8 and conc[idx].max() >= 16 * conc[idx].min()
    args = (get_model("llama-3.1-8b"), parse_gpus("2xH100"), Workload(isl=1024, osl=128), pts, idx, engine_profile(None))
    one = tails.simulate_points(*args)
    runs = []
    real_agg, real_disagg = tails.simulate_agg, tails.simulate_disagg
    monkeypatch.setattr(tails, "simulate_agg", lambda *a, **k: runs.append(np.size(a[3].tp)) or real_agg(*a, **k))
    monkeypatch.setattr(tails, "simulate_disagg", lambda *a, **k: runs.append(np.size(a[3].tp)) or real_disagg(*a, **k))
    monkeypatch.setattr(tails, "PADDED_REQUESTS_MAX", 0)
    grouped = tails.simulate_points(*args)
    assert len(runs) > 2 and sum(runs) == len(idx)  # several runs, every point in one of them
    for k in tails.TAIL_FIELDS + tails.SHAPE_FIELDS + ("requests_s",):
        assert np.allclose(grouped[k], one[k], rtol=1e-12, equal_nan=True), k


def test_running_deployments_of_far_apart_loads_in_bands_changes_no_number(monkeypatch):
    """simulate_trace steps deployments of far fewer users than the largest apart (only the cost changes): forcing the
    bands on (or off) leaves every frontier point's tails as they were, and the general loop runs once per band."""
    import simfront.simulate as sm

    calls = []
    run = sm.run_engine
    monkeypatch.setattr(sm, "run_engine", lambda *a, **k: calls.append(len(a[1].users)) or run(*a, **k))

    def tails(min_slots):
        monkeypatch.setattr(sm, "BAND_MIN_SLOTS", min_slots)
        calls.clear()
        res = api.predict("mixtral-8x7b", "8xl40s", modes=["disagg"], tails=True, isl=128, osl=64)  # a KV cache that fills
        return [(p.ttft_p99_ms, p.tpot_p99_ms, p.ttft_p50_ms) for p in res.frontier], list(calls)

    banded, band_calls = tails(0)
    whole, whole_calls = tails(float("inf"))
    assert len(band_calls) > 1 and len(whole_calls) == 1 and sum(band_calls) == whole_calls[0]
    assert banded == whole and sum(t[0] is not None for t in banded) >= 4

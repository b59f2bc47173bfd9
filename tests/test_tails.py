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

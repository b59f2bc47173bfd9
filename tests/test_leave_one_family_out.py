"""The band helpers of scripts/leave_one_family_out.py: symmetric per-op half-width sized on held-out residuals."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_spec = importlib.util.spec_from_file_location(
    "leave_one_family_out", Path(__file__).resolve().parent.parent / "scripts" / "leave_one_family_out.py")
lofo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lofo)


def test_halfwidth_holds_the_target_share_of_the_rows_it_was_sized_on():
    rng = np.random.default_rng(1)
    held = rng.normal(0.1, 0.3, 4000)
    d = {"heldout": held, "median": 0.05}
    h = lofo.fit_halfwidth(d)
    assert lofo.halfwidth_coverage(held, 0.05, h) == pytest.approx(lofo.TARGET_COVERAGE, abs=0.005)
    # sized on one sample, it transfers to another draw of the same spread, and not to a wider one
    other = rng.normal(0.1, 0.3, 4000)
    assert lofo.halfwidth_coverage(other, 0.05, h) == pytest.approx(0.8, abs=0.03)
    assert lofo.halfwidth_coverage(rng.normal(0.1, 0.6, 4000), 0.05, h) < 0.6


def test_halfwidth_ignores_unpredicted_rows():
    held = np.array([0.0, 0.1, -0.1, np.nan, np.inf, 0.2])
    assert np.isfinite(lofo.fit_halfwidth({"heldout": held, "median": 0.0}))
    assert lofo.halfwidth_coverage(held, 0.0, 0.15) == pytest.approx(3 / 4)


def test_repeat_spread_measures_the_gap_between_rows_of_one_configuration():
    cols = {"dtype": np.array(["a", "a", "a", "b"]), "num_tokens": np.array([8, 8, 16, 8]),
            "latency_us": np.array([10.0, 30.0, 5.0, 7.0])}
    n, spread = lofo.repeat_spread(cols, np.ones(4, dtype=bool))
    # one configuration has two rows (10 and 30 us, mean 20): each is 50 % off the pair mean
    assert n == 1 and spread == pytest.approx(50.0)
    # rows outside the selection do not count
    assert lofo.repeat_spread(cols, np.array([True, False, True, True]))[0] == 0


def test_pooled_band_counts_each_direction_with_its_own_band():
    held_a = np.array([0.0, 0.05, 0.5, -0.5])  # band [-0.1, 0.1]: 2 of 4 inside
    held_b = np.array([0.0, 0.3, 0.35, 2.0])  # band [0.2, 0.4]: 2 of 4 inside, nothing of a's band
    results = {("x", "y"): {"op": {"heldout": held_a, "p10": -0.1, "p90": 0.1, "median": 0.0}},
               ("y", "x"): {"op": {"heldout": held_b, "p10": 0.2, "p90": 0.4, "median": 0.3}}}
    zero = {("x", "y"): {"op": 0.0}, ("y", "x"): {"op": 0.0}}
    half = {("x", "y"): {"op": 0.1}, ("y", "x"): {"op": 0.1}}
    lines = lofo.pooled_band_lines(results, zero, {"op": 0.0}, half)
    row = lines[-1]  # the table's one data row (op "op")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "8"
    assert cells[2].startswith("50.0") and cells[3].startswith("50.0")
    # symmetric half-width 0.1 around each direction's median: a's 0 and 0.05, b's 0.3 and 0.35
    assert cells[4].startswith("50.0")


def test_two_kernel_rows_are_scored_three_ways():
    meas = np.array([10.0, 20.0, 10.0, 10.0])
    # kernel 0 (fast) predicts 10 everywhere; kernel 1 (slow) 20, and exists on the first two rows only
    paths = np.array([[10.0, 10.0, 10.0, 10.0], [20.0, 20.0, np.inf, np.inf]])
    pred = paths.min(axis=0)
    results = {("x", "y"): {"moe": {"heldout": np.log(meas / pred), "p10": 0.0, "p90": 0.0, "median": 0.0,
                                     "pred": pred, "meas": meas, "paths": paths}}}
    data = {"moe": {"y": {"num_tokens": np.array([1, 1, 2, 3]), "latency_us": meas}}}
    row = lofo.two_kernel_lines(results, data)[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    # headline: row 2 was timed on the slow kernel (20 us) and scores 50 % against the faster one
    assert cells[3] == "2" and cells[4] == "12.5" and cells[5] == "25.0"
    # one-kernel rows only, and the two-kernel rows on their nearer kernel: exact
    assert cells[6] == "0.0" and cells[7] == "0.0"
    # the configuration timed twice (rows 1 and 2): 10 and 20 us, each a third off the pair mean
    assert cells[8] == "1" and cells[9] == "33.3"

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

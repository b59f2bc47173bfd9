"""Pareto frontier, SLA filter, knee, thinning."""

import numpy as np
from hypothesis import given, settings, strategies as st

from simfront.pareto import interp_frontier, knee_index, pareto_mask, sla_mask, thin_frontier


def test_simple_frontier():
    x = np.array([1, 2, 3, 4, 2.5])
    y = np.array([10, 8, 5, 1, 4])
    m = pareto_mask(x, y)
    assert m.tolist() == [True, True, True, True, False]


def test_duplicates_and_ties_keep_one():
    x = np.array([1.0, 1.0, 2.0])
    y = np.array([5.0, 5.0, 5.0])
    m = pareto_mask(x, y)
    assert m.sum() == 1 and m[2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 1e4), st.floats(0.1, 1e4)), min_size=1, max_size=80))
def test_frontier_points_are_non_dominated_and_others_are_dominated(pts):
    x = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    m = pareto_mask(x, y)
    assert m.any()
    for i in range(x.size):
        dominated = np.any((x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i])))
        if m[i]:
            assert not dominated
        else:  # either dominated or an exact duplicate of a kept point
            dup = np.any(m & (x == x[i]) & (y == y[i]))
            assert dominated or dup


def test_sla_mask():
    pts = {"tok_s_gpu": np.array([1, 2, 3.0]), "ttft_ms": np.array([100, 3000, 500.0]),
           "tpot_ms": np.array([10, 20, 50.0]), "tok_s_user": np.array([100, 50, 20.0])}
    assert sla_mask(pts, ttft_ms=1000, tpot_ms=30).tolist() == [True, False, False]
    assert sla_mask(pts, min_tok_s_user=30).tolist() == [True, True, False]


def test_knee_and_thin_and_interp():
    x = np.array([1, 2, 4, 8, 16, 32.0])
    y = np.array([1000, 990, 950, 500, 100, 10.0])
    k = knee_index(x, y)
    assert 1 <= k <= 3
    idx = thin_frontier(np.arange(1, 100.0), 12)
    assert 8 <= idx.size <= 12 and idx[0] == 0 and idx[-1] == 98
    assert interp_frontier(x, y, [3, 40]).tolist()[0] == 950 and np.isnan(interp_frontier(x, y, [40])[0])

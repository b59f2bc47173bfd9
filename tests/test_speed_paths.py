"""The fast paths of the search give what the plain computations give (issue 16, speed)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront import pareto
from simfront.search import _append, _columns


def _brute_pareto(x, y):
    """Kept: not strictly dominated, and the first of its exact duplicates."""
    keep = np.zeros(x.size, dtype=bool)
    for i in range(x.size):
        dom = (x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i]))
        dup_before = (x[:i] == x[i]) & (y[:i] == y[i])
        keep[i] = not dom.any() and not dup_before.any()
    return keep


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), min_size=1, max_size=80))
def test_pareto_prefilter_matches_brute_force(pts):
    x = np.array([p[0] for p in pts], float)
    y = np.array([p[1] for p in pts], float)
    old = pareto.PARETO_PREFILTER_MIN_POINTS, pareto.PARETO_SAMPLE_STRIDE
    try:
        pareto.PARETO_PREFILTER_MIN_POINTS, pareto.PARETO_SAMPLE_STRIDE = 1, 3  # the sampled path on small sets
        fast = pareto.pareto_mask(x, y)
        pareto.PARETO_PREFILTER_MIN_POINTS = 10**12  # the plain sort
        plain = pareto.pareto_mask(x, y)
    finally:
        pareto.PARETO_PREFILTER_MIN_POINTS, pareto.PARETO_SAMPLE_STRIDE = old
    np.testing.assert_array_equal(fast, plain)
    np.testing.assert_array_equal(fast, _brute_pareto(x, y))


def test_pareto_prefilter_large_frontier_and_non_finite():
    rng = np.random.default_rng(7)
    x = rng.random(120_000)
    y = 1.0 / (x + 0.01) * (1.0 + 0.02 * rng.random(x.size))  # a long frontier, not a handful of points
    x[::1000] = np.round(x[::1000], 2)  # ties in x
    fast = pareto.pareto_mask(x, y)
    saved = pareto.PARETO_PREFILTER_MIN_POINTS
    try:
        pareto.PARETO_PREFILTER_MIN_POINTS = 10**12
        plain = pareto.pareto_mask(x, y)
        y2 = y.copy()
        y2[5] = np.nan  # not finite: the plain sort's own verdicts
        want = pareto.pareto_mask(x, y2)
    finally:
        pareto.PARETO_PREFILTER_MIN_POINTS = saved
    assert fast.sum() > 100
    np.testing.assert_array_equal(fast, plain)
    np.testing.assert_array_equal(pareto.pareto_mask(x, y2), want)


def test_append_gathers_like_a_broadcast_copy():
    rng = np.random.default_rng(3)
    cols = {k: [] for k in ("a", "b", "c", "d", "e", "s")}
    want = {k: [] for k in cols}
    for shape in ((5, 7), (1, 4), (6, 1), (3, 3)):
        mask = rng.random(shape) > 0.4
        vals = dict(a=rng.random((shape[0], 1)), b=rng.random((1, shape[1])), c=rng.random(shape), d=2.5,
                    e=rng.random(shape[1]), s=f"label{shape[0] % 2}")
        _append(cols, mask, **vals)
        for k, v in vals.items():
            want[k].append(np.full(int(mask.sum()), v, dtype=object) if isinstance(v, str)
                           else np.broadcast_to(np.asarray(v, float), shape)[mask])
    got = _columns(cols)
    for k in cols:
        w = np.concatenate(want[k])
        assert got[k].dtype == w.dtype
        np.testing.assert_array_equal(got[k], w)
    assert set(got["s"]) == {"label0", "label1"} and isinstance(got["s"][0], str)


def test_points_join_on_read_and_take_rows_like_the_joined_columns():
    from simfront.search import Points

    rng = np.random.default_rng(5)
    cols = {k: [] for k in ("x", "s")}
    for shape in ((4, 6), (3, 2), (5, 5)):
        _append(cols, rng.random(shape) > 0.3, x=rng.random(shape), s=f"p{shape[0]}")
    joined = _columns({k: list(v) for k, v in cols.items()})
    pts = Points(cols)
    idx = np.array([0, 3, len(joined["x"]) - 1, 7, 3])
    rows = pts.take(idx)  # before any column is joined
    for k in joined:
        np.testing.assert_array_equal(rows[k], joined[k][idx])
        assert rows[k].dtype == joined[k].dtype
    np.testing.assert_array_equal(pts["x"], joined["x"])
    pts["q"] = np.arange(joined["x"].size, dtype=float)  # a column added by the caller (api: quality)
    assert list(pts) == ["x", "s", "q"] and len(pts) == 3 and "q" in pts
    np.testing.assert_array_equal(pts.take(idx)["q"], idx.astype(float))
    assert set(dict(pts)) == {"x", "s", "q"}


def test_points_take_reads_lazy_blocks_of_every_shape():
    """Blocks of (layouts, 1), (1, batches), full-grid and one-element arrays: take() reads the rows the
    joined column holds, before and after the join."""
    from simfront.search import Points

    rng = np.random.default_rng(11)
    cols = {k: [] for k in ("col", "row", "grid", "one", "const")}
    for shape in ((5, 7), (1, 4), (6, 1), (3, 3)):
        _append(cols, rng.random(shape) > 0.35, col=rng.random((shape[0], 1)), row=rng.random((1, shape[1])),
                grid=rng.random(shape), one=rng.random((1, 1)), const=float(shape[0]))
    joined = _columns({k: list(v) for k, v in cols.items()})
    n = joined["grid"].size
    idx = np.array([0, n - 1, n // 2, 1, n // 3])
    pts = Points(cols)
    rows = pts.take(idx)
    for k in joined:
        np.testing.assert_array_equal(rows[k], joined[k][idx])
        np.testing.assert_array_equal(pts[k], joined[k])


def _cheapest_by_sort(ok, gpus, cap, prec):
    """The plain rule: sort by precision, fewest GPUs, most capacity, row; the first row of each precision."""
    idx = np.nonzero(ok)[0]
    if idx.size == 0:
        return {}
    order = idx[np.lexsort((-cap[idx], gpus[idx], prec[idx]))]
    _, first = np.unique(prec[order], return_index=True)
    return {int(prec[order[j]]): int(order[j]) for j in first}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 4), st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=60),
       st.booleans())
def test_cheapest_rows_per_precision_start_with_the_sorts_cheapest(rows, with_nan):
    """The plan's decode candidates of each precision: the sort's cheapest row first, then the next cheapest, in order."""
    from simfront.planning import _cheapest_rows_per_precision

    ok = np.array([r[0] for r in rows])
    gpus = np.array([r[1] for r in rows], float) * 8
    cap = np.array([r[2] for r in rows], float) * 0.5  # many exact ties on GPUs and capacity
    prec = np.array([r[3] for r in rows], float)
    if with_nan:  # a non-finite capacity keeps the sort's own NaN order
        cap[len(rows) // 2] = np.nan
    got = _cheapest_rows_per_precision(ok, gpus, cap, prec, 3)
    assert {q: int(v[0]) for q, v in got.items()} == _cheapest_by_sort(ok, gpus, cap, prec)
    for q, v in got.items():
        rest = [i for i in np.flatnonzero(ok & (prec == q))]
        rest.sort(key=lambda i: (gpus[i], -cap[i] if np.isfinite(cap[i]) else np.inf, i))
        assert len(v) == min(3, len(rest)) and set(v) <= set(rest)


def test_planning_add_gathers_like_a_broadcast_copy():
    from simfront.planning import _add

    rng = np.random.default_rng(3)
    mask = rng.random((7, 5)) < 0.5
    values = {"layout": rng.integers(1, 9, (7, 1)), "batch": np.arange(5.0)[None, :], "grid": rng.random((7, 5)),
              "scalar": 2.5, "one": np.full((1, 1), 4.0), "row": np.arange(5.0)}
    cols = {k: [] for k in values}
    _add(cols, mask, **values)
    for k, v in values.items():
        want = np.broadcast_to(np.asarray(v, dtype=float), mask.shape)[mask]
        np.testing.assert_array_equal(cols[k][0], want)
        assert cols[k][0].dtype == want.dtype


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), st.sampled_from([1.0, 2.0, 8.0, 2.5])), min_size=1, max_size=70),
       st.booleans())
def test_front_per_size_matches_the_rank_sort(rows, with_nan):
    from simfront.search import _front_per_size

    x = np.array([r[0] for r in rows], float) + np.arange(len(rows)) * (0.001 if len(rows) % 2 else 0.0)  # distinct x, or ties
    y = np.array([r[1] for r in rows], float)
    size = np.array([r[2] for r in rows])
    if with_nan:
        y[0] = np.nan
    _, g = np.unique(size, return_inverse=True)  # the rank-key rule (one three-key sort), as it was
    _, y_rank = np.unique(y, return_inverse=True)
    key = g.astype(np.int64) * (x.size + 1) + y_rank.astype(np.int64)
    order = np.lexsort((-y, -x, g))
    ks = key[order]
    prev = np.concatenate(([-1], np.maximum.accumulate(ks)[:-1]))
    first = np.concatenate(([True], g[order][1:] != g[order][:-1]))
    want = np.zeros(x.size, dtype=bool)
    want[order[first | (ks > prev)]] = True
    np.testing.assert_array_equal(_front_per_size(x, y, size), want)


def test_cli_main_pauses_the_collector_and_pydantic_plugins_for_the_command_only(monkeypatch):
    import gc
    import os

    import pytest

    from simfront import cli

    seen = []

    def command(argv):
        seen.append((gc.isenabled(), os.environ.get(cli.PYDANTIC_PLUGINS_ENV)))
        raise SystemExit(0)  # a command ends by exiting: the state comes back all the same

    monkeypatch.setattr(cli, "_main", command)
    monkeypatch.delenv(cli.PYDANTIC_PLUGINS_ENV, raising=False)
    assert gc.isenabled()
    with pytest.raises(SystemExit):
        cli.main(["predict"])
    assert seen[-1] == (False, "__all__")
    assert gc.isenabled() and cli.PYDANTIC_PLUGINS_ENV not in os.environ
    monkeypatch.setenv(cli.PYDANTIC_PLUGINS_ENV, "logfire")  # the user's own setting is kept
    with pytest.raises(SystemExit):
        cli.main(["predict"])
    assert seen[-1] == (False, "logfire") and os.environ[cli.PYDANTIC_PLUGINS_ENV] == "logfire" and gc.isenabled()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), st.sampled_from([1, 2, 8])),
                min_size=1, max_size=40))
def test_prefill_dominance_drops_only_points_another_beats_everywhere(rows):
    """A prefill configuration is dropped exactly where another of its worker size is no worse in every quantity and
    better in one, or equal in all and earlier (of equal points the first stays)."""
    from simfront.search import dominated_per_size, prefill_dominated

    cost = np.array([r[:4] for r in rows], dtype=float)
    size = np.array([r[4] for r in rows], dtype=float)
    got = dominated_per_size(cost, size)
    # the prefill side's quantities: TTFT, busy step and shared-step extra lower, requests/s higher
    np.testing.assert_array_equal(prefill_dominated(cost[:, 0], cost[:, 1], cost[:, 2], -cost[:, 3], size), got)
    for i in range(len(rows)):
        want = any(size[j] == size[i] and (cost[j] <= cost[i]).all() and ((cost[j] < cost[i]).any() or j < i)
                   for j in range(len(rows)) if j != i)
        assert got[i] == want


def test_pruned_pairing_keeps_the_frontier_of_every_pair(monkeypatch):
    """Large GPU sets prune both sides before pairing, each on the quantities the pair's evaluation reads from it (a
    dropped configuration is beaten in every one): forced on a small set, the pruned search's frontier reaches the
    full pairing's within 1 % at every tok/s/user (the old prefill rule on TTFT and requests/s alone lost up to 22 %
    there: docs/model_changes.md round 28)."""
    import simfront.search as search
    from simfront import api

    def frontier():
        r = api.predict(model="llama-3.1-70b", gpus="8xH100", isl=8192, osl=1024, modes=["disagg"])
        return np.array([[p["tok_s_user"], p["tok_s_gpu"]] for p in r["frontier"]])

    full = frontier()
    monkeypatch.setattr(search, "MAX_FULL_PAIRS", 0)
    pruned = frontier()
    for user, gpu in full:
        reach = pruned[pruned[:, 0] >= user * (1 - 1e-9), 1]
        assert reach.size and reach.max() >= 0.99 * gpu

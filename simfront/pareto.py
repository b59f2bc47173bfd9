"""Pareto frontier over (tok/s/user, output tok/s/GPU), SLA filters, the knee, frontier comparison."""

from __future__ import annotations

from typing import Mapping

import numpy as np


# Points above which pareto_mask first drops the points a sample's frontier strictly dominates
# (one pass of binary searches) before sorting what is left: searches of 10^6 configurations.
PARETO_PREFILTER_MIN_POINTS = 50_000
# Every how many'th point forms that sample.
PARETO_SAMPLE_STRIDE = 64


def pareto_mask(x, y) -> np.ndarray:
    """True where no other point has both x and y at least as large (one strictly larger); of exact
    duplicates on the frontier the first (lowest index) is kept."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size >= PARETO_PREFILTER_MIN_POINTS and np.isfinite(x).all() and np.isfinite(y).all():
        # Exact: a point strictly dominated by a sample point is off the frontier, and it dominates no
        # point that the sample does not (domination is transitive and a sample-frontier point is
        # never dropped), so the rest keep their verdicts, duplicates included.
        cand = np.nonzero(~_dominated_by(x, y, _front_xy(x[::PARETO_SAMPLE_STRIDE], y[::PARETO_SAMPLE_STRIDE])))[0]
        mask = np.zeros(x.size, dtype=bool)
        mask[cand[_pareto_sorted(x[cand], y[cand])]] = True
        return mask
    mask = np.zeros(x.size, dtype=bool)
    mask[_pareto_sorted(x, y)] = True
    return mask


def _pareto_sorted(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the frontier points (see :func:`pareto_mask`), by one sort."""
    order = np.lexsort((-y, -x))  # x descending, ties broken by y descending (stable: lower index first)
    ys = y[order]
    prev_best = np.concatenate([[-np.inf], np.maximum.accumulate(ys)[:-1]])
    return order[ys > prev_best]  # strictly beats every point with larger (or equal, earlier) x


def _front_xy(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The frontier of (x, y) sorted by x ascending (so y descending)."""
    i = _pareto_sorted(x, y)[::-1]
    return x[i], y[i]


def _dominated_by(x: np.ndarray, y: np.ndarray, front: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """True where a point of ``front`` (x strictly ascending, y descending: :func:`_front_xy`) strictly dominates (x, y)."""
    fx, fy = front
    top = np.concatenate([fy, [-np.inf]])  # best y among front points from position i on is fy[i]
    ge = np.searchsorted(fx, x, side="left")  # first front point with fx >= x
    # first front point with fx > x: the next one where fx == x (a frontier's x values are distinct, so
    # one binary search serves both; x is finite here, so it never equals the appended +inf)
    gt = ge + (np.concatenate([fx, [np.inf]])[ge] == x)
    return (top[ge] > y) | (top[gt] >= y)


def sla_text(sla: Mapping | None) -> str:
    """``TTFT <= 2000 ms, TPOT <= 30 ms`` from the SLA the search used (None values left out); ``p99 TTFT <= ...`` where
    the SLA is on a percentile (``percentile``)."""
    pct = (sla or {}).get("percentile")
    q = f"p{pct:g} " if pct is not None else ""
    parts = {"ttft_ms": q + "TTFT <= {:g} ms", "tpot_ms": q + "TPOT <= {:g} ms", "min_tok_s_user": ">= {:g} tok/s/user"}
    return ", ".join(parts[k].format(v) for k, v in (sla or {}).items() if k in parts and v is not None)


def sla_mask(points: dict, ttft_ms=None, tpot_ms=None, min_tok_s_user=None) -> np.ndarray:
    m = np.ones(np.asarray(points["tok_s_gpu"]).size, dtype=bool)
    if ttft_ms is not None:
        m &= points["ttft_ms"] <= ttft_ms
    if tpot_ms is not None:
        m &= points["tpot_ms"] <= tpot_ms
    if min_tok_s_user is not None:
        m &= points["tok_s_user"] >= min_tok_s_user
    return m


def knee_index(x, y) -> int:
    """Frontier point farthest from the chord between its two ends (in normalised log space)."""
    x = np.log(np.asarray(x, float))
    y = np.log(np.asarray(y, float))
    if x.size < 3:
        return int(np.argmax(y)) if x.size else -1
    xn = (x - x.min()) / max(np.ptp(x), 1e-12)
    yn = (y - y.min()) / max(np.ptp(y), 1e-12)
    i0, i1 = int(np.argmin(xn)), int(np.argmax(xn))
    dx, dy = xn[i1] - xn[i0], yn[i1] - yn[i0]
    dist = np.abs(dy * (xn - xn[i0]) - dx * (yn - yn[i0])) / max(np.hypot(dx, dy), 1e-12)
    return int(np.argmax(dist))


def thin_frontier(x, n_max: int = 15) -> np.ndarray:
    """Indices (into a frontier sorted by x) of at most ``n_max`` points spread evenly in log x."""
    x = np.asarray(x, float)
    if x.size <= n_max:
        return np.arange(x.size)
    lx = np.log(x)
    targets = np.linspace(lx.min(), lx.max(), n_max)
    # sorted distinct indices (a set, not np.unique: numpy 2's np.unique imports numpy.ma, ~9 ms)
    return np.array(sorted({int(np.argmin(np.abs(lx - t))) for t in targets}), dtype=np.int64)


def interp_frontier(fx, fy, x_query) -> np.ndarray:
    """Best y the frontier (fx, fy) reaches at tok/s/user >= x_query (step interpolation), NaN beyond it."""
    fx = np.asarray(fx, float)
    fy = np.asarray(fy, float)
    xq = np.atleast_1d(np.asarray(x_query, float))
    out = np.full(xq.shape, np.nan)
    for i, xv in enumerate(xq):  # a handful of query points
        ok = fx >= xv
        if ok.any():
            out[i] = fy[ok].max()
    return out


# relative throughput change below which two frontiers count as the same (model or measurement noise)
SAME_FRONTIER_TOLERANCE = 0.05
# share of the shared tok/s/user range over which one frontier must lead for a clear verdict, and the
# most of the range over which it may trail without the verdict turning into a trade
LEAD_SHARE, TRAIL_SHARE = 0.5, 0.25
# points on the shared tok/s/user range (log-spaced) where the two frontiers are compared
SHIFT_QUERY_POINTS = 12


def frontier_shift(bx, by, sx, sy) -> dict:
    """How frontier s = (sx, sy) sits against frontier b = (bx, by): tok/s/GPU change at equal tok/s/user over
    their shared range, and the verdict (pushes out / pulls in / same frontier / trades). ``verdict`` is
    "disjoint" when the two share no tok/s/user range. Judged over the whole range, so one tail point does
    not flip it."""
    bx, by, sx, sy = (np.asarray(a, float) for a in (bx, by, sx, sy))
    lo, hi = max(bx.min(), sx.min()), min(bx.max(), sx.max())
    if hi <= lo:
        return {"verdict": "disjoint", "reason": "the frontiers cover different tok/s/user ranges"}
    xq = np.geomspace(lo, hi, SHIFT_QUERY_POINTS)
    gain = interp_frontier(sx, sy, xq) / interp_frontier(bx, by, xq) - 1.0  # throughput change at equal tok/s/user
    ok = np.isfinite(gain)
    better = float(np.mean(gain[ok] > SAME_FRONTIER_TOLERANCE)) if ok.any() else 0.0
    worse = float(np.mean(gain[ok] < -SAME_FRONTIER_TOLERANCE)) if ok.any() else 0.0
    if better >= LEAD_SHARE and worse <= TRAIL_SHARE:
        verdict = "pushes the frontier out"
    elif worse >= LEAD_SHARE and better <= TRAIL_SHARE:
        verdict = "pulls the frontier in"
    elif better <= TRAIL_SHARE and worse <= TRAIL_SHARE:
        verdict = "moves configurations along the same frontier"
    else:
        verdict = "trades: better in part of the range, worse elsewhere"
    return {"verdict": verdict, "median_gain": float(np.nanmedian(gain)), "max_gain": float(np.nanmax(gain)),
            "min_gain": float(np.nanmin(gain)), "reach_change": float(sx.max() / bx.max() - 1.0), "x": xq, "gain": gain}

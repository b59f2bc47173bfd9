"""Pareto frontier over (tok/s/user, output tok/s/GPU), SLA filters, the knee, frontier comparison."""

from __future__ import annotations

import numpy as np


def pareto_mask(x, y) -> np.ndarray:
    """True where no other point has both x and y at least as large (one strictly larger)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    order = np.lexsort((-y, -x))  # x descending, ties broken by y descending
    ys = y[order]
    prev_best = np.concatenate([[-np.inf], np.maximum.accumulate(ys)[:-1]])
    keep_sorted = ys > prev_best  # strictly beats every point with larger (or equal, earlier) x
    mask = np.zeros(x.size, dtype=bool)
    mask[order[keep_sorted]] = True
    return mask


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
    idx = np.unique([int(np.argmin(np.abs(lx - t))) for t in targets])
    return idx


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

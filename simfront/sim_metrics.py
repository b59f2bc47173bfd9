"""A simulated trace and its summary statistics (:mod:`simfront.simulate`).

:class:`SimTrace` holds the per-request times the engine loops (:mod:`simfront.engine_loop`,
:mod:`simfront.engine_fast`) record; :func:`summarise` turns a trace into :class:`SimMetrics` (TTFT, TPOT and
end-to-end mean and percentiles, throughput after warm-up, goodput under an SLA); :func:`itl_stats` gives the
inter-token latency weighted by decode tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PERCENTILES = (50, 90, 99)


@dataclass
class SimTrace:
    """Per-request times of a simulation (deployments x requests; NaN where a request did not run)."""

    t_send: np.ndarray
    t_first: np.ndarray
    t_end: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    counted: np.ndarray  # bool: request inside the statistics window (after warm-up)
    # (D, iterations) step seconds seen by decode tokens, and the decode tokens emitted at that step time; a loop may
    # hand over its per-iteration lists of (D,) arrays instead, stacked on first use (:meth:`itl`: most callers never
    # read them)
    itl_s: np.ndarray | list
    itl_w: np.ndarray | list
    ttft_overhead_s: np.ndarray
    iterations: int
    preemptions: np.ndarray  # (D,)
    prompt_tokens_computed: np.ndarray  # (D,) prompt tokens prefilled (recompute included)

    def itl(self) -> tuple[np.ndarray, np.ndarray]:
        """(step seconds, decode tokens), each (D, iterations): the fields, stacked once where a loop gave lists."""
        if isinstance(self.itl_s, list):
            D = self.t_send.shape[0]
            self.itl_s, self.itl_w = (np.array(x).T if x else np.zeros((D, 0)) for x in (self.itl_s, self.itl_w))
        return self.itl_s, self.itl_w


def _nanpcts(x: np.ndarray, mask: np.ndarray, qs) -> list[np.ndarray]:
    """Per-row percentiles ``qs`` of ``x`` where ``mask`` (linear interpolation, as ``np.nanpercentile``;
    NaN for a row without values), vectorised over rows; one sort serves every percentile."""
    ok = mask & ~np.isnan(x)
    y = np.sort(np.where(ok, x, np.inf), axis=1)
    cnt = ok.sum(axis=1)
    r = np.arange(y.shape[0])
    hi_max = np.maximum(cnt - 1, 0)
    outs = []
    for q in qs:
        pos = (np.maximum(cnt, 1) - 1) * (float(q) / 100.0)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, hi_max)
        a, b = y[r, lo], y[r, hi]
        with np.errstate(invalid="ignore"):
            out = a + (b - a) * (pos - lo)
        outs.append(np.where(cnt > 0, np.where(hi == lo, a, out), np.nan))
    return outs


def _nanpct(x: np.ndarray, mask: np.ndarray, q) -> np.ndarray:
    """Per-row percentile ``q`` of ``x`` where ``mask`` (see :func:`_nanpcts`)."""
    return _nanpcts(x, mask, (q,))[0]


def _nanmean(x, mask):
    n = mask.sum(axis=1)
    return np.where(n > 0, np.where(mask, x, 0.0).sum(axis=1) / np.maximum(n, 1), np.nan)


def _weighted_pcts(v: np.ndarray, w: np.ndarray, qs) -> list[np.ndarray]:
    """Per-row weighted percentiles ``qs`` (rows of values ``v`` with weights ``w``); one sort serves
    every percentile."""
    if v.shape[1] == 0:
        return [np.full(v.shape[0], np.nan) for _ in qs]
    o = np.argsort(v, axis=1)
    vs = np.take_along_axis(v, o, axis=1)
    c = np.cumsum(np.take_along_axis(w, o, axis=1), axis=1)
    tot = c[:, -1:]
    r = np.arange(v.shape[0])
    outs = []
    for q in qs:
        i = np.argmax(c >= q / 100.0 * np.maximum(tot, 1e-30), axis=1)
        outs.append(np.where(tot[:, 0] > 0, vs[r, i], np.nan))
    return outs


@dataclass
class SimMetrics:
    """Serving metrics of simulated deployments (every field a (D,) array; seconds, per second)."""

    ttft_s: dict  # {"mean", "p50", "p90", "p99"}
    tpot_s: dict
    e2e_s: dict
    requests_s: np.ndarray  # the whole deployment
    output_tok_s: np.ndarray
    concurrency: np.ndarray
    gpus: np.ndarray
    preemptions: np.ndarray  # on the representative server
    iterations: int
    trace: SimTrace = field(repr=False, default=None)
    scale: np.ndarray = field(repr=False, default=None)  # deployment requests/s over the representative's
    # (D,) bool: deployments the simulation cannot represent and left out (their statistics are NaN), and why
    skipped: np.ndarray | None = field(repr=False, default=None)
    skipped_why: str = ""
    _itl: dict | None = field(repr=False, default=None)

    @property
    def itl_s(self) -> dict:
        """Inter-token latency {"mean", "p50", "p90", "p99"}: the step times decode tokens saw, weighted by the
        tokens (computed from the trace on first use: a sort over every step of every deployment)."""
        if self._itl is None:
            self._itl = itl_stats(self.trace)
        return self._itl

    def goodput(self, ttft_s: float | None = None, tpot_s: float | None = None, percentile: float | None = None) -> np.ndarray:
        """Requests/s of the deployment that meet the SLA (TTFT and TPOT each at most the bound).

        Without ``percentile``: the rate of requests that meet both bounds (DistServe's goodput).
        With ``percentile`` p: the whole throughput where the p-th percentile of TTFT and TPOT meets
        the bounds, else 0 (an SLA stated on p90/p99)."""
        tr = self.trace
        ttft, tpot = request_latencies(tr)
        ok = tr.counted.copy()
        if percentile is None:
            if ttft_s is not None:
                ok &= ttft <= ttft_s
            if tpot_s is not None:
                ok &= tpot <= tpot_s
            share = ok.sum(axis=1) / np.maximum(tr.counted.sum(axis=1), 1)
            return self.requests_s * share
        meets = np.ones(self.requests_s.shape, bool)
        if ttft_s is not None:
            meets &= _nanpct(ttft, tr.counted, percentile) <= ttft_s
        if tpot_s is not None:
            meets &= _nanpct(tpot, tr.counted, percentile) <= tpot_s
        return np.where(meets, self.requests_s, 0.0)

    def meets_sla(self, ttft_s=None, tpot_s=None, percentile: float = 50.0) -> np.ndarray:
        return self.goodput(ttft_s, tpot_s, percentile) > 0

    def as_columns(self, prefix: str = "sim_") -> dict:
        """Flat columns in milliseconds (``sim_ttft_p90_ms`` ...) and rates, for frontier points."""
        out = {}
        for name, d in (("ttft", self.ttft_s), ("tpot", self.tpot_s), ("itl", self.itl_s), ("e2e", self.e2e_s)):
            for k, v in d.items():
                out[f"{prefix}{name}_{k}_ms"] = v * 1e3
        out[f"{prefix}requests_s"] = self.requests_s
        out[f"{prefix}output_tok_s"] = self.output_tok_s
        return out


def request_latencies(tr: SimTrace) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, TPOT) in seconds of every request slot of a trace (deployments x requests; NaN where none ran)."""
    ov = tr.ttft_overhead_s[:, None]
    ttft = tr.t_first - tr.t_send + ov
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(tr.osl > 1, (tr.t_end - tr.t_first) / np.maximum(tr.osl - 1.0, 1.0), 0.0)
    return ttft, tpot


def itl_stats(tr: SimTrace) -> dict:
    """Mean and percentiles of the inter-token latency of a trace (step seconds weighted by decode tokens)."""
    step_s, tokens = tr.itl()
    w = tokens.sum(axis=1)
    itl = {"mean": np.where(w > 0, (step_s * tokens).sum(axis=1) / np.maximum(w, 1e-30), np.nan)}
    itl.update((f"p{q}", p) for q, p in zip(PERCENTILES, _weighted_pcts(step_s, tokens, PERCENTILES)))
    return itl


def summarise(tr: SimTrace, scale, concurrency, gpus) -> SimMetrics:
    """Statistics of a trace; ``scale`` = deployment requests/s per representative-server request/s."""
    m = tr.counted
    ttft, tpot = request_latencies(tr)
    e2e = tr.t_end - tr.t_send + tr.ttft_overhead_s[:, None]

    def stats(x):
        out = {"mean": _nanmean(x, m)}
        out.update((f"p{q}", p) for q, p in zip(PERCENTILES, _nanpcts(x, m, PERCENTILES)))
        return out

    # throughput: counted requests over the time from the first counted send to the last counted end
    some = m.any(axis=1)  # deployments with counted requests (the rest, left out or never finished, give NaN)
    start = np.where(some, np.min(np.where(m, tr.t_send, np.inf), axis=1), np.nan) if m.any() else np.zeros(m.shape[0])
    # warm-up: finished requests left out that were sent before the first counted one (those sent after
    # it only kept the load up); measure from the warm-up's end
    before = tr.t_send <= np.where(np.isfinite(start), start, np.inf)[:, None]
    warmups = np.isfinite(tr.t_end) & ~m & before
    warm = warmups.any(axis=1)
    end_warm = np.nanmax(np.where(warmups, tr.t_end, -np.inf), axis=1)
    start = np.where(warm & np.isfinite(end_warm), end_warm, start)
    done_in = (m & (tr.t_end >= start[:, None])).sum(axis=1)
    span = np.where(some, np.max(np.where(m, tr.t_end, -np.inf), axis=1), np.nan) - start
    with np.errstate(invalid="ignore", divide="ignore"):
        x_rep = done_in / span
        tok_rep = (np.where(m & (tr.t_end >= start[:, None]), tr.osl, 0.0)).sum(axis=1) / span
    sc = np.asarray(scale, float)
    return SimMetrics(stats(ttft), stats(tpot), stats(e2e), x_rep * sc, tok_rep * sc,
                      np.broadcast_to(np.asarray(concurrency, float), x_rep.shape).copy(),
                      np.broadcast_to(np.asarray(gpus, float), x_rep.shape).copy(), tr.preemptions, tr.iterations, tr, sc)


__all__ = ["SimTrace", "SimMetrics", "summarise"]

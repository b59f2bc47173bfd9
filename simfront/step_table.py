"""Step-time tables the simulation's engine loops interpolate in (:mod:`simfront.simulate`).

:func:`build_step_table` evaluates :func:`simfront.step.forward_step` under the serving profile
(:func:`simfront.serving.step_terms`) on a grid of (decode requests, prompt tokens, context) per deployment;
:func:`step_tables` builds the table of a set of deployments (one forward pass per precision over their distinct rows).
:class:`StepTable` interpolates in it; :class:`Cells` holds the same table as per-cell coefficients for the fast
loop (:mod:`simfront.engine_fast`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .deployment import Layouts
from .errors import SimfrontError
from .serving import NO_SPEC, Speculation, _drafted_pair, _drafts, _pipelined, step_terms
from .step import DEFAULT_ROUTING_ALPHA, StepBatch, forward_step

# Decode-batch grid points of the step table (requests per rank); prompt-token grid points below.
# Step time is close to piecewise linear between them (memory-bound decode, tile steps in MoE).
B_GRID = np.array([0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096], float)
P_GRID = np.array([0, 16, 128, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144], float)
CTX_POINTS = 2  # decode attention is linear in context: two points (shortest, longest) interpolate it

# 0-d float64 operands for the fast loops' per-iteration arithmetic: a ufunc converts a Python float anew on every
# call, which costs about as much as the operation itself on a few hundred deployments (same values either way)
ZERO, ONE, TOL, TINY, INF = (np.array(x) for x in (0.0, 1.0, 1e-9, 1e-12, np.inf))


@dataclass
class StepTable:
    """Engine step seconds per deployment on a grid: ``t[d, i_b, i_p, i_c]`` for ``b_grid[i_b]`` decode
    requests per rank, ``p_grid[i_p]`` prompt tokens in the step and context ``ctx_lo + (ctx_hi -
    ctx_lo) i_c / (n_c - 1)``; :meth:`__call__` interpolates (multilinear, linear beyond the grid)."""

    b_grid: np.ndarray
    p_grid: np.ndarray
    ctx_lo: np.ndarray  # (D,)
    ctx_hi: np.ndarray  # (D,)
    t: np.ndarray  # (D, nb, np, nc) seconds

    def take(self, rows) -> "StepTable":
        return StepTable(self.b_grid, self.p_grid, self.ctx_lo[rows], self.ctx_hi[rows], self.t[rows])

    @classmethod
    def stack(cls, parts: list[tuple[np.ndarray, "StepTable"]], D: int) -> "StepTable":
        """One table of ``D`` deployments from tables of row groups (same grids): ``[(rows, table), ...]``."""
        first = parts[0][1]
        t = np.zeros((D,) + first.t.shape[1:])
        lo, hi = np.zeros(D), np.zeros(D)
        for rows, tab in parts:
            t[rows], lo[rows], hi[rows] = tab.t, tab.ctx_lo, tab.ctx_hi
        return cls(first.b_grid, first.p_grid, lo, hi, t)

    def __call__(self, b, p, ctx, rows=None) -> np.ndarray:
        t = self.t if rows is None else self.t[rows]
        D, nb, npp, nc = t.shape
        lo = self.ctx_lo if rows is None else self.ctx_lo[rows]
        hi = self.ctx_hi if rows is None else self.ctx_hi[rows]
        ib, wb = _locate(self.b_grid, b)
        ip, wp = _locate(self.p_grid, p)
        u = (np.asarray(ctx, float) - lo) / np.maximum(hi - lo, 1.0) * (nc - 1)
        ic = np.clip(np.floor(u), 0, max(nc - 2, 0)).astype(int)
        wc = u - ic if nc > 1 else 0.0 * u
        flat = t.reshape(-1)
        base = np.arange(D) * (nb * npp * nc)
        out = 0.0
        for db, fb in ((0, 1 - wb), (1, wb)):
            for dp_, fp in ((0, 1 - wp), (1, wp)):
                for dc, fc in ((0, 1 - wc), (1, wc)):
                    if nc == 1 and dc:
                        continue
                    k = base + ((ib + db) * npp + (ip + dp_)) * nc + np.minimum(ic + dc, nc - 1)
                    out = out + flat[k] * fb * fp * (fc if nc > 1 else 1.0)
        return np.maximum(out, 0.0)


class Cells:
    """A :class:`StepTable` for the fast loop: per deployment and grid cell the eight coefficients of
    the multilinear form (``1, wb, wp, wb wp`` and the same times the context fraction), so one
    evaluation is one gather (same values as :meth:`StepTable.__call__`; needs ``CTX_POINTS`` = 2)."""

    def __init__(self, tab: StepTable):
        t = tab.t
        D, nb, npp, nc = t.shape
        if nc != 2:
            raise ValueError("Cells needs a step table with two context points")
        t00, t10, t01, t11 = t[:, :-1, :-1], t[:, 1:, :-1], t[:, :-1, 1:], t[:, 1:, 1:]
        a = np.stack([t00, t10 - t00, t01 - t00, t11 - t10 - t01 + t00], axis=-1)  # (D, nb-1, np-1, 2 ctx, 4)
        c = np.concatenate([a[..., 0, :], a[..., 1, :] - a[..., 0, :]], axis=-1)  # (D, nb-1, np-1, 8)
        # cell-major (cells, 8): a deployment's evaluation reads one cache line of eight coefficients
        self.coef = c.reshape(-1, 8)
        # the decode-only ones (1, wb at the shortest context; the same per context span) and the prefill-only ones
        # (1, wp at the shortest context) apart, for their own gathers
        self.coef_dec = np.ascontiguousarray(self.coef[:, [0, 1, 4, 5]])
        self.coef_pre = np.ascontiguousarray(self.coef[:, [0, 2]])
        self.b_grid, self.p_grid = tab.b_grid, tab.p_grid
        self.row = np.arange(D) * (nb - 1) * (npp - 1)  # each deployment's first cell
        self.b_off = np.arange(nb - 1) * (npp - 1)  # a batch cell's first cell within the deployment's
        self.ctx_lo, self.ctx_hi = tab.ctx_lo, tab.ctx_hi
        self.inv_span = 1.0 / np.maximum(tab.ctx_hi - tab.ctx_lo, 1.0)
        self.b_inv, self.p_inv = 1.0 / np.diff(tab.b_grid), 1.0 / np.diff(tab.p_grid)
        # a point's cell: the interior grid points at or below it (0 below the grid, the last cell above it)
        self.b_inner, self.p_inner = tab.b_grid[1:-1], tab.p_grid[1:-1]
        self.finite = bool(np.isfinite(self.coef).all())

    def parts(self, b, p, ctx, whole_b=None, whole_p=None) -> tuple[np.ndarray, np.ndarray]:
        """(step seconds before the clip at 0, their slope per context token) at (b, p, ctx); ``b`` >= 0.
        ``whole_b`` / ``whole_p``: :meth:`whole_batches` / :meth:`whole_prompts` covering ``b`` / ``p``, where those
        hold whole numbers (the same cells and weights, looked up)."""
        if whole_b is None:
            cell, wb = self._b_cell(b)
        else:
            bi = b.astype(np.intp)
            cell, wb = self.row + whole_b[0][bi], whole_b[1][bi]
        if whole_p is None:
            ip, wp = self._p_cell(p)
        else:
            pi = p.astype(np.intp)
            ip, wp = whole_p[0][pi], whole_p[1][pi]
        c0, c1, c2, c3, c4, c5, c6, c7 = self.coef.take(cell + ip, axis=0).T
        bw = wb * wp
        slope = (c4 + c5 * wb + c6 * wp + c7 * bw) * self.inv_span  # step seconds per context token
        return c0 + c1 * wb + c2 * wp + c3 * bw + (ctx - self.ctx_lo) * slope, slope

    def prefill_only(self, p) -> np.ndarray:
        """Seconds of a step with ``p`` prompt tokens and no decode requests (b = 0, shortest context)."""
        ip, wp = self._p_cell(p)
        c0, c2 = self.coef_pre.take(self.row + ip, axis=0).T
        return np.maximum(c0 + c2 * wp, ZERO)

    def decode_only(self, b, ctx) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`parts` of a decode-only step (p = 0); ``b`` >= 0."""
        cell, wb = self._b_cell(b)
        c0, c1, c4, c5 = self.coef_dec.take(cell, axis=0).T
        slope = (c4 + c5 * wb) * self.inv_span  # step seconds per context token
        return c0 + c1 * wb + (ctx - self.ctx_lo) * slope, slope

    def whole_batches(self, top: int) -> tuple[np.ndarray, np.ndarray]:
        """(cell offset within a deployment's cells, weight) of the batch cell of each whole batch size 0 .. ``top``,
        worked out as :meth:`_b_cell` does."""
        b = np.arange(top + 1, dtype=float)
        i = self.b_inner.searchsorted(b, side="right")
        return self.b_off[i], (b - self.b_grid[i]) * self.b_inv[i]

    def whole_prompts(self, top: int) -> tuple[np.ndarray, np.ndarray]:
        """(cell, weight) of the prompt-token cell of each whole token count 0 .. ``top``, as :meth:`_p_cell` gives."""
        return self._p_cell(np.arange(top + 1, dtype=float))

    def _b_cell(self, b) -> tuple[np.ndarray, np.ndarray]:
        """(first cell of the batch cell of ``b`` decode requests, weight of ``b`` in it). Decode requests are never
        below the grid's first point (0), so the weight needs no clip there."""
        i = self.b_inner.searchsorted(b, side="right")  # the cell, clipped to the grid's last
        return self.row + self.b_off[i], (b - self.b_grid[i]) * self.b_inv[i]

    def _p_cell(self, p) -> tuple[np.ndarray, np.ndarray]:
        """(prompt-token cell of ``p``, weight of ``p`` in it; 0 below the grid)."""
        i = self.p_inner.searchsorted(p, side="right")  # the cell, clipped to the grid's first and last
        return i, np.maximum((p - self.p_grid[i]) * self.p_inv[i], ZERO)

    def __call__(self, b, p, ctx) -> np.ndarray:
        b = np.maximum(np.asarray(b, float), 0.0)  # below the grid: its first point's value, as StepTable gives
        return np.maximum(self.parts(b, np.asarray(p, float), np.asarray(ctx, float))[0], 0.0)


def _locate(grid: np.ndarray, x) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, float)
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
    w = (x - grid[i]) / (grid[i + 1] - grid[i])
    return i, np.maximum(w, 0.0)  # linear extrapolation above the last point


def _grid(grid: np.ndarray, top: float) -> np.ndarray:
    """Grid points up to the first one at or above ``top`` (at least two points)."""
    k = int(np.searchsorted(grid, max(top, 1.0), side="left")) + 1
    return grid[: max(min(k, grid.size), 2)]


def build_step_table(model, precision, hw, lay: Layouts, profile: dict, *, isl_new: float, prefix: float, ctx_lo, ctx_hi,
                     b_max: float, p_max: float, spec=NO_SPEC, routing_alpha=DEFAULT_ROUTING_ALPHA,
                     worker_prompts: bool = False, prefill_ranks=None, memo: dict | None = None,
                     two_batch_overlap: tuple | None = None, allreduce_norm_fusion: tuple = (),
                     mla_native_heads: tuple = ()) -> StepTable:
    """Engine step times of the deployments' workers (``lay`` holds (D,) layout arrays) on the
    (decode requests, prompt tokens, context) grid, with the serving profile applied exactly as
    :mod:`simfront.serving` does (:func:`simfront.serving.step_terms`). ``isl_new`` sets how many
    sequences a step's prompt tokens belong to and ``prefix`` their cached prefix, as in
    :func:`simfront.serving.aggregated_raw`. ``spec``: one speculation setting or one per deployment
    (one forward pass with each row's draft tokens per request). ``routing_alpha``: the workload's MoE routing
    skew (:class:`simfront.serving.Workload`), as the evaluator takes it. ``worker_prompts``: the prompt-token axis
    is the whole worker's (a disaggregated prefill worker), dealt to its attention-DP ranks a whole prompt at a time
    (:func:`worker_prompt_ranks`), rather than every rank's. ``prefill_ranks``: (D,) attention-DP ranks that prefill in a
    step with prompt tokens, on average (:func:`simfront.serving.mixed_steps`; default every rank). ``two_batch_overlap``: the
    engine's two-batch overlap (:attr:`simfront.serving.Workload.overlap`; None: off), as the evaluator takes it;
    ``allreduce_norm_fusion``: the engine's all-reduce + RMSNorm fusion rules (:mod:`simfront.fusion`);
    ``mla_native_heads``: where its MLA decode runs the native kernel (:func:`simfront.step.mla_native_mask`). ``memo``: :func:`simfront.step.forward_step`'s op memo
    (ops repeated with the same inputs, as the attention of a model's dense and MoE layer groups, are costed once)."""
    bg = _grid(B_GRID, b_max)
    pg = _grid(P_GRID, p_max)
    D = np.asarray(lay.tp).reshape(-1).size
    col = lambda a: np.broadcast_to(np.asarray(a, float).reshape(-1), (D,))[:, None, None, None]  # noqa: E731
    tp, pp, dp, ep = (col(a) for a in (lay.tp, lay.pp, lay.dp, lay.ep))
    lo = np.broadcast_to(np.asarray(ctx_lo, float), (D,)).copy()
    hi = np.maximum(np.broadcast_to(np.asarray(ctx_hi, float), (D,)), lo + 1.0)
    ctx = lo[:, None, None, None] + (hi - lo)[:, None, None, None] * np.linspace(0.0, 1.0, CTX_POINTS)[None, None, None, :]
    B = bg[None, :, None, None]
    P = pg[None, None, :, None]
    ranks = None if prefill_ranks is None else col(prefill_ranks)
    if worker_prompts:
        P, ranks = worker_prompt_ranks(P, isl_new, dp)
    seqs = np.where(P > 0, np.maximum(P / max(isl_new, 1.0), 1.0), 0.0)
    groups = per_row(spec, D)  # one forward pass; the drafts' cost per speculation setting
    q = np.ones(D)
    for rows, sp in groups:
        q[rows] = sp.k + 1
    sb = StepBatch(decode_reqs=B, decode_ctx=ctx, q_tokens=q[:, None, None, None] if len(groups) > 1 else q[0],
                   prefill_tokens=P, prefill_seqs=seqs, prefill_prefix=prefix, prefill_ranks=ranks)
    st = forward_step(model, precision, hw, tp, pp, dp, ep, sb, routing_alpha=routing_alpha, memo={} if memo is None else memo,
                      two_batch_overlap=two_batch_overlap, allreduce_norm_fusion=allreduce_norm_fusion,
                      mla_native_heads=mla_native_heads)
    # every row's draft passes on the one forward pass (serving._split per speculation, its sums taken once)
    draft_layers, k, drafts = np.zeros(D), np.zeros(D), np.zeros(D, bool)
    for rows, sp in groups:
        draft_layers[rows], k[rows], drafts[rows] = sp.k * sp.draft_layers, sp.k, _drafts(sp)
    col4 = lambda a: a[:, None, None, None] if len(groups) > 1 else a[0]  # noqa: E731
    both = _drafted_pair(st, model, col4(draft_layers), col4(k), col4(drafts), _pipelined(st))
    both = np.broadcast_to(both, (2, D, bg.size, pg.size, CTX_POINTS))
    t = np.zeros((D, bg.size, pg.size, CTX_POINTS))
    for rows, sp in groups:
        split = both[:, rows]
        # per-request CPU overhead counts the decode requests, and overlaps the GPU step or not, as serving does
        # a pipelined worker's round schedules one micro-batch per stage, each with its own CPU work
        t[rows] = step_terms(split, profile, B, sp.accepted_per_step > 1.0, pp[rows])["engine_s"]
    if worker_prompts:
        # a busy prefill worker's step of several prompts runs at the profile's prefill pace, as the evaluator's queue
        # takes it (serving.finish_prefill: busy = step x prefill_scale); a lone prompt's step as it is
        t = t * np.where(seqs > 1.0, float(profile.get("prefill_scale", 1.0)), 1.0)
    return StepTable(bg, pg, lo, hi, t)


def worker_prompt_ranks(worker_tokens, isl_new: float, dp):
    """(prompt tokens on the busiest attention-DP rank, ranks that carry prompt tokens) of a step whose ``worker_tokens``
    prompt tokens are dealt to the worker's ``dp`` ranks a whole prompt of ``isl_new`` tokens at a time: up to one prompt
    it runs on one rank, up to ``dp`` prompts on as many ranks, beyond that on all of them evenly (mean field, so a
    fraction of a prompt or of a rank is allowed); the experts see all ``worker_tokens``."""
    w, dp = np.asarray(worker_tokens, float), np.asarray(dp, float)
    per_rank = np.maximum(w / dp, np.minimum(w, max(isl_new, 1.0)))  # the busiest rank's share
    ranks = np.where(per_rank > 0, w / np.maximum(per_rank, 1e-300), 1.0)
    return per_rank, ranks


def per_row(x, D: int) -> list[tuple[np.ndarray, object]]:
    """Row groups of a per-deployment setting given once for all or as a sequence of ``D`` values
    (precisions, speculation settings): ``[(rows, value), ...]``, one group per distinct value."""
    if isinstance(x, (list, tuple)) and not isinstance(x, Speculation):
        if len(x) != D:
            raise SimfrontError(f"{len(x)} per-deployment settings for {D} deployments")
        uniq: list = []
        rows: list[list[int]] = []
        for i, v in enumerate(x):
            for j, u in enumerate(uniq):
                if u is v or u == v:
                    rows[j].append(i)
                    break
            else:
                uniq.append(v)
                rows.append([i])
        return [(np.asarray(r), u) for r, u in zip(rows, uniq)]
    return [(np.arange(D), x)]


def step_tables(model, precision, hw, lay: Layouts, profile, spec, D: int, **kw) -> StepTable:
    """Step tables of the deployments on common grids: one forward pass per precision over the distinct
    (layout, speculation, context range) rows (search candidates share layouts across batch sizes)."""
    spec_id = np.zeros(D)
    for j, (rows, _) in enumerate(per_row(spec, D)):
        spec_id[rows] = j
    ctx = {k: np.broadcast_to(np.asarray(kw[k], float), (D,)) for k in ("ctx_lo", "ctx_hi")}
    ranks = kw.get("prefill_ranks")  # rows that prefill on different numbers of ranks need their own forward pass
    ranks = None if ranks is None else np.broadcast_to(np.asarray(ranks, float), (D,))
    key = np.stack([lay.tp, lay.pp, lay.dp, lay.ep, spec_id, ctx["ctx_lo"], ctx["ctx_hi"], *([] if ranks is None else [ranks])],
                   axis=1)
    parts = []
    memo: dict = {}  # one op memo for this call's forward passes (precisions that differ only in the KV format share ops)
    for rows, prec in per_row(precision, D):
        uniq, first, inv = np.unique(key[rows], axis=0, return_index=True, return_inverse=True)
        u = rows[first]  # one representative row per distinct key
        sp = [spec[i] for i in u] if isinstance(spec, (list, tuple)) else spec
        tab = build_step_table(model, prec, hw, lay.take(u), profile, spec=sp, memo=memo,
                               **{**kw, "ctx_lo": ctx["ctx_lo"][u], "ctx_hi": ctx["ctx_hi"][u],
                                  "prefill_ranks": None if ranks is None else ranks[u]})
        parts.append((rows, tab.take(np.asarray(inv).reshape(-1))))
    return StepTable.stack(parts, D)


def with_other_ranks_prefill(table: StepTable, share, prompt_tokens) -> StepTable:
    """``table`` with the other attention-DP ranks' prompts priced in: in a share ``share`` ((D,),
    :func:`other_ranks_prefill_share`) of the representative rank's steps another rank prefills ``prompt_tokens`` ((D,)),
    and the ranks step together (every MoE layer waits for all of them), so such a step takes as long as one with that
    many prompt tokens, or the rank's own where it carries more. Every step with fewer prompt tokens of its own (the
    decode-only ones included) is the mean of both. The evaluator's mean step (:func:`simfront.serving.finish_aggregated`:
    the mixed share of the steps at the mixed step's time) in the simulation's loops, which step that rank alone."""
    q = np.clip(np.asarray(share, float), 0.0, 1.0)
    rows = np.flatnonzero(q > 0)  # the others never prefill in a step of the rest: their steps stay as they are
    p_mix = np.asarray(prompt_tokens, float)[rows]
    ip, wp = _locate(table.p_grid, p_mix)
    mixed = table.t[rows, :, ip, :] * (1.0 - wp)[:, None, None] + table.t[rows, :, ip + 1, :] * wp[:, None, None]  # (rows, nb, nc)
    t = table.t.copy()
    below = (table.p_grid[None, :] < p_mix[:, None])[:, None, :, None]  # grid points with fewer own prompt tokens
    qr = q[rows, None, None, None]
    t[rows] = np.where(below, (1.0 - qr) * t[rows] + qr * mixed[:, :, None, :], t[rows])
    return StepTable(table.b_grid, table.p_grid, table.ctx_lo, table.ctx_hi, t)


def other_ranks_prefill_share(mixed_share, rank_share) -> np.ndarray:
    """Share of the representative rank's steps without its own prompt tokens in which another attention-DP rank
    prefills: the worker's mixed steps ``mixed_share`` less the rank's own ``rank_share``, over the steps it has none."""
    s = np.asarray(rank_share, float)
    return np.where(s < 1.0, np.clip(np.asarray(mixed_share, float) - s, 0.0, 1.0) / np.maximum(1.0 - s, 1e-300), 0.0)


__all__ = ["StepTable", "build_step_table", "B_GRID", "P_GRID", "with_other_ranks_prefill", "other_ranks_prefill_share"]

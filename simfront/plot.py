"""Self-contained offline plotly pages: frontier, frontier comparison, predicted-vs-measured.

Every page inlines plotly.js (``include_plotlyjs=True``): no CDN, no network needed to view it.
Inputs are lists of plain dicts in friendly units (ms, tok/s, USD per million output tokens), the
edge format of the search and validation results. Functions return the HTML string and write it
to ``path`` when one is given.
"""

from __future__ import annotations

from html import escape

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from simfront.errors import SimfrontError
from simfront.pareto import sla_text

# Presentation defaults (choices of this module, not physics).
MAX_POINTS = 5000  # most dominated points drawn; keeps pages small (~5 MB incl. plotly.js) and fast
SAMPLE_SEED = 0  # fixed seed so the same inputs always give the same page
N_STRATA = 64  # log-spaced tok/s/user bins used to stratify the sample of dominated points
LOG_FLOOR = 1e-12  # zero/negative/NaN x is binned as this tiny value (lowest stratum) instead of -inf
FAINT_OPACITY = 0.25  # dominated points: visible as a cloud, never competing with the frontier
FAINT_COLOR = "rgb(140,140,150)"
FAINT_SIZE = 4
FRONTIER_COLOR = "rgb(31,119,180)"
BAND_FILL = "rgba(31,119,180,0.18)"
MEASURED_COLOR = "rgb(214,39,40)"
VALIDATION_TOLERANCE = 0.2  # +-20 % guide lines on predicted-vs-measured plots (task brief)
INSIDE_COLOR = "rgb(44,160,44)"  # validation point within tolerance
OUTSIDE_COLOR = "rgb(255,127,14)"  # validation point outside tolerance
RANGE_PAD = 1.5  # validation axes extend this factor beyond the data on log axes
TEMPLATE = "plotly_white"
PAGE_CONFIG = {"displaylogo": False, "responsive": True}
FOOTNOTE_SHIFT_PX = 60  # below the x-axis title; needs a bottom margin > this
FOOTNOTE_LINE_PX = 18  # one more footnote line below the first (11 px font plus spacing; bottom margin 110 px holds it)
MODE_SYMBOL = {"agg": "circle", "disagg": "diamond"}
# a frontier point whose layout no measured calibration run had (its outside_calibration): the same shape, hollow
OUTSIDE_SUFFIX = "-open"
OUTSIDE_NOTE = "Hollow markers: layouts outside the measured calibration runs (priced from physics alone; see the hover)."
KNEE_COLOR = "rgb(255,176,0)"  # the knee: a gold star, outlined, above every other trace
KNEE_SYMBOL, KNEE_SIZE = "star", 20
SLA_COLOR = "rgb(44,160,44)"  # the best point under the SLA: a green ring around the point
SLA_SYMBOL, SLA_SIZE, SLA_RING_PX = "circle-open", 24, 3
TOP_MARGIN_PX = 110  # room above the plot for the title and a legend of up to three rows
TITLE_Y = 0.98  # the title at the very top of the page, above the legend (container coordinates)
# page CSS: a figure without its own height fills the browser window instead of plotly's fixed 450 px
PAGE_CSS = "<style>html,body,body>div{height:100%;margin:0}</style>"
NOTES_STYLE = "font-family:sans-serif;font-size:13px;color:#444;margin:8px 24px 24px"  # the notes below the figure
NOTES_POINTER = "{n} note{s} below the figure: what these numbers rest on (borrowed parameters, estimates, fallback kernels, ...)."
# with notes below the figure the page scrolls: its scrollbar is there from the start, so the figure is laid out at
# the width it keeps (a scrollbar appearing after the figure drew would push it sideways)
NOTES_PAGE_CSS = "<style>html{overflow-y:scroll}</style>"
AXIS_TYPE = "log"
LOG_TICKS = "D2"  # plotly log-axis ticks labelled at 1, 2 and 5 of each decade (not every digit)  # both frontier axes: tok/s/user and tok/s/GPU span decades (the latency end is not flat)

X_TITLE = "interactivity: output tok/s per user"
Y_TITLE = "throughput: output tok/s per GPU"
OUTPUT_NOTE = ("Throughput counts OUTPUT (generated) tokens only; prompt tokens are not counted. "
               "Cost in USD per million output tokens.")

# Columns carried into hover text, in this order (index = position in customdata).
HOVER_KEYS = ("mode", "tp", "pp", "ep", "attention_dp", "batch", "precision", "kv_dtype", "spec",
              "ttft_ms", "tpot_ms", "tok_s_user", "tok_s_gpu", "usd_per_mtok", "label", "outside_calibration")
HOVER_TEMPLATE = (
    "<b>%{customdata[14]}</b><br>"
    "%{customdata[0]}  TP=%{customdata[1]} PP=%{customdata[2]} EP=%{customdata[3]} "
    "attn-DP=%{customdata[4]}<br>"
    "batch=%{customdata[5]}  weights=%{customdata[6]}  KV=%{customdata[7]}  spec=%{customdata[8]}<br>"
    "TTFT %{customdata[9]:.1f} ms   TPOT %{customdata[10]:.2f} ms<br>"
    "%{customdata[11]:.1f} output tok/s/user<br>"
    "%{customdata[12]:.1f} output tok/s/GPU<br>"
    "%{customdata[13]:.3f} USD/Mtok output"
    "%{customdata[15]}"
    "<extra>%{fullData.name}</extra>"
)

# metric key -> (display name, unit) for validation pages.
VALIDATION_METRICS = {
    "ttft_ms": ("TTFT", "ms"),
    "tpot_ms": ("TPOT", "ms"),
    "tok_s_per_user": ("output tok/s per user", "tok/s"),
    "tok_s_per_gpu": ("output tok/s per GPU", "tok/s"),
    "output_tok_s_total": ("total output tok/s", "tok/s"),
}
VALIDATION_HOVER_KEYS = ("model", "gpu", "engine", "mode")


def _column(rows: Sequence[Mapping], key: str, default=np.nan) -> np.ndarray:
    """One key of every row as a numpy array (missing or None -> default)."""
    values = [row.get(key) for row in rows]
    return np.array([default if v is None else v for v in values], dtype=object)


def _floats(rows: Sequence[Mapping], key: str) -> np.ndarray:
    """One numeric key of every row as float64 (missing or None -> NaN)."""
    return _column(rows, key).astype(float)


def _customdata(rows: Sequence[Mapping]) -> np.ndarray:
    """(n, len(HOVER_KEYS)) object array for the hover template; absent spec/label shown as none/''."""
    if not rows:
        return np.empty((0, len(HOVER_KEYS)), dtype=object)
    cols = [_outside_text(rows) if k == "outside_calibration" else
            _column(rows, k, default="none" if k == "spec" else "" if k == "label" else "?") for k in HOVER_KEYS]
    return np.stack(cols, axis=1)


def frontier_mask(points: Sequence[Mapping], frontier: Sequence[Mapping]) -> np.ndarray:
    """True where a point has the same (tok/s/user, tok/s/GPU) as some frontier point."""
    key = _floats(points, "tok_s_user") + 1j * _floats(points, "tok_s_gpu")  # pair as one comparable value
    fkey = _floats(frontier, "tok_s_user") + 1j * _floats(frontier, "tok_s_gpu")
    return np.isin(key, fkey)


def sample_indices(x: np.ndarray, keep: np.ndarray, max_points: int = MAX_POINTS,
                   seed: int = SAMPLE_SEED) -> np.ndarray:
    """Sorted indices of at most ``max(max_points, keep.sum())`` points; every ``keep`` point included.

    The rest is a random sample stratified over ``N_STRATA`` log-spaced bins of ``x`` (proportional
    quota, at least one per occupied bin), so sparse regions of the cloud stay visible. Deterministic.
    """
    x, keep = np.asarray(x, dtype=float), np.asarray(keep, dtype=bool)
    if x.size <= max_points:
        return np.arange(x.size)
    rest = np.flatnonzero(~keep)
    room = max(max_points - int(keep.sum()), 0)  # slots left for non-kept points
    priority = np.random.default_rng(seed).random(rest.size)
    picked = _stratified_pick(x[rest], priority, max(room - N_STRATA, 0))
    picked = picked[np.argsort(priority[picked], kind="stable")[:room]]  # trim if the +1 per bin overflowed
    return np.sort(np.concatenate((np.flatnonzero(keep), rest[picked])))


def _stratified_pick(x: np.ndarray, priority: np.ndarray, budget: int) -> np.ndarray:
    """Positions picked per log-x stratum: floor(budget * share) + 1, lowest priority first."""
    logx = np.log10(np.clip(np.nan_to_num(x, nan=LOG_FLOOR), LOG_FLOOR, None))
    edges = np.linspace(logx.min(), logx.max(), N_STRATA + 1)
    strata = np.digitize(logx, edges[1:-1])  # 0 .. N_STRATA-1
    order = np.lexsort((priority, strata))  # by stratum, then random priority
    counts = np.bincount(strata, minlength=N_STRATA)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))  # start of each stratum in `order`
    rank = np.arange(x.size) - first[strata[order]]  # position within its stratum
    quota = budget * counts // max(x.size, 1) + 1  # proportional share, at least one per occupied bin
    return order[rank < quota[strata[order]]]


def _dominated_trace(points: Sequence[Mapping], frontier: Sequence[Mapping]) -> go.Scatter:
    """Faint cloud of dominated configurations, downsampled deterministically."""
    on_front = frontier_mask(points, frontier)
    idx = sample_indices(_floats(points, "tok_s_user"), on_front)
    idx = idx[~on_front[idx]]
    shown = [points[i] for i in idx]
    n_dominated = int((~on_front).sum())
    count = (f"{n_dominated:,}" if len(shown) == n_dominated
             else f"{len(shown):,} of {n_dominated:,} shown, stratified sample")
    return go.Scatter(
        x=_floats(shown, "tok_s_user"), y=_floats(shown, "tok_s_gpu"), mode="markers",
        name=f"dominated configs ({count})", opacity=FAINT_OPACITY,
        marker={"color": FAINT_COLOR, "size": FAINT_SIZE, "symbol": _symbols(shown)},
        customdata=_customdata(shown), hovertemplate=HOVER_TEMPLATE)


def _outside_text(rows: Sequence[Mapping]) -> np.ndarray:
    """Hover line per row naming its knobs outside the measured calibration layouts ('' inside them)."""
    return np.array(["<br>outside calibration: " + ", ".join(r["outside_calibration"]) if r.get("outside_calibration") else ""
                     for r in rows], dtype=object)


def _outside(rows: Sequence[Mapping]) -> np.ndarray:
    return np.array([bool(r.get("outside_calibration")) for r in rows], dtype=bool)


def _symbols(rows: Sequence[Mapping]) -> np.ndarray:
    """Marker symbol per row: disaggregated serving as diamonds, everything else as circles; hollow where the
    layout lies outside the measured calibration runs."""
    base = np.where(_column(rows, "mode", "") == "disagg", MODE_SYMBOL["disagg"], MODE_SYMBOL["agg"])
    return np.where(_outside(rows), np.char.add(base.astype(str), OUTSIDE_SUFFIX), base)


def _sorted_by_x(rows: Sequence[Mapping]) -> list[Mapping]:
    """Rows ordered by tok/s/user ascending (stable), so a frontier draws as one line."""
    order = np.argsort(_floats(rows, "tok_s_user"), kind="stable")
    return [rows[i] for i in order]


def _frontier_trace(frontier: Sequence[Mapping], name: str, color: str) -> go.Scatter:
    """Bold line + markers through the Pareto points, sorted by x."""
    rows = _sorted_by_x(frontier)
    return go.Scatter(
        x=_floats(rows, "tok_s_user"), y=_floats(rows, "tok_s_gpu"), mode="lines+markers", name=name,
        line={"color": color, "width": 3}, marker={"color": color, "size": 9, "symbol": _symbols(rows),
                                                    "line": {"color": "white", "width": 1}},
        customdata=_customdata(rows), hovertemplate=HOVER_TEMPLATE)


def _band_traces(bands: Mapping) -> list[go.Scatter]:
    """Uncertainty band: invisible lower edge, then upper edge filled down to it."""
    order = np.argsort(np.asarray(bands["x"], dtype=float), kind="stable")
    x = np.asarray(bands["x"], dtype=float)[order]
    low = go.Scatter(x=x, y=np.asarray(bands["y_low"], dtype=float)[order], mode="lines",
                     line={"width": 0}, hoverinfo="skip", showlegend=False, name="band low")
    high = go.Scatter(x=x, y=np.asarray(bands["y_high"], dtype=float)[order], mode="lines",
                      line={"width": 0}, fill="tonexty", fillcolor=BAND_FILL, hoverinfo="skip",
                      name="frontier uncertainty band")
    return [low, high]


def _measured_trace(measured: Sequence[Mapping]) -> go.Scatter:
    """Measured operating points as X markers drawn above the frontier."""
    return go.Scatter(
        x=_floats(measured, "tok_s_user"), y=_floats(measured, "tok_s_gpu"), mode="markers",
        name="measured", marker={"symbol": "x", "size": 13, "color": MEASURED_COLOR,
                                 "line": {"color": "black", "width": 1}},
        text=list(_column(measured, "label", "")),
        hovertemplate=("<b>%{text}</b><br>%{x:.1f} output tok/s/user<br>"
                       "%{y:.1f} output tok/s/GPU<extra>measured</extra>"))


def _marker_trace(row: Mapping, name: str, symbol: str, size: int, color: str, ring: bool = False) -> go.Scatter:
    """One highlighted configuration (the knee, the best point under the SLA) with its full hover text."""
    marker = ({"symbol": symbol, "size": size, "color": color, "line": {"color": color, "width": SLA_RING_PX}} if ring else
              {"symbol": symbol, "size": size, "color": color, "line": {"color": "black", "width": 1}})
    return go.Scatter(x=_floats([row], "tok_s_user"), y=_floats([row], "tok_s_gpu"), mode="markers", name=name,
                      marker=marker, customdata=_customdata([row]), hovertemplate=HOVER_TEMPLATE)


def _frontier_layout(fig: go.Figure, title: str) -> go.Figure:
    """Shared log-scale axes, template, legend and the output-tokens footnote."""
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left", "y": TITLE_Y, "yanchor": "top"}, template=TEMPLATE,
        hovermode="closest", margin={"b": 110, "t": TOP_MARGIN_PX},
        xaxis={"title": X_TITLE, "type": AXIS_TYPE, "dtick": LOG_TICKS},
        yaxis={"title": Y_TITLE, "type": AXIS_TYPE, "dtick": LOG_TICKS},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0,
                "traceorder": "normal"})
    return _footnote(fig, OUTPUT_NOTE)


def _footnote(fig: go.Figure, text: str) -> go.Figure:
    """Small grey note under the plot area."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0, y=0, yshift=-FOOTNOTE_SHIFT_PX,
                       xanchor="left", yanchor="top", showarrow=False, font={"size": 11, "color": "gray"})
    return fig


def frontier_figure(points: Sequence[Mapping], frontier: Sequence[Mapping], title: str,
                    bands: Mapping | None = None, measured: Sequence[Mapping] | None = None,
                    knee: Mapping | None = None, best: Mapping | None = None, sla: Mapping | None = None) -> go.Figure:
    """Dominated cloud (faint grey), optional band, Pareto frontier (bold blue), the knee (gold star), the
    best point under the SLA (green ring, legend names the SLA), optional measured X markers; log axes."""
    fig = go.Figure()
    if points:
        fig.add_trace(_dominated_trace(points, frontier))
    if bands is not None:
        fig.add_traces(_band_traces(bands))
    if frontier:
        fig.add_trace(_frontier_trace(frontier, "Pareto frontier", FRONTIER_COLOR))
    if best:
        fig.add_trace(_marker_trace(best, f"best under SLA ({sla_text(sla) or 'no SLA given'})", SLA_SYMBOL, SLA_SIZE, SLA_COLOR, ring=True))
    if knee:
        fig.add_trace(_marker_trace(knee, "knee of the frontier", KNEE_SYMBOL, KNEE_SIZE, KNEE_COLOR))
    if measured:
        fig.add_trace(_measured_trace(measured))
    return _outside_footnote(_frontier_layout(fig, title), frontier)


def _outside_footnote(fig: go.Figure, rows: Sequence[Mapping]) -> go.Figure:
    """A second footnote line saying what hollow markers mean, where any of ``rows`` is outside calibration."""
    if rows and _outside(rows).any():
        _footnote(fig, OUTSIDE_NOTE).layout.annotations[-1].update(yshift=-FOOTNOTE_SHIFT_PX - FOOTNOTE_LINE_PX)
    return fig


def to_html(fig: go.Figure, path: str | Path | None = None, notes: Sequence[str] | None = None) -> str:
    """Full standalone page with plotly.js inlined (offline); written to ``path`` if given. ``notes`` (what the
    numbers rest on: borrowed parameters, estimated peaks, fallback kernels) are listed below the figure, so the
    page carries the caveats the terminal output prints."""
    if notes:  # one more footnote line, under the others, points to the notes below the figure
        shifts = [a.yshift or 0 for a in fig.layout.annotations if a.yref == "paper" and a.y == 0 and a.yanchor == "top"]
        shift = (min(shifts) - FOOTNOTE_LINE_PX) if shifts else -FOOTNOTE_SHIFT_PX
        fig = go.Figure(fig)  # the caller's figure keeps its own annotations
        _footnote(fig, NOTES_POINTER.format(n=len(notes), s="s" if len(notes) > 1 else "")).layout.annotations[-1].update(yshift=shift)
        bottom = fig.layout.margin.b if fig.layout.margin.b is not None else 0
        fig.update_layout(margin={"b": max(bottom, -shift + FOOTNOTE_LINE_PX + 14)})  # the new line's 11 px font fits
    html = fig.to_html(include_plotlyjs=True, full_html=True, include_mathjax=False, config=PAGE_CONFIG)
    html = html.replace("<head>", "<head>" + PAGE_CSS, 1)
    if notes:
        items = "".join(f"<li>{escape(str(n))}</li>" for n in notes)
        # a <section>, not a <div>: PAGE_CSS gives the body's divs (the figure) the whole window
        block = f'<section style="{NOTES_STYLE}"><h3>Notes</h3><ul>{items}</ul></section>'
        html = html.replace("</body>", block + "</body>", 1).replace("</head>", NOTES_PAGE_CSS + "</head>", 1)
    if path is not None:
        Path(path).write_text(html, encoding="utf-8")
    return html


def frontier_html(points: Sequence[Mapping], frontier: Sequence[Mapping], path: str | Path | None = None,
                  title: str = "Latency-throughput frontier", bands: Mapping | None = None,
                  measured: Sequence[Mapping] | None = None, knee: Mapping | None = None,
                  best: Mapping | None = None, sla: Mapping | None = None, notes: Sequence[str] | None = None) -> str:
    """Offline HTML page of :func:`frontier_figure`, with the prediction's ``notes`` below it."""
    return to_html(frontier_figure(points, frontier, title, bands=bands, measured=measured, knee=knee, best=best, sla=sla), path,
                   notes=notes)


def compare_figure(frontiers: Mapping[str, Sequence[Mapping]], title: str,
                   knees: Mapping[str, Mapping | None] | None = None) -> go.Figure:
    """Several frontiers overlaid, one colour each (e.g. precision=fp8 vs nvfp4); each knee a star of its
    frontier's colour (``knees``: name -> knee point); log axes."""
    fig = go.Figure()
    palette = qualitative.Plotly
    for i, (name, rows) in enumerate(frontiers.items()):  # one trace per named frontier, not per config
        color = palette[i % len(palette)]
        fig.add_trace(_frontier_trace(rows, name, color).update(legendgroup=name))
        knee = (knees or {}).get(name)
        if knee:
            fig.add_trace(_marker_trace(knee, f"{name}: knee", KNEE_SYMBOL, KNEE_SIZE, color).update(legendgroup=name))
    return _outside_footnote(_frontier_layout(fig, title), [p for rows in frontiers.values() for p in rows])


def compare_html(frontiers: Mapping[str, Sequence[Mapping]], path: str | Path | None = None,
                 title: str = "Frontier comparison", knees: Mapping[str, Mapping | None] | None = None,
                 notes: Sequence[str] | None = None) -> str:
    """Offline HTML page of :func:`compare_figure`, with the comparison's ``notes`` below it."""
    if not frontiers:
        raise SimfrontError("compare needs at least one frontier")
    return to_html(compare_figure(frontiers, title, knees=knees), path, notes=notes)


def _metrics_present(rows: Sequence[Mapping]) -> list[str]:
    """Validation metrics that have both measured_ and predicted_ values in some row."""
    return [m for m in VALIDATION_METRICS
            if (np.isfinite(_floats(rows, f"measured_{m}")) & np.isfinite(_floats(rows, f"predicted_{m}"))).any()]


def _validation_traces(rows: Sequence[Mapping], metric: str, first: bool) -> tuple[list[go.Scatter], np.ndarray]:
    """Points (coloured by within/outside tolerance), y=x and +-tolerance lines; and the shared axis range."""
    meas, pred = _floats(rows, f"measured_{metric}"), _floats(rows, f"predicted_{metric}")
    ok = np.isfinite(meas) & np.isfinite(pred) & (meas > 0) & (pred > 0)  # log axes need > 0
    meas, pred = meas[ok], pred[ok]
    sub = [rows[i] for i in np.flatnonzero(ok)]
    ratio = pred / meas  # predicted / measured
    inside = np.abs(ratio - 1.0) <= VALIDATION_TOLERANCE
    hover = np.stack([_column(sub, k, "?") for k in VALIDATION_HOVER_KEYS] + [ratio], axis=1) if sub else None
    name, unit = VALIDATION_METRICS[metric]
    pts = go.Scatter(
        x=meas, y=pred, mode="markers", name="rows", showlegend=first,
        marker={"size": 8, "color": np.where(inside, INSIDE_COLOR, OUTSIDE_COLOR),
                "line": {"color": "white", "width": 0.5}},
        customdata=hover,
        hovertemplate=("%{customdata[0]} on %{customdata[1]}<br>%{customdata[2]}, %{customdata[3]}<br>"
                       f"measured %{{x:.3g}} {unit}<br>predicted %{{y:.3g}} {unit}<br>"
                       f"predicted/measured %{{customdata[4]:.2f}}<extra>{name}</extra>"))
    values = np.concatenate((meas, pred))
    x = np.array([values.min() / RANGE_PAD, values.max() * RANGE_PAD]) if values.size else np.array([1.0, 10.0])
    return [pts] + _guide_lines(x, first), x


def _guide_lines(x: np.ndarray, first: bool) -> list[go.Scatter]:
    """y = x and y = (1 +- tolerance) x between the two x values given."""
    tol = VALIDATION_TOLERANCE
    y_eq_x = go.Scatter(x=x, y=x, mode="lines", name="y = x", showlegend=first, hoverinfo="skip",
                        line={"color": "black", "width": 1})
    band = [go.Scatter(x=x, y=x * f, mode="lines", name=f"+-{tol:.0%}", showlegend=first and f > 1,
                       hoverinfo="skip", line={"color": "gray", "width": 1, "dash": "dash"})
            for f in (1 - tol, 1 + tol)]
    return [y_eq_x] + band


def validation_figure(rows: Sequence[Mapping], title: str) -> go.Figure:
    """One log-log predicted-vs-measured panel per metric present in ``rows``."""
    metrics = _metrics_present(rows)
    if not metrics:
        raise SimfrontError("no metric has both measured_<metric> and predicted_<metric> values; "
                            f"known metrics: {', '.join(VALIDATION_METRICS)}")
    n_cols = min(3, len(metrics))
    n_rows = -(-len(metrics) // n_cols)  # ceil division: panel grid rows
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=[VALIDATION_METRICS[m][0] for m in metrics],
                        horizontal_spacing=0.08, vertical_spacing=0.18)
    for i, metric in enumerate(metrics):  # one panel per metric (at most five)
        r, c = divmod(i, n_cols)
        traces, span = _validation_traces(rows, metric, first=i == 0)
        fig.add_traces(traces, rows=r + 1, cols=c + 1)
        unit, log_range = VALIDATION_METRICS[metric][1], np.log10(span)  # same range on both axes
        fig.update_xaxes(type="log", range=log_range, title=f"measured ({unit})", row=r + 1, col=c + 1)
        fig.update_yaxes(type="log", range=log_range, title=f"predicted ({unit})", row=r + 1, col=c + 1)
    fig.update_layout(title=title, template=TEMPLATE, height=420 * n_rows + 120, margin={"b": 110})
    return _footnote(fig, f"Green: within +-{VALIDATION_TOLERANCE:.0%} of measured; orange: outside. "
                          "tok/s metrics count OUTPUT (generated) tokens only.")


def validation_html(rows: Sequence[Mapping], path: str | Path | None = None,
                    title: str = "Predicted vs measured") -> str:
    """Offline HTML page of :func:`validation_figure`."""
    return to_html(validation_figure(rows, title), path)

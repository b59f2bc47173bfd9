"""Tests for simfront.plot: figure structure, offline HTML, downsampling, and a headless-Chromium render."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from simfront import plot
from simfront.errors import SimfrontError

from pngcheck import PNG_SIGNATURE, count_near, is_blank, picture_stats, read_png

# A <script> tag whose src points at the network (what an offline page must not have).
REMOTE_SCRIPT = re.compile(r"<script[^>]*\ssrc\s*=\s*[\"']?(https?:)?//", re.IGNORECASE)
FRONTIER_RGB = (31, 119, 180)  # plot.FRONTIER_COLOR
MEASURED_RGB = (214, 39, 40)  # plot.MEASURED_COLOR


def _row(i: int, tok_s_user: float, tok_s_gpu: float, mode: str = "agg") -> dict:
    return {"mode": mode, "tp": 1 + i % 8, "pp": 1, "ep": 8 * (i % 2) or 1, "attention_dp": bool(i % 3),
            "batch": 1 + i, "precision": "fp8", "kv_dtype": "fp8", "spec": None if i % 2 else "mtp",
            "ttft_ms": 100.0 + i, "tpot_ms": 1000.0 / tok_s_user, "tok_s_user": tok_s_user,
            "tok_s_gpu": tok_s_gpu, "usd_per_mtok": 0.5 + i / 1000}


def _cloud(n: int, seed: int = 1) -> tuple[list[dict], list[dict]]:
    """n synthetic configurations and their Pareto frontier (max tok/s/GPU at each tok/s/user)."""
    rng = np.random.default_rng(seed)
    user = rng.uniform(5.0, 200.0, n)
    gpu = 5000.0 / user * rng.uniform(0.2, 1.0, n)  # throughput falls with interactivity
    points = [_row(i, float(user[i]), float(gpu[i]), "agg" if i % 3 else "disagg") for i in range(n)]
    order = np.argsort(-user)
    best = np.maximum.accumulate(gpu[order])
    is_front = np.concatenate(([True], best[1:] > best[:-1]))  # new running max while moving left
    front_idx = rng.permutation(order[is_front])  # deliberately not sorted by x
    return points, [points[i] for i in front_idx]


@pytest.fixture(scope="module")
def cloud():
    return _cloud(300)


def _trace(fig, prefix):
    [trace] = [t for t in fig.data if (t.name or "").startswith(prefix)]
    return trace


# ---------- frontier figure structure ----------

def test_frontier_figure_has_all_layers(cloud):
    points, frontier = cloud
    bands = {"x": [p["tok_s_user"] for p in frontier], "y_low": [0.9 * p["tok_s_gpu"] for p in frontier],
             "y_high": [1.1 * p["tok_s_gpu"] for p in frontier]}
    measured = [{"tok_s_user": 50.0, "tok_s_gpu": 40.0, "label": "vllm run"}]
    fig = plot.frontier_figure(points, frontier, "t", bands=bands, measured=measured)
    names = [t.name for t in fig.data]
    assert any(n.startswith("dominated") for n in names)
    assert "Pareto frontier" in names and "measured" in names and "frontier uncertainty band" in names
    assert _trace(fig, "frontier uncertainty band").fill == "tonexty"
    assert _trace(fig, "measured").marker.symbol == "x"
    assert len(_trace(fig, "Pareto frontier").x) == len(frontier)


def test_frontier_trace_sorted_by_x_and_bold(cloud):
    points, frontier = cloud
    assert np.any(np.diff([p["tok_s_user"] for p in frontier]) < 0)  # input is unsorted
    tr = _trace(plot.frontier_figure(points, frontier, "t"), "Pareto frontier")
    assert np.all(np.diff(tr.x) > 0)
    assert tr.mode == "lines+markers" and tr.line.width >= 2


def test_dominated_points_are_faint_and_exclude_frontier(cloud):
    points, frontier = cloud
    dom = _trace(plot.frontier_figure(points, frontier, "t"), "dominated")
    assert dom.opacity < 0.5
    assert len(dom.x) == len(points) - len(frontier)
    assert f"({len(points) - len(frontier):,})" in dom.name  # not downsampled: plain count


def test_hover_shows_layout_and_units(cloud):
    points, frontier = cloud
    tr = _trace(plot.frontier_figure(points, frontier, "t"), "Pareto frontier")
    for text in ("TP=", "EP=", "PP=", "tok/s/user", "tok/s/GPU", "USD/Mtok"):
        assert text in tr.hovertemplate
    assert re.search(r"TTFT %\{customdata\[\d+\][^}]*\} ms", tr.hovertemplate)
    assert re.search(r"TPOT %\{customdata\[\d+\][^}]*\} ms", tr.hovertemplate)
    first = min(frontier, key=lambda p: p["tok_s_user"])  # customdata row 0 belongs to the smallest x
    keys = list(plot.HOVER_KEYS)
    assert tr.customdata[0][keys.index("tp")] == first["tp"]
    assert tr.customdata[0][keys.index("ep")] == first["ep"]
    assert tr.customdata[0][keys.index("ttft_ms")] == first["ttft_ms"]
    assert tr.customdata[0][keys.index("spec")] in ("mtp", "none")


def test_axes_units_template_and_output_footnote(cloud):
    fig = plot.frontier_figure(*cloud, "t")
    assert "tok/s per user" in fig.layout.xaxis.title.text
    assert "tok/s per GPU" in fig.layout.yaxis.title.text
    assert fig.layout.template.layout.paper_bgcolor is not None  # template applied (plotly_white)
    assert any("OUTPUT" in a.text for a in fig.layout.annotations)


def test_frontier_axes_are_log_scale(cloud):
    fig = plot.frontier_figure(*cloud, "t")
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert plot.compare_figure({"a": cloud[1]}, "c").layout.xaxis.type == "log"


def test_knee_and_best_under_sla_are_marked_and_distinct(cloud):
    points, frontier = cloud
    by_x = sorted(frontier, key=lambda p: p["tok_s_user"])
    knee, best = by_x[len(by_x) // 2], by_x[1]
    fig = plot.frontier_figure(points, frontier, "t", knee=knee, best=best, sla={"tpot_ms": 30.0, "ttft_ms": None})
    k, b = _trace(fig, "knee"), _trace(fig, "best under SLA")
    assert (k.x[0], k.y[0]) == (knee["tok_s_user"], knee["tok_s_gpu"])
    assert (b.x[0], b.y[0]) == (best["tok_s_user"], best["tok_s_gpu"])
    assert "TPOT <= 30 ms" in b.name and "TTFT" not in b.name  # the legend names the SLA that was given
    front, dom = _trace(fig, "Pareto frontier"), _trace(fig, "dominated")
    symbols = {k.marker.symbol, b.marker.symbol, "circle", "diamond"}
    assert len(symbols) == 4  # knee, SLA point and the frontier's own markers all differ
    assert len({k.marker.color, b.marker.color, front.line.color, dom.marker.color}) == 4
    names = [t.name for t in fig.data]
    assert names.index(k.name) > names.index(front.name) and names.index(b.name) > names.index(front.name)  # drawn on top
    assert k.customdata[0][list(plot.HOVER_KEYS).index("tp")] == knee["tp"]  # hover shows the configuration
    plain = plot.frontier_figure(points, frontier, "t")
    assert not [t for t in plain.data if (t.name or "").startswith(("knee", "best"))]


def test_compare_marks_each_knee_in_its_frontier_colour(cloud):
    _, frontier = cloud
    other = [dict(p, tok_s_gpu=2 * p["tok_s_gpu"]) for p in frontier]
    fig = plot.compare_figure({"fp8": frontier, "nvfp4": other}, "cmp", knees={"fp8": frontier[0], "nvfp4": None})
    [knee] = [t for t in fig.data if t.name.endswith("knee")]
    [fp8] = [t for t in fig.data if t.name == "fp8"]
    assert knee.name == "fp8: knee" and knee.marker.color == fp8.line.color
    assert knee.x[0] == frontier[0]["tok_s_user"]


def test_html_is_offline_and_written(cloud, tmp_path):
    path = tmp_path / "f.html"
    html = plot.frontier_html(*cloud, path=path, title="offline")
    assert path.read_text(encoding="utf-8") == html
    assert not REMOTE_SCRIPT.search(html)
    assert len(html) > 1_000_000  # plotly.js (several MB) is inlined
    assert REMOTE_SCRIPT.search('<script src="https://cdn.plot.ly/plotly.min.js"></script>')  # regex can fail


def test_the_page_carries_the_prediction_notes(cloud, tmp_path):
    """The notes the terminal prints (borrowed parameters, estimated peaks, ...) are listed under the figure, escaped,
    and a footnote line points to them; the caller's figure is left as it was."""
    notes = ["mi300x (cdna3, no calibration data): parameters borrowed from hopper", "a <b>tag</b> & more"]
    html = plot.frontier_html(*cloud, title="noted", notes=notes)
    assert "<h3>Notes</h3>" in html and "<li>mi300x (cdna3, no calibration data)" in html
    assert "a &lt;b&gt;tag&lt;/b&gt; &amp; more" in html and "<b>tag</b>" not in html
    assert "2 notes below the figure: what these numbers rest on" in html
    fig = plot.frontier_figure(*cloud, "noted")
    before = len(fig.layout.annotations)
    plot.to_html(fig, notes=notes)
    assert len(fig.layout.annotations) == before
    assert "<h3>Notes</h3>" not in plot.frontier_html(*cloud, title="plain")  # no notes, no section
    assert "<li>[nvfp4] a note</li>" in plot.compare_html({"fp8": cloud[1], "nvfp4": cloud[1]}, notes=["[nvfp4] a note"])


# ---------- downsampling ----------

def test_downsampling_caps_points_keeps_frontier_and_is_deterministic():
    points, frontier = _cloud(12_000, seed=3)
    fig1 = plot.frontier_figure(points, frontier, "t")
    fig2 = plot.frontier_figure(points, frontier, "t")
    dom = _trace(fig1, "dominated")
    assert len(dom.x) + len(frontier) <= plot.MAX_POINTS
    assert "stratified sample" in dom.name and f"of {len(points) - len(frontier):,}" in dom.name
    assert np.array_equal(dom.x, _trace(fig2, "dominated").x)
    front = _trace(fig1, "Pareto frontier")
    assert sorted(front.x) == sorted(p["tok_s_user"] for p in frontier)


def test_sample_indices_keeps_flagged_points_and_seed_matters():
    x = np.random.default_rng(0).uniform(1.0, 100.0, 20_000)
    keep = np.zeros(x.size, bool)
    keep[[3, 77, 19_999]] = True
    idx = plot.sample_indices(x, keep, max_points=1000, seed=0)
    assert idx.size <= 1000 and set([3, 77, 19_999]) <= set(idx.tolist())
    assert np.array_equal(idx, plot.sample_indices(x, keep, max_points=1000, seed=0))
    assert not np.array_equal(idx, plot.sample_indices(x, keep, max_points=1000, seed=1))
    assert np.array_equal(plot.sample_indices(x[:500], keep[:500], max_points=1000), np.arange(500))


def test_sample_indices_stratified_keeps_sparse_tail():
    # 19,990 points crowd x in [1, 2]; 10 lie near x = 1000. Plain random sampling at 5 % would
    # usually lose most of the tail; the stratified sample keeps one per occupied log-x bin.
    rng = np.random.default_rng(0)
    x = np.concatenate((rng.uniform(1.0, 2.0, 19_990), np.geomspace(500.0, 1000.0, 10)))
    idx = plot.sample_indices(x, np.zeros(x.size, bool), max_points=1000)
    assert idx.size <= 1000
    assert np.sum(x[idx] > 100.0) >= 5  # the 10 tail points span several bins


# ---------- compare and validation pages ----------

def test_compare_overlays_one_colour_per_frontier(cloud, tmp_path):
    _, frontier = cloud
    other = [dict(p, tok_s_gpu=1.5 * p["tok_s_gpu"]) for p in frontier]
    fig = plot.compare_figure({"fp8": frontier, "nvfp4": other}, "cmp")
    assert [t.name for t in fig.data] == ["fp8", "nvfp4"]
    assert fig.data[0].line.color != fig.data[1].line.color
    assert all(np.all(np.diff(t.x) > 0) for t in fig.data)
    html = plot.compare_html({"fp8": frontier, "nvfp4": other}, path=tmp_path / "c.html")
    assert not REMOTE_SCRIPT.search(html) and (tmp_path / "c.html").exists()
    with pytest.raises(SimfrontError):
        plot.compare_html({})


def _validation_rows() -> list[dict]:
    base = {"model": "llama-3.1-8b", "gpu": "H200", "engine": "vllm", "mode": "agg"}
    return [dict(base, measured_ttft_ms=100.0, predicted_ttft_ms=110.0, measured_tok_s_per_gpu=900.0,
                 predicted_tok_s_per_gpu=1000.0),
            dict(base, gpu="B200", measured_ttft_ms=50.0, predicted_ttft_ms=80.0, measured_tok_s_per_gpu=0.0,
                 predicted_tok_s_per_gpu=10.0)]  # zero measured: cannot be drawn on a log axis


def test_validation_one_log_panel_per_metric(tmp_path):
    fig = plot.validation_figure(_validation_rows(), "v")
    titles = [a.text for a in fig.layout.annotations]
    assert "TTFT" in titles and "output tok/s per GPU" in titles and "TPOT" not in titles
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis2.type == "log"
    assert "xaxis3" not in fig.layout.to_plotly_json()
    assert "(ms)" in fig.layout.xaxis.title.text and "(tok/s)" in fig.layout.yaxis2.title.text
    rows_ttft, rows_gpu = [t for t in fig.data if t.name == "rows"]
    assert len(rows_ttft.x) == 2 and len(rows_gpu.x) == 1  # the zero-measured row is dropped
    assert list(rows_ttft.marker.color) == [plot.INSIDE_COLOR, plot.OUTSIDE_COLOR]  # 1.10x in, 1.60x out
    for text in ("%{customdata[0]}", "%{customdata[1]}", "%{customdata[2]}", "%{customdata[3]}", "ms"):
        assert text in rows_ttft.hovertemplate
    assert list(rows_ttft.customdata[1][:4]) == ["llama-3.1-8b", "B200", "vllm", "agg"]
    html = plot.validation_html(_validation_rows(), path=tmp_path / "v.html")
    assert not REMOTE_SCRIPT.search(html)


def test_validation_guide_lines_have_tolerance_slopes():
    fig = plot.validation_figure(_validation_rows(), "v")
    lines = [t for t in fig.data if t.mode == "lines" and t.xaxis == "x"]
    slopes = sorted(float(t.y[1] / t.x[1]) for t in lines)
    assert slopes == pytest.approx([1 - plot.VALIDATION_TOLERANCE, 1.0, 1 + plot.VALIDATION_TOLERANCE])


def test_validation_without_metric_pairs_is_an_error():
    with pytest.raises(SimfrontError, match="measured_"):
        plot.validation_figure([{"model": "m", "measured_ttft_ms": 1.0}], "v")


# ---------- PNG reader (so the browser check below is trustworthy) ----------

def _encode_png(img: np.ndarray, filters: list[int]) -> bytes:
    """Minimal PNG encoder applying the given filter type per row (test helper)."""
    h, w, c = img.shape
    bpp, rows = c, img.reshape(h, w * c).astype(np.int32)
    out = bytearray()
    for y in range(h):
        cur, up = rows[y], rows[y - 1] if y else np.zeros(w * c, np.int32)
        left = np.concatenate((np.zeros(bpp, np.int32), cur[:-bpp]))
        upleft = np.concatenate((np.zeros(bpp, np.int32), up[:-bpp]))
        p = left + up - upleft
        pa, pb, pc = abs(p - left), abs(p - up), abs(p - upleft)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
        pred = [0 * cur, left, up, (left + up) // 2, paeth][filters[y]]
        out += bytes([filters[y]]) + ((cur - pred) & 0xFF).astype(np.uint8).tobytes()

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, {3: 2, 4: 6}[c], 0, 0, 0)
    return PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(out))) + chunk(b"IEND", b"")


@pytest.mark.parametrize("channels", [3, 4])
def test_png_reader_round_trips_every_filter(tmp_path, channels):
    img = np.random.default_rng(channels).integers(0, 256, (10, 7, channels), dtype=np.uint8)
    path = tmp_path / "r.png"
    path.write_bytes(_encode_png(img, [0, 1, 2, 3, 4, 4, 3, 2, 1, 0]))
    assert np.array_equal(read_png(path), img)


def test_blank_check_can_fail():
    white = np.full((80, 120, 3), 255, np.uint8)
    assert is_blank(white)
    noisy = np.random.default_rng(0).integers(0, 256, (80, 120, 3), dtype=np.uint8)
    assert not is_blank(noisy)


# ---------- headless Chromium, no network ----------

def _chromium() -> str | None:
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _screenshot(page: Path, tmp_path: Path) -> np.ndarray:
    """Render ``page`` in headless Chromium with networking blocked and decode the PNG."""
    png, profile = tmp_path / f"{page.stem}.png", tmp_path / f"profile-{page.stem}"
    profile.mkdir()
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--host-resolver-rules=MAP * ~NOTFOUND",  # no DNS: any http(s) fetch fails, the page must be offline
           f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1200,800",
           "--virtual-time-budget=5000", f"file://{page}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert png.exists(), f"chromium wrote no screenshot (rc={proc.returncode}): {proc.stderr[-2000:]}"
    return read_png(png)


needs_chromium = pytest.mark.skipif(
    _chromium() is None,
    reason="no Chromium found (/usr/bin/chromium, chromium or chromium-browser on PATH); "
           "install it with: apt-get install -y chromium")


@needs_chromium
def test_frontier_page_renders_offline_in_chromium(tmp_path):
    points, frontier = _cloud(2000)
    measured = [{"tok_s_user": 60.0, "tok_s_gpu": 120.0, "label": "measured run"}]
    page = tmp_path / "frontier.html"
    plot.frontier_html(points, frontier, path=page, title="render test", measured=measured)
    img = _screenshot(page, tmp_path)
    assert img.shape[:2] == (800, 1200)
    assert not is_blank(img), picture_stats(img)
    assert count_near(img, FRONTIER_RGB) > 500  # the frontier line itself was drawn
    assert count_near(img, MEASURED_RGB) > 30  # and the measured X marker


KNEE_RGB = (255, 176, 0)  # plot.KNEE_COLOR
SLA_RGB = (44, 160, 44)  # plot.SLA_COLOR


@needs_chromium
def test_knee_and_sla_point_render_in_chromium(tmp_path):
    points, frontier = _cloud(2000)
    by_x = sorted(frontier, key=lambda p: p["tok_s_user"])
    page = tmp_path / "marked.html"
    plot.frontier_html(points, frontier, path=page, title="marks", knee=by_x[len(by_x) // 2], best=by_x[1], sla={"tpot_ms": 30.0})
    img = _screenshot(page, tmp_path)
    assert count_near(img, KNEE_RGB) > 100  # the gold star (and its legend entry)
    assert count_near(img, SLA_RGB) > 50  # the green ring
    unmarked = tmp_path / "unmarked.html"
    plot.frontier_html(points, frontier, path=unmarked, title="marks")
    plain = _screenshot(unmarked, tmp_path)
    assert count_near(plain, KNEE_RGB) < 10 and count_near(plain, SLA_RGB) < 10  # the check can fail


@needs_chromium
def test_blank_and_cdn_pages_fail_the_check(tmp_path):
    empty = tmp_path / "empty.html"
    empty.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body></body></html>")
    assert is_blank(_screenshot(empty, tmp_path))
    # The same figure with plotly.js from the CDN cannot load without network: nothing is drawn.
    cdn = tmp_path / "cdn.html"
    cdn.write_text(plot.frontier_figure(*_cloud(200), "cdn").to_html(include_plotlyjs="cdn"))
    img = _screenshot(cdn, tmp_path)
    assert is_blank(img) and count_near(img, FRONTIER_RGB) == 0


def test_points_outside_the_calibration_layouts_are_hollow_and_named(cloud):
    points, frontier = cloud
    by_x = sorted(frontier, key=lambda p: p["tok_s_user"])
    marked = [dict(p, outside_calibration=["PP 2 (measured 1-1)"] if i == 0 else []) for i, p in enumerate(by_x)]
    fig = plot.frontier_figure(points, marked, "t")
    tr = _trace(fig, "Pareto frontier")
    assert tr.marker.symbol[0].endswith("-open") and not any(s.endswith("-open") for s in tr.marker.symbol[1:])
    keys = list(plot.HOVER_KEYS)
    assert "PP 2 (measured 1-1)" in tr.customdata[0][keys.index("outside_calibration")]
    assert tr.customdata[1][keys.index("outside_calibration")] == ""
    assert any(a.text == plot.OUTSIDE_NOTE for a in fig.layout.annotations)
    plain = plot.frontier_figure(points, frontier, "t")  # no point outside: no hollow marker, no footnote
    assert not any(a.text == plot.OUTSIDE_NOTE for a in plain.layout.annotations)
    cmp = plot.compare_figure({"a": marked, "b": frontier}, "c")
    assert any(a.text == plot.OUTSIDE_NOTE for a in cmp.layout.annotations)
    assert not any(a.text == plot.OUTSIDE_NOTE for a in plot.compare_figure({"b": frontier}, "c").layout.annotations)

"""Regenerate the README figure, docs/frontier.png: the predicted frontier of DeepSeek-R1 on 8xB200.

    python scripts/make_readme_figure.py [--out docs/frontier.png] [--chromium /usr/bin/chromium]

The picture is the page `simfront predict --model deepseek-r1 --gpus 8xB200 --isl 8192 --osl 1024
--html page.html` writes (``api.predict`` + ``report.write_frontier_html``: dominated configurations, the
p10-p90 band, the Pareto frontier and its knee, log-scale axes), screenshotted by headless Chromium.

Why Chromium: plotly's static export (``fig.write_image``) needs the kaleido package, which is not a
simfront dependency and cannot be installed offline; the rendered page is what users see anyway. The
screenshot runs as tests/test_plot.py renders pages: networking blocked, so the page must draw from its
inlined plotly.js. Chromium comes from the OS (`apt-get install -y chromium`; CI installs it). Only the
plotly toolbar and the page margin are hidden for the picture (one CSS rule added to the page's head).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import api, report  # noqa: E402

MODEL, GPUS, ISL, OSL = "deepseek-r1", "8xB200", 8192, 1024  # the README tour's example
WIDTH_PX, HEIGHT_PX = 1100, 650  # the picture's size in the README (the page's plot scales with the window)
RENDER_BUDGET_MS = 5000  # virtual time Chromium gives the page's scripts before the screenshot
# picture-only CSS: no toolbar, no page margin or scrollbar (the figure itself is unchanged)
# (and the plot as tall as the picture: headless Chromium reports a shorter window than it screenshots)
PICTURE_CSS = ("<style>body{margin:0;overflow:hidden}.modebar-container{display:none!important}"
               f"body>div,.plotly-graph-div{{height:{HEIGHT_PX}px!important}}</style>")


def find_chromium(given: str | None) -> str:
    for cand in ([given] if given else []) + ["/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or ""]:
        if cand and Path(cand).exists():
            return cand
    sys.exit("error: no Chromium found; install it (apt-get install -y chromium) or pass --chromium PATH")


def render(page: Path, png: Path, chromium: str) -> None:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
               "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}", f"--screenshot={png}",
               f"--window-size={WIDTH_PX},{HEIGHT_PX}", f"--virtual-time-budget={RENDER_BUDGET_MS}", f"file://{page}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if not png.exists():
        sys.exit(f"error: chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "frontier.png"))
    ap.add_argument("--chromium", default=None)
    args = ap.parse_args()
    chromium = find_chromium(args.chromium)
    res = api.predict(MODEL, GPUS, isl=ISL, osl=OSL)
    points = res.points  # every feasible configuration (the dominated cloud)
    with tempfile.TemporaryDirectory() as d:
        page = Path(d) / "frontier.html"
        report.write_frontier_html(res, points, str(page))
        page.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + PICTURE_CSS, 1), encoding="utf-8")
        out = Path(d) / "frontier.png"
        render(page, out, chromium)
        shutil.copyfile(out, args.out)
    print(f"wrote {args.out}: {res['model']} on {res['gpus']}, ISL {ISL} / OSL {OSL}, {len(res['frontier'])} frontier points "
          f"of {res['n_feasible']:,} feasible configurations")


if __name__ == "__main__":
    main()

"""Does calibrating on measurements help on measurements it has not seen? (issue: half/half check)

    python scripts/calibrate_half.py

Splits the shipped serving measurements (measurements/measured_serving.csv) into two halves by
configuration (every other (model, GPU, engine, mode, ISL, OSL) group), fits the serving profile on
half A only, and compares the error on half B before (neutral profile: no engine overheads, no
latency hiding, no burst queueing) and after. Then the same with the halves swapped.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront.calibration import Fitter, error_table  # noqa: E402
from simfront.ingest import load_measurements  # noqa: E402
from simfront.serving import NEUTRAL_PROFILE  # noqa: E402

NEUTRAL = NEUTRAL_PROFILE


def main() -> int:
    pts = load_measurements([str(ROOT / "measurements" / "measured_serving.csv")]).points
    f = Fitter(pts)
    keys = sorted({(p.model, p.gpu, p.engine, p.mode, p.isl, p.osl) for p in (pts[i] for i in f.rows)}, key=str)
    half_of = {k: j % 2 for j, k in enumerate(keys)}
    halves = [{i for i in f.rows if half_of[(pts[i].model, pts[i].gpu, pts[i].engine, pts[i].mode, pts[i].isl, pts[i].osl)] == h} for h in (0, 1)]
    print("| fitted on | scored on | rows scored | metric | MAPE before % | MAPE after % |")
    print("|---|---|---|---|---|---|")
    improved = True
    for a, b in ((0, 1), (1, 0)):
        before = error_table(pts, f.predict({"default": NEUTRAL}, halves[b]), halves[b])
        prof = f.fit(halves[a])
        after = error_table(pts, f.predict(prof, halves[b]), halves[b])
        for m in ("ttft_ms", "tpot_ms"):
            print(f"| half {'AB'[a]} ({len(halves[a])} rows) | half {'AB'[b]} | {after[m]['count']} | {m} | {before[m]['mape_pct']:.1f} | {after[m]['mape_pct']:.1f} |")
            improved &= after[m]["mape_pct"] < before[m]["mape_pct"]
    print("calibration improved the unseen half on every metric" if improved else "calibration did NOT improve every metric")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

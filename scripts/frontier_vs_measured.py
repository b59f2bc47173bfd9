"""Predicted frontiers against measured frontiers (issue: one deployment evaluator / knob-neutral fidelity).

For each sweep of a measured-point file (rows grouped by GPU, precision, ISL/OSL and mode), take the
measured Pareto set of (tok/s/user, output tok/s/GPU) and, for every measured Pareto point, simfront's
best tok/s/GPU at the same tok/s/user on the same GPU count (its whole frontier of that mode,
interpolated). Prints the geometric mean of predicted / measured per (GPU, precision, mode) and
overall, and writes the per-point table as JSON with ``--json``.

    python scripts/frontier_vs_measured.py [FILE] [--json out.json]

FILE defaults to ../shared/calibration/e2e/inferencemax_b200_h100.csv (beside the repository).
Nothing here is fitted: it only reads predictions and measurements.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import api  # noqa: E402
from simfront.ingest import load_measurements  # noqa: E402
from simfront.measured import resolve  # noqa: E402
from simfront.pareto import interp_frontier, pareto_mask  # noqa: E402

DEFAULT_FILE = ROOT.parent / "shared" / "calibration" / "e2e" / "inferencemax_b200_h100.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    ap.add_argument("--json", dest="json_out", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    pts = [p for p in load_measurements([args.file]).points if p.tok_s_per_user and p.output_tok_s_per_gpu]
    sweeps: dict[tuple, list] = defaultdict(list)
    for p in pts:
        r, why = resolve(p)
        if r is None:
            continue
        sweeps[(r.model.id, r.hw.id, r.precision.experts, int(r.isl), int(r.osl), p.mode or "agg")].append((p, r))
    rows = []
    cache: dict[tuple, list] = {}
    for (model, gpu, prec, isl, osl, mode), members in sorted(sweeps.items()):
        x = np.array([p.tok_s_per_user for p, _ in members])
        y = np.array([p.output_tok_s_per_gpu for p, _ in members])
        front = np.nonzero(pareto_mask(x, y))[0]
        for i in front:
            p, r = members[i]
            n = int(p.num_gpus or 0)
            if n < 1:
                continue
            key = (model, gpu, prec, isl, osl, mode, n)
            if key not in cache:
                res = api.predict(model, f"{n}x{gpu}", isl=isl, osl=osl, precision=[prec], modes=[mode])
                cache[key] = res["frontier"]
            f = cache[key]
            pred = float(interp_frontier([q["tok_s_user"] for q in f], [q["tok_s_gpu"] for q in f], p.tok_s_per_user)[0]) if f else math.nan
            rows.append({"model": model, "gpu": gpu, "precision": prec, "isl": isl, "osl": osl, "mode": mode, "num_gpus": n,
                         "measured_tok_s_user": p.tok_s_per_user, "measured_tok_s_gpu": p.output_tok_s_per_gpu,
                         "predicted_tok_s_gpu": pred if math.isfinite(pred) else None,
                         "ratio": pred / p.output_tok_s_per_gpu if math.isfinite(pred) and pred > 0 else None})
    groups: dict[tuple, list] = defaultdict(list)
    for r in rows:
        groups[(r["gpu"], r["precision"], r["mode"])].append(r)
    print(f"{len(pts)} measured rows, {len(sweeps)} sweeps, {len(rows)} measured Pareto points, {len(cache)} predicted frontiers "
          f"({time.perf_counter() - t0:.0f} s)")
    print(f"{'gpu':10} {'precision':10} {'mode':7} {'n':>4} {'reached':>7} {'geomean pred/meas':>18} {'median':>7} {'min':>6} {'max':>6}")
    summary = {}
    allr = []
    for (gpu, prec, mode), rs in sorted(groups.items()):
        ratios = np.array([r["ratio"] for r in rs if r["ratio"]])
        allr += list(ratios)
        gm = float(np.exp(np.mean(np.log(ratios)))) if ratios.size else math.nan
        summary[f"{gpu}/{prec}/{mode}"] = {"points": len(rs), "reached": int(ratios.size), "geomean_ratio": gm}
        print(f"{gpu:10} {prec:10} {mode:7} {len(rs):>4} {ratios.size:>7} {gm:>18.2f} "
              f"{np.median(ratios) if ratios.size else math.nan:>7.2f} {ratios.min() if ratios.size else math.nan:>6.2f} "
              f"{ratios.max() if ratios.size else math.nan:>6.2f}")
    allr = np.array(allr)
    print(f"overall geomean predicted/measured best tok/s/GPU at the measured tok/s/user: {np.exp(np.mean(np.log(allr))):.2f} "
          f"over {allr.size} points (not reached: {len(rows) - allr.size})")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

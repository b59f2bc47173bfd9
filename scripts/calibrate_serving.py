"""Fit the per-engine serving profile on measured serving runs and report the error honestly.

    python scripts/calibrate_serving.py                 # fit, write hardware/efficiency/serving.yaml, print report
    python scripts/calibrate_serving.py --no-write      # report only

The profile has six physical parameters per engine (TensorRT-LLM, SGLang, vLLM; plus a pooled
``default`` for unknown engines): the share of per-kernel fixed latency hidden inside a step
(CUDA graphs / PDL / fusion), a step-time scale, a per-step CPU overhead, how synchronised
closed-loop arrival waves stay (burst fraction), a TTFT scale and a per-request TTFT overhead.
Kernel-level efficiencies are NOT refitted here (they come from the kernel calibration).

Report: MAPE of TTFT and TPOT in-sample and leave-one-model-out (profiles fitted without the
model being scored), broken down by model, GPU, engine and mode; coverage; and the median absolute
error of output tokens/s on the offline max-throughput table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront.ingest import load_measurements  # noqa: E402
from simfront.measured import build_groups, evaluate  # noqa: E402
from simfront.models import resolve_name  # noqa: E402

DATA = ROOT.parent / "shared" / "calibration" / "e2e"
PARAMS = {  # name: (initial, low, high)
    "kernel_overlap": (0.5, 0.0, 0.95),
    "step_scale": (1.0, 0.5, 2.0),
    "step_overhead_s": (5e-4, 0.0, 5e-3),
    "burst_fraction": (0.5, 0.0, 1.0),
    "ttft_scale": (1.0, 0.3, 5.0),
    "ttft_overhead_s": (0.05, 0.0, 0.5),
}
NAMES = list(PARAMS)
ENGINES = ("trtllm", "sglang", "vllm")


def profile(x) -> dict:
    return dict(zip(NAMES, map(float, x)))


def metrics_for(groups, base, profiles: dict) -> list[dict]:
    def prof_for(engine):
        return profiles.get(engine, profiles.get("default"))
    return evaluate(groups, base, prof_for)


def residuals(groups, base, points, idx_rows, profiles) -> np.ndarray:
    pred = metrics_for(groups, base, profiles)
    res = []
    for i in idx_rows:
        p, m = pred[i], points[i]
        for k in ("ttft_ms", "tpot_ms"):
            v, y = p.get(f"predicted_{k}"), getattr(m, k)
            if v and y and v > 0 and y > 0:
                res.append(np.log(v / y))
    return np.asarray(res)


def fit(groups, base, points, rows, engines) -> dict:
    """Per-engine profiles fitted on ``rows``; engines with no rows get the pooled default."""
    x0 = np.array([PARAMS[n][0] for n in NAMES])
    lo = np.array([PARAMS[n][1] for n in NAMES])
    hi = np.array([PARAMS[n][2] for n in NAMES])
    out = {}
    # restrict groups to the rows each fit uses (fast: metrics are cached per group)
    pooled_groups = [g for g in groups if any(i in rows for i in g.idx)]

    def solve(sel_rows, sel_groups):
        def f(x):
            prof = profile(x)
            return residuals(sel_groups, base, points, sel_rows, {e: prof for e in (*ENGINES, "default", None)})
        r = least_squares(f, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.3, x_scale=hi - lo, max_nfev=60)
        return profile(r.x)

    out["default"] = solve(rows, pooled_groups)
    for e in engines:
        er = {i for i in rows if points[i].engine == e}
        if len(er) >= 20:
            out[e] = solve(er, [g for g in pooled_groups if g.engine == e])
    return out


def ape(pred, meas):
    return abs(pred / meas - 1.0) * 100


def summarise(points, pred, rows, key) -> dict:
    acc = defaultdict(lambda: {"ttft_ms": [], "tpot_ms": []})
    for i in rows:
        k = key(points[i])
        for m in ("ttft_ms", "tpot_ms"):
            v, y = pred[i].get(f"predicted_{m}"), getattr(points[i], m)
            if v and y:
                acc[k][m].append(ape(v, y))
                acc["ALL"][m].append(ape(v, y))
    return {k: {m: (len(v), float(np.mean(v)) if v else float("nan"), float(np.median(v)) if v else float("nan"))
                for m, v in d.items()} for k, d in acc.items()}


def table(title, summ) -> list[str]:
    lines = [f"### {title}", "", "| group | n | TTFT MAPE % | TTFT median APE % | TPOT MAPE % | TPOT median APE % |", "|---|---|---|---|---|---|"]
    for k in sorted(summ, key=lambda k: (k != "ALL", str(k))):
        t, p = summ[k]["ttft_ms"], summ[k]["tpot_ms"]
        lines.append(f"| {k} | {max(t[0], p[0])} | {t[1]:.1f} | {t[2]:.1f} | {p[1]:.1f} | {p[2]:.1f} |")
    return lines + [""]


def model_id(p) -> str:
    try:
        return resolve_name(p.model)[0]
    except Exception:
        return str(p.model)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--report", default=str(ROOT / "docs" / "calibration_serving.md"))
    a = ap.parse_args(argv)
    t0 = time.time()
    ing = load_measurements([str(Path(a.data) / "measured_serving.csv")])
    points = ing.points
    groups, base = build_groups(points)
    rows = {i for i, b in enumerate(base) if "reason" not in b}
    assumed = {i for i in rows if points[i].mode == "disagg" and points[i].prefill_workers is None}
    engines = sorted({points[i].engine for i in rows if points[i].engine})
    lines = ["# Serving calibration report", "", f"Produced by `python scripts/calibrate_serving.py` on `{a.data}/measured_serving.csv`.", ""]
    n_rows_file = len(points) + len(ing.problems)
    lines += [f"- rows in file: {n_rows_file}; ingested points: {len(points)}; rows reported by ingest (duplicates, bad values): {len(ing.problems)}",
              f"- predicted: {len(rows)} ({100 * len(rows) / max(n_rows_file, 1):.1f}% of rows, {100 * len(rows) / max(len(points), 1):.1f}% of points); "
              f"not predicted: {len(points) - len(rows)} (reasons below)",
              f"- disaggregated rows without worker counts, predicted as 1 prefill + 1 decode worker (an assumption): {len(assumed)}", ""]
    reasons = defaultdict(int)
    for b in base:
        if "reason" in b:
            reasons[b["reason"][:90]] += 1
    lines += [f"  - {n} x {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1])] + [""]

    # in-sample fit
    profiles = fit(groups, base, points, rows, engines)
    pred = metrics_for(groups, base, profiles)
    lines += ["## Fitted profiles", "", "```yaml", yaml.safe_dump(profiles, sort_keys=True).strip(), "```", ""]
    lines += ["## In-sample error (profiles fitted on all rows)", ""]
    lines += table("by engine", summarise(points, pred, rows, lambda p: p.engine))
    lines += table("by mode", summarise(points, pred, rows, lambda p: p.mode))
    lines += table("by model", summarise(points, pred, rows, model_id))
    lines += table("by GPU", summarise(points, pred, rows, lambda p: p.gpu))
    lines += table("rows with known worker counts only", summarise(points, pred, rows - assumed, lambda p: p.mode))

    # leave-one-model-out
    models = sorted({model_id(points[i]) for i in rows})
    lomo = [dict() for _ in points]
    for mid in models:
        held = {i for i in rows if model_id(points[i]) == mid}
        train = rows - held
        prof = fit(groups, base, points, train, engines)
        pr = metrics_for([g for g in groups if any(i in held for i in g.idx)], base, prof)
        for i in held:
            lomo[i] = pr[i]
    lines += ["## Leave-one-model-out (profiles fitted without the scored model)", ""]
    lines += table("by engine", summarise(points, lomo, rows, lambda p: p.engine))
    lines += table("by mode", summarise(points, lomo, rows, lambda p: p.mode))
    lines += table("by model", summarise(points, lomo, rows, model_id))
    lines += table("by GPU", summarise(points, lomo, rows, lambda p: p.gpu))

    # offline max-throughput table
    off = load_measurements([str(Path(a.data) / "offline_throughput.csv")])
    og, ob = build_groups(off.points)
    opred = metrics_for(og, ob, profiles)
    errs = [ape(p["predicted_output_tok_s_total"], m.output_tok_s_total) for p, m in zip(opred, off.points)
            if p.get("predicted_output_tok_s_total") and m.output_tok_s_total]
    lines += ["## Offline max-throughput (offline_throughput.csv)", "",
              f"- points: {len(off.points)}; predicted: {len(errs)}; median absolute error of output tok/s: "
              f"{np.median(errs):.1f}%; mean {np.mean(errs):.1f}%; p90 {np.percentile(errs, 90):.1f}%", ""]
    lines += [f"_runtime {time.time() - t0:.0f} s_", ""]
    text = "\n".join(lines)
    print(text)
    Path(a.report).parent.mkdir(parents=True, exist_ok=True)
    Path(a.report).write_text(text)
    if not a.no_write:
        out = {"fitted_by": "scripts/calibrate_serving.py", "fitted_on": "shared/calibration/e2e/measured_serving.csv (NVIDIA aiconfigurator 0.12.0 measured serving set)",
               "note": "per-engine serving overheads; families are engine names", "families": profiles, "family_fallback": {}}
        (ROOT / "hardware" / "efficiency" / "serving.yaml").write_text(yaml.safe_dump(out, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

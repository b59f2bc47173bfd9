"""Fit the per-engine serving profile on measured serving runs and report the error honestly.

    python scripts/calibrate_serving.py                 # fit, write hardware/efficiency/serving.yaml, print report
    python scripts/calibrate_serving.py --no-write      # report only

The profile (simfront.calibration.PARAMS) has nine physical parameters per engine (TensorRT-LLM,
SGLang, vLLM, plus a pooled ``default``). Kernel efficiencies are NOT refitted here. The report
gives TTFT / TPOT error in-sample and leave-one-model-out (profiles fitted without the model
being scored), broken down by model, GPU, engine and mode; coverage; the offline max-throughput
error; and the p10-p90 bands (from the leave-one-model-out residuals) that predictions carry.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import calibration  # noqa: E402
from simfront.calibration import Fitter, band_quantiles  # noqa: E402
from simfront.fidelity import MIN_BIN_ROWS, residual_trends  # noqa: E402
from simfront.ingest import load_measurements  # noqa: E402
from simfront.measured import build_groups, evaluate, measured_layout_ranges, measured_layout_ranges_by_family  # noqa: E402
from simfront.validation import _gpu_id, _model_id  # noqa: E402

DATA = ROOT / "measurements"
# the measured serving sets the profile is fitted on: aiconfigurator's serving runs and InferenceMAX's whole
# frontiers (concurrency sweeps, agg and disagg, MTP on and off); each is also scored by a fit on the other alone
SOURCES = ("measured_serving.csv", "inferencemax_b200_h100.csv")
POOLING_CHOICES = (0.0, 0.5, 1.0, 2.0, 4.0)  # partial-pooling weights compared by --pooling-sweep


def network_id(name) -> str:
    """The held-out unit of leave-one-model-out: models that are the same network (DeepSeek-R1 and DeepSeek-V3: one
    architecture, and measured_serving.csv holds 199 of their runs under both names with the same metrics) go out
    together, so a held-out model's twin rows cannot score it in sample."""
    from simfront.errors import SimfrontError
    from simfront.models import get_model

    mid = _model_id(name)
    try:
        return get_model(mid).arch.describe()
    except SimfrontError:
        return mid


def summarise(points, pred, rows, key) -> dict:
    acc = defaultdict(lambda: {"ttft_ms": [], "tpot_ms": []})
    for i in rows:
        k = key(points[i])
        for m in ("ttft_ms", "tpot_ms"):
            v, y = pred[i].get(f"predicted_{m}"), getattr(points[i], m)
            if v and y:
                e = abs(v / y - 1.0) * 100
                acc[k][m].append(e)
                acc["ALL"][m].append(e)
    return {k: {m: (len(v), float(np.mean(v)) if v else float("nan"), float(np.median(v)) if v else float("nan"))
                for m, v in d.items()} for k, d in acc.items()}


def table(title, summ) -> list[str]:
    lines = [f"### {title}", "", "| group | n | TTFT MAPE % | TTFT median APE % | TPOT MAPE % | TPOT median APE % |", "|---|---|---|---|---|---|"]
    for k in sorted(summ, key=lambda k: (k != "ALL", str(k))):
        t, p = summ[k]["ttft_ms"], summ[k]["tpot_ms"]
        lines.append(f"| {k} | {max(t[0], p[0])} | {t[1]:.1f} | {t[2]:.1f} | {p[1]:.1f} | {p[2]:.1f} |")
    return lines + [""]


def breakdowns(points, pred, rows) -> list[str]:
    out = []
    for title, key in (("by engine", lambda p: p.engine), ("by mode", lambda p: p.mode), ("by model", lambda p: _model_id(p.model)),
                       ("by GPU", lambda p: _gpu_id(p.gpu)), ("by source", lambda p: Path(p.source_file).name)):
        out += table(title, summarise(points, pred, rows, key))
    return out


# the bands every judged knob bin's median predicted/measured TPOT and output tok/s/GPU should sit in (issue 12)
TPOT_BIN_BAND = (0.9, 1.1)
GPU_BIN_BAND = (0.85, 1.15)


def knob_trends(points, preds: dict[str, list], rows) -> list[str]:
    """Median predicted/measured TPOT, TTFT and output tok/s/GPU per knob bin, one column per fit (in-sample,
    leave-one-model-out, leave-one-engine-out), and the judged bins whose TPOT median leaves ``TPOT_BIN_BAND`` or
    whose tok/s/GPU median (rows that report it: the InferenceMAX file) leaves ``GPU_BIN_BAND``."""
    tables = {}
    for name, pred in preds.items():
        recs = []
        for i in rows:
            r = points[i].model_dump()
            r.update({k: v for k, v in pred[i].items() if k.startswith("predicted_")})
            r["predicted_tok_s_per_gpu"] = pred[i].get("predicted_output_tok_s_per_gpu")  # the validate row's name
            recs.append(r)
        tables[name] = {(t["knob"], t["bin"]): t for t in residual_trends(recs)}
    keys = sorted(set().union(*tables.values()))
    names = list(preds)
    head = ("| knob | bin | n | " + " | ".join(f"TPOT {n}" for n in names) + " | " + " | ".join(f"TTFT {n}" for n in names)
            + " | n tok/s/GPU | " + " | ".join(f"tok/s/GPU {n}" for n in names) + " |")
    lines = [head, "|" + "---|" * (4 + 3 * len(names))]
    outside = {n: [] for n in names}
    outside_gpu = {n: [] for n in names}
    for k in keys:
        first = next(t[k] for t in tables.values() if k in t)
        judged = first["count"] >= MIN_BIN_ROWS
        n_gpu = first.get("output_tok_s_per_gpu_count", 0)
        cells = []
        for metric in ("tpot_ms", "ttft_ms", "output_tok_s_per_gpu"):
            if metric == "output_tok_s_per_gpu":
                cells.append(str(n_gpu))
            for n in names:
                v = tables[n].get(k, {}).get(f"{metric}_ratio")
                cells.append("" if v is None else f"{v:.2f}")
                if metric == "tpot_ms" and judged and v is not None and not TPOT_BIN_BAND[0] <= v <= TPOT_BIN_BAND[1]:
                    outside[n].append(f"{k[0]} {k[1]} ({v:.2f})")
                if (metric == "output_tok_s_per_gpu" and n_gpu >= MIN_BIN_ROWS and v is not None
                        and not GPU_BIN_BAND[0] <= v <= GPU_BIN_BAND[1]):
                    outside_gpu[n].append(f"{k[0]} {k[1]} ({v:.2f})")
        lines.append(f"| {k[0]} | {k[1]}{'' if judged else ' ~'} | {first['count']} | " + " | ".join(cells) + " |")
    lines.append("")
    for n in names:
        lines.append(f"- {n}: {len(outside[n])} judged bins (>= {MIN_BIN_ROWS} rows) with median TPOT outside "
                     f"[{TPOT_BIN_BAND[0]}, {TPOT_BIN_BAND[1]}]" + (f": {'; '.join(outside[n])}" if outside[n] else ""))
        lines.append(f"- {n}: {len(outside_gpu[n])} judged bins (>= {MIN_BIN_ROWS} rows with tok/s/GPU) with median tok/s/GPU "
                     f"outside [{GPU_BIN_BAND[0]}, {GPU_BIN_BAND[1]}]"
                     + (f": {'; '.join(outside_gpu[n])}" if outside_gpu[n] else ""))
    return lines + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--report", default=str(ROOT / "docs" / "calibration_serving.md"))
    ap.add_argument("--pooling-sweep", action="store_true",
                    help=f"also report in-sample and leave-one-model-out error for pooling weights {POOLING_CHOICES} (slow)")
    a = ap.parse_args(argv)
    t0 = time.time()
    files = [str(Path(a.data) / name) for name in SOURCES]
    ing = load_measurements(files)
    points = ing.points
    f = Fitter(points)
    rows = f.rows
    n_file = len(points) + len(ing.problems)
    rel = os.path.relpath(Path(a.data).resolve(), ROOT)
    lines = ["# Serving calibration report", "", "Produced by `python scripts/calibrate_serving.py` on "
             + " and ".join(f"`{rel}/{name}`" for name in SOURCES) + ".", "",
             f"- rows in the files: {n_file}; ingested points: {len(points)}; rows reported by ingest (duplicates, bad values, "
             f"layouts that cannot be told): {len(ing.problems)}",
             f"- fitted and scored: {len(rows)} ({100 * len(rows) / max(len(points), 1):.1f}% of ingested points, {100 * len(rows) / n_file:.1f}% of file rows); "
             f"not predicted: {sum('reason' in b for b in f.base)}:", ""]
    reasons = defaultdict(int)
    for b in f.base:
        if "reason" in b:
            reasons[b["reason"][:100]] += 1
    lines += [f"  - {n} x {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1])] + [""]
    flagged = [(points[i], b["measurement_flag"]) for i, b in enumerate(f.base) if "measurement_flag" in b]
    if flagged:  # predicted, but the measurement contradicts its own setup: left out of the fit and the scores
        lines += [f"- predicted but left out of fit and scores, their measurement contradicting their own setup: {len(flagged)}", ""]
        lines += [f"  - {Path(p.source_file).name}:{p.line} ({_model_id(p.model)}, {_gpu_id(p.gpu)}, {p.engine}, "
                  f"{p.isl:g}/{p.osl:g}, concurrency {p.concurrency:g}): {why}" for p, why in flagged] + [""]

    layouts = measured_layout_ranges(points, sorted(rows))
    by_family = measured_layout_ranges_by_family(points, sorted(rows))
    lines += ["- worker layouts of the fitted runs ([smallest, largest]; `calibrated_layouts` in serving.yaml): "
              + ", ".join(f"{k} {v[0]}-{v[1]}" for k, v in layouts.items()), ""]
    lines += [f"  - {fam} (`calibrated_layouts_by_family`, the ranges outside which `predict` flags a frontier point on a GPU "
              f"of that family): " + ", ".join(f"{k} {v[0]}-{v[1]}" for k, v in rng.items()) for fam, rng in by_family.items()] + [""]
    profiles = f.fit()
    pred = f.predict(profiles)
    lines += ["## Fitted profiles", "", "```yaml", yaml.safe_dump(profiles, sort_keys=True).strip(), "```", ""]
    lines += ["## In-sample error (profiles fitted on all rows)", ""] + breakdowns(points, pred, rows)
    lomo = f.cross_validate(folds=10_000, key=lambda p: network_id(p.model), start=profiles)
    lines += ["## Leave-one-model-out (profiles fitted without the scored model and any model of the same network: "
              "DeepSeek-R1 and DeepSeek-V3 go out together)", ""] + breakdowns(points, lomo, rows)
    src = lambda p: Path(p.source_file).name  # noqa: E731 - the file a point came from
    loso = f.cross_validate(folds=10_000, key=src, start=profiles)
    lines += ["## Leave-one-source-out (each file scored by profiles fitted on the other file alone)", ""]
    lines += table("by source", summarise(points, loso, rows, src)) + table("by mode", summarise(points, loso, rows, lambda p: f"{src(p)} {p.mode}"))
    loeo = f.cross_validate(folds=10_000, key=lambda p: p.engine, start=profiles)
    lines += ["## Leave-one-engine-out (the scored engine's profile fitted without its rows: the pooled fit of the others)", ""]
    lines += table("by engine", summarise(points, loeo, rows, lambda p: p.engine))
    lines += ["## Residual trends by knob bin (median predicted / measured; bins under "
              f"{MIN_BIN_ROWS} rows marked ~)", ""] + knob_trends(points, {"in-sample": pred, "LOMO": lomo, "LOEO": loeo}, rows)
    bands = band_quantiles(points, lomo, rows)
    lines += ["## Prediction bands (p10 / p90 of log(measured / predicted), leave-one-model-out)", "", "```yaml",
              yaml.safe_dump(bands, sort_keys=True).strip(), "```", ""]

    if a.pooling_sweep:
        lines += ["## Partial-pooling weight (how strongly engine profiles are pulled to the all-engine fit)", "",
                  f"The shipped weight is {calibration.POOLING_WEIGHT}, chosen from this table by the leave-one-model-out",
                  "error; the choice itself is therefore not out of sample.", "",
                  "| weight | in-sample TTFT MAPE % | in-sample TPOT MAPE % | LOMO TTFT MAPE % | LOMO TPOT MAPE % |", "|---|---|---|---|---|"]
        shipped = calibration.POOLING_WEIGHT
        for w in POOLING_CHOICES:
            calibration.POOLING_WEIGHT = w
            pw = f.fit()
            ins = summarise(points, f.predict(pw), rows, lambda p: "ALL")["ALL"]
            lo = summarise(points, f.cross_validate(folds=10_000, key=lambda p: network_id(p.model), start=pw), rows, lambda p: "ALL")["ALL"]
            lines.append(f"| {w} | {ins['ttft_ms'][1]:.1f} | {ins['tpot_ms'][1]:.1f} | {lo['ttft_ms'][1]:.1f} | {lo['tpot_ms'][1]:.1f} |")
        calibration.POOLING_WEIGHT = shipped
        lines.append("")

    off = load_measurements([str(Path(a.data) / "offline_throughput.csv")])
    og, ob = build_groups(off.points)
    opred = evaluate(og, ob, lambda e: profiles.get(e, profiles["default"]))
    errs = [abs(p["predicted_output_tok_s_total"] / m.output_tok_s_total - 1) * 100 for p, m in zip(opred, off.points)
            if p.get("predicted_output_tok_s_total") and m.output_tok_s_total]
    lines += ["## Offline max-throughput (offline_throughput.csv)", "",
              f"- points: {len(off.points)}; predicted: {len(errs)}; median absolute error of output tok/s: {np.median(errs):.1f}%; "
              f"mean {np.mean(errs):.1f}%; p90 {np.percentile(errs, 90):.1f}%", "", f"_runtime {time.time() - t0:.0f} s_", ""]
    text = "\n".join(lines)
    print(text)
    Path(a.report).parent.mkdir(parents=True, exist_ok=True)
    Path(a.report).write_text(text)
    if not a.no_write:
        out = {"fitted_by": "scripts/calibrate_serving.py",
               "fitted_on": "measurements/measured_serving.csv (NVIDIA aiconfigurator 0.12.0 measured serving set) and "
                            "measurements/inferencemax_b200_h100.csv (SemiAnalysis InferenceMAX public results)",
               "note": "per-engine serving profile; families are engine names; uncertainty = p10/p90 of log(measured/predicted), leave-one-model-out",
               "families": profiles, "family_fallback": {}, "uncertainty": bands,
               "calibrated_gpus": sorted({_gpu_id(points[i].gpu) for i in rows}),
               "calibrated_models": sorted({_model_id(points[i].model) for i in rows}),
               # [smallest, largest] of each worker knob over the fitted runs: a frontier point outside them is priced
               # from physics alone (simfront.coverage; predict's outside_calibration)
               "calibrated_layouts": layouts,
               # the same per GPU family: a layout measured on one family's interconnect and kernels is not measured on
               # another's; a family without runs is judged against every run (simfront.coverage.calibrated_layouts)
               "calibrated_layouts_by_family": by_family}
        (ROOT / "hardware" / "efficiency" / "serving.yaml").write_text(yaml.safe_dump(out, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""Serving predictions on GPUs and runs outside the calibration data: InferenceX's public results API snapshot.

    python scripts/validate_heldout_gpus.py [file.json] [--json out.json] [--report docs/heldout_gpus.md]

Nothing here is fitted: every row is predicted with the shipped parameters (``simfront validate``'s evaluator), so
the figures say how simfront does on GPUs it was not calibrated on (MI300X, MI325X, MI355X, H200, GB200, B300, ...:
their kernel parameters fitted on H100 and B200 or borrowed from another family, their peaks from the catalog) and,
for the two calibration GPUs, on the same runs as the calibration file. The snapshot's own sidecar
(measurements/inferencex_api_snapshot.simfront.yaml) includes the calibration file's recipe facts for B200 and H100 and
carries those of the other GPUs' aggregated runs, read from the public benchmark scripts; the other GPUs'
disaggregated runs keep simfront's defaults. Per GPU: rows,
whether its kernel parameters are fitted on it, on its family or borrowed (``simfront.efficiency.provenance``), the
median predicted / measured TPOT, TTFT and output tok/s per GPU, their MAPEs, and how many measured values fall
inside the p10-p90 band ``predict`` reports for that GPU and model (``simfront.uncertainty``; target 80 %); then per
(GPU, precision) sweep the measured frontier against simfront's (``simfront validate --frontier``'s comparison).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront.efficiency import provenance  # noqa: E402
from simfront.errors import SimfrontError  # noqa: E402
from simfront.fidelity import MIN_BIN_ROWS, residual_trends  # noqa: E402
from simfront.layout import Layout  # noqa: E402
from simfront.uncertainty import band_ratio, calibrated_gpus, prediction_bands  # noqa: E402
from simfront.validation import _gpu_id, _model_id, validate_files  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _runs import run_urls  # noqa: E402

DEFAULT_FILE = ROOT / "measurements" / "inferencex_api_snapshot.json"
CALIBRATION_GPUS = tuple(calibrated_gpus())  # the GPUs of the serving calibration (B200 and H100)
CALIBRATION_FILE = ROOT / "measurements" / "inferencemax_b200_h100.csv"
# metric -> (measured key, predicted key, uncertainty key of hardware/efficiency/serving.yaml)
METRICS = {"TPOT": ("tpot_ms", "predicted_tpot_ms", "tpot_ms"),
           "TTFT": ("ttft_ms", "predicted_ttft_ms", "ttft_ms"),
           "tok/s/GPU": ("output_tok_s_per_gpu", "predicted_tok_s_per_gpu", "output_tok_s_total")}


def calibration_runs() -> set[tuple]:
    """(run URL, concurrency, ISL, OSL) of the calibration file's InferenceMAX rows (their notes name the run)."""
    urls = run_urls(CALIBRATION_FILE)
    with CALIBRATION_FILE.open(newline="") as f:
        rows = list(enumerate(csv.DictReader(f), start=2))
    return {(urls[line], float(row["concurrency"]), float(row["isl"]), float(row["osl"])) for line, row in rows if line in urls}


def parameter_source(gpu: str) -> str:
    """'fitted on this GPU', 'fitted on its family' or 'borrowed from <family>' for a GPU's kernel parameters."""
    if gpu in CALIBRATION_GPUS:
        return "fitted on this GPU"
    try:
        prov = provenance(gpu)
    except SimfrontError:
        return "not in the catalog"
    borrowed = sorted({p.source_family for p in prov.params if p.borrowed})
    return f"borrowed from {', '.join(borrowed)}" if borrowed else f"fitted on its family ({prov.family})"


def ratios(rows: list[dict], metric: str) -> np.ndarray:
    meas, pred, _ = METRICS[metric]
    out = [r[pred] / r[meas] for r in rows if r.get(meas) and r.get(pred) and math.isfinite(r[pred])]
    return np.asarray(out, dtype=float)


def band_share(rows: list[dict], metric: str) -> float | None:
    """Share of rows whose measured value lies in the p10-p90 band predict reports for the row's GPU and model."""
    meas, pred, qkey = METRICS[metric]
    inside = total = 0
    for r in rows:
        if not (r.get(meas) and r.get(pred)):
            continue
        q, widen = prediction_bands(_gpu_id(r["gpu"]), _model_id(r["model"]))
        band = band_ratio(q, qkey, widen)
        if band is None:
            continue
        total += 1
        inside += band[0] <= r[meas] / r[pred] <= band[1]  # measured / predicted, the band's variable
    return inside / total if total else None


def summarise(rows: list[dict]) -> dict:
    out = {"rows": len(rows)}
    for metric in METRICS:
        r = ratios(rows, metric)
        out[metric] = {"n": int(r.size), "median_ratio": float(np.median(r)) if r.size else None,
                       "mape_pct": float(100 * np.mean(np.abs(r - 1))) if r.size else None,
                       "band_share": band_share(rows, metric)}
    return out


def fmt(x, spec=".2f", pct=False):
    if x is None:
        return "-"
    return f"{100 * x:.0f}" if pct else format(x, spec)


def table(title: str, groups: dict[str, list[dict]], extra=None) -> list[str]:
    head = ["group", "rows"] + (["kernel parameters"] if extra else [])
    for m in METRICS:
        head += [f"{m} pred/meas", f"{m} MAPE %", f"{m} in band %"]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, rows in groups.items():
        s = summarise(rows)
        cells = [name, str(s["rows"])] + ([extra(name)] if extra else [])
        for m in METRICS:
            cells += [fmt(s[m]["median_ratio"]), fmt(s[m]["mape_pct"], ".1f"), fmt(s[m]["band_share"], pct=True)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def decode_layout(r: dict) -> str:
    """The layout of the worker that decodes a row's requests: the server (aggregated) or a decode worker, labelled as
    :meth:`simfront.layout.Layout.label` labels a layout."""
    d = "decode_" if r.get("mode") == "disagg" else ""
    tp, ep, dp = (int(r.get(d + k) or 1) for k in ("tp", "ep", "attention_dp"))
    return ("decode " if d else "") + Layout(tp=tp, dp=dp, ep=ep).label()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--report", default=str(ROOT / "docs" / "heldout_gpus.md"))
    a = ap.parse_args(argv)
    res = validate_files([a.file], frontier=True)
    rows = [r for r in res["serving"]["rows"] if r.get("predicted_tpot_ms") is not None]
    skipped = [r for r in res["serving"]["rows"] if r.get("predicted_tpot_ms") is None]
    for r in rows:
        r["gpu_id"] = _gpu_id(r["gpu"])
    by_gpu: dict[str, list] = defaultdict(list)
    by_cell: dict[str, list] = defaultdict(list)
    by_layout: dict[str, list] = defaultdict(list)  # the decoding worker's layout: a knob the search chooses
    for r in rows:
        by_gpu[r["gpu_id"]].append(r)
        by_cell[f"{r['gpu_id']} {r['engine']} {r['precision']} {r['mode']}{' mtp' if r.get('spec_decoding') else ''}"].append(r)
        by_layout[f"{r['gpu_id']} {r['engine']} {r['precision']} {decode_layout(r)}"].append(r)
    held = [r for r in rows if r["gpu_id"] not in CALIBRATION_GPUS]
    fitted = calibration_runs()
    seen = [r for r in rows if r["gpu_id"] in CALIBRATION_GPUS]
    in_fit = sum((r.get("run_url"), r["concurrency"], r["isl"], r["osl"]) in fitted for r in seen)
    rel = Path(a.file).resolve()
    try:
        rel = rel.relative_to(ROOT)
    except ValueError:
        pass
    lines = ["# Serving predictions on held-out GPUs and runs", "",
             f"Produced by `python scripts/validate_heldout_gpus.py` on `{rel}`; nothing fitted on it. Ratios are "
             "medians of predicted / measured; 'in band' is the share of measured values inside the p10-p90 band "
             "`predict` reports for the row's GPU and model (widened off the calibration data; 80 % is calibrated).", "",
             f"- rows predicted: {len(rows)}; not predicted: {len(skipped)}; problems reading the file: {len(res['problems'])}", ""]
    reasons: dict[str, int] = defaultdict(int)
    for r in skipped:
        reasons[(r.get("reason") or "no prediction")[:160]] += 1
    lines += [f"  - {n} x {why}" for why, n in sorted(reasons.items(), key=lambda x: -x[1])] + [""]
    lines += [f"- calibration-GPU rows (B200, H100): {len(seen)}, of which {in_fit} are runs of the calibration file "
              f"`{CALIBRATION_FILE.relative_to(ROOT)}` (same run URL, concurrency and lengths). Recipe facts come from "
              "this file's own sidecar (`measurements/inferencex_api_snapshot.simfront.yaml`), which includes the "
              "calibration file's for B200 and H100 (the same runs) and adds the aggregated runs of the other GPUs "
              "(request intake, memory share, token budget, KV dtype, MTP drafts, read from the public benchmark "
              "scripts); the disaggregated runs of the other GPUs keep simfront's defaults (decode caps, prefill "
              "batches and MTP drafts not known).", ""]
    lines += table("held-out GPUs against the calibration GPUs' rows",
                   {"held-out GPUs": held, "calibration GPUs (B200, H100)": seen})
    lines += table("by GPU", dict(sorted(by_gpu.items())), extra=parameter_source)
    lines += table("by GPU, engine, precision, mode", dict(sorted(by_cell.items())))
    lines += table("by GPU, engine, precision and the decoding worker's layout ('decode': a disaggregated decode worker)",
                   dict(sorted(by_layout.items())))
    lines += ["### Residual trends on the held-out GPUs (median predicted / measured by knob bin; bins under "
              f"{MIN_BIN_ROWS} rows marked ~)", "", "| knob | bin | rows | TPOT | TTFT | tok/s/GPU |", "|---|---|---|---|---|---|"]
    for t in residual_trends(held):
        if t["knob"] == "GPU":
            continue  # the by-GPU table above
        mark = "" if t["judged"] else " ~"
        lines.append(f"| {t['knob']} | {t['bin']}{mark} | {t['count']} | {fmt(t.get('tpot_ms_ratio'))} | "
                     f"{fmt(t.get('ttft_ms_ratio'))} | {fmt(t.get('output_tok_s_per_gpu_ratio'))} |")
    lines.append("")
    fronts = (res.get("fidelity") or {}).get("frontiers", {}).get("summary", {})
    lines += ["### Frontiers (issue 12's comparison c)", "",
              "Per (GPU, precision) sweep: the measured Pareto points of (tok/s/user, output tok/s/GPU), and simfront's best "
              "tok/s/GPU at each one's tok/s/user on the same GPU count, over measured (geometric mean); 'at load' is simfront's "
              "best configuration at the measured concurrency; class agreement compares the layout class (TP, TP+EP, DPA+EP, "
              "agg/disagg) of the two. A sweep measured only over a few layouts and loads reads high here for what nobody "
              "measured, not only for optimism.", "",
              "| sweep | measured Pareto points | pred/meas best tok/s/GPU | at load | class agrees |", "|---|---|---|---|---|"]
    for name, f in fronts.items():
        lines.append(f"| {name} | {f.get('points')} | {fmt(f.get('geomean_ratio'))} | {fmt(f.get('at_load_geomean_ratio'))} | "
                     f"{fmt(f.get('class_agreement'), pct=True)} % |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    Path(a.report).parent.mkdir(parents=True, exist_ok=True)
    Path(a.report).write_text(text + "\n")
    if a.json_out:
        out = {"held_out": summarise(held), "calibration_gpus": dict(summarise(seen), runs_in_calibration_file=in_fit),
               "by_gpu": {g: dict(summarise(v), kernel_parameters=parameter_source(g)) for g, v in sorted(by_gpu.items())},
               "by_cell": {k: summarise(v) for k, v in sorted(by_cell.items())}, "skipped": dict(reasons), "frontiers": fronts}
        Path(a.json_out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

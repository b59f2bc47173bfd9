"""Measured vs predicted: kernel timing files and serving / benchmark result files.

``validate_files`` reads each file, recognises kernel CSVs (calibration format) by their columns
and everything else through :mod:`simfront.ingest`, predicts every row, and summarises the error
per metric (count, MAPE, median and p90 absolute percentage error) overall and by model, GPU,
engine and mode. Rows keep their input order; a row simfront cannot predict carries ``reason``.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .errors import SimfrontError
from .kernel_validate import detect_kernel_op, validate_kernel_rows
from .measured import predict_points

MEASUREMENTS_DIR = Path(__file__).resolve().parent.parent / "measurements"
BUILTIN_FILES = ("measured_serving.csv", "offline_throughput.csv")

# metric -> (measured field on MeasuredPoint, JSON name of the prediction)
METRIC_FIELDS = {
    "ttft_ms": "predicted_ttft_ms",
    "tpot_ms": "predicted_tpot_ms",
    "tok_s_per_user": "predicted_tok_s_per_user",
    "output_tok_s_total": "predicted_output_tok_s_total",
    "output_tok_s_per_gpu": "predicted_tok_s_per_gpu",
    "request_throughput": "predicted_request_throughput",
}


def _read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        return list(r.fieldnames or []), list(r)


def _is_kernel_file(path: Path) -> str | None:
    if path.suffix.lower() != ".csv":
        return None
    try:
        cols, _ = _read_csv(path)
    except (OSError, csv.Error, UnicodeDecodeError):
        return None
    if "latency_us" not in cols:
        return None
    return detect_kernel_op(cols, path.name)


def error_stats(pred: Iterable[float], meas: Iterable[float]) -> dict:
    """count, MAPE, median and p90 absolute percentage error, and mean signed bias (%)."""
    p = np.asarray(list(pred), float)
    m = np.asarray(list(meas), float)
    if p.size == 0:
        return {"count": 0, "mape_pct": None, "median_ape_pct": None, "p90_ape_pct": None, "bias_pct": None}
    ape = np.abs(p / m - 1.0) * 100
    return {"count": int(p.size), "mape_pct": round(float(ape.mean()), 2), "median_ape_pct": round(float(np.median(ape)), 2),
            "p90_ape_pct": round(float(np.percentile(ape, 90)), 2), "bias_pct": round(float(np.median(p / m - 1.0) * 100), 2)}


def _model_id(name) -> str:
    from .models import resolve_name

    try:
        return resolve_name(str(name))[0]
    except Exception:
        return str(name)


def _gpu_id(name) -> str:
    from .hardware import get_hardware

    try:
        return get_hardware(str(name)).id
    except Exception:
        return str(name)


def _serving_rows(points: list, preds: list[dict]) -> list[dict]:
    rows = []
    for p, pr in zip(points, preds):
        d = {k: v for k, v in p.model_dump().items() if k not in ("metric_definitions", "extra", "notes", "warnings", "missing")}
        d.update(p.extra or {})  # unknown columns are kept
        d["metric_definitions"] = p.metric_definitions
        d["missing"] = p.missing
        d["warnings"] = p.warnings
        any_metric = False
        for metric, key in METRIC_FIELDS.items():
            if getattr(p, metric, None) is None:
                continue
            any_metric = True
            v = pr.get(f"predicted_{metric}")
            d[key] = None if v is None or not math.isfinite(v) else round(float(v), 4)
        if "reason" in pr:
            d["reason"] = pr["reason"]
        elif not any_metric:
            d["reason"] = "no measured metric in this row"
        rows.append(d)
    return rows


def _with_skipped(rows: list[dict], skipped: list[dict], file_order: dict[str, int]) -> list[dict]:
    """One row per input row: rows the reader skipped come back in input order with their reason;
    an exact duplicate carries the prediction of the row it repeats, marked ``duplicate_of``
    (left out of the error statistics so a repeated run is not counted twice)."""
    by_line = {(r.get("source_file"), r.get("line")): r for r in rows}
    extra = []
    for s in skipped:
        dup = s.get("duplicate_of")
        first = by_line.get((dup["source_file"], dup["line"])) if dup else None
        if first is not None:
            d = {k: v for k, v in first.items() if k != "row_id"}
            d.update(source_file=s["source_file"], line=s["line"], duplicate_of=f"{dup['source_file']}:{dup['line']}")
        else:
            d = {"source_file": s["source_file"], "line": s["line"], "reason": s["message"]}
        extra.append(d)
    out = rows + extra
    out.sort(key=lambda r: (file_order.get(r.get("source_file"), len(file_order)), r.get("line") or 0))
    return out


def _summary(rows: list[dict]) -> dict:
    out: dict[str, Any] = {"metrics": {}, "by": {}}
    n = len(rows)
    predicted = sum(1 for r in rows if "reason" not in r)
    rows = [r for r in rows if "duplicate_of" not in r]  # a repeated run counts once in the statistics
    for metric, key in METRIC_FIELDS.items():
        pairs = [(r[key], r[metric]) for r in rows if r.get(key) and r.get(metric)]
        if pairs:
            out["metrics"][metric] = error_stats(*zip(*pairs))
    for dim, fn in (("model", lambda r: _model_id(r.get("model"))), ("gpu", lambda r: _gpu_id(r.get("gpu"))),
                    ("engine", lambda r: r.get("engine")), ("mode", lambda r: r.get("mode"))):
        groups: dict = defaultdict(lambda: defaultdict(list))
        for r in rows:
            for metric, key in METRIC_FIELDS.items():
                if r.get(key) and r.get(metric):
                    groups[str(fn(r))][metric].append((r[key], r[metric]))
        out["by"][dim] = {g: {m: error_stats(*zip(*v)) for m, v in ms.items()} for g, ms in sorted(groups.items())}
    out["rows"] = n
    out["predicted_rows"] = predicted
    out["coverage_pct"] = round(100.0 * predicted / n, 2) if n else None
    return out


def validate_files(paths: list[str], overrides: dict | None = None) -> dict:
    """Validate kernel and serving files. Returns {kernels, serving, problems, files}."""
    from .ingest import load_measurements

    kernel_rows: list[dict] = []
    kernel_summary: dict = {}
    serving_paths: list[str] = []
    problems: list[str] = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise SimfrontError(f"file not found: {p}")
        op = _is_kernel_file(path)
        if op:
            _, rows = _read_csv(path)
            res = validate_kernel_rows(rows, op=op, filename=path.name)
            for r in res["rows"]:
                r["source_file"] = str(path)
            kernel_rows.extend(res["rows"])
            for k, v in res["summary"].items():
                kernel_summary[f"{path.name}:{k}" if k in kernel_summary else k] = v
        else:
            serving_paths.append(str(path))
    out: dict[str, Any] = {"files": [str(p) for p in paths]}
    if kernel_rows:
        out["kernels"] = {"summary": kernel_summary, "rows": kernel_rows}
    if serving_paths:
        ing = load_measurements(serving_paths, overrides=overrides)
        problems.extend(ing.problems)
        preds = predict_points(ing.points)
        rows = _with_skipped(_serving_rows(ing.points, preds), ing.skipped, {p: i for i, p in enumerate(serving_paths)})
        out["serving"] = {"summary": _summary(rows), "rows": rows}
    out["problems"] = problems
    return out


def builtin_files() -> list[str]:
    files = [MEASUREMENTS_DIR / f for f in BUILTIN_FILES]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SimfrontError(f"built-in measurements missing: {', '.join(missing)}")
    return [str(f) for f in files]


def flat(res: dict) -> dict:
    """The issue-3/4 flat shape: ``summary`` and ``rows`` of the one kind of file given."""
    if "kernels" in res and "serving" not in res:
        return {"summary": res["kernels"]["summary"], "rows": res["kernels"]["rows"], "problems": res["problems"]}
    if "serving" in res and "kernels" not in res:
        return {"summary": res["serving"]["summary"], "rows": res["serving"]["rows"], "problems": res["problems"]}
    summary = {}
    rows: list[dict] = []
    for kind in ("kernels", "serving"):
        if kind in res:
            summary[kind] = res[kind]["summary"]
            rows.extend(res[kind]["rows"])
    return {"summary": summary, "rows": rows, "problems": res["problems"]}

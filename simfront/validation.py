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
        if "measurement_flag" in pr:
            d["measurement_flag"] = pr["measurement_flag"]
        if "measured_in_decode" in pr:
            d["measured_in_decode"] = pr["measured_in_decode"]
        if pr.get("assumptions"):  # what the prediction rests on that the row does not record
            d["assumptions"] = pr["assumptions"]
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
            d = {"source_file": s["source_file"], "line": s["line"], "reason": s["message"], "skipped_by_reader": True}
        extra.append(d)
    out = rows + extra
    out.sort(key=lambda r: (file_order.get(r.get("source_file"), len(file_order)), r.get("line") or 0))
    return out


def _summary(rows: list[dict]) -> dict:
    out: dict[str, Any] = {"metrics": {}, "by": {}}
    n = len(rows)
    predicted = sum(1 for r in rows if "reason" not in r)
    rows_all = rows
    # a repeated run counts once in the statistics; a run whose measurement contradicts its own setup not at all
    rows = [r for r in rows if "duplicate_of" not in r and "measurement_flag" not in r]
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
    out["flagged_rows"] = sum(1 for r in rows_all if "measurement_flag" in r and "duplicate_of" not in r)
    out["coverage_pct"] = round(100.0 * predicted / n, 2) if n else None
    # rows the reader could use (not skipped as malformed, implausible or of unknown layout): the share of
    # those simfront predicts says what the model covers, apart from the file's own defects
    usable = n - sum(1 for r in rows_all if r.get("skipped_by_reader"))
    out["usable_rows"] = usable
    out["usable_coverage_pct"] = round(100.0 * predicted / usable, 2) if usable else None
    return out


# Fields that --model / --gpu / --gpu-memory-fraction fill only where a row does not name its own (the file knows
# best what it measured); every other override sets the field on every row, with a warning where it changes one.
FILL_ONLY = ("model", "gpu", "gpu_memory_fraction")
_NAN_TEXT = {"nan", "+nan", "-nan"}  # spellings of a non-number in a CSV cell


def _fill_only(overrides: dict | None) -> tuple[dict, dict]:
    """(overrides, fill-only defaults): --gpu / --model checked against the catalogs first."""
    from .inputs import check_gpu_name, check_model_name, memory_fraction_value

    rest = dict(overrides or {})
    fill = {k: rest.pop(k) for k in FILL_ONLY if rest.get(k) is not None}
    check_gpu_name("--gpu", fill.get("gpu"))
    check_model_name("--model", fill.get("model"))
    if "gpu_memory_fraction" in fill:
        fill["gpu_memory_fraction"] = memory_fraction_value("--gpu-memory-fraction", fill["gpu_memory_fraction"])
    return rest, fill


def _fill_points(points: list, fill: dict) -> list:
    """Points with the fill-only fields set where the file (and its sidecar) left them unknown."""
    if not fill:
        return points
    out = []
    for p in points:
        upd = {k: v for k, v in fill.items() if getattr(p, k, None) is None}
        if upd:
            notes = dict(p.notes or {})
            notes.update({k: f"{k} from --{k} (the file does not name it)" for k in upd})
            p = p.model_copy(update={**upd, "notes": notes, "missing": [m for m in p.missing if m not in upd]})
        out.append(p)
    return out


def _unused_fill(points: list, fill: dict) -> list[str]:
    """A line for each fill-only option (--gpu, --model, --gpu-memory-fraction) that no row took, because every row
    names its own value: what the user gave is said, not silently left unused."""
    out = []
    for k, v in fill.items():
        if points and all(getattr(p, k, None) is not None for p in points):
            flag = "--" + k.replace("_", "-")
            what = {"gpu": "GPU", "gpu_memory_fraction": "GPU memory fraction"}.get(k, k)
            out.append(f"{flag} {v}: every row names its own {what}, so it filled none ({flag} only fills rows "
                       f"that do not name one)")
    return out


def _nan_paths(obj, prefix: str = "") -> list[str]:
    """Key paths of NaN numbers inside a parsed JSON record."""
    if isinstance(obj, float) and math.isnan(obj):
        return [prefix or "value"]
    if isinstance(obj, dict):
        return [q for k, v in obj.items() for q in _nan_paths(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(obj, list):
        return [q for i, v in enumerate(obj) for q in _nan_paths(v, f"{prefix}[{i}]")]
    return []


def _nan_cells(path: str) -> dict[int, list[str]]:
    """line -> fields the file gives as NaN (CSV cells, JSON / JSONL records): a NaN is no measurement."""
    from .ingest.detect import load_file

    try:
        loaded = load_file(Path(path), path)
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    out: dict[int, list[str]] = {}
    for line, row in loaded.rows:
        bad = [k for k, v in row.items() if isinstance(v, str) and v.strip().lower() in _NAN_TEXT]
        if bad:
            out[line] = bad
    for line, obj in loaded.json:
        bad = _nan_paths(obj)
        if bad:
            out[line] = bad
    return out


def _warn_nan(points: list, paths: list[str]) -> list:
    """A row whose file gives a metric (or anything) as NaN says so: the value is not silently lost."""
    cells = {p: _nan_cells(p) for p in paths}
    out = []
    for pt in points:
        bad = cells.get(pt.source_file, {}).get(pt.line)
        if bad:
            msg = (f"{', '.join(bad)} = NaN in the file: not a measurement, so "
                   f"{'that value is' if len(bad) == 1 else 'those values are'} left out of this row")
            pt = pt.model_copy(update={"warnings": [*(pt.warnings or []), msg]})
        out.append(pt)
    return out


def _nothing_read(paths: list[str], problems: list[str]) -> SimfrontError:
    """One error line when no file yielded a single row: what was wrong with (the first of) them."""
    first = problems[0] if problems else f"{', '.join(paths)}: no data rows (a header only?)"
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    tail = "" if "known formats" in first else ("; validate reads kernel CSVs, the serving and measured-point CSVs and vLLM, "
                                                "SGLang, AIPerf, genai-perf, GuideLLM and trtllm-bench result files")
    return SimfrontError(f"nothing could be read: {first}{more}{tail}")


def validate_files(paths: list[str], overrides: dict | None = None, frontier: bool = False) -> dict:
    """Validate kernel and serving files. Returns {kernels, serving, problems, files} (+ ``fidelity``:
    residual trends by knob and measured-vs-predicted frontiers, with ``frontier``).

    ``overrides`` set configuration fields on every row, except ``model`` and ``gpu``, which fill
    only rows that do not name one. A file list from which no row at all could be read is an error."""
    from .ingest import load_measurements
    from .inputs import check_input_files

    check_input_files(paths)
    overrides, fill = _fill_only(overrides)
    kernel_rows: list[dict] = []
    kernel_summary: dict = {}
    serving_paths: list[str] = []
    problems: list[str] = []
    for p in paths:
        path = Path(p)
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
        if not ing.points and not kernel_rows:  # every row skipped: nothing was validated
            raise _nothing_read(serving_paths, problems)
        points = _warn_nan(_fill_points(ing.points, fill), serving_paths)
        problems.extend(_unused_fill(ing.points, fill))
        preds = predict_points(points)
        rows = _with_skipped(_serving_rows(points, preds), ing.skipped, {p: i for i, p in enumerate(serving_paths)})
        out["serving"] = {"summary": _summary(rows), "rows": rows}
        if frontier:
            from .fidelity import frontier_comparison, residual_trends

            out["fidelity"] = {"trends": residual_trends(rows), "frontiers": frontier_comparison(points)}
    elif not kernel_rows:
        raise _nothing_read([str(p) for p in paths], problems)
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
        return {"summary": res["serving"]["summary"], "rows": res["serving"]["rows"], "problems": res["problems"],
                "fidelity": res.get("fidelity")}
    summary = {}
    rows: list[dict] = []
    for kind in ("kernels", "serving"):
        if kind in res:
            summary[kind] = res[kind]["summary"]
            rows.extend(res[kind]["rows"])
    return {"summary": summary, "rows": rows, "problems": res["problems"], "fidelity": res.get("fidelity")}

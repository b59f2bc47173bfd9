"""Check kernel timings in the calibration CSV format against the cost model.

Rows look like ``shared/calibration/kernels/<gpu>__<op>.csv`` (any catalog GPU). The op comes
from an ``op`` column, the file name, or the column set. Predictions are vectorised per
(op, GPU, categorical values) group with the fitted parameters in ``hardware/efficiency``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .errors import SimfrontError
from .hardware import get_hardware
from .kernel_ops import all_ops, op_params

MEASURED = "latency_us"
PREDICTED = "predicted_latency_us"
# Column signatures of the calibration ops (shared/calibration/README.md), used when an op's
# module is not importable; the registry's own "columns" take precedence.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "gemm": ("dtype", "m", "n", "k"),
    "attention_decode": ("batch", "kv_len", "n_heads", "n_kv_heads", "head_dim"),
    "attention_prefill": ("batch", "seq_len", "n_heads", "n_kv_heads", "head_dim"),
    "mla_decode": ("batch", "kv_len", "n_heads", "tp_size"),
    "mla_prefill": ("batch", "seq_len", "n_heads", "tp_size"),
    "moe": ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts"),
    "nccl": ("collective", "num_gpus", "message_bytes"),
}


def _signatures() -> dict[str, set[str]]:
    """Columns that identify each op: the table above, the registry's columns for ops it lacks."""
    sig = {op: set(cols) for op, cols in SIGNATURES.items()}
    for op, entry in all_ops().items():
        sig.setdefault(op, set(entry.get("columns", ())))
    return sig


def detect_kernel_op(columns: Iterable[str], filename: str | None = None) -> str | None:
    """Op of a kernel file: from ``<gpu>__<op>.csv``-style names, else the most specific column match."""
    sigs = _signatures()
    if filename:
        stem = Path(str(filename)).stem.lower()
        if "__" in stem and stem.split("__", 1)[1] in sigs:
            return stem.split("__", 1)[1]
        named = [op for op in sigs if re.search(rf"(^|[^a-z]){op}($|[^a-z])", stem)]
        if len(named) == 1:
            return named[0]
    cols = {str(c).strip().lower() for c in columns}
    hits = sorted((op for op, need in sigs.items() if need and need <= cols), key=lambda op: -len(sigs[op]))
    if not hits:
        return None
    if len(hits) > 1 and len(sigs[hits[0]]) == len(sigs[hits[1]]):
        return None  # ambiguous
    return hits[0]


def _as_array(values: list) -> np.ndarray:
    """Numeric array when every value parses as a number, else a string array."""
    try:
        return np.array([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([str(v).strip() for v in values])


def validate_kernel_rows(rows: list[dict], op: str | None = None, filename: str | None = None) -> dict[str, Any]:
    """Predict every row; return ``{"summary": {op: stats}, "rows": [row + op + prediction]}`` in input order."""
    ops = all_ops()
    columns = set().union(*(r.keys() for r in rows)) if rows else set()
    file_op = op or detect_kernel_op(columns, filename)
    out_rows = [dict(r) for r in rows]
    for r in out_rows:
        r["op"] = str(r.get("op") or file_op or "")
        r[PREDICTED] = None
    # group rows by (op, gpu, categorical values) and predict each group in one call
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(out_rows):
        name = r["op"]
        if name not in ops:
            r["reason"] = f"unsupported op {name!r}" if name else "cannot tell the op from the columns or file name"
            continue
        need = ops[name]["columns"]
        missing = [c for c in need if c not in r or r[c] in (None, "")]
        if missing:
            r["reason"] = f"missing columns: {', '.join(missing)}"
            continue
        cat = tuple(str(r[c]) for c in need if not _is_number(r[c]))
        groups.setdefault((name, str(r.get("gpu", "")), cat), []).append(i)
    for (name, gpu, _), idx in groups.items():
        entry = ops[name]
        try:
            hw = get_hardware(gpu)
        except SimfrontError as exc:
            for i in idx:
                out_rows[i]["reason"] = f"unsupported GPU: {exc}"
            continue
        cols = {c: _as_array([out_rows[i][c] for i in idx]) for c in entry["columns"]}
        try:
            with np.errstate(all="ignore"):
                pred = np.asarray(entry["predict"](cols, hw, op_params(entry, hw)), dtype=np.float64) * 1e6
        except (SimfrontError, KeyError, ValueError, TypeError) as exc:
            for i in idx:
                out_rows[i]["reason"] = f"cannot predict: {exc}"
            continue
        for i, v in zip(idx, pred):
            if np.isfinite(v) and v > 0:
                out_rows[i][PREDICTED] = float(v)
            else:
                out_rows[i]["reason"] = "prediction is not a finite positive time"
    return {"summary": _summary(out_rows), "rows": out_rows}


def _is_number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def _summary(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """Per op: rows, rows scored (measured and predicted), MAPE and median APE in percent."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == name]
        scored = [(r[PREDICTED], float(r[MEASURED])) for r in mine
                  if r[PREDICTED] is not None and _is_number(r.get(MEASURED)) and float(r[MEASURED]) > 0]
        ape = np.array([abs(p / m - 1.0) * 100.0 for p, m in scored])
        out[name or "unknown"] = {
            "count": len(mine),
            "scored": len(scored),
            "mape_pct": float(ape.mean()) if ape.size else None,
            "median_ape_pct": float(np.median(ape)) if ape.size else None,
        }
    return out

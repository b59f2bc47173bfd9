#!/usr/bin/env python
"""Kernel predictions on a GPU outside the kernel calibration, against public-library kernels timed on it.

    python scripts/validate_torch_kernels.py [--report docs/torch_kernels.md] [--json out.json]

Reads ``measurements/kernels/<gpu>__<op>.csv`` (timed by ``scripts/time_kernels_torch.py``: cuBLAS GEMMs and
PyTorch's attention backends) and predicts every row with the shipped kernel parameters (``simfront validate``'s
kernel evaluator; nothing is fitted here). Per (GPU, op, dtype): rows, median predicted / measured, MAPE, median
APE. Where ``../shared/calibration/kernels/h100_sxm__<op>.csv`` holds the same shape, it also gives the median of
this GPU's library time over the calibration's H100 time, which separates a difference of kernel scope (the
calibration timed TensorRT-LLM's ops, which can hold more than the bare library kernel) from a prediction error.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simfront.kernel_validate import MEASURED, PREDICTED, validate_kernel_rows  # noqa: E402
from _emit import emit  # noqa: E402

MEASURED_DIR = ROOT / "measurements" / "kernels"
CALIBRATION_DIR = ROOT.parent / "shared" / "calibration" / "kernels"
# shape columns that identify one kernel call, per op (the calibration CSV columns, timing excluded)
SHAPE_KEYS = {"gemm": ("dtype", "m", "n", "k"),
              "attention_prefill": ("batch", "seq_len", "n_heads", "n_kv_heads", "head_dim", "window_size", "kv_cache_dtype"),
              "attention_decode": ("batch", "kv_len", "n_heads", "n_kv_heads", "head_dim", "window_size", "kv_cache_dtype")}


def _key(row: dict, op: str) -> tuple:
    """A row's shape as comparable values (numbers as floats, so '64' and '64.0' agree)."""
    out = []
    for c in SHAPE_KEYS[op]:
        v = str(row[c]).strip()
        try:
            out.append(float(v))
        except ValueError:
            out.append(v)
    return tuple(out)


def _calibration_times(op: str) -> dict[tuple, float]:
    """Median calibration-H100 latency per shape of ``op`` (empty when the calibration folder is absent)."""
    path = CALIBRATION_DIR / f"h100_sxm__{op}.csv"
    if not path.exists():
        return {}
    by_shape: dict[tuple, list[float]] = defaultdict(list)
    for r in csv.DictReader(path.open()):
        by_shape[_key(r, op)].append(float(r[MEASURED]))
    return {k: float(np.median(v)) for k, v in by_shape.items()}


def score(measured_dir: Path = MEASURED_DIR) -> list[dict]:
    """One summary dict per (GPU, op, dtype) group of the measured files."""
    out = []
    for path in sorted(measured_dir.glob("*__*.csv")):
        gpu, name = path.stem.split("__", 1)
        op = "gemm" if name.startswith("gemm") else name  # gemm_streaming: a GEMM sweep of its own
        if op not in SHAPE_KEYS:
            continue
        rows = list(csv.DictReader(path.open()))
        predicted = validate_kernel_rows(rows, op=op, filename=path.name)["rows"]
        h100 = _calibration_times(op)
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in predicted:
            groups[str(r.get("dtype") or r.get("kv_cache_dtype"))].append(r)
        for dtype, rs in sorted(groups.items()):
            meas = np.array([float(r[MEASURED]) for r in rs])
            pred = np.array([np.nan if r[PREDICTED] is None else float(r[PREDICTED]) for r in rs])
            ok = np.isfinite(pred)
            ratio = pred[ok] / meas[ok]  # predicted / measured latency per row
            ape = np.abs(ratio - 1.0) * 100.0
            same = [(float(r[MEASURED]), h100[_key(r, op)], r[PREDICTED]) for r in rs if _key(r, op) in h100]
            out.append({
                "gpu": gpu, "op": name, "dtype": dtype, "rows": len(rs), "predicted": int(ok.sum()),
                "median_pred_over_meas": float(np.median(ratio)) if ok.any() else None,
                "mape_pct": float(ape.mean()) if ok.any() else None,
                "median_ape_pct": float(np.median(ape)) if ok.any() else None,
                "rows_with_h100_calibration_shape": len(same),
                "median_meas_over_h100_calibration": float(np.median([m / h for m, h, _ in same])) if same else None,
                "median_pred_over_h100_calibration": float(np.median([p / h for _, h, p in same if p is not None])) if same else None,
            })
    return out


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def report(groups: list[dict], info: dict) -> str:
    lines = ["# Kernel predictions on a GPU outside the kernel calibration (public-library kernels)", "",
             "Produced by `python scripts/validate_torch_kernels.py` from `measurements/kernels/` (timed by "
             "`scripts/time_kernels_torch.py`); nothing fitted on it. The kernel parameters of these GPUs come from "
             "their family's calibration GPU (H200: fitted on H100, `simfront.efficiency.provenance`).", ""]
    if info:
        lines += [f"Timed on {info.get('device_name')} with PyTorch {info.get('torch')} (CUDA {info.get('cuda')}): "
                  f"GEMMs through cuBLAS (`torch.mm`, `torch._scaled_mm` with per-tensor scales, or 1x128 / 128x128 block scales for `fp8_block`), attention through the "
                  f"fastest of PyTorch's SDPA backends per shape ({json.dumps(info.get('backends', {}))}); "
                  f"each kernel replayed {info.get('repeats_per_graph')} times from a CUDA graph, median of "
                  f"{info.get('replays')} replays.", ""]
    lines += ["| GPU | op | dtype | rows | pred / meas (median) | MAPE % | median APE % | rows with a calibration H100 shape | "
              "this GPU's library time / H100 calibration time | predicted / H100 calibration time |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for g in groups:
        lines.append(f"| {g['gpu']} | {g['op']} | {g['dtype']} | {g['rows']} | {_fmt(g['median_pred_over_meas'], '.2f')} | "
                     f"{_fmt(g['mape_pct'], '.1f')} | {_fmt(g['median_ape_pct'], '.1f')} | {g['rows_with_h100_calibration_shape']} | "
                     f"{_fmt(g['median_meas_over_h100_calibration'], '.2f')} | {_fmt(g['median_pred_over_h100_calibration'], '.2f')} |")
    quant = info.get("fp8_with_activation_quant") or []
    h100 = _calibration_times("gemm")
    same = [(q["latency_us"], h100[k]) for q in quant if (k := ("fp8", float(q["m"]), float(q["n"]), float(q["k"]))) in h100]
    if same:
        lines += ["", f"FP8 GEMMs timed again with the activation quantised inside the timed call (dynamic per-tensor scale: "
                  f"amax, divide, cast, then the GEMM; unfused PyTorch ops): {len(same)} shapes, median time over the "
                  f"calibration's H100 time {np.median([q / h for q, h in same]):.2f} (the bare GEMM's is in the table above)."]
    lines += ["", "How to read it: where the library kernel is the one the calibration timed (BF16 GEMMs are cuBLAS in both), "
              "predicted / measured tests the transfer of the fitted parameters to this GPU's datasheet. Where this GPU's "
              "library time is well below the calibration's H100 time of the same shape on a GPU of the same compute "
              "(H200 and H100 share their tensor-core rates), the two timed different work or different kernels: the "
              "calibration timed TensorRT-LLM's ops, which may hold more than the bare kernel (an FP8 GEMM op that quantises "
              "its activation: the bare FP8 GEMM lands below the calibration's time and the unfused quantise-and-GEMM above "
              "it, which fits a fused quantisation) or run another kernel for the shape (TensorRT-LLM's decode attention "
              "for large query groups). simfront prices the engine's op, so there predicted / measured above 1 measures "
              "the scope, not the transfer to this GPU; which of the two it is needs TensorRT-LLM on this GPU.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", type=Path, default=None, help="write the markdown table here")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    groups = score()
    info = {}
    for p in sorted(MEASURED_DIR.glob("*__torch_kernels.json")):
        info = json.loads(p.read_text())
    text = report(groups, info)
    emit(text, args.report, args.json, groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())

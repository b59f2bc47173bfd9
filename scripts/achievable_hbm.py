#!/usr/bin/env python
"""Achievable HBM bandwidth of the calibration GPUs from their measured GEMM sweeps.

The achievable matmul rates in ``hardware/*.yaml`` are the maxima of aiconfigurator's collected GEMM data
(specs.md A.3). The same sweeps also time weight-streaming GEMMs: a few token rows against a weight matrix
several times the L2 cache, where the kernel's time is the weight bytes over the bandwidth the HBM sustains.
This script takes, per GPU, the largest such bandwidth, so the HBM figure comes from the same source and
method as the FLOP figures:

    bytes   = n*k*b_w + m*k*b_act + m*n*2      (weights, activations, BF16 output)
    bw      = bytes / latency                  over rows with m <= MAX_ROWS and n*k*b_w >= L2_MULTIPLE x L2

    python scripts/achievable_hbm.py [--data DIR]      # DIR: the calibration kernels, or measurements/kernels (H200)

It prints per GPU and dtype the maximum and the 90th percentile and the share of the datasheet bandwidth;
``hardware/h100_sxm.yaml`` and ``hardware/b200_sxm.yaml`` carry the overall maxima with this script as their
source, and the other GPUs of each family take that family's measured share of its datasheet figure.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront.hardware import get_hardware  # noqa: E402

_spec = importlib.util.spec_from_file_location("calibrate_kernels", ROOT / "scripts" / "calibrate_kernels.py")
ck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ck)  # its CSV loader (load_csv), as the other kernel scripts use it

DEFAULT_DATA = ROOT.parent / "shared" / "calibration" / "kernels"
MAX_ROWS = 64  # token rows: the activation and output bytes stay under 1 % of the weight bytes
L2_MULTIPLE = 3.0  # weight matrix at least this many L2 caches, so repeated timings cannot hit in L2
OUT_BYTES = 2.0  # BF16 output
# bytes per weight element and per activation element of the GEMM formats in the CSVs (block scales included:
# NVFP4 carries one FP8 scale per 16 elements; 128x128 FP8 block scales are under 0.01 %)
FORMAT_BYTES = {"bfloat16": (2.0, 2.0), "fp8": (1.0, 1.0), "fp8_block": (1.0, 1.0), "nvfp4": (0.5625, 0.5625)}


def streaming_bandwidths(path: Path, l2_bytes: float) -> dict[str, np.ndarray]:
    """{dtype: achieved bytes/s of each weight-streaming row} of one ``<gpu>__gemm.csv``."""
    cols = ck.load_csv(path)
    m, n, k, t_s = (cols[c].astype(float) for c in ("m", "n", "k", "latency_us"))
    t_s = t_s * 1e-6
    out: dict[str, np.ndarray] = {}
    for dtype, (b_w, b_act) in FORMAT_BYTES.items():  # a handful of formats, each over all its rows at once
        weight_bytes = n * k * b_w
        sel = (cols["dtype"] == dtype) & (m <= MAX_ROWS) & (weight_bytes >= L2_MULTIPLE * l2_bytes)
        if sel.any():
            moved = weight_bytes + m * k * b_act + m * n * OUT_BYTES  # HBM bytes of the GEMM
            out[dtype] = moved[sel] / t_s[sel]
    return out


def gpu_bandwidths(paths: list[Path], l2_bytes: float) -> dict[str, np.ndarray]:
    """{dtype: achieved bytes/s of each weight-streaming row} over several GEMM files of one GPU."""
    merged: dict[str, list[np.ndarray]] = {}
    for path in paths:
        for dtype, v in streaming_bandwidths(path, l2_bytes).items():
            merged.setdefault(dtype, []).append(v)
    return {dtype: np.concatenate(vs) for dtype, vs in merged.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of <gpu>__gemm*.csv kernel timings")
    args = ap.parse_args(argv)
    by_gpu: dict[str, list[Path]] = {}
    for path in sorted(args.data.glob("*__gemm*.csv")):  # <gpu>__gemm.csv, and sweeps such as <gpu>__gemm_streaming.csv
        by_gpu.setdefault(path.stem.split("__", 1)[0], []).append(path)
    if not by_gpu:
        print(f"error: no <gpu>__gemm*.csv files in {args.data}", file=sys.stderr)
        return 2
    print(f"weight-streaming GEMM rows: m <= {MAX_ROWS}, weights >= {L2_MULTIPLE:g} x L2; bandwidth in TB/s")
    for gpu, paths in by_gpu.items():
        hw = get_hardware(gpu)
        per = gpu_bandwidths(paths, hw.l2_bytes)
        if not per:
            print(f"{gpu}: no weight-streaming rows")
            continue
        best = max(float(v.max()) for v in per.values())
        for dtype, v in sorted(per.items()):
            print(f"  {gpu:10s} {dtype:10s} rows {v.size:4d}  max {v.max() / 1e12:5.2f}  p90 {np.percentile(v, 90) / 1e12:5.2f}")
        print(f"{gpu}: achievable {best / 1e12:.3f} TB/s = {best / hw.hbm_bandwidth_bytes_per_s:.3f} of the datasheet "
              f"{hw.hbm_bandwidth_bytes_per_s / 1e12:.2f} TB/s (spec file now: {hw.achievable_hbm_bytes_per_s / 1e12:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

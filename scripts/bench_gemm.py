#!/usr/bin/env python
"""Time gemm_cost over 1,000,000 random GEMM shapes on one core (target: under 1 s).

    .venv/bin/python scripts/bench_gemm.py [--shapes 1000000] [--gpu h100_sxm] [--fmt fp8]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core: keep BLAS/OpenMP pools single-threaded
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simfront.gemm import gemm_cost  # noqa: E402
from simfront.hardware import get_hardware  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", type=int, default=1_000_000)
    ap.add_argument("--gpu", default="h100_sxm")
    ap.add_argument("--fmt", default="fp8")
    args = ap.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # pin to one core
    hw = get_hardware(args.gpu)
    rng = np.random.default_rng(0)
    # log-uniform shapes: tokens 1..32k, weights 64..64k
    m = np.round(np.exp(rng.uniform(0, np.log(32768), args.shapes)))
    n = np.round(np.exp(rng.uniform(np.log(64), np.log(65536), args.shapes)))
    k = np.round(np.exp(rng.uniform(np.log(64), np.log(65536), args.shapes)))
    gemm_cost(m[:10], n[:10], k[:10], args.fmt, hw)  # warm up: load parameters, import paths
    t0 = time.perf_counter()
    cost = gemm_cost(m, n, k, args.fmt, hw)
    elapsed = time.perf_counter() - t0
    assert np.all(np.isfinite(cost.time_s)) and np.all(cost.time_s > 0)
    print(f"{args.shapes:,} GEMM shapes ({args.fmt} on {hw.id}) in {elapsed:.3f} s on one core "
          f"({elapsed / args.shapes * 1e9:.0f} ns/shape); target < 1 s: {'ok' if elapsed < 1.0 else 'MISS'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

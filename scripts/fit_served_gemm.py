#!/usr/bin/env python
"""Fit the served (autotuned) NVFP4 GEMM kernel's values on public microbenchmarks of it.

The calibration set's NVFP4 GEMM rows time TensorRT-LLM's NVFP4 ``Linear`` outside an ``autotune()`` block
(ai-dynamo/aiconfigurator ``collector/trtllm/collect_gemm.py``), so its AutoTuner runs the fallback tactic; serving
engines tune the tactic at start-up (``hardware/kernels.yaml``, op ``gemm_nvfp4``). This script takes the fastest of
FlashInfer's autotuned cudnn / cutlass / trtllm NVFP4 backends on Blackwell
(``measurements/kernels/served_nvfp4_gemm_b200.csv``, flashinfer-ai/flashinfer PR 2540) and fits the three values
of the ``fp4`` GEMM class that describe a tactic: the per-CTA K-loop streaming rate (``cta_bandwidth_bytes_per_s``),
the fixed time of one call (``launch_s``, the GEMM kernel alone: those rows take pre-quantised input) and the share of
the achievable FP4 rate on large shapes (``eta_compute``). Every other value is the Blackwell calibration fit
(``hardware/efficiency/gemm.yaml``). Least squares on log(predicted / measured). Writes
``hardware/efficiency/served_gemm.yaml``, which ``simfront.gemm.gemm_cost(served=True)`` (the serving step) reads.

    python scripts/fit_served_gemm.py [--no-write]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import minimize

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import efficiency  # noqa: E402
from simfront.gemm import gemm_cost  # noqa: E402
from simfront.hardware import get_hardware  # noqa: E402

DATA = ROOT / "measurements" / "kernels" / "served_nvfp4_gemm_b200.csv"
OUT = ROOT / "hardware" / "efficiency" / "served_gemm.yaml"
GPU = "b200_sxm"
SOURCE = ("flashinfer-ai/flashinfer PR 2540 (feat: cute dsl mmfp4 for blackwell), autotuned mm_fp4 tables on "
          "Blackwell: per shape the fastest of the cudnn, cutlass and trtllm backends (the CuTe DSL backend that pull "
          "request adds is left out: the measured serving runs predate it)")
# fitted values of the fp4 class: name -> (start, lower, upper); eta_compute is a share of the catalog's achievable
# FP4 rate, which is the calibration kernel's maximum (hardware/b200_sxm.yaml), so a tuned kernel may exceed 1: cuDNN
# ran a 1024 x 9216 x 7168 GEMM at 5.2 PFLOP/s in the same table, 1.15x that figure
FITTED = {
    "cta_bandwidth_bytes_per_s": (2.0e11, 1.0e10, 1.0e12),
    "launch_s": (5.0e-6, 5.0e-7, 3.0e-5),
    "eta_compute": (1.3, 0.5, 2.0),
}


def load(path: Path = DATA) -> dict[str, np.ndarray]:
    rows = list(csv.DictReader(path.open()))
    return {k: np.array([float(r[k]) for r in rows]) for k in ("m", "n", "k", "latency_us")}


def predict_us(cols: dict, hw, values: dict | None) -> np.ndarray:
    """The served NVFP4 GEMM's time (us) of each row with these fp4-class values (None: the calibration-fitted
    kernel), its input already quantised as the public rows' is."""
    ov = {} if values is None else {"served_gemm": {hw.family: {"fp4": values}}}
    with efficiency.using(ov):
        return np.asarray(gemm_cost(cols["m"], cols["n"], cols["k"], "nvfp4", hw, fused_act_quant=True,
                                    served=values is not None).time_s) * 1e6


def fit(cols: dict, hw) -> tuple[dict, float]:
    names = list(FITTED)
    lo = np.log([FITTED[n][1] for n in names])
    hi = np.log([FITTED[n][2] for n in names])

    def values(x):
        return dict(zip(names, np.exp(np.clip(x, lo, hi)).tolist()))

    def loss(x):
        return float(np.mean(np.log(predict_us(cols, hw, values(x)) / cols["latency_us"]) ** 2))

    x0 = np.log([FITTED[n][0] for n in names])
    res = minimize(loss, x0, method="Nelder-Mead", options={"xatol": 1e-5, "fatol": 1e-10, "maxiter": 4000})
    return values(res.x), float(res.fun)


def mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred / meas - 1.0)) * 100.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-write", action="store_true", help=f"print the fit, do not write {OUT.relative_to(ROOT)}")
    a = ap.parse_args(argv)
    hw = get_hardware(GPU)
    cols = load()
    base = predict_us(cols, hw, None)
    values, _ = fit(cols, hw)
    pred = predict_us(cols, hw, values)
    print(f"{len(cols['m'])} rows ({DATA.relative_to(ROOT)}); MAPE of the calibration-fitted kernel {mape(base, cols['latency_us']):.1f} %, "
          f"median predicted / measured {np.median(base / cols['latency_us']):.2f}")
    print(f"served fit: MAPE {mape(pred, cols['latency_us']):.1f} %, median {np.median(pred / cols['latency_us']):.2f}; "
          + ", ".join(f"{k} {v:.4g}" for k, v in values.items()))
    if a.no_write:
        return 0
    doc = {
        "fitted_by": "scripts/fit_served_gemm.py",
        "data": str(DATA.relative_to(ROOT)),
        "source": SOURCE,
        "date": dt.date.today().isoformat(),
        "families": {hw.family: {"fp4": {**{k: float(f"{v:.4g}") for k, v in values.items()},
                                         "rows": int(len(cols["m"])),
                                         "mape_pct": round(mape(pred, cols["latency_us"]), 1),
                                         "mape_pct_calibrated_kernel": round(mape(base, cols["latency_us"]), 1)}}},
    }
    header = ("# Served GEMM kernels whose calibration rows timed another tactic (hardware/kernels.yaml: served_tuned_tactic).\n"
              "# Written by scripts/fit_served_gemm.py; do not edit by hand (rerun the script). Per family and GEMM class,\n"
              "# the values that replace the calibration fit's in serving steps (simfront.gemm.gemm_cost(served=True)).\n")
    OUT.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=120))
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Kernels timed on an H200 (outside the kernel calibration) with PyTorch: the shipped parameters predict the
BF16 cuBLAS GEMMs, and the two scripts that time and score them work on real and synthetic files."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from simfront.kernel_validate import MEASURED, PREDICTED, validate_kernel_rows

ROOT = Path(__file__).resolve().parent.parent
MEASURED_DIR = ROOT / "measurements" / "kernels"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ratios(path: Path, dtype: str) -> np.ndarray:
    rows = [r for r in csv.DictReader(path.open()) if r["dtype"] == dtype]
    out = validate_kernel_rows(rows, filename=path.name)["rows"]
    return np.array([float(r[PREDICTED]) / float(r[MEASURED]) for r in out])


def test_h200_bf16_gemms_predicted_from_the_hopper_fit():
    """BF16 GEMMs are cuBLAS in the calibration and here, so this is the transfer of the H100 fit to H200's spec."""
    ratio = _ratios(MEASURED_DIR / "h200_sxm__gemm.csv", "bfloat16")
    assert len(ratio) >= 100
    assert 0.9 <= np.median(ratio) <= 1.1
    assert np.mean(np.abs(ratio - 1.0)) < 0.15  # MAPE


def test_every_measured_row_is_predicted_finite():
    for path in MEASURED_DIR.glob("*__*.csv"):
        rows = list(csv.DictReader(path.open()))
        out = validate_kernel_rows(rows, filename=path.name)["rows"]
        preds = [r[PREDICTED] for r in out]
        assert all(p is not None and np.isfinite(p) and p > 0 for p in preds), path.name


def test_score_reports_each_op_and_dtype():
    groups = _load("validate_torch_kernels").score()
    keys = {(g["op"], g["dtype"]) for g in groups}
    assert {("gemm", "bfloat16"), ("gemm", "fp8"), ("attention_prefill", "bfloat16"),
            ("attention_decode", "bfloat16")} <= keys
    for g in groups:
        assert g["predicted"] == g["rows"] > 0
        assert g["median_pred_over_meas"] > 0


def test_sample_shapes_keeps_only_dense_bf16_attention(tmp_path):
    pytest.importorskip("pandas")
    tk = _load("time_kernels_torch")
    src = tmp_path / "cal"
    src.mkdir()
    (src / "h100_sxm__gemm.csv").write_text(
        "gpu,dtype,m,n,k,latency_us\n"
        "h100_sxm,bfloat16,16,4096,4096,10\n"
        "h100_sxm,fp8,16,4096,4096,8\n"
        "h100_sxm,bfloat16,32768,65536,65536,50000\n")  # too slow to keep inside a short GPU lease
    head = "gpu,batch,{L},n_heads,n_kv_heads,head_dim,window_size,kv_cache_dtype,latency_us\n"
    for op, length in (("attention_prefill", "seq_len"), ("attention_decode", "kv_len")):
        (src / f"h100_sxm__{op}.csv").write_text(
            head.format(L=length)
            + "h100_sxm,4,1024,32,8,128,0,bfloat16,50\n"
            + "h100_sxm,4,1024,32,8,128,128,bfloat16,40\n"  # sliding window: not what SDPA computes
            + "h100_sxm,4,1024,32,8,128,0,fp8,45\n")  # FP8 KV cache: not timed by the script
    dst = tmp_path / "shapes"
    tk.sample_shapes(src, dst, per_group=10)
    gemm = list(csv.DictReader((dst / "gemm.csv").open()))
    assert sorted(r["dtype"] for r in gemm) == ["bfloat16", "fp8"]
    assert all(r["m"] == "16" for r in gemm)
    for op in ("attention_prefill", "attention_decode"):
        rows = list(csv.DictReader((dst / f"{op}.csv").open()))
        assert len(rows) == 1 and rows[0]["window_size"] == "0" and rows[0]["kv_cache_dtype"] == "bfloat16"


def test_shapes_come_from_a_sample_or_from_measured_files(tmp_path):
    tk = _load("time_kernels_torch")
    assert tk.shape_file(MEASURED_DIR, "gemm").name == "h200_sxm__gemm.csv"  # not the streaming sweep
    assert tk.shape_file(tmp_path, "gemm") is None
    (tmp_path / "gemm.csv").write_text("dtype,m,n,k\nbfloat16,1,2,3\n")
    assert tk.shape_file(tmp_path, "gemm") == tmp_path / "gemm.csv"

"""Kernel-CSV validation (simfront/kernel_validate.py) and the calibration registry (simfront/kernel_ops.py)."""

from __future__ import annotations

import csv
import time

import numpy as np
import pytest

from simfront.hardware import get_hardware
from simfront.kernel_ops import OPS, all_ops, op_params
from simfront.kernel_validate import PREDICTED, SIGNATURES, detect_kernel_op, validate_kernel_rows
from kernel_data import KERNEL_DIR

KERNELS = KERNEL_DIR
needs_data = pytest.mark.skipif(not KERNELS.exists(), reason="calibration data not available")


def _rows(gpu: str, op: str, step: int = 200) -> list[dict]:
    with (KERNELS / f"{gpu}__{op}.csv").open() as fh:
        return list(csv.DictReader(fh))[::step]


@pytest.mark.parametrize("op", sorted(SIGNATURES))
def test_the_op_is_detected_from_its_columns(op):
    cols = list(SIGNATURES[op]) + ["gpu", "latency_us"]
    assert detect_kernel_op(cols) == op
    assert detect_kernel_op(["gpu", "latency_us"]) is None


def test_the_op_is_detected_from_the_file_name_first():
    assert detect_kernel_op(["a", "b"], "h100_sxm__moe.csv") == "moe"
    assert detect_kernel_op(["a"], "/x/y/my_nccl_run.csv") == "nccl"
    # gemm columns, but the file says attention: the name wins
    assert detect_kernel_op(list(SIGNATURES["gemm"]), "b200_sxm__attention_decode.csv") == "attention_decode"


def test_registry_entries_are_complete():
    for name, entry in OPS.items():
        assert {"kind", "params", "predict", "columns", "vary"} <= set(entry), name
        assert entry["vary"] in entry["columns"]
        for spec in entry["params"].values():
            default, lo, hi = spec
            assert lo <= default <= hi
    ops = all_ops()
    assert set(OPS) <= set(ops)


@needs_data
@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm"])
def test_calibration_files_validate_with_every_column_kept(gpu):
    for op in sorted(all_ops()):
        path = KERNELS / f"{gpu}__{op}.csv"
        if not path.exists():
            continue
        rows = _rows(gpu, op)
        out = validate_kernel_rows(rows, filename=path.name)
        assert len(out["rows"]) == len(rows)
        for src, got in zip(rows, out["rows"]):
            assert {k: got[k] for k in src} == src  # original columns, original values, input order
            assert got["op"] == op
            assert got[PREDICTED] is not None and got[PREDICTED] > 0, got.get("reason")
        s = out["summary"][op]
        assert s["count"] == len(rows) and s["scored"] == len(rows)
        assert 0 <= s["median_ape_pct"] <= s["mape_pct"] * 3


@needs_data
def test_op_is_inferred_from_columns_when_no_file_name_is_given():
    rows = _rows("h100_sxm", "nccl", 50)
    out = validate_kernel_rows(rows)
    assert {r["op"] for r in out["rows"]} == {"nccl"}
    assert out["summary"]["nccl"]["mape_pct"] < 40


def test_unsupported_rows_get_a_null_prediction_and_a_reason_in_place():
    good = {"gpu": "h100_sxm", "dtype": "bfloat16", "m": "64", "n": "4096", "k": "4096", "latency_us": "10"}
    rows = [
        good,
        dict(good, gpu="tpu_v9"),
        dict(good, dtype="fp3"),
        {k: v for k, v in good.items() if k != "k"},
        dict(good, op="warp_drive"),
        dict(good, m="lots"),
    ]
    out = validate_kernel_rows(rows, op="gemm")["rows"]
    assert out[0][PREDICTED] > 0 and "reason" not in out[0]
    assert out[1][PREDICTED] is None and "GPU" in out[1]["reason"]
    assert out[2][PREDICTED] is None and out[2]["reason"]
    assert out[3][PREDICTED] is None and "missing" in out[3]["reason"]
    assert out[4][PREDICTED] is None and "unsupported op" in out[4]["reason"]
    assert out[5][PREDICTED] is None and out[5]["reason"]
    assert [r.get("gpu") for r in out] == [r.get("gpu") for r in rows]


def test_rows_for_any_catalog_gpu_are_predicted():
    rows = [{"gpu": g, "dtype": "fp8", "m": 128, "n": 8192, "k": 8192} for g in ("h200_sxm", "mi300x", "gb200", "l40s")]
    out = validate_kernel_rows(rows)
    assert all(r[PREDICTED] > 0 for r in out["rows"])
    assert out["summary"]["gemm"]["scored"] == 0  # no measurement given
    assert out["summary"]["gemm"]["mape_pct"] is None


def test_predictions_match_the_registry_and_are_vectorised():
    rng = np.random.default_rng(3)
    n = 6000
    m, nn, k = (np.round(np.exp(rng.uniform(0, 10, n))) for _ in range(3))
    rows = [{"gpu": "b200_sxm", "dtype": "nvfp4", "m": a, "n": b, "k": c} for a, b, c in zip(m, nn, k)]
    t0 = time.perf_counter()
    out = validate_kernel_rows(rows)
    assert time.perf_counter() - t0 < 2.0
    hw = get_hardware("b200_sxm")
    want = OPS["gemm"]["predict"]({"dtype": np.array(["nvfp4"] * n), "m": m, "n": nn, "k": k}, hw, op_params(OPS["gemm"], hw)) * 1e6
    np.testing.assert_allclose([r[PREDICTED] for r in out["rows"]], want, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["int4_wo", "int8_wo", "sq", "fp4"])
def test_weight_only_smoothquant_and_fp4_rows_are_predicted_on_every_catalog_gpu(dtype):
    from simfront.hardware import catalog

    rows = [{"gpu": g, "dtype": dtype, "m": m, "n": 8192, "k": 8192, "latency_us": 100.0}
            for g in sorted(catalog()) for m in (1, 64, 4096)]
    out = validate_kernel_rows(rows, op="gemm")
    for r in out["rows"]:
        assert r["predicted_latency_us"] is not None and r["predicted_latency_us"] > 0, (r["gpu"], r.get("reason"))

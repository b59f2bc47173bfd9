"""scripts/achievable_hbm.py: the HBM figure of the calibration GPUs from their weight-streaming GEMM rows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from simfront.hardware import get_hardware

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("achievable_hbm", ROOT / "scripts" / "achievable_hbm.py")
ah = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ah)


def _csv(tmp_path, rows):
    path = tmp_path / "x__gemm.csv"
    path.write_text("gpu,dtype,m,n,k,latency_us\n" + "".join(f"x,{d},{m},{n},{k},{t}\n" for d, m, n, k, t in rows))
    return path


def test_only_few_row_gemms_over_l2_sized_weights_count(tmp_path):
    l2 = 50e6
    rows = [
        ("bfloat16", 8, 16384, 16384, 200.0),  # 537 MB of weights: counts
        ("bfloat16", 512, 16384, 16384, 400.0),  # too many token rows: compute enters
        ("bfloat16", 8, 4096, 4096, 5.0),  # 34 MB of weights: under 3 L2 caches, could hit in L2
        ("int8_wo", 8, 16384, 16384, 100.0),  # a format the script does not size
    ]
    per = ah.streaming_bandwidths(_csv(tmp_path, rows), l2)
    assert list(per) == ["bfloat16"] and per["bfloat16"].size == 1
    moved = 16384 * 16384 * 2 + 8 * 16384 * 2 + 8 * 16384 * 2  # weights, activations, output
    assert per["bfloat16"][0] == pytest.approx(moved / 200e-6)


def test_narrower_formats_count_their_own_bytes(tmp_path):
    rows = [("fp8_block", 4, 16384, 65536, 400.0), ("nvfp4", 4, 16384, 65536, 400.0)]
    per = ah.streaming_bandwidths(_csv(tmp_path, rows), 50e6)
    assert per["nvfp4"][0] == pytest.approx(per["fp8_block"][0] * 0.5625, rel=1e-3)


@pytest.mark.skipif(not ah.DEFAULT_DATA.exists(), reason="calibration data (../shared) not beside the repository")
@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm"])
def test_the_spec_files_carry_the_measured_figure(gpu):
    hw = get_hardware(gpu)
    per = ah.streaming_bandwidths(ah.DEFAULT_DATA / f"{gpu}__gemm.csv", hw.l2_bytes)
    best = max(float(v.max()) for v in per.values())
    assert hw.achievable_hbm_bytes_per_s == pytest.approx(best, rel=2e-3)
    assert best < hw.hbm_bandwidth_bytes_per_s  # below the datasheet, as every achievable figure


def test_h200_carries_its_own_measured_figure():
    """H200's figure is measured on an H200 (measurements/kernels, timed with PyTorch), not the H100 share."""
    hw = get_hardware("h200_sxm")
    paths = sorted((ROOT / "measurements" / "kernels").glob("h200_sxm__gemm*.csv"))
    per = ah.gpu_bandwidths(paths, hw.l2_bytes)
    best = max(float(v.max()) for v in per.values())
    assert hw.achievable_hbm_bytes_per_s == pytest.approx(best, rel=2e-3)
    assert len(per["bfloat16"]) >= 40 and best < hw.hbm_bandwidth_bytes_per_s

"""The served (autotuned) NVFP4 GEMM: serving steps price the tactic engines tune, not the calibration's fallback one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from simfront import efficiency, gemm, kernels
from simfront.gemm import gemm_cost, served_values
from simfront.hardware import get_hardware

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fit_served_gemm", ROOT / "scripts" / "fit_served_gemm.py")
fsg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fsg)

B200 = get_hardware("b200_sxm")


def _t_us(m, n, k, fmt, hw, served, fused=True):
    return float(gemm_cost(m, n, k, fmt, hw, fused_act_quant=fused, static_act_scale=True, served=served).time_s) * 1e6


def test_public_tuned_rows_are_reproduced_by_the_served_kernel_not_the_calibrated_one():
    cols = fsg.load()
    meas = cols["latency_us"]
    with efficiency.using({}):  # the shipped values, whatever profile a caller installed
        served = np.array([_t_us(m, n, k, "nvfp4", B200, True) for m, n, k in zip(cols["m"], cols["n"], cols["k"])])
        calibrated = np.array([_t_us(m, n, k, "nvfp4", B200, False) for m, n, k in zip(cols["m"], cols["n"], cols["k"])])
    assert fsg.mape(served, meas) <= 15.0
    assert 0.85 <= float(np.median(served / meas)) <= 1.15
    # the fallback tactic the calibration timed is far slower on the same shapes: the served values must be in force
    assert fsg.mape(calibrated, meas) >= 30.0


def test_written_values_are_what_the_script_fits_on_the_committed_rows():
    written = served_values("fp4", B200)
    assert written is not None and set(written) == set(gemm.SERVED_VALUES)
    with efficiency.using({}):
        refit, _ = fsg.fit(fsg.load(), B200)
    for name, value in refit.items():
        assert written[name] == pytest.approx(value, rel=0.03), name


@pytest.mark.parametrize("m,n,k", [(1, 1280, 8192), (4, 7168, 2304), (64, 8192, 28672), (1024, 9216, 7168)])
def test_served_nvfp4_gemm_is_faster_than_the_untuned_tactic(m, n, k):
    assert _t_us(m, n, k, "nvfp4", B200, served=True) < _t_us(m, n, k, "nvfp4", B200, served=False)


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "fp8_block"])
def test_served_flag_leaves_formats_without_a_served_tactic_alone(fmt):
    assert _t_us(16, 8192, 8192, fmt, B200, served=True) == _t_us(16, 8192, 8192, fmt, B200, served=False)


@pytest.mark.parametrize("gpu", ["rtx_pro_6000_server", "h100_sxm", "mi355x"])
def test_platforms_without_the_tuned_table_keep_the_calibrated_kernel(gpu):
    hw = get_hardware(gpu)
    assert served_values("fp4", hw) is None
    assert _t_us(4, 8192, 8192, "nvfp4", hw, served=True) == _t_us(4, 8192, 8192, "nvfp4", hw, served=False)


def test_blackwell_ultra_and_grace_blackwell_take_the_served_values():
    for gpu in ("b300_sxm", "gb200", "gb300"):
        hw = get_hardware(gpu)
        assert kernels.served_tuned_tactic("gemm_nvfp4", hw)
        assert served_values("fp4", hw) == served_values("fp4", B200)


def test_an_unfused_quantize_kernel_costs_the_served_gemm_one_launch_and_its_bytes():
    fused = _t_us(4, 8192, 8192, "nvfp4", B200, served=True, fused=True)
    unfused = _t_us(4, 8192, 8192, "nvfp4", B200, served=True, fused=False)
    assert unfused - fused >= kernels.launch_cost().per_launch_s * 1e6 * 0.999


def test_more_hbm_bandwidth_never_slows_a_served_memory_bound_gemm():
    a = B200.achievable
    hbm = a.hbm_bandwidth_bytes_per_s
    fast = B200.model_copy(update={"achievable": a.model_copy(update={
        "hbm_bandwidth_bytes_per_s": hbm.model_copy(update={"value": hbm.value * 1.5})})})
    assert fast.achievable_hbm_bytes_per_s == pytest.approx(1.5 * B200.achievable_hbm_bytes_per_s)
    # 264 MB of weights at 4 rows: HBM-bound, so strictly faster; a small GEMM bound by its CTAs' k-loop: never slower
    assert _t_us(4, 57344, 8192, "nvfp4", fast, served=True) < _t_us(4, 57344, 8192, "nvfp4", B200, served=True)
    assert _t_us(1, 1280, 8192, "nvfp4", fast, served=True) <= _t_us(1, 1280, 8192, "nvfp4", B200, served=True)

"""GEMM cost (simfront/gemm.py) and memory-bound kernels (simfront/elementwise.py): invariants and calibration."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront.elementwise import memory_op_cost
from simfront.errors import SimfrontError
from simfront.gemm import PARAMS, dtype_class, gemm_cost
from simfront.hardware import catalog, get_hardware
from simfront.kernel_ops import OPS, op_params
from simfront.precision import FORMATS
from kernel_data import KERNEL_DIR, more_hbm

KERNELS = KERNEL_DIR
GPUS = sorted(catalog())
FMTS = sorted(FORMATS)


def _shapes(seed: int, size: int = 400):
    rng = np.random.default_rng(seed)
    m = np.round(np.exp(rng.uniform(0, np.log(65536), size)))
    n = np.round(np.exp(rng.uniform(0, np.log(131072), size)))
    k = np.round(np.exp(rng.uniform(0, np.log(131072), size)))
    return m, n, k


@pytest.mark.parametrize("fmt", FMTS)
def test_flops_are_exactly_2mnk(fmt):
    m, n, k = _shapes(1)
    for gpu in ("h100_sxm", "b200_sxm", "mi300x", "a100_sxm"):
        c = gemm_cost(m, n, k, fmt, get_hardware(gpu))
        np.testing.assert_array_equal(c.flops, 2.0 * m * n * k)


@settings(max_examples=25, deadline=None)
@given(gpu=st.sampled_from(GPUS), fmt=st.sampled_from(FMTS), seed=st.integers(0, 2**16), axis=st.sampled_from("mnk"),
       step=st.floats(1.0, 4096.0))
def test_time_never_decreases_when_a_dimension_grows(gpu, fmt, seed, axis, step):
    hw = get_hardware(gpu)
    m, n, k = _shapes(seed)
    base = gemm_cost(m, n, k, fmt, hw).time_s
    grown = {"m": (m + step, n, k), "n": (m, n + step, k), "k": (m, n, k + step)}[axis]
    after = gemm_cost(*grown, fmt, hw).time_s
    assert np.all(after >= base * (1 - 1e-12))


@settings(max_examples=25, deadline=None)
@given(gpu=st.sampled_from(GPUS), fmt=st.sampled_from(FMTS), seed=st.integers(0, 2**16), factor=st.floats(1.0, 4.0))
def test_more_hbm_bandwidth_never_slows_a_gemm(gpu, fmt, seed, factor):
    hw = get_hardware(gpu)
    faster = more_hbm(hw, factor)
    m, n, k = _shapes(seed)
    assert np.all(gemm_cost(m, n, k, fmt, faster).time_s <= gemm_cost(m, n, k, fmt, hw).time_s * (1 + 1e-12))




def test_gemms_use_the_achievable_peaks_not_the_datasheet():
    hw = get_hardware("l40s")
    big = gemm_cost(8192, 8192, 8192, "bf16", hw)
    # never faster than the measured maximum (261 of 362 datasheet TFLOPS), and near it on a big square GEMM
    assert big.flops / big.time_s <= hw.achievable_matmul_flops_per_s("bf16") * 1.3
    assert big.flops / big.time_s <= hw.peak_flops_per_s["bf16"]
    assert big.flops / big.time_s > 0.6 * hw.achievable_matmul_flops_per_s("bf16")
    # a decode GEMM streams its weights at the achievable bandwidth: doubling it halves the weight time
    d1 = gemm_cost(1, 8192, 8192, "bf16", hw).time_s
    d2 = gemm_cost(1, 8192, 8192, "bf16", more_hbm(hw, 2.0)).time_s
    assert d2 < 0.75 * d1


@pytest.mark.parametrize("gpu", ["a100_sxm", "l40s", "h100_sxm", "mi300x", "mi355x", "b200_sxm"])
def test_weight_only_formats_run_near_the_16_bit_rate_when_compute_bound_and_at_their_weight_bytes_when_not(gpu):
    hw = get_hardware(gpu)
    bf16 = gemm_cost(8192, 8192, 8192, "bf16", hw).time_s
    for fmt in ("w4a16", "w8a16"):
        big = gemm_cost(8192, 8192, 8192, fmt, hw).time_s
        assert big < 1.5 * bf16, fmt  # dequantise in the main loop: near the BF16 tensor rate (not 0.2 of it)
        small = gemm_cost(1, 8192, 8192, fmt, hw).time_s
        assert small < 0.8 * gemm_cost(1, 8192, 8192, "bf16", hw).time_s, fmt  # fewer weight bytes
    assert gemm_cost(1, 8192, 8192, "w4a16", hw).time_s < gemm_cost(1, 8192, 8192, "w8a16", hw).time_s


def test_fp4_is_mxfp4_on_cdna4_and_runs_at_its_fp4_rate():
    mi355, b200 = get_hardware("mi355x"), get_hardware("b200_sxm")
    from simfront.precision import gemm_rate_dtype, resolve_format

    assert resolve_format("fp4", mi355).name == "mxfp4" and resolve_format("fp4", b200).name == "nvfp4"
    assert gemm_rate_dtype(resolve_format("fp4", mi355), mi355) == "fp4"  # MXFP4 MFMA at the FP4 rate
    big = (8192, 8192, 8192)
    assert gemm_cost(*big, "fp4", mi355).time_s < 0.5 * gemm_cost(*big, "bf16", mi355).time_s
    # on H100 (no FP4) a fp4 GEMM falls back to dequantise + BF16 math
    h100 = get_hardware("h100_sxm")
    assert gemm_cost(*big, "fp4", h100).time_s > 0.7 * gemm_cost(*big, "bf16", h100).time_s


def test_no_nan_or_negative_over_wide_shapes_including_zero_tokens():
    rng = np.random.default_rng(7)
    m = np.concatenate([[0, 1, 2], np.round(np.exp(rng.uniform(0, np.log(1e6), 3000)))])
    n = np.concatenate([[1, 1, 7], np.round(np.exp(rng.uniform(0, np.log(1e6), 3000)))])
    k = np.concatenate([[1, 3, 1], np.round(np.exp(rng.uniform(0, np.log(1e6), 3000)))])
    for gpu in GPUS:
        for fmt in FMTS:
            c = gemm_cost(m, n, k, fmt, get_hardware(gpu))
            for leg in (c.time_s, c.compute_s, c.memory_s, c.mem_bytes, c.flops):
                assert np.all(np.isfinite(leg)) and np.all(leg >= 0), (gpu, fmt)
            assert np.all(c.time_s > 0)


def test_decode_gemms_are_memory_bound_and_big_prefill_gemms_compute_bound():
    hw = get_hardware("h100_sxm")
    c = gemm_cost(np.array([1, 8, 16384]), 8192, 8192, "bf16", hw)
    assert list(c.bound) == ["memory", "memory", "compute"]
    # decode time is set by streaming the weights: close to N·K·2 B at datasheet bandwidth, never faster
    weight_s = 8192 * 8192 * 2 / hw.hbm_bandwidth_bytes_per_s
    assert weight_s < c.time_s[0] < 2.0 * weight_s


def test_formats_trade_bytes_and_rate_as_the_hardware_allows():
    h100, b200 = get_hardware("h100_sxm"), get_hardware("b200_sxm")
    big, one = (8192, 8192, 8192), (1, 8192, 8192)
    assert gemm_cost(*big, "fp8", h100).time_s < gemm_cost(*big, "bf16", h100).time_s
    assert gemm_cost(*big, "nvfp4", b200).time_s < gemm_cost(*big, "fp8", b200).time_s
    # weight-only 4-bit: fewer bytes at decode, no faster math at prefill
    assert gemm_cost(*one, "w4a16", h100).time_s < gemm_cost(*one, "bf16", h100).time_s
    assert gemm_cost(*big, "w4a16", h100).time_s >= gemm_cost(*big, "bf16", h100).time_s
    # Hopper has no FP4 tensor cores: NVFP4 runs weight-only at the BF16 rate
    assert dtype_class(FORMATS["nvfp4"], h100) == "wonly"
    assert dtype_class(FORMATS["nvfp4"], b200) == "fp4"
    assert gemm_cost(*big, "nvfp4", h100).time_s > gemm_cost(*big, "fp8", h100).time_s


def test_explicit_parameters_override_the_fitted_file():
    hw = get_hardware("h100_sxm")
    p = op_params(OPS["gemm"], hw)
    slow = dict(p, eta_compute_bf16=0.25)
    assert gemm_cost(8192, 8192, 8192, "bf16", hw, slow).time_s > 1.5 * gemm_cost(8192, 8192, 8192, "bf16", hw, p).time_s
    assert set(PARAMS) <= set(p)


def test_unknown_format_is_a_user_error():
    with pytest.raises(SimfrontError):
        gemm_cost(1, 1, 1, "fp3", get_hardware("h100_sxm"))


@pytest.mark.skipif(not KERNELS.exists(), reason="calibration data not available")
@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm"])
def test_calibrated_predictions_land_near_measured_kernels(gpu):
    with (KERNELS / f"{gpu}__gemm.csv").open() as fh:
        rows = list(csv.DictReader(fh))[::150]  # 40 rows spread over the file
    hw = get_hardware(gpu)
    pred = np.array([gemm_cost(float(r["m"]), float(r["n"]), float(r["k"]), r["dtype"], hw).time_s for r in rows]) * 1e6
    meas = np.array([float(r["latency_us"]) for r in rows])
    assert np.mean(np.abs(pred / meas - 1)) < 0.25


# ------------------------------------------------------------------ memory-bound kernels (elementwise.py)


def test_memory_op_time_is_fixed_cost_plus_bytes_over_achieved_bandwidth():
    hw = get_hardware("h100_sxm")
    c = memory_op_cost(np.array([0.0, 1e9]), hw)
    assert c.time_s[0] > 0  # fixed per-kernel cost
    per_byte = (c.time_s[1] - c.time_s[0]) / 1e9
    assert 1 / hw.hbm_bandwidth_bytes_per_s < per_byte < 2 / hw.hbm_bandwidth_bytes_per_s
    assert c.mem_bytes[1] == 1e9 and c.bound[1] == "memory"


@settings(max_examples=30, deadline=None)
@given(gpu=st.sampled_from(GPUS), nbytes=st.floats(0, 1e12), flops=st.floats(0, 1e13), factor=st.floats(1.0, 8.0))
def test_memory_op_never_slower_with_more_bandwidth_and_never_nan(gpu, nbytes, flops, factor):
    hw = get_hardware(gpu)
    faster = more_hbm(hw, factor)
    a, b = memory_op_cost(nbytes, hw, flops=flops), memory_op_cost(nbytes, faster, flops=flops)
    assert np.isfinite(a.time_s) and a.time_s > 0
    assert b.time_s <= a.time_s * (1 + 1e-12)
    assert memory_op_cost(nbytes * 2, hw, flops=flops).time_s >= a.time_s


def test_a_serving_fp8_linear_with_a_static_activation_scale_pays_no_more_fixed_time_than_block_fp8():
    """The benchmark's per-tensor FP8 Linear carries its scale handling; a serving engine's static-scale FP8 GEMM
    pays at most the block-scaled format's fixed time (one quantisation pass) and reads its input once in that pass
    (no amax pass: the checkpoint holds the scale); its FLOPs and weight bytes do not change."""
    from simfront.gemm import gemm_cost
    from simfront.hardware import get_hardware

    for gpu in ("h100_sxm", "b200_sxm"):
        hw = get_hardware(gpu)
        bench, serve = gemm_cost(4, 10240, 8192, "fp8", hw), gemm_cost(4, 10240, 8192, "fp8", hw, static_act_scale=True)
        assert serve.time_s < bench.time_s and serve.flops == bench.flops
        # the quantize pass reads the BF16 input once instead of twice: one m x k BF16 read less
        assert bench.mem_bytes - serve.mem_bytes == pytest.approx(4 * 8192 * 2.0)
        big = (8192, 8192, 8192)
        # at a large GEMM the saving is the amax pass's read of the input, a small part of the op
        assert gemm_cost(*big, "fp8", hw, static_act_scale=True).time_s / gemm_cost(*big, "fp8", hw).time_s > 0.85
        for fmt in ("bf16", "fp8_block"):  # other formats are as benchmarked
            assert gemm_cost(4, 10240, 8192, fmt, hw, static_act_scale=True).time_s == gemm_cost(4, 10240, 8192, fmt, hw).time_s


def test_a_gemm_whose_input_arrives_quantized_skips_the_quantize_pass_for_fp8_and_nvfp4_only():
    """A norm or gated activation that writes FP8 (static scale) or NVFP4 for the GEMM after it (gemm.FUSED_QUANT_CLASSES)
    leaves the GEMM its own kernel: no quantize pass (fewer bytes, less time), the same FLOPs, and a saving that is the
    pass alone (the smaller part of a large GEMM); block-FP8 and BF16 GEMMs are unchanged."""
    from simfront.gemm import gemm_cost
    from simfront.hardware import get_hardware

    for gpu, fmts in (("h100_sxm", ("fp8",)), ("b200_sxm", ("fp8", "nvfp4"))):
        hw = get_hardware(gpu)
        for fmt in fmts:
            for shape in ((4, 10240, 8192), (8192, 8192, 8192)):
                alone = gemm_cost(*shape, fmt, hw, static_act_scale=True)
                fused = gemm_cost(*shape, fmt, hw, static_act_scale=True, fused_act_quant=True)
                assert fused.time_s < alone.time_s and fused.mem_bytes < alone.mem_bytes and fused.flops == alone.flops
            assert fused.time_s / alone.time_s > 0.75  # the large GEMM: the pass is the smaller part of it
        for fmt in ("bf16", "fp8_block"):
            a = gemm_cost(4, 10240, 8192, fmt, hw, static_act_scale=True)
            b = gemm_cost(4, 10240, 8192, fmt, hw, static_act_scale=True, fused_act_quant=True)
            assert a.time_s == b.time_s and a.mem_bytes == b.mem_bytes


def test_nvfp4_gemm_with_and_without_its_quantize_kernel_against_vllms_published_b200_timings():
    """vllm-project/vllm PR 20646 (B200, CUTLASS NVFP4 before its tuned configs; benchmarks/kernels/bench_nvfp4_gemm.py)
    timed Llama-3.1-8B's QKV GEMM (N 6144, K 4096) with the activation quantize kernel ("nvfp4") and on a quantized
    input ("nvfp4-noquant"), TFLOP/s by batch. Never fitted on: the priced op (quantize kernel included) and the same GEMM
    on an input an engine's fused norm or activation wrote quantized stay within 15 % of both."""
    from simfront.gemm import gemm_cost
    from simfront.hardware import get_hardware

    hw = get_hardware("b200_sxm")
    n, k = 6144, 4096
    published_tflops = {1: (3.737964, 4.439497), 16: (59.959389, 71.160187), 64: (235.645587, 281.971021),
                        128: (454.178740, 549.526976)}
    for m, (with_quant, no_quant) in published_tflops.items():
        flops = 2.0 * m * n * k
        alone = flops / float(gemm_cost(m, n, k, "nvfp4", hw, static_act_scale=True).time_s) / 1e12
        fused = flops / float(gemm_cost(m, n, k, "nvfp4", hw, static_act_scale=True, fused_act_quant=True).time_s) / 1e12
        assert alone == pytest.approx(with_quant, rel=0.15), m
        assert fused == pytest.approx(no_quant, rel=0.15), m

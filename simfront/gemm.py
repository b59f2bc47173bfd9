"""Dense GEMM cost: Y[m,n] = X[m,k] W[k,n] on one GPU (m = tokens).

Roofline with the kernel facts that move real GEMMs off it (modeling-notes.md §1.1, §2):

* work is cut into output tiles (M tile = next power of two of m, clipped to the family's tile
  range), split along k only to fill SMs the tiles leave idle, and run in waves over the SMs
  (the partial last wave counted by a fitted fraction: stream-K recovers the rest);
* compute leg = waves x one tile's MMA time at the SM's share of the achieved tensor rate;
* memory leg = max(all bytes at the achieved HBM bandwidth, waves x one tile's bytes at the rate
  a single CTA's k-loop streams): few tiles cannot pull full bandwidth;
* the legs combine through a soft maximum (loads and math overlap imperfectly near the ridge),
  plus a fixed per-kernel cost and, for dynamically quantized formats, the activation
  quantization pass.

Efficiencies are per dtype class and per architecture family (``hardware/efficiency/gemm.yaml``) and
are fractions of the GPU's ACHIEVABLE peaks (``Hardware.achievable``: the measured maximum dense GEMM
rate per dtype and the measured streaming HBM bandwidth), not of its datasheet, so a value fitted on one
GPU transfers to another through that GPU's own achievable peaks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import efficiency, kernels
from .cost import Cost
from .errors import SimfrontError
from .precision import FORMATS, Format, gemm_rate_dtype, resolve_format

# Output of every GEMM is written in BF16 (TRT-LLM / vLLM GEMM epilogues; modeling-notes.md §1.1 b_out).
OUT_BYTES = 2.0
# Quantized formats quantize BF16 activations in a separate pass: read 2 B, write act_bytes
# (AIC prices it as a memory op 2·m·k/BW; modeling-notes.md §1.1).
ACT_SOURCE_BYTES = 2.0

# Efficiency class of each format when its fast tensor-core path exists. MXFP4 on FP4-capable GPUs
# runs as W4A8 block-scaled MMA at the FP8 rate (precision.py), so it shares the block-scaled class.
_FAST_CLASS = {
    "bf16": "bf16",
    "fp16": "bf16",
    "fp8": "fp8",
    "int8": "fp8",
    "fp8_block": "fp8_block",
    "nvfp4": "fp4",
    "mxfp4": "fp8_block",
    "w4a16": "wonly",
    "w8a16": "wonly",
}
DTYPE_CLASSES = ("bf16", "fp8", "fp8_block", "fp4", "wonly")
# Measured class whose fitted values a class with no calibration rows on a family takes (the
# calibrator copies them, ``scripts/calibrate_kernels.py``): the same kernel pipeline (launches,
# prologue, CTA k-loop, share of the achievable peak) at another tensor rate. FP4 tensor cores are the
# FP8 MMA path at half the operand width (H100 has no FP4 rows). Weight-only GEMMs keep their priors:
# their main-loop dequantisation makes them slower than BF16 when compute-bound (measured ~0.8 of peak).
CLASS_FALLBACK = {"fp4": "fp8", "fp8_block": "fp8"}
# Activation-quantization reads of the BF16 input per class: dynamic per-tensor scaling needs an
# amax pass before the quantize pass (2 reads); block scales are computed in one pass per 1x128 / 1x16
# group (1 read) (TensorRT-LLM / TransformerEngine quantization kernels; modeling-notes.md §1.1).
ACT_QUANT_READS = {"fp8": 2.0, "fp8_block": 1.0, "fp4": 1.0}
# Classes whose activation quantization a serving engine fuses into the kernel that produces the GEMM's input
# (the residual-add + RMSNorm before it, or the gated activation) when that input is a norm's or activation's output:
# per-tensor FP8 with the checkpoint's static scale (and INT8 SmoothQuant, the same class) and NVFP4. vLLM's
# fuse_norm_quant (FP8 static) and fuse_act_quant (FP8 static; NVFP4 on SM100) at its default optimization level and
# fuse_allreduce_rms (all-reduce + RMSNorm + FP8 static / NVFP4 quant, TP > 1) at O2 (vllm-project/vllm
# docs/design/fusions.md, "Quick Reference" and "Support Matrix"); TensorRT-LLM's AllReduceFusionOp
# RESIDUAL_RMS_NORM_QUANT_FP8 / RESIDUAL_RMS_NORM_QUANT_NVFP4 kernels; FlashInfer's add_rmsnorm_fp4quant. Block-FP8
# (1x128 groups) keeps its separate quantize kernel: the DeepGEMM / trtllm-gen block-scaled paths quantize their
# input in their own pass.
FUSED_QUANT_CLASSES = ("fp8", "fp4")

# name -> (default, lower bound, upper bound). Defaults from modeling-notes.md §2 / specs.md A.3;
# lo == hi marks a parameter that is chosen, not fitted.
PARAMS: dict[str, tuple[float, float, float]] = {
    # achieved fraction of the ACHIEVABLE dense tensor rate (Hardware.achievable, the measured maximum)
    # on large shapes: the median/max ratios of specs.md A.3 (H100 BF16 771/834, FP8 1219/1503, block FP8
    # 1092/1265, B200 NVFP4 3525/4547). Above 1 allowed: the model's wave and prologue terms already
    # charge part of what separates the median from the maximum.
    "eta_compute_bf16": (0.92, 0.2, 1.3),
    "eta_compute_fp8": (0.81, 0.2, 1.3),
    "eta_compute_fp8_block": (0.86, 0.2, 1.3),
    "eta_compute_fp4": (0.78, 0.1, 1.3),
    # weight-only int4/int8 dequantise in the GEMM main loop and run near the BF16 tensor rate when
    # compute-bound: measured ~0.8 of the A100 BF16 datasheet peak (issue 13) = 0.83 of its achievable 299
    "eta_compute_wonly": (0.83, 0.05, 1.3),
    # achieved fraction of the ACHIEVABLE HBM bandwidth when enough CTAs stream (AIC 0.8 of datasheet
    # / 0.90 achievable share = 0.89; scripts/achievable_hbm.py)
    "eta_memory_bf16": (0.89, 0.3, 1.3),
    "eta_memory_fp8": (0.89, 0.3, 1.3),
    "eta_memory_fp8_block": (0.89, 0.3, 1.3),
    "eta_memory_fp4": (0.89, 0.3, 1.3),
    "eta_memory_wonly": (0.85, 0.3, 1.3),
    # fixed per-op cost: launch + prologue/epilogue + the benchmark's activation scale/quantisation kernels
    # (per-tensor FP8 as the calibration benchmark runs it; serving engines: gemm_cost(static_act_scale=True))
    "launch_s_bf16": (3e-6, 5e-7, 3e-5),
    "launch_s_fp8": (4e-6, 5e-7, 3e-5),
    "launch_s_fp8_block": (4e-6, 5e-7, 3e-5),
    "launch_s_fp4": (4e-6, 5e-7, 3e-5),
    "launch_s_wonly": (4e-6, 5e-7, 3e-5),
    # HBM bandwidth one CTA pulls through its k-loop (bytes/s): the small-grid penalty. Block-scaled
    # kernels pay scale loads and promotion per k-block, so their k-loop is slower.
    "cta_bandwidth_bytes_per_s_bf16": (100e9, 5e9, 1e12),
    "cta_bandwidth_bytes_per_s_fp8": (100e9, 5e9, 1e12),
    "cta_bandwidth_bytes_per_s_fp8_block": (100e9, 5e9, 1e12),
    "cta_bandwidth_bytes_per_s_fp4": (100e9, 5e9, 1e12),
    "cta_bandwidth_bytes_per_s_wonly": (100e9, 5e9, 1e12),
    # k elements per split-K slice (how far kernels split k to fill idle SMs); block-scaled
    # kernels (DeepGEMM-style) barely split k
    "split_k_chunk_bf16": (2048.0, 64.0, 1e6),
    "split_k_chunk_fp8": (2048.0, 64.0, 1e6),
    "split_k_chunk_fp8_block": (2048.0, 64.0, 1e6),
    "split_k_chunk_fp4": (2048.0, 64.0, 1e6),
    "split_k_chunk_wonly": (2048.0, 64.0, 1e6),
    # most k slices a kernel splits into (split-K / stream-K heuristics cap the reduction cost)
    "split_k_max": (16.0, 1.0, 256.0),
    # exponent of the soft maximum of the compute and memory legs (large = hard roofline max)
    "roofline_sharpness": (4.0, 1.0, 32.0),
    # achieved fraction of the achievable HBM bandwidth in the activation-quantization kernels
    "eta_quant": (0.7, 0.1, 1.3),
    # pipeline prologue/epilogue per tile, in equivalent k elements
    "k_overhead": (128.0, 0.0, 2048.0),
    # fraction of the partial last wave that is not recovered by stream-K / persistent scheduling
    "wave_quantization_bf16": (0.5, 0.0, 1.0),
    "wave_quantization_fp8": (0.5, 0.0, 1.0),
    "wave_quantization_fp8_block": (0.5, 0.0, 1.0),
    "wave_quantization_fp4": (0.5, 0.0, 1.0),
    "wave_quantization_wonly": (0.5, 0.0, 1.0),
    # CTA tile sizes (NVIDIA Matmul Background guide DU-09799-001 §3: 128x128 / 128x256 typical)
    "tile_m": (128.0, 128.0, 128.0),
    "tile_n": (128.0, 128.0, 128.0),
    # smallest M tile a kernel uses for skinny GEMMs (Hopper WGMMA M=64; swap-AB kernels go lower)
    "tile_m_min": (64.0, 64.0, 64.0),
}

# Architecture choices per family that are not fitted: Blackwell tcgen05 2-SM MMA tiles are 256 wide
# (CUTLASS Blackwell GEMM docs); Hopper and older keep 128x128.
FAMILY_DEFAULTS: dict[str, dict[str, float]] = {
    "blackwell": {"tile_n": 256.0},
    "cdna4": {"tile_n": 256.0},
}


def resolve_params(kind: str, hw, p: dict | None, specs: dict, family_defaults: dict) -> dict[str, Any]:
    """Code defaults < family defaults < fitted file (when p is None) < explicit ``p``.

    Shipped values (``p`` None) are those of the GPU their block was fitted on: :func:`transfer_params` adapts
    them to ``hw`` (a class whose kernel is another library on ``hw`` takes its sibling's values), except the
    ones a user calibration profile sets itself. Explicit values are the caller's to adapt."""
    out = {name: spec[0] for name, spec in specs.items()}
    out.update(family_defaults.get(hw.family, {}))
    if p is not None:
        out.update(p)
        return out
    try:
        out.update(efficiency.params(kind, hw.family))
    except SimfrontError:
        return out  # no fitted file yet: defaults only
    fitted_on = efficiency.fitted_gpus(kind, hw.family)
    if fitted_on:
        from .hardware import get_hardware

        adapted = transfer_params(kind, out, get_hardware(fitted_on[0]), hw)
        if adapted is not out:
            ov = efficiency.active_overrides().get(kind, {})
            mine = {*ov.get("default", {}), *ov.get(hw.family, {})}  # a user profile's own values are never swapped
            out = {name: (out[name] if name in mine else v) for name, v in adapted.items()}
    return out


def transfer_params(kind: str, p: dict, source_hw, target_hw) -> dict:
    """``p`` (``kind`` values fitted on ``source_hw``'s platform) as ``target_hw`` uses them: each class whose kernel
    is another library there (``kernels.class_swaps``, data in hardware/kernels.yaml) takes its sibling class's
    values, as a format class with no rows on the fitted family does; ``p`` itself where nothing differs."""
    swaps = kernels.class_swaps(kind, source_hw, target_hw)
    if not swaps:
        return p
    out = dict(p)
    for cls, sib in swaps.items():
        for name in p:
            if name.endswith(f"_{cls}") and f"{name[: -len(cls) - 1]}_{sib}" in p:
                out[name] = p[f"{name[: -len(cls) - 1]}_{sib}"]
    return out


def dtype_class(fmt: Format, hw) -> str:
    """Efficiency class: the format's own class on its fast path, weight-only when the GPU lacks it."""
    rate = gemm_rate_dtype(fmt, hw)
    if fmt.needs is not None and rate == fmt.fallback_dtype and rate != fmt.compute_dtype:
        return "wonly"  # dequantize to BF16, then BF16 MMA
    return _FAST_CLASS[fmt.name]


def _tile_m_for(m, p) -> np.ndarray:
    """M tile a kernel picks: next power of two >= m, between tile_m_min and tile_m."""
    pow2 = np.exp2(np.ceil(np.log2(np.maximum(m, 1.0))))
    return np.clip(pow2, p["tile_m_min"], p["tile_m"])


def class_view(p: dict, cls: str) -> dict[str, Any]:
    """Parameters as one dtype class sees them: ``name_<cls>`` becomes ``name``."""
    suffix = f"_{cls}"
    out = dict(p)
    for key, val in p.items():
        if key.endswith(suffix):
            out[key[: -len(suffix)]] = val
    return out


def grouped_gemm_times(m, n, k, groups, *, rate_flops_per_s, hbm_bytes_per_s, sm_count, b_act, b_w, b_out, q):
    """Compute and memory legs (seconds) of ``groups`` equal GEMMs of m x n x k run in one kernel.

    ``q`` is a :func:`class_view`. Returns (compute_s, memory_s, flops, bytes); ``m`` may be
    fractional (mean rows per group).
    """
    m = np.maximum(np.asarray(m, dtype=np.float64), 0.0)
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    groups = np.asarray(groups, dtype=np.float64)
    tm = _tile_m_for(m, q)
    # output tiles over all groups
    tiles = np.maximum(groups * np.ceil(m / tm) * np.ceil(n / q["tile_n"]), 1.0)
    # split-K slices: only to fill SMs the output tiles leave idle, at most k / chunk
    split_k = np.clip(np.minimum(k / q["split_k_chunk"], sm_count / tiles), 1.0, q["split_k_max"])
    units = tiles * split_k
    # waves of work units over the SMs, the partial last wave counted by the unrecovered fraction
    waves_exact = units / sm_count
    full_waves = np.ceil(waves_exact - 1e-9)  # tolerance: units = tiles x (SMs / tiles) may round above the SM count
    waves = waves_exact + q["wave_quantization"] * np.maximum(full_waves - waves_exact, 0.0)
    # one SM's share of the achieved tensor rate
    sm_rate = q["eta_compute"] * rate_flops_per_s / sm_count
    # time of one wave: one (tm x tn x (k/split + prologue)) unit per SM
    compute_s = waves * 2.0 * tm * q["tile_n"] * (k / split_k + q["k_overhead"]) / sm_rate
    # HBM bytes: activations in, weights in, output out (scale bytes are in the format sizes)
    bytes_moved = groups * (m * k * b_act + n * k * b_w + m * n * b_out)
    # bytes one work unit streams: its A and B slices over k/split, plus its output tile
    unit_bytes = (tm * b_act + q["tile_n"] * b_w) * (k / split_k) + tm * q["tile_n"] * b_out
    # HBM time: the whole GPU at its achieved bandwidth, or each SM's units at its CTA k-loop rate
    memory_s = np.maximum(bytes_moved / (q["eta_memory"] * hbm_bytes_per_s), full_waves * unit_bytes / q["cta_bandwidth_bytes_per_s"])
    flops = 2.0 * groups * m * n * k
    return compute_s, memory_s, flops, bytes_moved


def soft_max(a, b, sharpness):
    """(a^s + b^s)^(1/s): the roofline max, rounded where the two legs are close."""
    hi = np.maximum(a, b)
    lo = np.minimum(a, b)
    return hi * (1.0 + (lo / np.maximum(hi, 1e-30)) ** sharpness) ** (1.0 / sharpness)


# hardware/kernels.yaml op whose served kernel differs from the calibrated one, per GEMM class
SERVED_TACTIC_OPS = {"fp4": "gemm_nvfp4"}
# the served kernel's values (hardware/efficiency/served_gemm.yaml) that replace the calibration fit's
SERVED_VALUES = ("cta_bandwidth_bytes_per_s", "launch_s", "eta_compute")


def served_values(cls: str, hw) -> dict[str, float] | None:
    """Values of the kernel engines serve GEMM class ``cls`` with on ``hw``, where it is not the tactic the calibration
    rows timed (``served_tuned_tactic`` in hardware/kernels.yaml; values fitted on public microbenchmarks of the tuned
    kernel, hardware/efficiency/served_gemm.yaml by scripts/fit_served_gemm.py); None where serving runs the timed one."""
    op = SERVED_TACTIC_OPS.get(cls)
    if op is None or not kernels.served_tuned_tactic(op, hw):
        return None
    block = efficiency.params("served_gemm", hw.family).get(cls)
    if not block:
        return None
    return {name: float(block[name]) for name in SERVED_VALUES if name in block}


def gemm_cost(m, n, k, fmt: str, hw, p: dict | None = None, *, static_act_scale: bool = False,
              fused_act_quant: bool = False, served: bool = False) -> Cost:
    """Time of one GEMM X[m,k]·W[k,n] in ``fmt`` on ``hw`` (broadcast over m, n, k).

    ``static_act_scale``: a serving engine's per-tensor FP8 linear, whose activation scale is the checkpoint's static
    one. The calibration benchmark times TensorRT-LLM's FP8 ``Linear.forward`` on BF16 input, scale handling
    included (aiconfigurator collector/trtllm/collect_gemm.py), and per-tensor FP8 rows carry far more fixed time
    than the block-scaled ones, which quantise their input in one kernel (fitted 14.2 against 5.8 us on B200, 12.3
    against 4.4 us on H100). Engines quantise a static-scale activation in one pass or fuse it into the kernel
    before the GEMM (vLLM ``RMSNormQuantFusionPass`` / ``kFp8StaticTensorSym``, SGLang ``RMSNormQuantPass``), so the
    serving GEMM pays at most the block-scaled format's fixed time.

    ``fused_act_quant``: the GEMM's input is a norm's or gated activation's output, which a serving engine writes
    already quantized for the classes of ``FUSED_QUANT_CLASSES``: the quantize kernel is gone, its bytes and one
    dependent kernel launch (``kernels.launch_cost().per_launch_s``, a public launch microbenchmark) with it. On B200,
    vLLM's NVFP4 CUTLASS GEMM for Llama-3.1-8B's QKV (N 6144, K 4096) ran 3.74 TFLOP/s with its quantize kernel and
    4.44 without at one token, 13.5 against 11.3 us (vllm-project/vllm PR 20646, before its tuned configs); priced
    here 13.4 and 11.6 us.

    ``served``: a serving engine's step, which runs the tactic its autotuner chose where the calibration rows timed
    another (:func:`served_values`): that kernel's values replace the fitted ones, its fixed time the GEMM kernel's alone
    (the public rows it is fitted on take quantised input), plus one launch for a quantize kernel the engine does not
    fuse."""
    f = FORMATS[fmt] if fmt in FORMATS else resolve_format(fmt, hw)
    cls = dtype_class(f, hw)
    allp = resolve_params("gemm", hw, p, PARAMS, FAMILY_DEFAULTS)
    q = class_view(allp, cls)
    static = static_act_scale and cls == "fp8"  # a checkpoint's static scale: one quantize pass, no amax pass
    if static:
        q["launch_s"] = min(q["launch_s"], allp["launch_s_fp8_block"])  # one quantisation pass at most
    fused = fused_act_quant and cls in FUSED_QUANT_CLASSES
    sv = served_values(cls, hw) if served else None
    if sv is not None:  # the tuned kernel: its own values; a quantize kernel the engine does not fuse launches before it
        q.update(sv)
        if not fused and cls in ACT_QUANT_READS:
            q["launch_s"] = q["launch_s"] + kernels.launch_cost().per_launch_s
    elif fused:  # the quantize pass runs in the kernel before: one dependent launch fewer (its bytes below)
        q["launch_s"] = max(q["launch_s"] - kernels.launch_cost().per_launch_s, 0.0)
    rate_dtype = gemm_rate_dtype(f, hw)
    # block-scaled FP8 has its own measured maximum where the spec lists one
    rate = hw.achievable_matmul_flops_per_s("fp8_block" if cls == "fp8_block" and rate_dtype == "fp8" else rate_dtype)
    bw = hw.achievable_hbm_bytes_per_s
    m, n, k = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (m, n, k)))
    compute_s, memory_s, flops, mem_bytes = grouped_gemm_times(
        m, n, k, 1.0, rate_flops_per_s=rate, hbm_bytes_per_s=bw, sm_count=hw.sm_count,
        b_act=f.act_bytes, b_w=f.bytes_per_element, b_out=OUT_BYTES, q=q,
    )
    time_s = q["launch_s"] + soft_max(compute_s, memory_s, q["roofline_sharpness"])
    if cls in ACT_QUANT_READS and not fused:
        # activation quantization: read the BF16 input (once, or twice with a dynamic scale's amax pass), write the
        # quantized copy
        reads = 1.0 if static else ACT_QUANT_READS[cls]
        quant_bytes = m * k * (reads * ACT_SOURCE_BYTES + f.act_bytes)
        quant_s = quant_bytes / (q["eta_quant"] * bw)
        time_s = time_s + quant_s
        mem_bytes = mem_bytes + quant_bytes
        memory_s = memory_s + quant_s
    return Cost(time_s=time_s, flops=flops, mem_bytes=mem_bytes, compute_s=compute_s, memory_s=memory_s)

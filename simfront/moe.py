"""Fused MoE on one rank: routing, grouped expert GEMMs (gate/up, down), finalize. No communication.

Tokens are routed over ``num_experts`` experts with top-``topk``; this rank holds
``num_experts / moe_ep`` of them, each sliced to ``inter / moe_tp``. Work follows modeling-notes.md
§1.8: FLOPs ``2·pairs·(3 if gated else 2)·H·I/TP`` for the token-expert pairs on the rank; weights
for the experts actually touched, ``L·(1 − exp(−pairs/L))`` (BLIS nEff), so a tiny batch still
streams its experts. The expert GEMMs reuse the GEMM physics (tiles, waves, CTA k-loop rate) with
their own efficiencies (``hardware/efficiency/moe.yaml``); token- and pair-level passes (quantize,
permute, finalize, router) are memory traffic. With a skewed router (``alpha``) the busiest rank
sets the time and fewer experts are touched.
"""

from __future__ import annotations

import numpy as np

from .cost import Cost
from .gemm import ACT_QUANT_READS, ACT_SOURCE_BYTES, OUT_BYTES, class_view, dtype_class, grouped_gemm_times, resolve_params, soft_max
from .precision import gemm_rate_dtype, get_format

# name -> (default, lo, hi); lo == hi is chosen, not fitted. Defaults: modeling-notes.md §2.
PARAMS: dict[str, tuple[float, float, float]] = {
    # achieved fraction of the tensor-core peak in the grouped expert GEMMs
    "eta_compute_bf16": (0.6, 0.1, 1.0),
    "eta_compute_fp8": (0.5, 0.1, 1.0),
    "eta_compute_fp8_block": (0.5, 0.1, 1.0),
    "eta_compute_fp4": (0.35, 0.05, 1.0),
    "eta_compute_wonly": (0.3, 0.02, 1.0),
    # achieved fraction of HBM bandwidth streaming expert weights (AIC 0.8; specs.md A.3)
    "eta_memory_bf16": (0.7, 0.1, 1.0),
    "eta_memory_fp8": (0.7, 0.1, 1.0),
    "eta_memory_fp8_block": (0.7, 0.1, 1.0),
    "eta_memory_fp4": (0.7, 0.1, 1.0),
    "eta_memory_wonly": (0.6, 0.1, 1.0),
    # fixed cost of the fused op: routing/top-k, permute, quantize, finalize kernels
    "launch_s_bf16": (15e-6, 1e-6, 2e-4),
    "launch_s_fp8": (15e-6, 1e-6, 2e-4),
    "launch_s_fp8_block": (15e-6, 1e-6, 2e-4),
    "launch_s_fp4": (15e-6, 1e-6, 2e-4),
    "launch_s_wonly": (15e-6, 1e-6, 2e-4),
    # fixed cost per expert with tokens (per-group setup in the grouped GEMM scheduler)
    "expert_overhead_s": (0.1e-6, 1e-9, 5e-6),
    # fraction of the partial last wave not recovered (grouped GEMMs run persistent tile schedulers)
    "wave_quantization": (0.5, 0.0, 1.0),
    # tile geometry of the grouped GEMM (CUTLASS grouped GEMM 128x128; decode-size experts run
    # swap-AB / small-M tiles down to 16 rows); not fitted
    "tile_m": (128.0, 128.0, 128.0),
    "tile_n": (128.0, 128.0, 128.0),
    "tile_m_min": (16.0, 16.0, 16.0),
    # per-tile prologue/epilogue (scale loads, epilogue stores) in equivalent k elements
    "k_overhead": (128.0, 0.0, 8192.0),
    # grouped GEMMs do not split k (not fitted); with few tiles each CTA's k-loop rate binds
    "split_k_chunk": (1e9, 1e9, 1e9),
    "split_k_max": (1.0, 1.0, 1.0),
    "cta_bandwidth_bytes_per_s_bf16": (100e9, 5e9, 1e12),
    "cta_bandwidth_bytes_per_s_fp8": (100e9, 5e9, 1e12),
    "cta_bandwidth_bytes_per_s_fp8_block": (100e9, 5e9, 1e12),
    "cta_bandwidth_bytes_per_s_fp4": (100e9, 5e9, 1e12),
    "cta_bandwidth_bytes_per_s_wonly": (100e9, 5e9, 1e12),
    # soft-max exponent of the compute and memory legs; near 1 the legs add (no overlap)
    "roofline_sharpness": (4.0, 1.0, 32.0),
    # achieved HBM fraction of the permute / finalize / quantize passes, per dtype class: the quantize
    # and expand kernels of block-scaled formats also compute and write swizzled scale factors
    "eta_aux_bf16": (0.5, 0.05, 1.0),
    "eta_aux_fp8": (0.5, 0.05, 1.0),
    "eta_aux_fp8_block": (0.5, 0.05, 1.0),
    "eta_aux_fp4": (0.5, 0.05, 1.0),
    "eta_aux_wonly": (0.5, 0.05, 1.0),
    # share of per-pair activation round trips (down-GEMM output, permute copy, finalize read) that
    # reaches HBM; fused finalize epilogues (TensorRT-LLM CUTLASS MoE) keep the rest on chip
    "pair_traffic_fraction": (0.5, 0.01, 1.0),
    # share of an activation row moved through HBM for EVERY routed selection of the tokens entering
    # the op, local or not: the routing sort / expand-map / finalize kernels walk all T·k selections
    # and only then drop the non-local ones (TensorRT-LLM CUTLASS MoE under EP). 0 = local pairs only.
    "selection_traffic_fraction": (0.0, 0.0, 1.0),
    # share of the tokens entering the op without a local expert that the token-level passes
    # (input quantize, combine-output write) still touch: they run over the whole input and output
    # tensors, not only the rows this rank's experts use (0 = local tokens only, 1 = every token)
    "all_token_fraction": (0.0, 0.0, 1.0),
}

FAMILY_DEFAULTS: dict[str, dict[str, float]] = {}


def _pl_moments(x_hi, a):
    """Mean and CDF of the truncated power law p(x) ∝ x^-a on [1, x_hi]."""
    def integral(power):  # ∫_1^x_hi x^power dx, with the log limit at power = -1
        if abs(power + 1.0) < 1e-6:
            return np.log(x_hi)
        return (x_hi ** (power + 1.0) - 1.0) / (power + 1.0)

    mean = integral(1.0 - a) / integral(-a)

    def cdf(x):
        x = np.clip(x, 1.0, x_hi)
        if abs(a - 1.0) < 1e-6:
            return np.log(x) / np.log(x_hi)
        return (1.0 - x ** (1.0 - a)) / (1.0 - x_hi ** (1.0 - a))

    def quantile(qv):
        if abs(a - 1.0) < 1e-6:
            return x_hi**qv
        return (1.0 - qv * (1.0 - x_hi ** (1.0 - a))) ** (1.0 / (1.0 - a))

    return mean, cdf, quantile


def power_law_rank_load(num_tokens, topk, num_experts, moe_ep, alpha):
    """(token-expert pairs, experts with tokens) on the busiest EP rank under a skewed router.

    Expert loads are draws from a truncated power law p(x) ∝ x^-alpha on [1, T], normalised to
    T·k pairs (AIC ``POWER_LAW_DISTRIBUTION.md``, modeling-notes.md §1.8). The busiest rank holds
    the heaviest expert (median of the largest of E draws, at most T pairs: a token picks an expert
    once) plus average ones; an expert whose share rounds below half a token gets none, so skew
    also cuts the weights read.
    """
    T = np.maximum(np.asarray(num_tokens, dtype=np.float64), 1.0)
    E = np.asarray(num_experts, dtype=np.float64)
    local = E / moe_ep
    pairs = T * topk
    x_hi = np.maximum(T, 2.0)
    mean, cdf, quantile = _pl_moments(x_hi, float(alpha))
    x_max = quantile(0.5 ** (1.0 / E))
    top = np.minimum(pairs * x_max / (E * mean), T)
    rest = (pairs - top) / np.maximum(E - 1.0, 1.0)
    rank_pairs = np.minimum(top + (local - 1.0) * rest, pairs)
    # a draw x carries x·pairs/(E·mean) pairs; below half a pair the expert receives none
    p_hit = 1.0 - cdf(0.5 * E * mean / pairs)
    touched = np.minimum(1.0 + (local - 1.0) * p_hit, local)
    # a token picks an expert at most once: at least pairs / T experts carry the rank's pairs
    touched = np.clip(touched, rank_pairs / T, local)
    return rank_pairs, touched


def moe_cost(num_tokens, hidden, inter, topk, num_experts, moe_tp, moe_ep, fmt, hw, alpha=None, gated=True, p=None) -> Cost:
    """One rank's fused MoE time for ``num_tokens`` tokens entering the op (broadcasts)."""
    f = get_format(fmt)
    cls = dtype_class(f, hw)
    q = class_view(resolve_params("moe", hw, p, PARAMS, FAMILY_DEFAULTS), cls)
    rate = hw.peak_flops_per_s[gemm_rate_dtype(f, hw)]
    bw = hw.hbm_bandwidth_bytes_per_s
    T, H, I, k, E, tp, ep = np.broadcast_arrays(
        *(np.asarray(x, dtype=np.float64) for x in (num_tokens, hidden, inter, topk, num_experts, moe_tp, moe_ep))
    )
    T = np.maximum(T, 0.0)
    local = E / ep  # experts held by this rank
    inter_local = I / tp  # expert width after moe TP slicing
    mean_pairs = T * k / ep  # token-expert pairs per rank, balanced routing
    # experts with at least one token on the rank (uniform-random occupancy, BLIS nEff)
    touched = local * -np.expm1(-mean_pairs / np.maximum(local, 1e-9))
    pairs = mean_pairs
    if alpha is not None:
        skew_pairs, skew_touched = power_law_rank_load(T, k, E, ep, alpha)
        pairs = np.maximum(skew_pairs, mean_pairs) * (T > 0)
        touched = np.minimum(touched, skew_touched)
    # at least one expert's weights are read, and at least pairs / T experts (one pair per token each)
    touched = np.maximum(touched, np.minimum(local, np.maximum(1.0, pairs / np.maximum(T, 1.0))))
    rows = pairs / touched  # mean tokens per touched expert
    up_width = (2.0 if gated else 1.0) * inter_local  # gate and up projections side by side
    kw = dict(rate_flops_per_s=rate, hbm_bytes_per_s=bw, sm_count=hw.sm_count, b_act=f.act_bytes, b_w=f.bytes_per_element, q=q)
    pair_frac = q["pair_traffic_fraction"]
    # gate/up GEMM (SwiGLU fused in its epilogue, quantized output), then down GEMM whose per-pair
    # BF16 output reaches HBM only in the unfused share
    c1, m1, fl1, b1 = grouped_gemm_times(rows, up_width, H, touched, b_out=f.act_bytes, **kw)
    c2, m2, fl2, b2 = grouped_gemm_times(rows, H, inter_local, touched, b_out=OUT_BYTES * pair_frac, **kw)
    # token-level passes: quantize the input (per-tensor FP8 reads it twice), write the combined
    # output, router logits; pair-level: permuted input copy and finalize read (unfused share)
    quant_reads = ACT_QUANT_READS.get(cls, 1.0)
    # distinct tokens with a local expert: T·(1 − (1 − 1/EP)^k) under uniform routing (modeling-notes.md
    # §3), scaled up with the busiest rank's excess pairs
    tokens_rank = np.minimum(T * -np.expm1(k * np.log1p(-1.0 / np.maximum(ep, 1.0 + 1e-9))) * pairs / np.maximum(mean_pairs, 1e-30), T)
    tokens_rank = np.where(ep > 1, tokens_rank, T)
    # tokens the token-level passes touch: the local ones plus a share of those routed elsewhere
    tokens_pass = tokens_rank + q["all_token_fraction"] * (T - tokens_rank)
    token_bytes = tokens_pass * H * (quant_reads * ACT_SOURCE_BYTES + f.act_bytes + OUT_BYTES) + T * E * ACT_SOURCE_BYTES
    # pair-level bytes: unfused share of the local pairs' round trips, plus the share of every one of
    # the T·k selections (local or not) that the routing / expand / finalize walk moves
    pair_rows = pair_frac * pairs + q["selection_traffic_fraction"] * T * k
    aux_bytes = token_bytes + pair_rows * H * (f.act_bytes + OUT_BYTES)
    aux_s = aux_bytes / (q["eta_aux"] * bw)  # HBM time of the token- and pair-level passes
    compute_s = c1 + c2
    memory_s = m1 + m2 + aux_s
    gemm_s = soft_max(c1, m1, q["roofline_sharpness"]) + soft_max(c2, m2, q["roofline_sharpness"])
    time_s = q["launch_s"] + touched * q["expert_overhead_s"] + gemm_s + aux_s
    # FLOPs reported are the rank's share of the useful work (balanced routing): the time above is
    # set by the busiest rank, but skew does not create work, it only moves it
    useful_flops = 2.0 * mean_pairs * (up_width * H + H * inter_local)
    return Cost(time_s=time_s, flops=useful_flops, mem_bytes=b1 + b2 + aux_bytes, compute_s=compute_s, memory_s=memory_s)

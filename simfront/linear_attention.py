"""Delta-rule linear attention cost (Gated DeltaNet in Qwen3-Next/Qwen3.5, Kimi Delta Attention
in Kimi K3 / Kimi Linear), one layer on one GPU. ``n_heads`` = recurrent states (value heads)
on this GPU, each a ``head_k_dim x head_v_dim`` matrix (modeling-notes.md §1.7).

There are no calibration kernels for these layers: the efficiency parameters are borrowed from
the softmax-attention fit (``hardware/efficiency/attention.yaml``): decode uses the decode
launch cost, per-CTA cost, HBM efficiency and occupancy; prefill uses the prefill launch cost,
per-CTA cost, tensor FLOP efficiency and HBM efficiency.
"""

from __future__ import annotations

import numpy as np

from . import efficiency
from .attention import BYTES_16BIT, DECODE_OVERLAP_NORM, PREFILL_OVERLAP_NORM, _f, _occupancy, _peak, hbm_bw, soft_max
from .cost import Cost

KIND = "attention"

# FLOPs per token per head of one recurrent step: S^T k (2 dk dv), the rank-1 delta update
# S += beta (v - S^T k) k^T (2 dk dv), and the read-out S^T q (2 dk dv) [modeling-notes.md §1.7].
DECODE_FLOPS_PER_STATE_ELEM = 6.0
# FLOPs per token per head of the inter-chunk part of the chunkwise form: W S (delta correction),
# Q S (read-out) and K^T U (state update), 2 dk dv each (Yang et al. 2024, arXiv 2406.06484 §3).
CHUNK_STATE_FLOPS_PER_ELEM = 6.0


def _params(p, hw) -> dict:
    return efficiency.params_with_priors(KIND, hw.family, p)


def linear_attention_decode_cost(batch, n_heads, head_k_dim, head_v_dim, hw, p=None, state_bytes=4, conv_dim=0, conv_kernel=4, q_tokens=1) -> Cost:
    """One recurrent decode step for ``batch`` requests: constant in context length.

    Bytes per request: the state is read once and written once per query token (speculative
    verify keeps one intermediate state per draft token), ``n_heads * dk * dv * state_bytes``
    each; the short-conv state ``conv_dim * (conv_kernel - 1)`` 16-bit values is read and written
    likewise; q/k/v/o activations are 16-bit. FLOPs ``6 * dk * dv`` per token per head.
    """
    p = _params(p, hw)
    b, nh, dk, dv, sb, q = _f(batch), _f(n_heads), _f(head_k_dim), _f(head_v_dim), _f(state_bytes), _f(q_tokens)
    cd, ck = _f(conv_dim), _f(conv_kernel)
    state_bytes_total = b * nh * dk * dv * sb * (1.0 + q)  # read once, one write per token
    conv_bytes = b * cd * (ck - 1.0) * BYTES_16BIT * (1.0 + q)
    act_bytes = b * q * nh * (2.0 * dk + 2.0 * dv) * BYTES_16BIT  # q, k in; v in, o out
    hbm_bytes = state_bytes_total + conv_bytes + act_bytes
    flops = DECODE_FLOPS_PER_STATE_ELEM * b * q * nh * dk * dv + 2.0 * b * q * cd * ck  # recurrence + depthwise conv

    sm = hw.sm_count
    bw = p["decode_hbm_eff"] * hbm_bw(hw)
    ctas = b * nh  # one CTA per (request, head) state
    memory_s = hbm_bytes / (bw * _occupancy(ctas, p["decode_half_occupancy_ctas_per_sm"], sm))
    # FP32 state math on CUDA cores; the prefill tensor efficiency stands in for their efficiency.
    compute_s = flops / (p["prefill_flop_eff"] * hw.peak_flops_per_s["fp32"])
    overhead_s = ctas * p["decode_unit_s"] / sm
    time_s = p["decode_launch_s"] + soft_max(overhead_s, np.maximum(memory_s, compute_s), DECODE_OVERLAP_NORM)
    return Cost(time_s=time_s, flops=flops, mem_bytes=hbm_bytes, compute_s=compute_s, memory_s=memory_s)


def linear_attention_prefill_cost(batch, seq_len, n_heads, head_k_dim, head_v_dim, hw, p=None, chunk=64, state_bytes=4) -> Cost:
    """Chunkwise-parallel prefill of ``seq_len`` tokens per sequence (chunk size ``chunk``).

    FLOPs per head and token (my convention, from the chunkwise delta rule of Yang et al. 2024):
    ``2*C*(3*dk + 2*dv)`` intra-chunk (K K^T, W, U, Q K^T, masked P U) plus ``6*dk*dv``
    inter-chunk; the C^3 triangular solve is neglected. Bytes: 16-bit q/k/v/o, plus one state
    per chunk written for the output pass (aiconfigurator ``h_chunks``) and the initial/final
    state. Chunks of one (sequence, head) run in order on one SM, which bounds small batches.
    """
    p = _params(p, hw)
    b, s, nh, dk, dv, c, sb = _f(batch), _f(seq_len), _f(n_heads), _f(head_k_dim), _f(head_v_dim), _f(chunk), _f(state_bytes)
    per_head_flops = s * (2.0 * c * (3.0 * dk + 2.0 * dv) + CHUNK_STATE_FLOPS_PER_ELEM * dk * dv)
    flops = b * nh * per_head_flops
    n_chunks = np.ceil(s / c)
    hbm_bytes = b * nh * (s * (2.0 * dk + 2.0 * dv) * BYTES_16BIT + (n_chunks + 2.0) * dk * dv * sb)

    sm = hw.sm_count
    peak = p["prefill_flop_eff"] * _peak(hw, "bf16")  # tensor-core chunk GEMMs in BF16 (achievable rate)
    ctas = b * nh
    work_s = flops / peak + ctas * p["prefill_cta_s"] / sm
    serial_s = per_head_flops / (peak / sm) + p["prefill_cta_s"]  # one (sequence, head) on one SM
    compute_s = soft_max(work_s, serial_s, PREFILL_OVERLAP_NORM)
    memory_s = hbm_bytes / (p["prefill_hbm_eff"] * hbm_bw(hw))
    time_s = p["prefill_launch_s"] + soft_max(compute_s, memory_s, PREFILL_OVERLAP_NORM)
    return Cost(time_s=time_s, flops=flops, mem_bytes=hbm_bytes, compute_s=compute_s, memory_s=memory_s)

"""Multi-head latent attention (DeepSeek-V3 family, Kimi K2/K3, GLM-5) and the DSA indexer.

Dimensions default to DeepSeek-V3 (kv_lora_rank 512, qk_rope 64, qk_nope 128, v_head 128;
modeling-notes.md §1.4) and are taken from the model config otherwise (GLM-5: nope 192, v 256).
Heads are per GPU. Parameters: ``hardware/efficiency/mla.yaml`` (fitted through
:data:`CALIBRATION_OPS` on the measured H100 SXM / B200 MLA kernels, aiconfigurator 0.12.0).

* Decode (weight absorption): every local head attends in the latent space against one shared
  latent KV row of ``kv_lora_rank + qk_rope_dim`` elements per token, so KV bytes do not grow
  with heads while FLOPs do: memory-bound at few heads, compute-bound when
  heads x query tokens is large (modeling-notes.md §1.4; FlashMLA deep-dive). That is the native
  kernels' path (Hopper, datacenter Blackwell, CDNA3/4: ``hardware/kernels.yaml``); other GPUs run
  the Triton grouped decode kernel, which streams the latent rows once per block of 16 heads.
* Prefill (no absorption): ordinary causal MHA with ``d_qk = nope + rope`` and ``d_v``,
  timed by the shared flash-prefill model of :mod:`simfront.attention`.
* DSA (DeepSeek-V3.2, GLM-5): ``topk`` limits each query to its selected tokens; the lightning
  indexer that selects them is priced separately by :func:`dsa_indexer_cost`.
"""

from __future__ import annotations

import numpy as np

from . import efficiency, kernels
from .attention import BYTES_16BIT, DECODE_OVERLAP_NORM, _f, _math_peak, _stream_occupancy, flash_prefill_seconds, hbm_bw, soft_max
from .cost import Cost

KIND = "mla"

# Query rows (heads x query tokens) per decode tile: absorbed-MLA kernels (FlashMLA) process the
# local heads of one request in 64-row tiles, so fewer rows still pay for a full tile of math
# [FlashMLA layout, recalled; on the calibration set padding to 64 fits better than none:
# in-sample MAPE 8.9% vs 9.7% on H100].
MLA_HEAD_TILE = 64

# Bytes per token of the DSA indexer key cache beyond the FP8 key itself: one FP32 scale
# (aiconfigurator common.indexer_cache_entry_bytes, 128 + 4 = 132 B; modeling-notes.md §1.6).
INDEXER_SCALE_BYTES = 4.0
# Bytes of one indexer logit written by the logits kernel and read back by top-k (FP32).
INDEXER_LOGIT_BYTES = 4.0


def _params(p, hw) -> dict:
    """Fitted parameters of ``hw``'s family (priors from the PARAMS tables for any key not fitted)."""
    return efficiency.params_with_priors(KIND, hw.family, p, DECODE_PARAMS, PREFILL_PARAMS)


def _decode_seconds(batch, kv_len, n_heads, kv_bytes, hw, p, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128,
                    v_head_dim=128, q_tokens=1, topk=None, native=None):
    b, kv, nh, kvb, q = _f(batch), _f(kv_len), _f(n_heads), _f(kv_bytes), _f(q_tokens)
    r, rope = _f(kv_lora_rank), _f(qk_rope_dim)
    L = kv if topk is None else np.minimum(kv, _f(topk))  # latent rows each query attends
    rows = nh * q  # query rows sharing each latent KV row
    # the platform's native kernel, where the engine runs it (``native``: a mask of the configurations that do)
    native = kernels.has_native("mla_decode", hw) & (True if native is None else np.asarray(native, dtype=bool))
    # Native absorbed-MLA kernels (FlashMLA, trtllm-gen, aiter) tile the heads of a request in
    # MLA_HEAD_TILE rows and read the latent rows once. Elsewhere (Ampere, Ada, SM 12.0) engines run the
    # Triton grouped decode kernel (hardware/kernels.yaml mla_decode fallback): one program per block of
    # head_block heads, each streaming the request's latent rows, so they are read once per head block.
    tile = np.where(native, MLA_HEAD_TILE, float(kernels.fallback("mla_decode")["head_block"]))
    tiles = np.ceil(rows / tile)
    reads = np.where(native, 1.0, tiles)
    low_bit = kvb < BYTES_16BIT

    # Latent rows read once per request (shared by all local heads and, for DSA, assumed largely
    # shared by neighbouring draft tokens) by native kernels, once per head block by the fallback;
    # Q in (r + rope) and latent output (r) per row, 16-bit.
    kv_stream_bytes = b * L * (r + rope) * kvb * reads
    qo_bytes = b * rows * (r + rope + r) * BYTES_16BIT
    flops = 2.0 * b * rows * L * (r + rope + r)  # scores over r+rope dims, values over r dims
    padded_flops = flops * tiles * tile / rows

    sm = hw.sm_count
    bw = p["decode_hbm_eff"] * hbm_bw(hw)
    ctas = b * tiles * np.maximum(L / p["decode_split_tokens"], 1.0)
    # Streaming saturates when the CTAs' own rates (bytes each keeps in flight / memory latency, a
    # property of the kernel and the SM, not of the GPU's bandwidth) add up to the HBM rate: a GPU
    # with more bandwidth per SM (B200: 50 GB/s per SM, H100: 24) needs more concurrent CTAs.
    occ = _stream_occupancy(ctas, p["decode_cta_bytes_per_s"], bw)
    memory_s = kv_stream_bytes / (bw * occ) + qo_bytes / bw
    compute_s = padded_flops / _math_peak(hw, low_bit, p["decode_flop_eff"], p["decode_flop_eff_fp8"])
    overhead_s = (b * p["decode_request_s"] + b * rows * p["decode_row_s"]) / sm
    # Fixed cost per call: the kernel launches of this GPU's MLA library (FlashMLA: metadata, split-KV and
    # combine kernels; trtllm-gen: one; hardware/kernels.yaml `launches`, each at the measured per-launch
    # cost) plus decode_launch_s, the fitted rest (tile setup, first KV tile latency) that transfers.
    launch_s = np.where(native, kernels.launch_seconds("mla_decode", hw), kernels.launch_seconds("mla_decode", hw, fallback=True))
    time_s = p["decode_launch_s"] + launch_s + soft_max(overhead_s, np.maximum(memory_s, compute_s), DECODE_OVERLAP_NORM)
    return time_s, flops, kv_stream_bytes + qo_bytes, compute_s, memory_s


def mla_decode_cost(batch, kv_len, n_heads, kv_bytes, hw, p=None, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128,
                    v_head_dim=128, q_tokens=1, topk=None, native=None) -> Cost:
    """Absorbed MLA decode: ``batch`` requests of ``q_tokens`` query tokens over ``kv_len``
    cached latent rows (``min(kv_len, topk)`` with DSA). ``n_heads`` are the heads on this GPU.

    The W_UK / W_UV absorption BMMs (nope->latent, latent->v) are projections, priced with the
    GEMMs; ``qk_nope_dim`` and ``v_head_dim`` are accepted for a uniform signature. ``native``: where the engine runs
    the platform's native MLA kernel (a mask broadcast with the other arguments; None: wherever the platform has one,
    hardware/kernels.yaml); elsewhere the Triton fallback is priced.
    """
    p = _params(p, hw)
    t, fl, by, c, m = _decode_seconds(batch, kv_len, n_heads, kv_bytes, hw, p, kv_lora_rank, qk_rope_dim, qk_nope_dim,
                                      v_head_dim, q_tokens, topk, native)
    return Cost(time_s=t, flops=fl, mem_bytes=by, compute_s=c, memory_s=m)


def mla_prefill_cost(batch, seq_len, n_heads, hw, p=None, prefix_len=0, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128,
                     v_head_dim=128, kv_bytes=2, topk=None) -> Cost:
    """Causal MLA prefill of ``seq_len`` new tokens on a cached prefix.

    Dense (``topk`` None): non-absorbed MHA with d_qk = nope + rope and d_v; the cached prefix is
    read as latent rows and decompressed (the kv_b GEMM is priced with the projections).
    DSA (``topk`` set): each query attends ``min(position, topk)`` selected latent rows in the
    absorbed form (d_qk = kv_lora + rope, d_v = kv_lora; modeling-notes.md §1.6).
    """
    p = _params(p, hw)
    kvb = _f(kv_bytes)
    fp8 = kvb < BYTES_16BIT
    latent_row = (_f(kv_lora_rank) + _f(qk_rope_dim)) * kvb  # bytes per cached token
    if topk is None:
        dqk, dv, window = _f(qk_nope_dim) + _f(qk_rope_dim), _f(v_head_dim), 0.0
        t, fl, by, c, m = flash_prefill_seconds(batch, seq_len, prefix_len, n_heads, n_heads, dqk, dv, window, kvb, fp8, hw, p,
                                                kv_row_bytes=latent_row)
    else:
        # Absorbed sparse attention: the top-k cap acts like a window on the number of keys.
        # Each query gathers its own selected latent rows (shared by all heads); neighbouring
        # queries select overlapping sets, so HBM sees each cached row about once and the
        # re-reads are left to L2 (an assumption: no sparse-prefill kernel data).
        dqk, dv = _f(kv_lora_rank) + _f(qk_rope_dim), _f(kv_lora_rank)
        t, fl, by, c, m = flash_prefill_seconds(batch, seq_len, prefix_len, n_heads, 1.0, dqk, dv, _f(topk), kvb, fp8, hw, p,
                                                kv_row_bytes=latent_row)
    return Cost(time_s=t, flops=fl, mem_bytes=by, compute_s=c, memory_s=m)


def dsa_indexer_cost(batch, q_len, kv_len, index_n_heads, index_head_dim, hw, p=None) -> Cost:
    """DSA lightning indexer (DeepSeek-V3.2, GLM-5): FP8 logits of ``q_len`` queries per request
    against all ``kv_len`` cached index keys, then top-k over them.

    FLOPs ``2 * q_len * n_idx * d_idx * kv_len`` at the FP8 rate; bytes: the key cache
    ``kv_len * (d_idx + 4)`` (FP8 key + FP32 scale) plus FP32 logits written and read back for
    top-k (modeling-notes.md §1.6). It always scans every cached key: skipping the selection
    when ``kv_len <= topk`` is the caller's decision. No kernel data: uses the MLA decode
    launch cost, HBM efficiency and the MLA prefill FP8 FLOP efficiency.
    """
    p = _params(p, hw)
    b, ql, kv, nidx, didx = _f(batch), _f(q_len), _f(kv_len), _f(index_n_heads), _f(index_head_dim)
    flops = 2.0 * b * ql * nidx * didx * kv
    hbm_bytes = b * kv * (didx + INDEXER_SCALE_BYTES) + 2.0 * b * ql * kv * INDEXER_LOGIT_BYTES
    compute_s = flops / _math_peak(hw, True, p["prefill_flop_eff"], p["prefill_flop_eff_fp8"])
    memory_s = hbm_bytes / (p["decode_hbm_eff"] * hbm_bw(hw))
    time_s = p["decode_launch_s"] + kernels.launch_cost().per_launch_s + np.maximum(compute_s, memory_s)  # one kernel
    return Cost(time_s=time_s, flops=flops, mem_bytes=hbm_bytes, compute_s=compute_s, memory_s=memory_s)


# ----------------------------------------------------------------------------------- calibration


def _kv_bytes_col(cols) -> np.ndarray:
    return np.where(np.char.lower(np.asarray(cols["kv_cache_dtype"]).astype(str)) == "fp8", 1.0, 2.0)


def _predict_decode(cols, hw, p):
    return _decode_seconds(cols["batch"], cols["kv_len"], cols["n_heads"], _kv_bytes_col(cols), hw, p)[0]


def _predict_prefill(cols, hw, p):
    kvb = _kv_bytes_col(cols)
    return mla_prefill_cost(cols["batch"], cols["seq_len"], cols["n_heads"], hw, p, kv_bytes=kvb).time_s


DECODE_PARAMS = {
    # fixed cost per call beyond its kernel launches (hardware/kernels.yaml launches x per_launch_s)
    "decode_launch_s": (7.5e-6, 1e-6, 5e-5),
    "decode_flop_eff": (0.71, 0.05, 1.3),  # achieved fraction of the ACHIEVABLE BF16 tensor rate (compute-bound decode)
    "decode_flop_eff_fp8": (0.43, 0.05, 1.3),  # same with FP8 KV (FP8 math where supported), of the achievable FP8 rate
    "decode_hbm_eff": (1.07, 0.3, 1.3),  # achieved fraction of the ACHIEVABLE HBM bandwidth for latent KV rows
    "decode_split_tokens": (3000.0, 16.0, 1e6),  # KV tokens per split-KV CTA
    # HBM bytes/s one split-KV CTA streams on its own (in-flight bytes / latency); with the HBM rate it
    # sets how many CTAs saturate the GPU (H100 fit: half the rate at ~5 CTAs = 0.04 per SM)
    "decode_cta_bytes_per_s": (6e11, 1e9, 1e13),
    "decode_request_s": (4.2e-6, 1e-10, 1e-4),  # SM-seconds per request (tile setup, split combine)
    "decode_row_s": (1.8e-7, 1e-12, 1e-5),  # SM-seconds per query row (Q load, output store)
}
PREFILL_PARAMS = {
    "prefill_launch_s": (1.38e-5, 1e-6, 5e-5),
    "prefill_flop_eff": (0.77, 0.05, 1.3),  # of the achievable BF16 tensor rate
    "prefill_flop_eff_fp8": (0.59, 0.05, 1.3),  # of the achievable FP8 tensor rate
    "prefill_score_flops": (700.0, 0.1, 1e5),  # softmax per score in BF16 tensor FLOPs (attention.PREFILL_PARAMS)
    "prefill_cta_s": (3.4e-6, 1e-9, 1e-4),
    "prefill_row_s": (2.4e-9, 1e-12, 1e-6),
    "prefill_elem_s": (4.3e-11, 1e-14, 1e-8),
    "prefill_fp8_elem_s": (2.4e-10, 1e-15, 1e-8),
    "prefill_hbm_eff": (0.95, 0.2, 1.3),  # of the achievable HBM bandwidth
}

CALIBRATION_OPS = {
    "mla_decode": {
        "kind": KIND,
        "params": DECODE_PARAMS,
        "predict": _predict_decode,
        "columns": ["batch", "kv_len", "n_heads", "tp_size", "kv_cache_dtype"],
    },
    "mla_prefill": {
        "kind": KIND,
        "params": PREFILL_PARAMS,
        "predict": _predict_prefill,
        "columns": ["batch", "seq_len", "n_heads", "tp_size", "kv_cache_dtype"],
    },
}

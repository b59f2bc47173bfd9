"""Softmax attention cost per op (one layer, one GPU): paged decode and causal flash prefill.

Heads are per GPU (after tensor parallelism). Each function returns a :class:`Cost` whose
``time_s`` is the modelled kernel time; ``compute_s`` / ``memory_s`` are the roofline legs
after efficiency derating. Efficiency parameters live in ``hardware/efficiency/attention.yaml``
(one block per architecture family, fitted by ``scripts/calibrate_kernels.py`` through
:data:`CALIBRATION_OPS` on the measured H100 SXM and B200 kernels in
``shared/calibration/kernels``; aiconfigurator 0.12.0 database, TensorRT-LLM kernels).

Decode model (per layer, ``batch`` requests of ``q_tokens`` query tokens over ``L`` KV tokens):

* KV bytes ``batch * kv_heads_read * L * 2 * head_dim * kv_bytes`` streamed at
  ``hbm_eff * BW * occupancy``; occupancy rises with the number of split-KV CTAs.
* fixed per-CTA work (one CTA per request x KV head) plus per-query-head Q/O work (proportional to
  head_dim) spread over the SMs, combined with the streaming leg in quadrature (they partly
  overlap), plus a launch cost.
* GQA/MQA: all query heads of a group share one KV read, up to :data:`MAX_SHARED_GROUP`
  query heads per KV head; larger groups run one CTA per query head whose re-reads hit L2, so HBM
  streams the KV once and each query head's element work is charged on the SMs. Grouped kernels
  stage whole KV tiles, so each of their CTAs reads at least one tile of tokens.
* FP8 cache: per-(query head, element) dequantised math on the SMs; never slower than 16-bit.
  Grouped FP8 kernels (Hopper, head_dim >= :data:`FP8_GROUPED_MIN_HEAD_DIM`) have a lower launch
  cost and a per-CTA cost proportional to head_dim, as do the 16-bit grouped kernels where those are
  TMA kernels too (trtllm-gen on datacenter Blackwell, ``attention_decode_tma_grouped``); per-head FP8 kernels keep half the bytes in
  flight per CTA (same element vectors), so they need twice the CTAs to reach the streaming bandwidth.
* Sliding window (Hopper TensorRT-LLM), 16-bit cache or per-head kernels with any cache: split-KV
  CTAs outside the window still run (capped grid); never more than full attention.

Prefill model (FlashAttention-style, causal, optional cached prefix and sliding window):
per-pair MMA time overlapped with softmax time, per-query-row prologue/epilogue, per-CTA
setup, a critical path for the last query tile, and an HBM leg for Q/K/V/O.
"""

from __future__ import annotations

import numpy as np

from . import efficiency, kernels
from .cost import Cost

KIND = "attention"

# Largest GQA group (query heads per KV head) one decode CTA serves from a single KV read.
# Observed in the calibration set: TensorRT-LLM grouped (XQA) kernels cover groups up to 32;
# groups of 48-128 query heads per KV head run ~g times slower, as if each query head re-read
# the KV (shared/calibration/kernels/*__attention_decode.csv, rows with n_heads/n_kv_heads > 32).
MAX_SHARED_GROUP = 32

# Narrowest head the Hopper FP8-KV grouped-query decode kernels serve with their low fixed cost.
# Observed in the calibration set (shared/calibration/kernels/h100_sxm__attention_decode.csv):
# FP8-KV GQA rows with head_dim 128-256 bottom out at ~6 us, head_dim 64 rows at ~8 us like the
# 16-bit kernels, so narrower heads pay the 16-bit launch cost (on B200 both are the same).
FP8_GROUPED_MIN_HEAD_DIM = 128

# Query rows per prefill CTA: FlashAttention-2/3 forward kernels tile queries in blocks of 128
# rows (FA3 paper, arXiv 2407.08608, Hopper forward tile 128 x 128).
PREFILL_TILE_Q = 128

# Exponent of the soft maximum (p-norm) that combines two partly overlapping legs: 1 would add
# them, infinity would take the larger. Chosen once on the calibration set (fits of a free
# exponent gave ~1.5-2 for decode fixed work vs streaming and ~4 for MMA vs softmax in prefill).
DECODE_OVERLAP_NORM = 2.0
PREFILL_OVERLAP_NORM = 4.0

BYTES_16BIT = 2.0  # bytes of a BF16/FP16 activation element (Q, O, fresh K/V)


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def soft_max(a, b, k: float) -> np.ndarray:
    """p-norm of two non-negative times: between max(a, b) (k -> inf) and a + b (k = 1)."""
    a, b = _f(a), _f(b)
    m = np.maximum(np.maximum(a, b), 1e-300)
    return m * ((a / m) ** k + (b / m) ** k) ** (1.0 / k)


def _params(p, hw) -> dict:
    """Fitted parameters of ``hw``'s family (priors from the PARAMS tables for any key not fitted)."""
    return efficiency.params_with_priors(KIND, hw.family, p, DECODE_PARAMS, PREFILL_PARAMS)


def _peak(hw, dtype: str) -> float:
    """ACHIEVABLE dense tensor rate in ``dtype`` (``Hardware.achievable``), 0 where the GPU lacks it."""
    return float(hw.achievable_matmul_flops_per_s(dtype)) if hw.supports(dtype) else 0.0


def hbm_bw(hw) -> float:
    """ACHIEVABLE HBM streaming bandwidth (``Hardware.achievable``): efficiencies are fractions of it."""
    return float(hw.achievable_hbm_bytes_per_s)


def _math_peak(hw, fp8_math, eff_bf16, eff_fp8) -> np.ndarray:
    """Achieved tensor FLOP/s: FP8 when requested and supported, never below the BF16 path.

    ``eff_*`` are fractions of the ACHIEVABLE matmul rate, so they transfer across GPUs."""
    bf16 = _peak(hw, "bf16") * eff_bf16
    fp8 = _peak(hw, "fp8") * eff_fp8 if hw.supports("fp8") else 0.0
    return np.where(fp8_math, max(bf16, fp8), bf16)


def _stream_occupancy(ctas, cta_bytes_per_s, bw_bytes_per_s) -> np.ndarray:
    """Fraction of streaming bandwidth ``bw_bytes_per_s`` reached by ``ctas`` concurrent CTAs that each
    stream at most ``cta_bytes_per_s`` (saturating; half at ``ctas * cta_bytes_per_s == bw``)."""
    x = _f(ctas) * cta_bytes_per_s / bw_bytes_per_s
    return x / (1.0 + x)


def _occupancy(ctas, ctas_half_per_sm, sm_count) -> np.ndarray:
    """Fraction of streaming bandwidth reached with ``ctas`` concurrent CTAs (saturating)."""
    x = _f(ctas) / (ctas_half_per_sm * sm_count)
    return x / (1.0 + x)


# ----------------------------------------------------------------------------------- decode


def decode_launches(batch, kv_len, n_kv_heads, per_head_path, fp8_fused, hw) -> np.ndarray:
    """Kernels one decode-attention call launches on ``hw`` (``hardware/kernels.yaml`` ``launches``).

    The grouped kernels (trtllm-gen on sm_100 / sm_103, XQA mma.sync elsewhere) run after a separate
    RoPE + KV-append kernel; the Hopper FP8 GMMA XQA kernel (``fp8_fused``) does both itself. Where the
    grouped kernel is XQA, it runs only when its grid (request x KV head x history split) fills the GPU,
    else the fused masked-MHA kernel (``attention_decode_mmha``) does: small grids pay one launch on those
    GPUs and two on trtllm-gen GPUs, whose dispatcher has no such switch. Oversized query groups
    (``per_head_path``) run masked MHA everywhere.
    """
    b, kv, nkv = _f(batch), _f(kv_len), _f(n_kv_heads)
    grouped = float(kernels.launches("attention_decode_tma_grouped", hw))
    fused = float(kernels.launches("attention_decode_mmha", hw))
    fp8 = float(kernels.launches("attention_decode_fp8_grouped", hw)) if kernels.has_native("attention_decode_fp8_grouped", hw) else grouped
    n = np.where(fp8_fused, fp8, grouped)
    if not kernels.has_native("attention_decode_tma_grouped", hw):  # XQA dispatch: small grids take masked MHA
        xqa = kernels.fallback("attention_decode_tma_grouped")
        blocks = b * nkv * np.maximum(1.0, np.floor(kv / xqa["small_grid_history_tokens_per_cta"]))
        n = np.where(blocks < xqa["small_grid_min_ctas_per_sm"] * hw.sm_count, fused, n)
    return np.where(per_head_path, fused, n)


def _decode_seconds(batch, kv_len, n_heads, n_kv_heads, head_dim, window, kv_bytes, hw, p, q_tokens=1, _walk=True):
    """Decode time and its legs; shared by :func:`attention_decode_cost` and calibration."""
    b, kv, nh, nkv, hd = _f(batch), _f(kv_len), _f(n_heads), _f(n_kv_heads), _f(head_dim)
    w, kvb, q = _f(window), _f(kv_bytes), _f(q_tokens)
    L = np.where(w > 0, np.minimum(kv, w), kv)  # KV tokens actually read (sliding window)
    group = nh / nkv
    per_head_path = group > MAX_SHARED_GROUP  # oversized groups: one CTA per query head
    mha = group <= 1.0  # one query head per KV head: one CTA per head either way
    generic = per_head_path | mha  # per-head kernels without a query-group loop
    low_bit = kvb < BYTES_16BIT  # FP8 (or narrower) KV cache kernels

    # Grouped kernels stage whole KV tiles through shared memory: each (request, KV head) CTA reads
    # and processes at least decode_grouped_kv_tile_tokens tokens of K and V, however short the context.
    L_read = np.where(generic, L, np.maximum(L, p["decode_grouped_kv_tile_tokens"]))
    # K and V rows read from HBM once per KV head: the query heads of an oversized group re-read
    # the same rows close together in time, so their re-reads hit L2 (50 MB on H100) not HBM.
    kv_stream_bytes = b * nkv * L_read * 2.0 * hd * kvb
    qo_bytes = b * q * nh * hd * 2.0 * BYTES_16BIT  # Q read + O written, 16-bit
    flops = 4.0 * b * q * nh * L * hd  # QK^T and PV, 2 flops per MAC

    sm = hw.sm_count
    bw = p["decode_hbm_eff"] * hbm_bw(hw)
    units = b * np.where(per_head_path, nh, nkv)  # CTAs before split-KV: one per (request, KV head or query head)
    ctas = units * np.maximum(L / p["decode_split_tokens"], 1.0)  # split-KV CTAs streaming at once
    # Per-head kernels load K/V in vectors of a fixed number of elements, so a CTA keeps bytes in
    # flight in proportion to the element size: an FP8 cache needs twice the CTAs to reach the same
    # streaming bandwidth. Grouped kernels stage whole byte tiles and do not.
    inflight = np.where(generic, kvb / BYTES_16BIT, 1.0)
    occ = _occupancy(ctas * inflight, p["decode_half_occupancy_ctas_per_sm"], sm)
    memory_s = kv_stream_bytes / (bw * occ) + qo_bytes / bw
    # Per-query-head re-read of the KV rows (from L2) and its CUDA-core dot products in the
    # per-head kernels: SM-seconds per (query head, K/V element) spread over the busy SMs.
    qhead_elems = b * q * nh * L_read * 2.0 * hd  # K/V elements each query head consumes
    reread_s = np.where(per_head_path, qhead_elems * p["decode_perhead_elem_s"], 0.0) / (sm * occ)
    # FP8 cache in the shared-read kernels: every query head's scores and weighted sum run on
    # dequantised FP8 rows (per-element convert and scale), SM-seconds per (query head, element).
    dequant_s = np.where(low_bit & ~per_head_path, qhead_elems * p["decode_fp8_qhead_elem_s"], 0.0) / (sm * occ)
    reread_s = reread_s + dequant_s
    # Tensor math (binds only for speculative verify with large groups): no decode data constrains
    # it, so the prefill FLOP efficiencies of the same kind stand in (their priors if absent).
    eff16 = p.get("prefill_flop_eff", PREFILL_PARAMS["prefill_flop_eff"][0])
    eff8 = p.get("prefill_flop_eff_fp8", PREFILL_PARAMS["prefill_flop_eff_fp8"][0])
    compute_s = np.maximum(flops / _math_peak(hw, low_bit, eff16, eff8), reread_s)

    # Fixed work (SM-seconds) spread over the SMs. Every kernel loads Q and writes O per query
    # head, work proportional to head_dim. Per-CTA: per-head kernels pay decode_unit_s per CTA;
    # grouped kernels with 16-bit KV one lump per (request, KV head); grouped FP8 kernels a cost
    # proportional to head_dim per CTA (they convert Q and set up head_dim-wide KV tiles).
    qo_elem_s = b * q * nh * hd * p["decode_qhead_elem_s"]
    generic_s = units * p["decode_unit_s"] + qo_elem_s
    grouped8_s = units * hd * p["decode_grouped_fp8_cta_elem_s"] + qo_elem_s
    # Where the 16-bit grouped kernel is itself a warp-specialised TMA kernel (trtllm-gen on sm_100 /
    # sm_103, hardware/kernels.yaml attention_decode_tma_grouped), its CTAs cost what the FP8 TMA kernel's do.
    grouped16_s = grouped8_s if kernels.has_native("attention_decode_tma_grouped", hw) else units * p["decode_grouped_kv16_unit_s"] + qo_elem_s
    overhead_16 = np.where(generic, generic_s, grouped16_s)
    overhead_8 = np.where(generic, generic_s, grouped8_s)
    launch_16 = p["decode_launch_s"]
    # Grouped FP8 kernels launch cheaper, but only for heads of FP8_GROUPED_MIN_HEAD_DIM or wider and
    # only where that kernel exists (XQA's Hopper kernels, hardware/kernels.yaml attention_decode_fp8_grouped).
    fast_fp8 = ~generic & (hd >= FP8_GROUPED_MIN_HEAD_DIM) & kernels.has_native("attention_decode_fp8_grouped", hw)
    launch_8 = np.where(fast_fp8, p["decode_launch_grouped_fp8_frac"], 1.0) * launch_16
    # An FP8 cache never pays more fixed cost than the 16-bit kernel for the same shape
    # (an engine would pick the cheaper kernel); this keeps "FP8 KV is never slower" exact.
    overhead = np.where(low_bit, np.minimum(overhead_8, overhead_16), overhead_16) / sm
    # Sliding window (TensorRT-LLM on Hopper) with a 16-bit cache, or in the per-head kernels with
    # any cache: the split-KV grid is still sized by the whole context, so split CTAs that land
    # outside the window are launched, walk their block-table slice and exit; each costs a fixed
    # SM-time (less in the per-head kernels, which stage no tiles). The grid is capped at
    # decode_window_max_ctas_per_sm CTAs per SM (the kernel sizes its split grid to fill the GPU).
    # trtllm-gen (sm_100 / sm_103) sizes its split-KV grid by the window (fmhaKernels.h computeNumCtas:
    # maxAttentionWindow = min(kv_len, window + tileSizeKv - 1)), so its grouped kernels launch no CTA outside it.
    window_grid = kernels.has_native("attention_decode_tma_grouped", hw) & ~per_head_path
    skipped_ctas = np.minimum(units * np.maximum(kv - L, 0.0) / p["decode_split_tokens"],
                              p["decode_window_max_ctas_per_sm"] * sm)  # split CTAs outside the window
    skip_s = np.where(generic, p["decode_window_split_generic_s"], p["decode_window_split_s"])
    walk_s = np.where((w > 0) & (~low_bit | generic) & ~window_grid, skipped_ctas * skip_s, 0.0) / sm
    launch = np.where(low_bit, launch_8, launch_16)
    # Kernel launches of the call (RoPE / KV-append kernel where it is separate, the attention kernel), each at
    # the measured per-launch cost: data per platform, so the fitted decode_launch_s is the kernel's own fixed work.
    launch = launch + decode_launches(b, kv, nkv, per_head_path, low_bit & fast_fp8, hw) * kernels.launch_cost().per_launch_s
    time_s = launch + soft_max(overhead + walk_s, np.maximum(memory_s, compute_s), DECODE_OVERLAP_NORM)
    if _walk:
        # An engine never does worse than ignoring the window (full attention over kv_len).
        full_s = _decode_seconds(batch, kv_len, n_heads, n_kv_heads, head_dim, 0.0, kv_bytes, hw, p, q_tokens, _walk=False)[0]
        time_s = np.where(w > 0, np.minimum(time_s, full_s), time_s)
        # An FP8 cache is never slower than the 16-bit kernel (the engine can dequantise up front).
        bf16_s = _decode_seconds(batch, kv_len, n_heads, n_kv_heads, head_dim, window, np.maximum(kvb, BYTES_16BIT), hw, p,
                                 q_tokens, _walk=True)[0] if np.any(low_bit) else time_s
        time_s = np.where(low_bit, np.minimum(time_s, bf16_s), time_s)
    return time_s, flops, kv_stream_bytes + qo_bytes, compute_s, memory_s


def attention_decode_cost(batch, kv_len, n_heads, n_kv_heads, head_dim, window, kv_bytes, hw, p=None, q_tokens=1) -> Cost:
    """One paged-attention decode step: ``batch`` requests, ``q_tokens`` query tokens each
    (>1 for speculative verify) over ``kv_len`` cached tokens; ``window`` 0 = full attention,
    else only the last ``window`` tokens are read. ``kv_bytes``: bytes per KV element."""
    p = _params(p, hw)
    t, fl, by, c, m = _decode_seconds(batch, kv_len, n_heads, n_kv_heads, head_dim, window, kv_bytes, hw, p, q_tokens)
    return Cost(time_s=t, flops=fl, mem_bytes=by, compute_s=c, memory_s=m)


# ----------------------------------------------------------------------------------- prefill


def causal_pairs(seq_len, prefix_len=0, window=0) -> np.ndarray:
    """(query, key) pairs one sequence attends: sum over new tokens i of min(prefix+i+1, window).

    ``window`` 0 means no window (plain causal: ``s*p + s*(s+1)/2``).
    """
    s, pf, w = _f(seq_len), _f(prefix_len), _f(window)

    def ramp(n):  # sum_{j=1..n} min(j, w)
        return np.where(n <= w, n * (n + 1.0) / 2.0, w * (w + 1.0) / 2.0 + (n - w) * w)

    full = s * pf + s * (s + 1.0) / 2.0
    return np.where(w > 0, ramp(s + pf) - ramp(pf), full)


def flash_prefill_seconds(batch, seq_len, prefix_len, n_heads, n_kv_heads, head_dim_qk, head_dim_v, window, kv_bytes, fp8_math, hw, p,
                          kv_row_bytes=None, extra_bytes=0.0):
    """Causal flash-attention forward time and legs (shared by GQA and MLA prefill).

    ``p`` holds the ``prefill_*`` parameters (``prefill_window_min_tokens`` optional, default 0).
    ``kv_row_bytes``: KV-cache bytes per token per sequence (written for new tokens, read for the
    prefix); default ``n_kv_heads * (d_qk + d_v) * kv_bytes``, MLA passes its latent row. ``extra_bytes`` adds HBM
    traffic (e.g. rows gathered by sparse attention).
    """
    b, s, pf = _f(batch), _f(seq_len), _f(prefix_len)
    nh, nkv, dqk, dv, w, kvb = _f(n_heads), _f(n_kv_heads), _f(head_dim_qk), _f(head_dim_v), _f(window), _f(kv_bytes)
    fp8 = np.asarray(fp8_math, dtype=bool)
    sm = hw.sm_count
    # Sliding-window kernels visit at least prefill_window_min_tokens keys per query (masked
    # tiles are not skipped below that granularity).
    w_eff = np.where(w > 0, np.maximum(w, p.get("prefill_window_min_tokens", 0.0)), 0.0)
    pairs = causal_pairs(s, pf, w_eff)  # attended (q, k) pairs per sequence and head
    pairs_nominal = causal_pairs(s, pf, w)
    flops = 2.0 * b * nh * (dqk + dv) * pairs_nominal  # QK^T (d_qk) + PV (d_v), 2 flops per MAC

    peak = _math_peak(hw, fp8, p["prefill_flop_eff"], p["prefill_flop_eff_fp8"])
    # Softmax per (q, k) score, in tensor-FLOP equivalents of the GPU's achievable BF16 rate per SM: flash
    # kernels keep the exponentials in step with the MMA pipe of their architecture (FlashAttention-4 on
    # Blackwell computes part of them as FMA polynomials because MUFU throughput did not grow with the
    # tensor cores), so a score costs a fixed share of MMA time across GPUs rather than fixed SM-seconds.
    score_sm_s = p["prefill_score_flops"] / (_peak(hw, "bf16") / sm)
    pair_sm_s = soft_max(2.0 * (dqk + dv) / (peak / sm), score_sm_s, PREFILL_OVERLAP_NORM)  # SM-s per pair
    row_sm_s = p["prefill_row_s"] + (dqk + dv) * p["prefill_elem_s"] + np.where(fp8, (dqk + dv) * p["prefill_fp8_elem_s"], 0.0)
    ctas = b * nh * np.ceil(s / PREFILL_TILE_Q)
    work_sm_s = ctas * p["prefill_cta_s"] + b * nh * s * row_sm_s + b * nh * pairs * pair_sm_s
    # Critical path: the last query tile sees the most keys and runs on one SM.
    tq = np.minimum(s, PREFILL_TILE_Q)
    keys_last = np.where(w_eff > 0, np.minimum(s + pf, w_eff + tq), s + pf)
    longest_s = p["prefill_cta_s"] + tq * row_sm_s + tq * keys_last * pair_sm_s
    compute_s = soft_max(work_sm_s / sm, longest_s, PREFILL_OVERLAP_NORM)

    kv_rows = nkv * (dqk + dv) * kvb if kv_row_bytes is None else _f(kv_row_bytes)
    hbm_bytes = b * (s * nh * (dqk + dv) * BYTES_16BIT  # Q read, O written
                     + s * nkv * (dqk + dv) * BYTES_16BIT  # fresh K/V read
                     + (s + pf) * kv_rows)  # KV cache rows written (new) and read (prefix)
    hbm_bytes = hbm_bytes + _f(extra_bytes)
    memory_s = hbm_bytes / (p["prefill_hbm_eff"] * hbm_bw(hw))
    time_s = p["prefill_launch_s"] + soft_max(compute_s, memory_s, PREFILL_OVERLAP_NORM)
    return time_s, flops, hbm_bytes, compute_s, memory_s


def attention_prefill_cost(batch, seq_len, n_heads, n_kv_heads, head_dim, window, hw, p=None, prefix_len=0, head_dim_v=None, kv_bytes=2) -> Cost:
    """Causal flash attention over ``seq_len`` new tokens per sequence on a cached prefix of
    ``prefix_len`` tokens (chunked prefill / prefix cache); ``window`` 0 = full attention.
    ``kv_bytes`` 1 (FP8 KV cache) runs FP8 attention math where the GPU supports it."""
    p = _params(p, hw)
    dv = head_dim if head_dim_v is None else head_dim_v
    fp8 = _f(kv_bytes) < BYTES_16BIT
    t, fl, by, c, m = flash_prefill_seconds(batch, seq_len, prefix_len, n_heads, n_kv_heads, head_dim, dv, window, kv_bytes, fp8, hw, p)
    return Cost(time_s=t, flops=fl, mem_bytes=by, compute_s=c, memory_s=m)


# ----------------------------------------------------------------------------------- calibration


def _kv_bytes_col(cols) -> np.ndarray:
    return np.where(np.char.lower(np.asarray(cols["kv_cache_dtype"]).astype(str)) == "fp8", 1.0, 2.0)


def _predict_decode(cols, hw, p):
    return _decode_seconds(cols["batch"], cols["kv_len"], cols["n_heads"], cols["n_kv_heads"], cols["head_dim"],
                           cols["window_size"], _kv_bytes_col(cols), hw, p)[0]


def _predict_prefill(cols, hw, p):
    kvb = _kv_bytes_col(cols)
    return flash_prefill_seconds(cols["batch"], cols["seq_len"], 0.0, cols["n_heads"], cols["n_kv_heads"], cols["head_dim"],
                                 cols["head_dim"], cols["window_size"], kvb, kvb < BYTES_16BIT, hw, p)[0]


# name: (default = hopper fit, lower bound, upper bound). Names are disjoint between ops of the
# same kind, so both ops' parameters live in one family block of attention.yaml.
DECODE_PARAMS = {
    "decode_launch_s": (8.1e-6, 1e-6, 5e-5),  # fixed cost of the attention kernel beyond its launches (decode_launches: data)
    "decode_launch_grouped_fp8_frac": (0.67, 0.2, 1.0),  # fixed cost of grouped FP8-KV kernels (head_dim >= 128) / decode_launch_s
    "decode_hbm_eff": (0.99, 0.3, 1.3),  # achieved fraction of the ACHIEVABLE HBM bandwidth for paged KV at full occupancy
    "decode_split_tokens": (400.0, 16.0, 1e6),  # KV tokens per split-KV CTA
    "decode_half_occupancy_ctas_per_sm": (0.53, 1e-3, 10.0),  # CTAs per SM at which streaming reaches half its peak
    "decode_unit_s": (1.25e-6, 1e-10, 1e-4),  # SM-seconds per (request, head) CTA of per-head kernels
    "decode_grouped_kv16_unit_s": (3.75e-6, 1e-10, 1e-4),  # same per (request, KV head) for grouped mma.sync kernels with 16-bit KV
    # SM-seconds per head_dim element per CTA of grouped TMA kernels (Hopper FP8-KV XQA; trtllm-gen, any KV dtype)
    "decode_grouped_fp8_cta_elem_s": (5.3e-9, 1e-13, 1e-6),
    "decode_grouped_kv_tile_tokens": (56.0, 1.0, 512.0),  # fewest KV tokens a grouped-kernel CTA reads (one staged tile)
    "decode_qhead_elem_s": (7.8e-10, 1e-13, 1e-7),  # SM-seconds per (request, query head, head_dim element): Q load, O store
    "decode_perhead_elem_s": (4.1e-11, 1e-14, 1e-8),  # SM-seconds per (query head, K/V element) in per-head kernels
    "decode_fp8_qhead_elem_s": (4.5e-12, 1e-15, 1e-8),  # SM-seconds per (query head, FP8 K/V element) in shared-read kernels
    "decode_window_split_s": (8.9e-5, 1e-10, 1e-4),  # SM-seconds per split-KV CTA outside a 16-bit sliding window
    "decode_window_split_generic_s": (2.8e-5, 1e-10, 1e-4),  # same for the per-head kernels (16-bit or FP8 cache)
    "decode_window_max_ctas_per_sm": (0.23, 0.1, 64.0),  # cap of skipped split-KV CTAs per SM in windowed kernels
}
PREFILL_PARAMS = {
    "prefill_launch_s": (1.2e-5, 1e-6, 5e-5),  # fixed kernel cost
    "prefill_flop_eff": (0.69, 0.05, 1.3),  # achieved fraction of the ACHIEVABLE BF16 tensor rate in the attention main loop
    "prefill_flop_eff_fp8": (0.59, 0.05, 1.3),  # same for FP8 attention math (FP8 KV cache), of the achievable FP8 rate
    # softmax/exp per (q, k) score, overlapped with MMA, in BF16 tensor FLOPs at the achievable per-SM rate
    # (H100: 6e-11 SM-s x 834e12 / 132 FLOP/s = 380)
    "prefill_score_flops": (380.0, 0.1, 1e5),
    "prefill_window_min_tokens": (780.0, 1.0, 8192.0),  # fewest keys a sliding-window query visits
    "prefill_cta_s": (3.6e-6, 1e-9, 1e-4),  # SM-seconds of setup per CTA (query tile x head)
    "prefill_row_s": (1e-8, 1e-12, 1e-6),  # SM-seconds per query row per head (softmax finalise)
    "prefill_elem_s": (2.8e-10, 1e-14, 1e-8),  # SM-seconds per Q/O element (prologue/epilogue)
    "prefill_fp8_elem_s": (1e-12, 1e-15, 1e-8),  # extra SM-seconds per element to quantise to FP8
    "prefill_hbm_eff": (0.83, 0.2, 1.3),  # achieved fraction of the ACHIEVABLE HBM bandwidth for Q/K/V/O
}

CALIBRATION_OPS = {
    "attention_decode": {
        "kind": KIND,
        "params": DECODE_PARAMS,
        "predict": _predict_decode,
        "columns": ["batch", "kv_len", "n_heads", "n_kv_heads", "head_dim", "window_size", "kv_cache_dtype"],
    },
    "attention_prefill": {
        "kind": KIND,
        "params": PREFILL_PARAMS,
        "predict": _predict_prefill,
        "columns": ["batch", "seq_len", "n_heads", "n_kv_heads", "head_dim", "window_size", "kv_cache_dtype"],
    },
}

"""Fused MoE on one rank: routing, grouped expert GEMMs (gate/up, down), finalize. No communication.

Tokens are routed over ``num_experts`` experts with top-``topk``; this rank holds
``num_experts / moe_ep`` of them, each sliced to ``inter / moe_tp``. Work follows modeling-notes.md
§1.8: FLOPs ``2·pairs·(3 if gated else 2)·H·I/TP`` for the token-expert pairs on the rank; weights
for the experts actually touched, ``L·(1 − exp(−pairs/L))`` (BLIS nEff), so a tiny batch still
streams its experts. The expert GEMMs reuse the GEMM physics (tiles, waves, CTA k-loop rate) with
their own efficiencies (``hardware/efficiency/moe.yaml``); token- and pair-level passes (quantize,
permute, finalize, router) are memory traffic, and the router's top-k rescans every token's E
logits once per pick. With a skewed router (``alpha``) the busiest rank sets the time; its load
follows the benchmark's power-law sampler (``power_law_rank_load``). Non-gated experts (squared-ReLU
up then down) have two matrices (``gated=False``). Gated NVFP4 experts on datacenter Blackwell also
have a fused FP4 kernel (``moe_path_costs``), and the op takes the faster of the two; gated MXFP4 experts
there run that fused kernel only (``FUSED_OPS``).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from . import kernels
from .cost import Cost
from .gemm import ACT_QUANT_READS, ACT_SOURCE_BYTES, DTYPE_CLASSES, OUT_BYTES, class_view, dtype_class, grouped_gemm_times, resolve_params, soft_max
from .precision import gemm_rate_dtype, get_format

# dtype classes with their own efficiencies: the dense-GEMM classes plus W4A8 MXFP4 (``MOE_CLASS``)
MOE_CLASSES = (*DTYPE_CLASSES, "mxfp4")

# name -> (default, lo, hi); lo == hi is chosen, not fitted. Defaults: modeling-notes.md §2.
PARAMS: dict[str, tuple[float, float, float]] = {
    # achieved fraction of the ACHIEVABLE tensor rate (Hardware.achievable, the measured dense-GEMM
    # maximum) in the grouped expert GEMMs. Above 1 allowed, as in gemm.PARAMS: the wave and prologue
    # terms already charge part of what separates typical from maximal GEMMs.
    "eta_compute_bf16": (0.7, 0.1, 1.3),
    "eta_compute_fp8": (0.65, 0.1, 1.3),
    "eta_compute_fp8_block": (0.65, 0.1, 1.3),
    "eta_compute_fp4": (0.45, 0.05, 1.3),
    "eta_compute_wonly": (0.35, 0.02, 1.3),
    "eta_compute_mxfp4": (0.45, 0.05, 1.3),
    # achieved fraction of the ACHIEVABLE HBM bandwidth streaming expert weights; start values below the 0.89
    # of dense weight streaming (AIC 0.8 of datasheet / 0.90 achievable share, scripts/achievable_hbm.py)
    "eta_memory_bf16": (0.85, 0.1, 1.3),
    "eta_memory_fp8": (0.85, 0.1, 1.3),
    "eta_memory_fp8_block": (0.85, 0.1, 1.3),
    "eta_memory_fp4": (0.85, 0.1, 1.3),
    "eta_memory_wonly": (0.7, 0.1, 1.3),
    "eta_memory_mxfp4": (0.85, 0.1, 1.3),
    # fixed cost of the fused op: routing/top-k, permute, quantize, finalize kernels
    **{f"launch_s_{c}": (15e-6, 1e-6, 2e-4) for c in MOE_CLASSES},
    # fixed cost per expert with tokens (per-group setup in the grouped GEMM scheduler)
    **{f"expert_overhead_s_{c}": (0.1e-6, 1e-9, 5e-6) for c in MOE_CLASSES},
    # fixed cost per expert HELD by the rank, with tokens or not: the grouped GEMM's per-group problem
    # shapes, pointers and strides (and block-scale layouts) are built for every local expert, and a
    # persistent tile scheduler walks every group to find its tiles. Visible where few of many local
    # experts have tokens (decode without expert parallelism: 256-512 local experts, 1-16 tokens)
    **{f"local_expert_s_{c}": (0.01e-6, 1e-10, 2e-6) for c in MOE_CLASSES},
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
    # per-CTA k-loop streaming rate, bytes/s
    **{f"cta_bandwidth_bytes_per_s_{c}": (100e9, 5e9, 1e12) for c in MOE_CLASSES},
    # soft-max exponent of the compute and memory legs; near 1 the legs add (no overlap)
    "roofline_sharpness": (4.0, 1.0, 32.0),
    # achieved HBM fraction of the permute / finalize / quantize passes, per dtype class: the quantize
    # and expand kernels of block-scaled formats also compute and write swizzled scale factors
    **{f"eta_aux_{c}": (0.6, 0.05, 1.3) for c in MOE_CLASSES},  # of the achievable HBM bandwidth
    # share of per-pair activation round trips (down-GEMM output, permute copy, finalize read) that
    # reaches HBM; fused finalize epilogues (TensorRT-LLM CUTLASS MoE) keep the rest on chip
    "pair_traffic_fraction": (0.5, 0.01, 1.0),
    # share of an activation row moved through HBM for EVERY routed selection of the tokens entering
    # the op, local or not: the routing sort / expand-map / finalize kernels walk all T·k selections
    # and only then drop the non-local ones (TensorRT-LLM CUTLASS MoE under EP). 0 = local pairs only.
    # Fixed at 0, not fitted: every fit put it at its lower bound (H100, B200, pooled; params_at_bounds.py),
    # i.e. the non-local selections' rows never reach HBM in the CUTLASS MoE kernels of the calibration set.
    "selection_traffic_fraction": (0.0, 0.0, 0.0),
    # share of the tokens entering the op without a local expert that the token-level passes
    # (input quantize, combine-output write) still touch: they run over the whole input and output
    # tensors, not only the rows this rank's experts use (0 = local tokens only, 1 = every token)
    "all_token_fraction": (0.0, 0.0, 1.0),
    # seconds per (token, expert logit, top-k pick) of the router's top-k selection: a generic top-k
    # kernel rescans a token's E logits once per pick (k·E work per token)
    "topk_scan_s": (1e-12, 1e-15, 1e-9),
    # Fused FP4 MoE kernel (``has_fused_path``): a second kernel beside the CUTLASS grouped path above,
    # sharing its tile accounting, weight streaming, token passes and router; three parameters of its own.
    # share of the grouped path's fixed cost (launch_s) the fused op keeps: routing, two GEMMs and
    # finalize, about half the launches, no permute/expand kernels (<= 1: a subset of those launches)
    "fused_launch_fraction": (0.5, 0.05, 1.0),
    # tensor rate of the fused kernel's expert GEMMs over the grouped GEMM's, capped at the tensor-core
    # peak (>= 1: the same MMA instructions, so never a slower rate)
    "fused_compute_gain": (1.5, 1.0, 4.0),
    # SM seconds per CTA of the fused GEMMs' worst-case launch grid that finds no routed rows and exits
    "fused_cta_s": (0.1e-6, 1e-9, 1e-5),
}

FAMILY_DEFAULTS: dict[str, dict[str, float]] = {}
# class with no calibration rows on a family -> measured class it takes its fitted values from
# (gemm.CLASS_FALLBACK; W4A8 MXFP4 grouped GEMMs are mixed-input FP8 MMA)
CLASS_FALLBACK = {"fp4": "fp8", "mxfp4": "fp8", "wonly": "bf16", "fp8_block": "fp8"}
# Parameters that describe the block scales rather than the tensor pipeline: an unmeasured block-scaled
# class (NVFP4: 16-element blocks, W4A8 MXFP4: 32-element blocks) takes them from the measured
# block-scaled class (FP8 128x128 blocks), not from per-tensor FP8. Per-expert group setup builds each
# expert's scale-factor layout, and the quantize / expand passes compute and write swizzled scale
# factors (the eta_aux comment above). Both families show it in the setup per held expert: local_expert_s
# of fp8_block is 9.5x (Hopper) and 7.8x (Blackwell) that of per-tensor fp8; with that term apart, the
# setup per expert with tokens is within 0.8-1.2x of fp8's (hardware/efficiency/moe.yaml, round 31).
PARAM_CLASS_FALLBACK = {cls: {"expert_overhead_s": "fp8_block", "local_expert_s": "fp8_block", "eta_aux": "fp8_block"}
                        for cls in ("fp4", "mxfp4")}

# Formats whose fused-MoE kernel is its own efficiency class (the GEMM module folds them into another):
# W4A8 MXFP4 x MXFP8 experts run a mixed-input kernel with 32-element block scales (trtllm-gen on sm_100/103,
# ``FUSED_OPS``; a grouped GEMM elsewhere), not the FP8 block-scaled (DeepGEMM-style) kernels of its dense-GEMM class.
MOE_CLASS = {"mxfp4": "mxfp4"}

# Platforms with the fused FP4 block-scale MoE kernel (TensorRT-LLM "min-latency" MoE / flashinfer
# trtllm-gen ``trtllm_fp4_block_scale_moe``): routing, the gathered gate/up GEMM with SwiGLU and FP4
# requantization in its epilogue, the down GEMM and finalize, in a few launches with no permuted copy of
# the activations. Data: ``moe_fused_fp4`` in hardware/kernels.yaml (sm_100 / sm_103 cubins only; the RTX
# PRO 6000 (sm_120) and every other GPU run the CUTLASS grouped-GEMM path). Gated NVFP4 experts only.
FUSED_FP4_COMPUTE_CAPABILITIES = kernels.platforms("moe_fused_fp4")
# format -> (hardware/kernels.yaml op of its fused trtllm-gen MoE kernel, MoE efficiency class it runs in): NVFP4
# experts (beside the CUTLASS grouped path) and W4A8 MXFP4 x MXFP8 experts (``moe_fused_mxfp4``, the only MoE kernel
# priced for them on its platforms: ``kernels.sole_moe_kernel``)
FUSED_OPS = {"nvfp4": ("moe_fused_fp4", "fp4"), "mxfp4": ("moe_fused_mxfp4", "mxfp4")}
# names of the two kernels where both exist (``Cost.kernel``, shown by ``simfront explain``)
KERNEL_LABELS = {"grouped": "cutlass-grouped", "fused": "fused-fp4"}
# Token tile of the fused kernel's GEMMs (rows of routed tokens per CTA): the routed tokens per expert,
# T·k / E, between these bounds (TensorRT-LLM / flashinfer trtllm-gen tile choice, powers of two there;
# continuous here so that more tokens never shrink the grid). Routing runs on the device in the same
# op, so the host sizes the grid for the worst case, every one of the T·k selections landing on this
# rank's experts: (T·k + L·(tile − 1)) / tile token tiles times the output tiles; CTAs beyond the
# routed rows exit at once. Geometry of the kernel, not fitted. Provenance: recalled from the
# TensorRT-LLM / flashinfer trtllm-gen MoE launcher (tile choice, max padded token count), not re-read
# here; kept because without it the fused path is too fast under wide expert parallelism at
# 128-2048 tokens, where every rank still launches the grid for all T·k selections.
FUSED_TILE_TOKENS = (8.0, 64.0)


def moe_class(fmt, hw) -> str:
    """Efficiency class of experts in ``fmt`` on ``hw``: the dense-GEMM class, or the MoE kernel's own
    (``MOE_CLASS``) on its fast path."""
    cls = dtype_class(fmt, hw)
    return cls if cls == "wonly" else MOE_CLASS.get(fmt.name, cls)


def _fused_op(f, hw, gated=True, num_experts=None) -> str | None:
    """hardware/kernels.yaml op of the fused trtllm-gen MoE kernel gated experts in format ``f`` run on ``hw``
    (``FUSED_OPS``), or None where there is none or (``num_experts`` given, scalar or array: kept if any element
    qualifies) every model is beyond its router's expert limit (``max_experts``)."""
    op, cls = FUSED_OPS.get(f.name, (None, None))
    if op is None or not gated or not kernels.has_native(op, hw) or moe_class(f, hw) != cls:
        return None
    if num_experts is not None and not np.any(np.asarray(num_experts, dtype=np.float64) <= kernels.max_experts(op, hw)):
        return None
    return op


def has_fused_path(fmt, hw, gated=True, num_experts=None) -> bool:
    """True where a fused FP4 MoE kernel exists: gated NVFP4 experts on ``FUSED_FP4_COMPUTE_CAPABILITIES``
    and gated MXFP4 experts on the platforms of ``moe_fused_mxfp4``, and (``num_experts`` given, scalar or
    array: True if any element qualifies) models within its router's expert limit (``max_experts`` in
    hardware/kernels.yaml)."""
    return _fused_op(get_format(fmt) if isinstance(fmt, str) else fmt, hw, gated, num_experts) is not None


# Skewed router of the calibration benchmark (aiconfigurator MoE collector, ``power_law_<alpha>``;
# modeling-notes.md §1.8): each expert draws a weight x from p(x) ∝ x^-alpha, on [1, 0.8·T] when the
# T·k pairs outnumber the experts and on [0.01, 2] otherwise; its load is round(x·T·k / Σx), the
# rounding deficit is topped up one pair at a time on the heaviest experts, and the EP group with the
# most pairs is the measured rank. Geometry of that sampler, not fitted. Provenance: recalled from the
# aiconfigurator collector source, which is not shipped in its wheel and could not be re-read here;
# kept because it lowers the cross-validated MoE error on both GPUs (docs/calibration_kernels.md) and
# a Monte-Carlo run of the sampler matches this analytic form (median 1% on experts touched).
PL_SMALL_RANGE = (0.01, 2.0)  # weight range when T·k <= E
PL_LARGE_HI = 0.8  # upper weight bound, in tokens, when T·k > E
# share of the Gaussian order-statistic spread sqrt(2 ln EP)·sqrt(L)·sd that the busiest EP group adds
# over the mean group load (heavy tails concentrate it in one expert, already counted as the top one)
_PL_GROUP_SPREAD = 0.5


def _pl_law(lo, hi, a):
    """Truncated power law p(x) ∝ x^-a on [lo, hi] (arrays): mean, sd, survival, quantile."""
    def integral(power, x0, x1):  # ∫_x0^x1 x^power dx, with the log limit at power = -1
        if abs(power + 1.0) < 1e-6:
            return np.log(x1 / x0)
        return (x1 ** (power + 1.0) - x0 ** (power + 1.0)) / (power + 1.0)

    z = integral(-a, lo, hi)
    mean = integral(1.0 - a, lo, hi) / z
    sd = np.sqrt(np.maximum(integral(2.0 - a, lo, hi) / z - mean**2, 0.0))

    def survival(x):  # P(X >= x)
        return integral(-a, np.clip(x, lo, hi), hi) / z

    def quantile(qv):
        if abs(a - 1.0) < 1e-6:
            return lo * (hi / lo) ** qv
        return ((hi ** (1.0 - a) - lo ** (1.0 - a)) * qv + lo ** (1.0 - a)) ** (1.0 / (1.0 - a))

    return mean, sd, survival, quantile


def _pl_sampler_load(T, k, E, ep, a):
    """(pairs, experts with pairs) on the busiest EP group of the benchmark's power-law sampler at T tokens."""
    P = T * k
    local = E / ep
    few = P <= E
    lo = np.where(few, PL_SMALL_RANGE[0], 1.0)
    hi = np.where(few, PL_SMALL_RANGE[1], np.maximum(PL_LARGE_HI * T, 1.0 + 1e-6))
    mean, sd, survival, quantile = _pl_law(lo, hi, a)
    per_pair = E * mean / P  # weight that earns one pair: share = x / per_pair
    hit = E * survival(0.5 * per_pair)  # experts whose share rounds to at least one pair
    # with few pairs no share reaches half a pair until the heaviest weight does: then every pair is a
    # rounding top-up of its own expert; past it the experts rounding to a pair set the count
    all_topped = np.where(few, np.minimum(P, E * mean / (2.0 * hi)), 0.0)
    touched_all = np.minimum(np.maximum(hit, all_topped), np.minimum(E, P))
    share = touched_all / E
    spread = np.sqrt(2.0 * np.log(np.maximum(ep, 1.0)))  # expected max of EP standard normals

    def busiest(n):  # largest of EP group counts when n items fall on the groups at random
        return n / ep + spread * np.sqrt(n / ep * (1.0 - 1.0 / ep))

    # few pairs: ~one pair per touched expert; the busiest group has the most touched experts and pairs
    touched_few = np.minimum(busiest(touched_all), touched_all)
    pairs_few = np.minimum(np.maximum(busiest(P), touched_few), P)
    # many pairs: the busiest group holds the heaviest expert, the others hit independently
    touched_many = 1.0 + (local - 1.0) * share
    # heaviest expert: median of the largest of E draws, at most T pairs (a token picks an expert once)
    top = np.minimum(P * quantile(0.5 ** (1.0 / E)) / (E * mean), T)
    rest = (P - top) / np.maximum(E - 1.0, 1.0)
    group_spread = _PL_GROUP_SPREAD * spread * np.sqrt(local) * sd * P / (E * mean)
    pairs_many = np.maximum(top + (local - 1.0) * rest, P / ep + group_spread)
    # a token picks an expert at most once: at least pairs / T experts carry the group's pairs
    pairs_many = np.minimum(pairs_many, P)
    touched_many = np.clip(np.minimum(touched_many, pairs_many), pairs_many / T, local)
    pairs = np.where(few, pairs_few, pairs_many)
    # the busiest group holds at least its even share and, with any pair at all, one pair
    pairs = np.where(ep > 1, np.maximum(pairs, np.maximum(P / ep, np.minimum(P, 1.0))), P)
    touched = np.clip(np.where(few, touched_few, touched_many), np.minimum(pairs, 1.0), np.minimum(local, pairs))
    # pairs of the group's heaviest expert (few pairs: about one each)
    heaviest = np.minimum(np.where(few, np.maximum(pairs / np.maximum(touched, 1e-9), 1.0), top), pairs)
    return pairs, touched, heaviest


# The calibration benchmark's min-latency rows (TensorRT-LLM's fused trtllm-gen FP4 MoE, the fused path here) route
# every model through DeepSeek-V3's grouped router: 8 expert groups, the 4 best kept per token, the top-k taken inside
# them (aiconfigurator collector/trtllm/collect_moe.py, min_latency_mode: "all use deepseek setting for now"). Its
# balanced logits give token i the experts (i + j*ceil(E/k)) mod E (collector/helper.py ``balanced_logits``); with
# k = 8 that is one expert in each group, so every group scores the same and every token keeps the same four groups.
# Ties are taken to go to the lower index (the order the router's top-k reductions compare in). Benchmark geometry,
# not fitted; only the fused path of balanced kernel rows uses it (a trained router does not tie).
COLLECTOR_N_GROUP = 8
COLLECTOR_TOPK_GROUP = 4


@lru_cache(maxsize=4096)
def _collector_grouped_expert_load(T: int, k: int, E: int) -> tuple[float, ...]:
    """Tokens per expert (all E) of the benchmark's balanced logits through its grouped router (see above)."""
    stride = -(-E // k)  # ceil(E / k)
    if T >= stride:  # token i repeats token i mod stride: one pattern per residue, weighted by its count
        base = np.arange(stride, dtype=np.float64)
        weight = np.floor((T - 1 - base) / stride) + 1.0
    else:  # the collector spreads T < stride tokens over the stride (float index, truncated)
        base = np.arange(T, dtype=np.float64) * stride / T
        weight = np.ones(T)
    picks = np.floor(base[:, None] + stride * np.arange(k)[None, :]).astype(np.int64) % E  # (patterns, k)
    score = np.zeros((base.size, E))
    np.add.at(score, (np.repeat(np.arange(base.size), k), picks.ravel()), 1.0)  # the one-hot sum the logits rank by
    g = COLLECTOR_N_GROUP
    if E % g or E // g < 2:  # the grouped router needs equal groups of at least two experts
        chosen = picks
    else:
        size = E // g
        top2 = np.sort(score.reshape(-1, g, size), axis=2)[:, :, -2:].sum(axis=2)  # group score: its best two experts
        order = np.lexsort((np.broadcast_to(np.arange(g), top2.shape), -top2), axis=1)  # best groups, lower index first
        keep = np.zeros((base.size, g), dtype=bool)
        np.put_along_axis(keep, order[:, :COLLECTOR_TOPK_GROUP], True, axis=1)
        masked = np.where(np.repeat(keep, size, axis=1), score, -1.0)  # experts outside the kept groups never chosen
        chosen = np.lexsort((np.broadcast_to(np.arange(E), masked.shape), -masked), axis=1)[:, :k]
    load = np.zeros(E)
    np.add.at(load, chosen.ravel(), np.repeat(weight, k))
    return tuple(load)


def collector_grouped_rank_load(num_tokens, topk, num_experts, moe_ep):
    """(pairs, touched experts, heavy experts, pairs per heavy expert) on the measured rank (rank 0: experts
    [0, E/EP)) of a balanced min-latency benchmark row (see ``COLLECTOR_N_GROUP``). Heavy experts are those
    carrying at least half the busiest one's tokens (the tie-broken picks every token shares)."""
    T, k, E, ep = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (num_tokens, topk, num_experts, moe_ep)))
    keys = np.stack([T.ravel(), k.ravel(), E.ravel(), ep.ravel()], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    vals = np.zeros((len(uniq), 4))
    for j, (t, kk, e, p) in enumerate(uniq):  # distinct benchmark shapes (cached), not configurations
        load = np.asarray(_collector_grouped_expert_load(int(max(t, 1)), int(kk), int(e)))[: max(int(e // p), 1)]
        heavy = load >= 0.5 * load.max() if load.max() > 0 else np.zeros(load.shape, dtype=bool)
        vals[j] = (load.sum(), np.count_nonzero(load), np.count_nonzero(heavy), load[heavy].mean() if heavy.any() else 0.0)
    out = vals[inv.ravel()].T.reshape((4,) + T.shape)
    return out[0], out[1], out[2], out[3]


def power_law_rank_load(num_tokens, topk, num_experts, moe_ep, alpha):
    """(token-expert pairs, experts with tokens) on the busiest EP rank under a skewed router.

    Follows the benchmark's power-law sampler (see ``PL_SMALL_RANGE``): with few pairs nearly every
    pair lands on its own expert, so a small batch touches ~T·k experts; with many pairs the heaviest
    expert (median of the largest of E draws, at most T pairs) and the busiest-group selection load
    the measured rank beyond T·k/EP, and experts whose share rounds to zero are not read. Past the
    sampler's switch at T·k = E the few-pairs load at the switch bounds the load from below, so more
    tokens never lighten the rank.
    """
    pairs, touched, _ = _pl_rank_load(num_tokens, topk, num_experts, moe_ep, alpha)
    return pairs, touched


# The busiest rank's load depends on the token counts, the model's experts and top-k, the EP sizes and the skew, not on
# the GPU: a plan over six GPU types asks for the same arrays again for every type and precision (8 of the 10 calls of
# a deepseek-r1 plan repeat an earlier one, ~6 ms each). The last few loads are kept in this process, keyed by the
# arrays' shapes and bytes (equal bytes, equal inputs: the same loads); callers get copies, never the kept arrays.
_PL_MEMO: dict = {}
_PL_MEMO_MAX = 8


def _pl_rank_load(num_tokens, topk, num_experts, moe_ep, alpha):
    """``power_law_rank_load`` plus the pairs of the busiest rank's heaviest expert (memoised, see ``_PL_MEMO``)."""
    args = [np.asarray(x, dtype=np.float64) for x in (num_tokens, topk, num_experts, moe_ep)]
    key = (float(alpha), *((a.shape, a.tobytes()) for a in args))
    loads = _PL_MEMO.get(key)
    if loads is None:
        loads = _pl_rank_load_of(*args, alpha)
        if len(_PL_MEMO) >= _PL_MEMO_MAX:
            _PL_MEMO.pop(next(iter(_PL_MEMO)))  # the oldest
        _PL_MEMO[key] = loads
    return tuple(v.copy() for v in loads)


def _pl_rank_load_of(num_tokens, topk, num_experts, moe_ep, alpha):
    """:func:`_pl_rank_load`, computed."""
    T, k, E, ep = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (num_tokens, topk, num_experts, moe_ep)))
    T = np.maximum(T, 1.0)
    a = float(alpha)
    pairs, touched, heaviest = _pl_sampler_load(T, k, E, ep, a)
    # past the switch point T = floor(E / k) the load is at least the sampler's load there; below it the switch
    # point is T itself (the same numbers), so the second pass runs only where T exceeds it
    beyond = T > np.floor(E / k)
    if not beyond.any():
        return pairs, touched, heaviest
    kb, Eb, epb = k[beyond], E[beyond], ep[beyond]
    T_switch = np.maximum(np.floor(Eb / kb), 1.0)
    if (kb == kb[0]).all() and (Eb == Eb[0]).all():
        # one model's experts (the usual case): the switch-point load depends on the EP size alone, so it is
        # evaluated once per distinct EP size (a handful, where ``beyond`` holds ~10^5 elements) and spread back;
        # the sampler is elementwise, so every element gets the value it would get in the full pass
        eps, inv = np.unique(epb, return_inverse=True)
        like = np.ones_like(eps)
        sw = tuple(v[inv] for v in _pl_sampler_load(T_switch[0] * like, kb[0] * like, Eb[0] * like, eps, a))
    else:
        sw = _pl_sampler_load(T_switch, kb, Eb, epb, a)
    out = []
    for full, part in zip((pairs, touched, heaviest), sw):
        full = np.array(np.broadcast_to(full, T.shape), dtype=np.float64)  # a writable copy of this load
        full[beyond] = np.maximum(full[beyond], part)
        out.append(full)
    return tuple(out)


def moe_cost(num_tokens, hidden, inter, topk, num_experts, moe_tp, moe_ep, fmt, hw, alpha=None, gated=True, p=None, *,
             spread_balanced=False, dispatched=False, routed_tokens=None) -> Cost:
    """One rank's fused MoE time for ``num_tokens`` tokens entering the op (broadcasts).

    Where more than one MoE kernel exists for the format (``moe_path_costs``: the fused FP4 kernel
    beside the CUTLASS grouped path on datacenter Blackwell), the engine runs the faster one, so the
    time (and the work record) is that of the faster path per element: TensorRT-LLM's min-latency
    MoE and the flashinfer trtllm-gen MoE that SGLang and vLLM use on Blackwell are picked for it.

    ``spread_balanced``: balanced routing (``alpha=None``) hands every pair its own expert until all
    are busy, as the calibration benchmark's deterministic balanced router does; the default is
    uniform random routing (a batch of pairs touches ``L·(1 − exp(−pairs/L))`` experts).
    """
    paths = moe_path_costs(num_tokens, hidden, inter, topk, num_experts, moe_tp, moe_ep, fmt, hw, alpha=alpha, gated=gated,
                           p=p, spread_balanced=spread_balanced, dispatched=dispatched, routed_tokens=routed_tokens)
    best = paths["grouped"]
    fused = paths.get("fused")
    if fused is not None:
        pick = fused.time_s < best.time_s  # the engine runs the faster kernel
        label = KERNEL_LABELS["fused"] if np.all(pick) else KERNEL_LABELS["grouped"] if not np.any(pick) else "faster of both"
        best = Cost(**{n: np.where(pick, getattr(fused, n), getattr(best, n))
                       for n in ("time_s", "flops", "mem_bytes", "compute_s", "memory_s")}, kernel=label)
    return best


def moe_path_costs(num_tokens, hidden, inter, topk, num_experts, moe_tp, moe_ep, fmt, hw, alpha=None, gated=True, p=None, *,
                   spread_balanced=False, collector_router=False, timed_kernel=False, dispatched=False,
                   routed_tokens=None) -> dict[str, Cost]:
    """Each MoE kernel's cost for the same work: ``{"grouped": ..., "fused": ...}`` (arguments as ``moe_cost``).

    ``grouped``: routing, permute, CUTLASS grouped expert GEMMs and finalize as separate kernels (every
    GPU and format). ``fused`` (only where ``has_fused_path``): the fused FP4 kernel runs the same
    FLOPs, streams the same expert weights and makes the same token-level passes, but gathers the
    routed activations inside its gate/up GEMM (no permuted copy, no walk over other ranks'
    selections, no per-expert group setup), with its own fixed cost, tensor rate and launch grid
    (``fused_*`` parameters, ``FUSED_TILE_TOKENS``). Calibration fits both on unlabelled rows
    (``kernel_ops.predict_moe_paths``); ``moe_cost`` is what an engine runs, the faster of them.

    ``timed_kernel``: price the grouped kernel the calibration benchmark timed on ``hw``. Otherwise (serving) a
    platform whose engines serve the class with a kernel that builds no per-expert groups
    (``kernels.served_without_group_setup``) pays no setup per held expert.
    """
    f = get_format(fmt)
    cls = moe_class(f, hw)
    q = class_view(resolve_params("moe", hw, p, PARAMS, FAMILY_DEFAULTS), cls)
    # ACHIEVABLE peaks (Hardware.achievable): the efficiencies are fractions of them, as in gemm.gemm_cost;
    # block-scaled FP8 experts run at the block-scaled FP8 maximum where the spec lists one
    rate_dtype = gemm_rate_dtype(f, hw)
    rate = hw.achievable_matmul_flops_per_s("fp8_block" if cls == "fp8_block" and rate_dtype == "fp8" else rate_dtype)
    bw = hw.achievable_hbm_bytes_per_s
    T, H, I, k, E, tp, ep = np.broadcast_arrays(
        *(np.asarray(x, dtype=np.float64) for x in (num_tokens, hidden, inter, topk, num_experts, moe_tp, moe_ep))
    )
    T = np.maximum(T, 0.0)
    disp = np.asarray(dispatched, dtype=bool)
    # tokens whose top-k the rank scans and whose router logits it reads: with all-to-all dispatch only its own (routed
    # before the dispatch), else every token entering the op
    routed = T if routed_tokens is None else np.where(disp, np.asarray(routed_tokens, dtype=np.float64), T)
    local = E / ep  # experts held by this rank
    inter_local = I / tp  # expert width after moe TP slicing
    mean_pairs = T * k / ep  # token-expert pairs per rank, balanced routing
    # experts with at least one token on the rank (uniform-random occupancy, BLIS nEff)
    touched = local * -np.expm1(-mean_pairs / np.maximum(local, 1e-9))
    if spread_balanced:
        touched = np.minimum(local, mean_pairs)
    pairs = mean_pairs
    if alpha is not None:
        skew_pairs, skew_touched, skew_top = _pl_rank_load(T, k, E, ep, alpha)
        pairs = np.maximum(skew_pairs, mean_pairs) * (T > 0)
        touched = skew_touched * (T > 0)  # the sampler's own hit count: a small batch spreads widely
    # at least one expert's weights are read, and at least pairs / T experts (one pair per token each)
    touched = np.maximum(touched, np.minimum(local, np.maximum(1.0, pairs / np.maximum(T, 1.0))))
    up_width = (2.0 if gated else 1.0) * inter_local  # gate and up projections side by side
    pair_frac = q["pair_traffic_fraction"]

    def expert_gemms(qx, pairs=pairs, touched=touched, heavy=None):
        """(c1, m1, b1, c2, m2, b2): compute and memory legs and bytes of the two expert GEMMs at efficiencies ``qx``,
        for ``pairs`` over ``touched`` experts; ``heavy`` = (experts, pairs each) that form a group of their own."""
        kw = dict(rate_flops_per_s=rate, hbm_bytes_per_s=bw, sm_count=hw.sm_count, b_act=f.act_bytes, b_w=f.bytes_per_element, q=qx)
        # gate/up GEMM (SwiGLU fused in its epilogue, quantized output), then down GEMM whose per-pair
        # BF16 output reaches HBM only in the unfused share
        rows = pairs / touched  # mean tokens per touched expert
        c1, m1, _, b1 = grouped_gemm_times(rows, up_width, H, touched, b_out=f.act_bytes, **kw)
        c2, m2, _, b2 = grouped_gemm_times(rows, H, inter_local, touched, b_out=OUT_BYTES * pair_frac, **kw)
        if heavy is None and alpha is not None:  # skewed rank: its heaviest expert is a group of its own
            heavy = (np.minimum(touched, 1.0), skew_top)
        if heavy is not None:
            # the heavy experts and the others share the rank's pairs; they run in one grouped kernel, so their
            # tiles add (the bytes are the same either way)
            n_top = np.minimum(heavy[0], touched)
            n_rest = np.maximum(touched - n_top, 0.0)
            top = np.where(n_rest > 0, np.clip(heavy[1], 0.0, pairs / np.maximum(n_top, 1e-9)), pairs / np.maximum(n_top, 1e-9))
            rest_rows = np.where(n_rest > 0, np.maximum(pairs - n_top * top, 0.0) / np.maximum(n_rest, 1e-9), 0.0)
            c1 = (grouped_gemm_times(top, up_width, H, n_top, b_out=f.act_bytes, **kw)[0]
                  + grouped_gemm_times(rest_rows, up_width, H, n_rest, b_out=f.act_bytes, **kw)[0])
            c2 = (grouped_gemm_times(top, H, inter_local, n_top, b_out=OUT_BYTES * pair_frac, **kw)[0]
                  + grouped_gemm_times(rest_rows, H, inter_local, n_rest, b_out=OUT_BYTES * pair_frac, **kw)[0])
        return c1, m1, b1, c2, m2, b2

    c1, m1, b1, c2, m2, b2 = expert_gemms(q)
    # token-level passes: quantize the input (per-tensor FP8 reads it twice), write the combined
    # output, router logits; pair-level: permuted input copy and finalize read (unfused share)
    quant_reads = ACT_QUANT_READS.get(cls, 1.0)
    # distinct tokens with a local expert: T·(1 − (1 − 1/EP)^k) under uniform routing (modeling-notes.md
    # §3), scaled up with the busiest rank's excess pairs
    tokens_rank = np.minimum(T * -np.expm1(k * np.log1p(-1.0 / np.maximum(ep, 1.0 + 1e-9))) * pairs / np.maximum(mean_pairs, 1e-30), T)
    tokens_rank = np.where(ep > 1, tokens_rank, T)
    # tokens the token-level passes touch: the local ones plus a share of those routed elsewhere
    # (an all-to-all dispatch delivers only the tokens with a local expert: none routed elsewhere)
    tokens_pass = tokens_rank + q["all_token_fraction"] * (T - tokens_rank) * ~disp
    # tokens whose selections the rank's kernels walk: those it received after a dispatch, else all
    seen = np.where(disp, tokens_rank, T)
    token_bytes = tokens_pass * H * (quant_reads * ACT_SOURCE_BYTES + f.act_bytes + OUT_BYTES) + routed * E * ACT_SOURCE_BYTES
    # pair-level bytes: unfused share of the local pairs' round trips, plus the share of every one of
    # the T·k selections (local or not) that the routing / expand / finalize walk moves
    pair_rows = pair_frac * pairs + q["selection_traffic_fraction"] * seen * k
    aux_bytes = token_bytes + pair_rows * H * (f.act_bytes + OUT_BYTES)
    aux_s = aux_bytes / (q["eta_aux"] * bw)  # HBM time of the token- and pair-level passes
    compute_s = c1 + c2
    memory_s = m1 + m2 + aux_s
    gemm_s = soft_max(c1, m1, q["roofline_sharpness"]) + soft_max(c2, m2, q["roofline_sharpness"])
    # router top-k over every token entering the op (local experts or not)
    routing_s = routed * k * E * q["topk_scan_s"]
    # per-group setup of every expert the rank holds, unless its engines serve the class without grouped problem lists
    held_s = local * q["local_expert_s"]
    if not timed_kernel and kernels.served_without_group_setup("moe", cls, hw):
        held_s = np.zeros_like(held_s)
    # fixed cost, per-group setup of the experts with tokens and of the held ones, GEMMs, token passes, router
    time_s = q["launch_s"] + touched * q["expert_overhead_s"] + held_s + gemm_s + aux_s + routing_s
    # FLOPs reported are the rank's share of the useful work (balanced routing): the time above is
    # set by the busiest rank, but skew does not create work, it only moves it
    useful_flops = 2.0 * mean_pairs * (up_width * H + H * inter_local)
    fused_op = _fused_op(f, hw, gated, E)  # hardware/kernels.yaml op of the fused kernel, or None
    out = {"grouped": Cost(time_s=time_s, flops=useful_flops, mem_bytes=b1 + b2 + aux_bytes, compute_s=compute_s, memory_s=memory_s,
                           kernel=KERNEL_LABELS["grouped"] if fused_op is not None else "")}
    if fused_op is not None:
        # same tiles, FLOPs and weight bytes; the tensor rate of the fused kernel's GEMMs
        eta_fused = np.minimum(q["eta_compute"] * q["fused_compute_gain"], 1.0)
        f_pairs = pairs
        if collector_router and alpha is None:
            # the benchmark's balanced rows reach this kernel through its grouped router (COLLECTOR_N_GROUP)
            f_pairs, f_touched, n_heavy, heavy_pairs = collector_grouped_rank_load(T, k, E, ep)
            f_touched = np.maximum(f_touched, np.minimum(local, 1.0))
            fc1, fm1, _, fc2, fm2, _ = expert_gemms(dict(q, eta_compute=eta_fused), f_pairs, f_touched, (n_heavy, heavy_pairs))
        else:
            fc1, fm1, _, fc2, fm2, _ = expert_gemms(dict(q, eta_compute=eta_fused))
        # token-level passes as above; per pair only the down-GEMM output the finalize reads (unfused
        # share): the gate/up GEMM gathers routed rows itself, so no permuted copy and no selection walk
        f_aux_bytes = token_bytes + pair_frac * f_pairs * H * OUT_BYTES
        f_aux_s = f_aux_bytes / (q["eta_aux"] * bw)
        f_gemm_s = soft_max(fc1, fm1, q["roofline_sharpness"]) + soft_max(fc2, fm2, q["roofline_sharpness"])
        # launch grid of both GEMMs, sized for every selection (FUSED_TILE_TOKENS); its empty CTAs cost
        # SM time even when few selections are local (expert parallelism)
        tile_t = np.clip(T * k / E, *FUSED_TILE_TOKENS)
        grid = (seen * k + local * (tile_t - 1.0)) / tile_t * (np.ceil(up_width / q["tile_n"]) + np.ceil(H / q["tile_n"]))
        grid_s = grid / hw.sm_count * q["fused_cta_s"]
        f_time_s = q["fused_launch_fraction"] * q["launch_s"] + f_gemm_s + f_aux_s + routing_s + grid_s
        # models beyond the fused kernel's router limit run the grouped path only (never picked: inf)
        f_time_s = np.where(E <= kernels.max_experts(fused_op, hw), f_time_s, np.inf)
        if kernels.sole_moe_kernel(fused_op, hw):  # no grouped kernel beside it for this format where it runs: never picked
            out["grouped"] = replace(out["grouped"], time_s=np.where(np.isfinite(f_time_s), np.inf, time_s))
        out["fused"] = Cost(time_s=f_time_s, flops=useful_flops, mem_bytes=b1 + b2 + f_aux_bytes, compute_s=fc1 + fc2,
                            memory_s=fm1 + fm2 + f_aux_s, kernel=KERNEL_LABELS["fused"])
    return out

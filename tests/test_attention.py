"""Softmax attention cost: hand-derived work, physical invariants, calibration fit quality."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront import efficiency, kernels
from simfront.attention import (
    CALIBRATION_OPS,
    FP8_GROUPED_MIN_HEAD_DIM,
    MAX_SHARED_GROUP,
    attention_decode_cost,
    attention_prefill_cost,
    causal_pairs,
    decode_launches,
    soft_max,
)
from simfront.hardware import get_hardware
from kernel_data import KERNEL_DIR, check_registry_contract, sample_ape, more_hbm



H100 = get_hardware("h100_sxm")
B200 = get_hardware("b200_sxm")
MI300X = get_hardware("mi300x")  # cdna3: no fitted block, falls back to hopper
GPUS = [H100, B200, MI300X]
DATA = KERNEL_DIR
FAST = settings(max_examples=60, deadline=None)


# ------------------------------------------------------------------ work formulas (hand-derived)


def test_causal_pairs_hand_values():
    # s=4, no prefix: 1+2+3+4 = 10 pairs; prefix 3: each of the 4 queries also sees 3 cached keys -> 10 + 12
    assert causal_pairs(4) == 10
    assert causal_pairs(4, 3) == 22
    # window 2: keys per query min(i+1, 2) = 1, 2, 2, 2
    assert causal_pairs(4, 0, 2) == 7
    # window 2 with prefix 3: positions 4..7 all see 2 keys
    assert causal_pairs(4, 3, 2) == 8


@given(s=st.integers(1, 60), p=st.integers(0, 60), w=st.integers(0, 80))
@FAST
def test_causal_pairs_matches_brute_force(s, p, w):
    brute = sum(min(p + i + 1, w) if w > 0 else p + i + 1 for i in range(s))
    assert causal_pairs(s, p, w) == brute


def test_prefill_flops_convention():
    # F = 2 * n_h * (d_qk + d_v) * pairs * batch  (QK^T + PV, 2 flops per multiply-add)
    c = attention_prefill_cost(batch=3, seq_len=1000, n_heads=8, n_kv_heads=2, head_dim=128, window=0, hw=H100)
    assert float(c.flops) == pytest.approx(2 * 8 * (128 + 128) * (1000 * 1001 / 2) * 3)
    # separate value head dim and a cached prefix of 500 tokens
    c = attention_prefill_cost(1, 100, 4, 4, 192, 0, H100, prefix_len=500, head_dim_v=128)
    assert float(c.flops) == pytest.approx(2 * 4 * (192 + 128) * (100 * 500 + 100 * 101 / 2))


def test_decode_flops_and_kv_bytes():
    # F = 4 * b * q * n_h * L * d; KV bytes = b * n_kv * L * 2 (K and V) * d * kv_bytes; Q/O = b*q*n_h*d*2*2
    c = attention_decode_cost(batch=2, kv_len=1000, n_heads=8, n_kv_heads=2, head_dim=128, window=0, kv_bytes=2, hw=H100)
    assert float(c.flops) == pytest.approx(4 * 2 * 8 * 1000 * 128)
    assert float(c.mem_bytes) == pytest.approx(2 * 2 * 1000 * 2 * 128 * 2 + 2 * 8 * 128 * 2 * 2)
    # a 256-token window reads only 256 tokens
    w = attention_decode_cost(2, 1000, 8, 2, 128, 256, 2, H100)
    assert float(w.flops) == pytest.approx(4 * 2 * 8 * 256 * 128)


def test_gqa_kv_read_shared_by_group():
    # doubling query heads with the same KV heads adds only Q/O bytes, not KV bytes
    a = attention_decode_cost(4, 8192, 8, 8, 128, 0, 2, H100)
    b = attention_decode_cost(4, 8192, 32, 8, 128, 0, 2, H100)
    kv = 4 * 8 * 8192 * 2 * 128 * 2
    assert float(a.mem_bytes) - kv == pytest.approx(4 * 8 * 128 * 4)
    assert float(b.mem_bytes) - kv == pytest.approx(4 * 32 * 128 * 4)
    # groups above MAX_SHARED_GROUP run one CTA per query head: HBM still streams the KV once
    # (the re-reads hit L2) but each query head's element work is charged on the SMs
    big = attention_decode_cost(16, 8192, 2 * MAX_SHARED_GROUP, 1, 128, 0, 2, H100)
    small = attention_decode_cost(16, 8192, MAX_SHARED_GROUP, 1, 128, 0, 2, H100)
    assert float(big.mem_bytes) - float(small.mem_bytes) == pytest.approx(16 * MAX_SHARED_GROUP * 128 * 4)
    assert float(big.time_s) > 1.5 * float(small.time_s)
    assert float(big.compute_s) > float(big.memory_s)


def test_hopper_window_walks_full_context_with_16bit_cache():
    # 16-bit windowed decode on Hopper grows with the full context (split CTAs outside the window)
    # but stays below full attention; an FP8 cache and Blackwell honour the window
    t = lambda kv, w, kvb, hw: float(attention_decode_cost(16, kv, 16, 2, 128, w, kvb, hw).time_s)
    assert t(32768, 128, 2, H100) > 1.3 * t(128, 128, 2, H100)
    assert t(32768, 128, 2, H100) <= t(32768, 0, 2, H100)
    assert t(32768, 128, 1, H100) == pytest.approx(t(128, 128, 1, H100), rel=1e-6)
    assert t(32768, 128, 2, B200) < 1.05 * t(128, 128, 2, B200)


def test_trtllm_gen_window_grid_is_sized_by_the_window():
    # trtllm-gen sizes its split-KV grid by min(kv_len, window + tile - 1) (fmhaKernels.h computeNumCtas): on
    # B200 a 16-bit windowed decode costs what the window alone costs, whatever the context; Hopper's XQA grid
    # is sized by the whole context (test above). Same parameters on both GPUs.
    from simfront.attention import _params

    p = _params(None, H100)
    t = lambda kv, w, hw: float(attention_decode_cost(16, kv, 16, 2, 128, w, 2, hw, p=p).time_s)
    assert t(131072, 128, B200) == pytest.approx(t(128, 128, B200), rel=1e-9)
    assert t(131072, 128, H100) > 1.3 * t(128, 128, H100)


def test_decode_launch_counts_are_engine_source_data():
    # hardware/kernels.yaml: trtllm-gen (sm_100/103) and XQA mma.sync run a separate RoPE / KV-append kernel
    # first (2 launches); Hopper's FP8 GMMA XQA kernel fuses it (1); masked MHA fuses everything (1).
    for op, n in (("attention_decode_tma_grouped", 2), ("attention_decode_fp8_grouped", 1), ("attention_decode_mmha", 1)):
        native = kernels.table()[op].native
        assert all(k.launches and k.launches_source for k in native), op
    assert kernels.launches("attention_decode_tma_grouped", B200) == 2
    assert kernels.launches("attention_decode_tma_grouped", H100) == 2  # the xqa-mma fallback
    assert kernels.launches("attention_decode_fp8_grouped", H100) == 1
    xqa = kernels.fallback("attention_decode_tma_grouped")
    assert xqa["launches_source"] and xqa["small_grid_history_tokens_per_cta"] == 128
    assert xqa["small_grid_min_ctas_per_sm"] == pytest.approx(1 / 4)  # kEnableMinBlockFactor = 4
    assert kernels.fallback("attention_decode_mmha")["estimate"] is True  # AMD: no TensorRT-LLM, said so


def test_decode_launches_follow_the_dispatch_of_each_platform():
    no, yes = np.array(False), np.array(True)
    n = lambda b, kv, nkv, hw, per_head=no, fused=no: float(decode_launches(b, kv, nkv, per_head, fused, hw))
    # Hopper: XQA only where request x KV head x history splits reach SMs / 4; smaller grids run masked MHA
    assert n(1, 16, 8, H100) == 1  # 8 CTAs < 132 / 4
    assert n(4, 1024, 8, H100) == 2  # 4 x 8 x 8 = 256 CTAs
    assert n(1, 4096, 1, H100) == 1  # 32 history splits < 33
    assert n(1, 4224, 1, H100) == 2  # 33 splits
    assert n(64, 4096, 8, H100, fused=yes) == 1  # FP8 GMMA kernel applies RoPE itself
    # B200: trtllm-gen for every grid, after the preprocessing kernel
    assert n(1, 16, 8, B200) == 2 and n(64, 4096, 8, B200) == 2
    # oversized groups run masked MHA on both
    assert n(64, 4096, 1, H100, per_head=yes) == 1 and n(64, 4096, 1, B200, per_head=yes) == 1
    # arrays broadcast
    assert decode_launches(np.array([1, 64]), 16, 8, no, no, H100).tolist() == [1.0, 2.0]


def test_small_grid_b200_pays_one_more_launch_than_h100(monkeypatch):
    # Same fitted parameters on H100 and B200: a launch-bound 16-bit GQA step (masked MHA on Hopper, preprocessing
    # + trtllm-gen on B200) pays exactly one more launch on B200 at the measured per-launch cost.
    from simfront.attention import _params

    p = _params(None, H100)
    t = lambda hw: float(attention_decode_cost(1, 16, 32, 8, 128, 0, 2, hw, p=p).time_s)
    with_launches = t(B200) - t(H100)
    real = kernels.launch_cost()
    monkeypatch.setattr(kernels, "launch_cost", lambda: real.model_copy(update={"per_launch_s": 1e-30}))
    without = t(B200) - t(H100)
    assert with_launches - without == pytest.approx(real.per_launch_s, rel=1e-6)


def test_hopper_window_walks_in_per_head_kernels_with_fp8_cache():
    # per-head (MHA) kernels launch the whole-context split grid whatever the cache format, so an
    # FP8 MHA window grows with the context; a grouped FP8 kernel honours the window (test above)
    t = lambda kv, w, kvb: float(attention_decode_cost(16, kv, 16, 16, 64, w, kvb, H100).time_s)
    assert t(32768, 128, 1) > 1.3 * t(128, 128, 1)
    assert t(32768, 128, 1) <= t(32768, 0, 1)
    assert t(32768, 128, 1) <= t(32768, 128, 2)


def test_hopper_fp8_grouped_fast_launch_needs_wide_heads():
    # tiny GQA decode is launch-bound: FP8 grouped kernels launch cheaper for head_dim >= 128 only
    t = lambda d, kvb, hw=H100: float(attention_decode_cost(1, 16, 8, 2, d, 0, kvb, hw).time_s)
    assert FP8_GROUPED_MIN_HEAD_DIM == 128
    for d in (128, 256):
        assert t(d, 1) < 0.8 * t(d, 2)
    assert t(64, 1) > 0.95 * t(64, 2)
    for d in (64, 128, 256):  # no such kernel split on Blackwell
        assert t(d, 1, B200) == pytest.approx(t(d, 2, B200), rel=0.02)


def test_hopper_fp8_grouped_cta_cost_scales_with_head_dim():
    # many (request, KV head) CTAs over a tiny context: the FP8 grouped kernels' per-CTA work
    # (Q conversion, head_dim-wide tile set-up) grows with head_dim, the 16-bit lump barely does
    t = lambda d, kvb: float(attention_decode_cost(2048, 2, 8, 2, d, 0, kvb, H100).time_s)
    assert t(256, 1) > 2.5 * t(64, 1)
    assert t(256, 2) < 1.6 * t(64, 2)
    assert t(256, 1) <= t(256, 2)


def test_grouped_kernels_read_at_least_one_kv_tile():
    tile = efficiency.params("attention", "hopper")["decode_grouped_kv_tile_tokens"]
    assert 16 <= tile <= 256
    gqa = lambda kv: float(attention_decode_cost(4, kv, 8, 2, 128, 0, 2, H100).mem_bytes)
    mha = lambda kv: float(attention_decode_cost(4, kv, 2, 2, 128, 0, 2, H100).mem_bytes)
    assert gqa(1) == pytest.approx(gqa(int(tile)))  # a short context still reads a whole tile
    assert gqa(1) >= 4 * 2 * int(tile) * 2 * 128 * 2
    assert mha(1) < mha(16) < mha(int(tile))  # per-head kernels read only the tokens present


def test_fp8_per_head_kernels_need_more_ctas_to_stream():
    # per-head kernels keep half the bytes in flight with an FP8 cache, so with few CTAs FP8 saves
    # much less than half of the streaming time; grouped kernels halve it
    mem = lambda nh, nkv, kvb: float(attention_decode_cost(2, 4096, nh, nkv, 128, 0, kvb, H100).memory_s)
    assert mem(4, 4, 1) > 0.7 * mem(4, 4, 2)
    assert mem(16, 4, 1) < 0.6 * mem(16, 4, 2)


def test_speculative_verify_reads_kv_once():
    one = attention_decode_cost(32, 32768, 32, 8, 128, 0, 2, H100, q_tokens=1)
    four = attention_decode_cost(32, 32768, 32, 8, 128, 0, 2, H100, q_tokens=4)
    assert float(four.flops) == pytest.approx(4 * float(one.flops))
    assert float(one.time_s) <= float(four.time_s) < 2 * float(one.time_s)


def test_soft_max_limits():
    assert soft_max(3.0, 4.0, 2.0) == pytest.approx(5.0)
    assert soft_max(3.0, 4.0, 1.0) == pytest.approx(7.0)
    assert float(soft_max(0.0, 0.0, 2.0)) == 0.0


def test_decode_is_memory_bound_and_long_context_near_bandwidth():
    c = attention_decode_cost(64, 32768, 64, 8, 128, 0, 2, H100)
    assert c.bound == "memory"
    achieved = float(c.mem_bytes / c.time_s) / H100.hbm_bandwidth_bytes_per_s
    assert 0.6 < achieved <= 1.0


def test_prefill_long_sequence_is_compute_bound_below_peak():
    c = attention_prefill_cost(1, 16384, 64, 8, 128, 0, H100)
    assert c.bound == "compute"
    mfu = float(c.flops / c.time_s) / H100.peak_flops_per_s["bf16"]
    assert 0.3 < mfu < 0.8  # FA3-class: ~50-75% of BF16 peak (modeling-notes.md §1.2)


# ------------------------------------------------------------------ invariants (hypothesis)

heads = st.sampled_from([(1, 1), (8, 1), (8, 8), (32, 8), (64, 8), (16, 2), (64, 1), (128, 2)])
dims = st.sampled_from([64, 128, 256])
gpus = st.sampled_from(GPUS)


@given(b=st.integers(1, 2048), kv=st.integers(1, 200_000), h=heads, d=dims, w=st.sampled_from([0, 128, 4096]),
       kvb=st.sampled_from([1, 2]), q=st.integers(1, 4), hw=gpus, f=st.floats(1.0, 4.0))
@FAST
def test_decode_monotone_in_kv_len_and_batch(b, kv, h, d, w, kvb, q, hw, f):
    t = float(attention_decode_cost(b, kv, h[0], h[1], d, w, kvb, hw, q_tokens=q).time_s)
    assert np.isfinite(t) and t > 0
    assert float(attention_decode_cost(b, int(kv * f) + 1, h[0], h[1], d, w, kvb, hw, q_tokens=q).time_s) >= t * (1 - 1e-12)
    assert float(attention_decode_cost(int(b * f) + 1, kv, h[0], h[1], d, w, kvb, hw, q_tokens=q).time_s) >= t * (1 - 1e-12)


@given(b=st.integers(1, 2048), kv=st.integers(1, 200_000), h=heads, d=dims, w=st.sampled_from([0, 128, 4096]),
       hw=gpus, q=st.integers(1, 4))
@FAST
def test_decode_window_fp8_and_bandwidth(b, kv, h, d, w, hw, q):
    full16 = attention_decode_cost(b, kv, h[0], h[1], d, 0, 2, hw, q_tokens=q)
    win16 = attention_decode_cost(b, kv, h[0], h[1], d, w, 2, hw, q_tokens=q)
    full8 = attention_decode_cost(b, kv, h[0], h[1], d, 0, 1, hw, q_tokens=q)
    assert float(win16.time_s) <= float(full16.time_s) * (1 + 1e-12)  # a window never costs more
    assert float(full8.time_s) <= float(full16.time_s) * (1 + 1e-12)  # FP8 KV never slower
    faster = more_hbm(hw, 2.0)
    assert float(attention_decode_cost(b, kv, h[0], h[1], d, w, 2, faster, q_tokens=q).time_s) <= float(win16.time_s) * (1 + 1e-12)


@given(b=st.integers(1, 256), s=st.integers(1, 32768), p=st.integers(0, 65536), h=heads, d=dims,
       w=st.sampled_from([0, 128, 1024, 8192]), kvb=st.sampled_from([1, 2]), hw=gpus, f=st.floats(1.0, 4.0))
@FAST
def test_prefill_monotone_window_and_finite(b, s, p, h, d, w, kvb, hw, f):
    c = attention_prefill_cost(b, s, h[0], h[1], d, w, hw, prefix_len=p, kv_bytes=kvb)
    t = float(c.time_s)
    assert np.isfinite(t) and t > 0 and float(c.flops) > 0 and float(c.mem_bytes) > 0
    assert float(attention_prefill_cost(b, int(s * f) + 1, h[0], h[1], d, w, hw, prefix_len=p, kv_bytes=kvb).time_s) >= t * (1 - 1e-12)
    assert float(attention_prefill_cost(int(b * f) + 1, s, h[0], h[1], d, w, hw, prefix_len=p, kv_bytes=kvb).time_s) >= t * (1 - 1e-12)
    full = attention_prefill_cost(b, s, h[0], h[1], d, 0, hw, prefix_len=p, kv_bytes=kvb)
    assert t <= float(full.time_s) * (1 + 1e-12)


def test_arrays_broadcast():
    c = attention_decode_cost(np.array([1, 8, 64]), np.array([[128], [8192]]), 32, 8, 128, 0, 2, H100)
    assert c.time_s.shape == (2, 3)
    assert np.all(np.diff(c.time_s, axis=1) >= 0)


# ------------------------------------------------------------------ calibration contract


def test_calibration_ops_contract():
    check_registry_contract(CALIBRATION_OPS, "attention")



@pytest.mark.skipif(not DATA.exists(), reason="calibration kernels not available")
@pytest.mark.parametrize("op,limit", [("attention_decode", 0.25), ("attention_prefill", 0.20)])
@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm"])
def test_loose_accuracy_on_calibration_rows(op, limit, gpu):
    pred, ape = sample_ape(CALIBRATION_OPS[op], "attention", gpu, op, 48, seed=7)
    assert np.all(np.isfinite(pred)) and ape.mean() < limit


@pytest.mark.parametrize("hw", GPUS, ids=lambda h: h.id)
def test_decode_monotone_dense_sweep(hw):
    # a dense kv_len sweep catches narrow non-monotone regions random sampling can miss
    kv = np.unique(np.geomspace(1, 262144, 600).astype(int))[:, None]
    for b in (1, 3, 64):
        for nh, nkv in ((32, 1), (64, 8), (8, 8), (128, 2)):
            for kvb in (1, 2):
                for q in (1, 4):
                    t = attention_decode_cost(b, kv, nh, nkv, 128, np.array([0, 1024]), kvb, hw, q_tokens=q).time_s
                    assert np.all(np.diff(t, axis=0) >= -1e-15), (b, nh, nkv, kvb, q)


@pytest.mark.parametrize("hw", GPUS, ids=lambda h: h.id)
def test_prefill_monotone_dense_sweep(hw):
    s = np.unique(np.geomspace(1, 65536, 400).astype(int))[:, None]
    for b in (1, 16):
        for nh, nkv in ((4, 1), (64, 8)):
            for kvb in (1, 2):
                t = attention_prefill_cost(b, s, nh, nkv, 128, np.array([0, 128, 4096]), hw, prefix_len=1000, kv_bytes=kvb).time_s
                assert np.all(np.diff(t, axis=0) >= -1e-15), (b, nh, kvb)

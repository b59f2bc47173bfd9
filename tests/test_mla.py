"""MLA / DSA cost: hand-derived work, invariants, calibration fit quality."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront.hardware import get_hardware
from simfront.mla import CALIBRATION_OPS, MLA_HEAD_TILE, dsa_indexer_cost, mla_decode_cost, mla_prefill_cost
from kernel_data import KERNEL_DIR, check_registry_contract, sample_ape, more_hbm



H100 = get_hardware("h100_sxm")
B200 = get_hardware("b200_sxm")
MI355X = get_hardware("mi355x")  # cdna4: falls back to blackwell
GPUS = [H100, B200, MI355X]
DATA = KERNEL_DIR
FAST = settings(max_examples=60, deadline=None)


def test_decode_flops_and_bytes_deepseek_dims():
    # absorbed decode: F = 2 * b * q * n_h * L * (r + rope + r) = 2*b*q*n_h*L*1088
    # bytes: latent rows b*L*576*kv_bytes (shared by heads) + per query row (576 + 512) * 2
    c = mla_decode_cost(batch=2, kv_len=1000, n_heads=16, kv_bytes=2, hw=H100)
    assert float(c.flops) == pytest.approx(2 * 2 * 16 * 1000 * 1088)
    assert float(c.mem_bytes) == pytest.approx(2 * 1000 * 576 * 2 + 2 * 16 * 1088 * 2)
    # more heads: FLOPs scale, latent KV bytes do not
    c128 = mla_decode_cost(2, 1000, 128, 2, H100)
    assert float(c128.flops) == pytest.approx(8 * float(c.flops))
    assert float(c128.mem_bytes) - 2 * 128 * 1088 * 2 == pytest.approx(2 * 1000 * 576 * 2)


def test_decode_bound_flips_with_local_heads():
    # TP8 (16 heads/GPU) stays memory-bound; all 128 heads x 2 tokens (DP attention + MTP) is compute-bound
    # (modeling-notes.md §1.4, FlashMLA: compute-bound once heads x query tokens >= ~128)
    assert mla_decode_cost(64, 32768, 16, 2, H100).bound == "memory"
    assert mla_decode_cost(64, 32768, 128, 2, H100, q_tokens=2).bound == "compute"
    # FLOPs of fewer rows than one tile are padded to the tile in time, not in reported work
    few = mla_decode_cost(8, 65536, MLA_HEAD_TILE // 4, 2, H100)
    assert float(few.flops) == pytest.approx(2 * 8 * (MLA_HEAD_TILE // 4) * 65536 * 1088)


def test_dsa_decode_cheaper_at_long_context_equal_when_short():
    dense = mla_decode_cost(64, 65536, 128, 1, H100)
    sparse = mla_decode_cost(64, 65536, 128, 1, H100, topk=2048)
    assert float(sparse.time_s) < 0.2 * float(dense.time_s)
    short = mla_decode_cost(64, 1024, 128, 1, H100)
    short_sparse = mla_decode_cost(64, 1024, 128, 1, H100, topk=2048)
    assert float(short_sparse.time_s) == pytest.approx(float(short.time_s))


def test_prefill_flops_non_absorbed_and_glm5_dims():
    # F = 2 * n_h * (d_qk + d_v) * pairs * batch; DeepSeek d_qk = 128 + 64, d_v = 128
    c = mla_prefill_cost(batch=1, seq_len=1000, n_heads=16, hw=H100)
    assert float(c.flops) == pytest.approx(2 * 16 * (192 + 128) * 1000 * 1001 / 2)
    # GLM-5: nope 192, rope 64, v 256 (specs.md B.3)
    g = mla_prefill_cost(1, 1000, 16, H100, qk_nope_dim=192, v_head_dim=256)
    assert float(g.flops) == pytest.approx(2 * 16 * (256 + 256) * 1000 * 1001 / 2)
    # with a cached prefix of 4000 tokens
    p = mla_prefill_cost(1, 1000, 16, H100, prefix_len=4000)
    assert float(p.flops) == pytest.approx(2 * 16 * 320 * (1000 * 4000 + 1000 * 1001 / 2))


def test_dsa_prefill_flops_ramp_then_saturate():
    # sparse prefill: F = 2 * n_h * (576 + 512) * sum_i min(prefix + i + 1, topk)  (modeling-notes.md §1.6)
    c = mla_prefill_cost(1, 3000, 128, H100, topk=2048)
    pairs = 2048 * 2049 / 2 + (3000 - 2048) * 2048
    assert float(c.flops) == pytest.approx(2 * 128 * 1088 * pairs)
    dense = mla_prefill_cost(1, 16384, 128, H100, prefix_len=65536)
    sparse = mla_prefill_cost(1, 16384, 128, H100, prefix_len=65536, topk=2048)
    assert float(sparse.time_s) < float(dense.time_s)


def test_indexer_work():
    # F = 2 * b * q * n_idx * d_idx * kv at FP8; key cache kv * (d_idx + 4) bytes + FP32 logits written and read
    c = dsa_indexer_cost(batch=4, q_len=1, kv_len=10000, index_n_heads=64, index_head_dim=128, hw=H100)
    assert float(c.flops) == pytest.approx(2 * 4 * 64 * 128 * 10000)
    assert float(c.mem_bytes) == pytest.approx(4 * 10000 * 132 + 2 * 4 * 10000 * 4)
    assert c.bound == "memory"  # decode indexer streams its key cache
    assert dsa_indexer_cost(1, 8192, 16384, 64, 128, H100).bound == "compute"


kvs = st.integers(1, 200_000)
hs = st.sampled_from([1, 2, 8, 16, 32, 64, 96, 128])


@given(b=st.integers(1, 1024), kv=kvs, h=hs, q=st.integers(1, 4), topk=st.sampled_from([None, 2048]),
       hw=st.sampled_from(GPUS), f=st.floats(1.0, 4.0))
@FAST
def test_decode_invariants(b, kv, h, q, topk, hw, f):
    c16 = mla_decode_cost(b, kv, h, 2, hw, q_tokens=q, topk=topk)
    t = float(c16.time_s)
    assert np.isfinite(t) and t > 0
    assert float(mla_decode_cost(b, int(kv * f) + 1, h, 2, hw, q_tokens=q, topk=topk).time_s) >= t * (1 - 1e-12)
    assert float(mla_decode_cost(int(b * f) + 1, kv, h, 2, hw, q_tokens=q, topk=topk).time_s) >= t * (1 - 1e-12)
    assert float(mla_decode_cost(b, kv, h, 1, hw, q_tokens=q, topk=topk).time_s) <= t * (1 + 1e-12)  # FP8 never slower
    assert float(mla_decode_cost(b, kv, h, 2, hw, q_tokens=q, topk=2048).time_s) <= float(mla_decode_cost(b, kv, h, 2, hw, q_tokens=q).time_s) * (1 + 1e-12)
    faster = more_hbm(hw, 2.0)
    assert float(mla_decode_cost(b, kv, h, 2, faster, q_tokens=q, topk=topk).time_s) <= t * (1 + 1e-12)


@given(b=st.integers(1, 128), s=st.integers(1, 32768), p=st.integers(0, 65536), h=hs, kvb=st.sampled_from([1, 2]),
       topk=st.sampled_from([None, 2048]), hw=st.sampled_from(GPUS), f=st.floats(1.0, 4.0))
@FAST
def test_prefill_and_indexer_invariants(b, s, p, h, kvb, topk, hw, f):
    c = mla_prefill_cost(b, s, h, hw, prefix_len=p, kv_bytes=kvb, topk=topk)
    t = float(c.time_s)
    assert np.isfinite(t) and t > 0 and float(c.mem_bytes) > 0
    assert float(mla_prefill_cost(b, int(s * f) + 1, h, hw, prefix_len=p, kv_bytes=kvb, topk=topk).time_s) >= t * (1 - 1e-12)
    assert float(mla_prefill_cost(int(b * f) + 1, s, h, hw, prefix_len=p, kv_bytes=kvb, topk=topk).time_s) >= t * (1 - 1e-12)
    i = dsa_indexer_cost(b, s, p + s, 64, 128, hw)
    assert np.isfinite(float(i.time_s)) and float(i.time_s) > 0
    assert float(dsa_indexer_cost(b, s, int((p + s) * f) + 1, 64, 128, hw).time_s) >= float(i.time_s) * (1 - 1e-12)


def test_calibration_ops_contract():
    check_registry_contract(CALIBRATION_OPS, "mla")



@pytest.mark.skipif(not DATA.exists(), reason="calibration kernels not available")
@pytest.mark.parametrize("op,limit", [("mla_decode", 0.20), ("mla_prefill", 0.20)])
@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm"])
def test_loose_accuracy_on_calibration_rows(op, limit, gpu):
    pred, ape = sample_ape(CALIBRATION_OPS[op], "mla", gpu, op, 48, seed=11)
    assert np.all(np.isfinite(pred)) and ape.mean() < limit


@pytest.mark.parametrize("hw", GPUS, ids=lambda h: h.id)
def test_decode_and_prefill_monotone_dense_sweep(hw):
    kv = np.unique(np.geomspace(1, 262144, 600).astype(int))[:, None]
    for b in (1, 3, 64):
        for h in (1, 16, 128):
            for kvb in (1, 2):
                for q in (1, 2):
                    t = mla_decode_cost(b, kv, h, kvb, hw, q_tokens=q).time_s
                    assert np.all(np.diff(t, axis=0) >= -1e-15), (b, h, kvb, q)
    s = np.unique(np.geomspace(1, 65536, 400).astype(int))
    for topk in (None, 2048):
        t = mla_prefill_cost(2, s, 16, hw, prefix_len=500, topk=topk).time_s
        assert np.all(np.diff(t) >= -1e-15)


def test_decode_streaming_needs_more_ctas_on_a_gpu_with_more_bandwidth():
    """Occupancy from per-CTA streaming rate: at one CTA count, a GPU with twice the HBM bandwidth reaches
    a smaller share of it, so a few long requests gain less than 2x; many requests gain the full 2x."""
    from simfront.attention import _stream_occupancy

    assert float(_stream_occupancy(10, 1e11, 1e12)) == pytest.approx(0.5)
    assert float(_stream_occupancy(20, 1e11, 2e12)) == pytest.approx(0.5)
    fast = more_hbm(H100, 2.0)
    few = dict(batch=1, kv_len=65536, n_heads=16, kv_bytes=2)
    many = dict(batch=512, kv_len=65536, n_heads=16, kv_bytes=2)
    # the streaming leg (the one occupancy acts on)
    gain_few = float(mla_decode_cost(**few, hw=H100).memory_s / mla_decode_cost(**few, hw=fast).memory_s)
    gain_many = float(mla_decode_cost(**many, hw=H100).memory_s / mla_decode_cost(**many, hw=fast).memory_s)
    assert gain_few < gain_many
    assert gain_many == pytest.approx(2.0, rel=0.1)

"""Fused-MoE routing and kernel-class details (simfront/moe.py, simfront/kernel_ops.py MoE rows)."""

from __future__ import annotations

import numpy as np
import pytest

from simfront.hardware import get_hardware
from simfront.kernel_ops import NONGATED_MOE_SHAPES, OPS, moe_gated, op_params, predict_moe
from simfront.moe import moe_cost, moe_path_costs, power_law_rank_load


def _rows(**cols):
    n = max(len(np.atleast_1d(v)) for v in cols.values())
    return {k: np.array(np.broadcast_to(np.asarray(v), (n,))) for k, v in cols.items()}


def test_nemotron_expert_shapes_are_not_gated_and_a_gated_column_wins():
    cols = _rows(hidden_size=[2688.0, 7168.0, 8192.0], inter_size=[1856.0, 2048.0, 5120.0],
                 num_experts=[128.0, 256.0, 512.0], topk=[6.0, 8.0, 22.0])
    assert moe_gated(cols).tolist() == [False, True, False]
    assert (2688, 1856, 128, 6) in NONGATED_MOE_SHAPES
    cols["gated"] = np.array(["true", "true", "false"])
    assert moe_gated(cols).tolist() == [True, True, False]


def test_non_gated_rows_are_predicted_with_two_matrices():
    hw = get_hardware("h100_sxm")
    p = op_params(OPS["moe"], hw)
    base = dict(dtype="bfloat16", num_tokens=[16384.0], hidden_size=[2688.0], inter_size=[1856.0], topk=[6.0],
                num_experts=[128.0], moe_tp_size=[1.0], moe_ep_size=[1.0], distribution="balanced")
    nongated = predict_moe(_rows(**base), hw, p)
    gated = predict_moe(_rows(**base, gated=["true"]), hw, p)
    assert nongated[0] < gated[0]
    direct = moe_cost(16384.0, 2688, 1856, 6, 128, 1, 1, "bf16", hw, gated=False, p=p).time_s
    np.testing.assert_allclose(nongated, direct)


def test_small_skewed_batches_spread_their_pairs_over_many_experts():
    # the benchmark's power-law sampler: with T·k <= E nearly every pair is a rounding top-up on its
    # own expert, so 4 tokens x top-8 over 256 experts touch well over k experts (a Monte-Carlo of the
    # sampler gives ~18)
    for alpha in (1.01, 1.2):
        pairs, touched = power_law_rank_load(np.array([1.0, 4.0]), 8, 256, 1, alpha)
        np.testing.assert_allclose(pairs, [8.0, 32.0])
        assert touched[0] == pytest.approx(8.0)
        assert 14.0 <= touched[1] <= 32.0


@pytest.mark.parametrize("E,k,ep", [(8, 2, 2), (16, 1, 4), (16, 8, 4), (128, 8, 32), (256, 8, 1), (256, 8, 64), (512, 22, 128)])
@pytest.mark.parametrize("alpha", [1.01, 1.2])
def test_power_law_load_never_falls_as_tokens_grow(E, k, ep, alpha):
    T = np.unique(np.round(np.exp(np.linspace(0.0, np.log(65536.0), 600))))
    pairs, touched = power_law_rank_load(T, k, E, ep, alpha)
    assert np.all(np.isfinite(pairs)) and np.all(np.isfinite(touched))
    assert np.all(np.diff(pairs) >= -1e-9 * pairs[1:]) and np.all(np.diff(touched) >= -1e-9 * touched[1:])
    assert np.all(touched <= E / ep + 1e-9) and np.all(touched <= pairs + 1e-9) and np.all(pairs <= T * k + 1e-9)


def test_busiest_rank_of_a_large_skewed_batch_carries_more_than_its_share():
    pairs, touched = power_law_rank_load(np.array([1024.0, 16384.0]), 8, 256, 32, 1.2)
    assert np.all(pairs > 2.0 * np.array([1024.0, 16384.0]) * 8 / 32)
    assert np.all(touched <= 8.0)


def test_router_top_k_scans_every_logit_of_every_token():
    hw = get_hardware("b200_sxm")
    p = op_params(OPS["moe"], hw)
    T = np.array([1024.0, 16384.0])
    a = moe_cost(T, 1024, 2688, 22, 512, 1, 256, "nvfp4", hw, p=dict(p, topk_scan_s=0.0))
    b = moe_cost(T, 1024, 2688, 22, 512, 1, 256, "nvfp4", hw, p=dict(p, topk_scan_s=1e-12))
    np.testing.assert_allclose(b.time_s - a.time_s, T * 22 * 512 * 1e-12, rtol=1e-9)


def test_w4a8_mxfp4_moe_is_its_own_kernel_class():
    hw = get_hardware("b200_sxm")
    p = op_params(OPS["moe"], hw)
    T = np.array([8.0, 4096.0])
    slow = dict(p, eta_compute_mxfp4=0.05, eta_memory_mxfp4=0.1)
    assert np.all(moe_cost(T, 4096, 2048, 6, 256, 1, 8, "mxfp4", hw, p=slow).time_s
                  > moe_cost(T, 4096, 2048, 6, 256, 1, 8, "mxfp4", hw, p=p).time_s)
    np.testing.assert_allclose(moe_cost(T, 4096, 2048, 6, 256, 1, 8, "fp8_block", hw, p=slow).time_s,
                               moe_cost(T, 4096, 2048, 6, 256, 1, 8, "fp8_block", hw, p=p).time_s)


def test_per_expert_setup_cost_is_per_format_class():
    hw = get_hardware("b200_sxm")
    p = op_params(OPS["moe"], hw)
    more = dict(p, expert_overhead_s_fp4=p["expert_overhead_s_fp4"] + 1e-6)
    # the CUTLASS grouped path's per-group setup (B200 NVFP4 also has the fused kernel, which has none)
    a = moe_path_costs(64.0, 4096, 1024, 10, 512, 1, 1, "nvfp4", hw, p=p)["grouped"]
    b = moe_path_costs(64.0, 4096, 1024, 10, 512, 1, 1, "nvfp4", hw, p=more)["grouped"]
    assert 100e-6 < float(b.time_s - a.time_s) < 512e-6  # ~1 µs per touched expert
    np.testing.assert_allclose(moe_cost(64.0, 4096, 1024, 10, 512, 1, 1, "bf16", hw, p=more).time_s,
                               moe_cost(64.0, 4096, 1024, 10, 512, 1, 1, "bf16", hw, p=p).time_s)


def test_spread_balanced_router_gives_each_pair_its_own_expert_and_random_routing_stays_default():
    hw = get_hardware("h100_sxm")
    T = np.array([1.0, 4.0, 16.0])
    random = moe_cost(T, 7168, 2048, 8, 256, 1, 1, "fp8", hw)
    spread = moe_cost(T, 7168, 2048, 8, 256, 1, 1, "fp8", hw, spread_balanced=True)
    np.testing.assert_allclose(random.time_s, moe_cost(T, 7168, 2048, 8, 256, 1, 1, "fp8", hw, spread_balanced=False).time_s)
    # 16 tokens x top-8 = 128 pairs: 128 distinct experts vs ~101 under random routing, so more weights
    assert np.all(spread.mem_bytes >= random.mem_bytes) and spread.mem_bytes[2] > 1.2 * random.mem_bytes[2]
    np.testing.assert_allclose(spread.flops, random.flops)


def test_skewed_rank_counts_its_heaviest_expert_tiles_apart():
    from simfront import moe as moe_mod
    from simfront.gemm import OUT_BYTES, class_view, dtype_class, grouped_gemm_times
    from simfront.precision import get_format

    hw = get_hardware("b200_sxm")
    p = op_params(OPS["moe"], hw)
    T, H, I, k, E = 4096.0, 4096, 1536, 8, 128
    pairs, touched, top = moe_mod._pl_rank_load(T, k, E, 1, 1.2)
    assert top < pairs and touched > 1
    f = get_format("fp8")
    q = class_view(p, dtype_class(f, hw))
    kw = dict(rate_flops_per_s=hw.achievable_matmul_flops_per_s("fp8"), hbm_bytes_per_s=hw.achievable_hbm_bytes_per_s, sm_count=hw.sm_count,
              b_act=f.act_bytes, b_w=f.bytes_per_element, q=q)
    rest = (pairs - top) / (touched - 1.0)
    up = (grouped_gemm_times(top, 2 * I, H, 1.0, b_out=f.act_bytes, **kw)[0]
          + grouped_gemm_times(rest, 2 * I, H, touched - 1.0, b_out=f.act_bytes, **kw)[0])
    down = (grouped_gemm_times(top, H, I, 1.0, b_out=OUT_BYTES * q["pair_traffic_fraction"], **kw)[0]
            + grouped_gemm_times(rest, H, I, touched - 1.0, b_out=OUT_BYTES * q["pair_traffic_fraction"], **kw)[0])
    c = moe_cost(T, H, I, k, E, 1, 1, "fp8", hw, alpha=1.2, p=p)
    np.testing.assert_allclose(c.compute_s, up + down, rtol=1e-12)

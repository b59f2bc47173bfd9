"""Fused MoE cost on one rank (simfront/moe.py): work accounting, invariants, calibration."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront.hardware import catalog, get_hardware
from simfront.kernel_ops import csv_format, moe_gated, routing_alpha
from simfront.moe import moe_cost, moe_path_costs, power_law_rank_load
from kernel_data import KERNEL_DIR, more_hbm



KERNELS = KERNEL_DIR
GPUS = sorted(catalog())
FMTS = ["bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "w4a16"]
# (hidden, inter, topk, experts): DeepSeek-V3, Qwen3-235B, Llama-4-Maverick-like, Mixtral-like
SHAPES = [(7168, 2048, 8, 256), (4096, 1536, 8, 128), (5120, 8192, 1, 128), (4096, 14336, 2, 8)]


@pytest.mark.parametrize("gated,mats", [(True, 3), (False, 2)])
def test_balanced_flops_are_2_tokens_topk_mats_hidden_inter_over_tp_ep(gated, mats):
    T = np.array([1.0, 7.0, 64.0, 1000.0, 16384.0])
    for H, I, k, E in SHAPES:
        for tp, ep in [(1, 1), (2, 4), (8, 8), (1, 32)]:
            c = moe_cost(T, H, I, k, E, tp, ep, "fp8", get_hardware("h100_sxm"), gated=gated)
            np.testing.assert_allclose(c.flops, 2 * T * k * mats * H * I / (tp * ep), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(gpu=st.sampled_from(GPUS), fmt=st.sampled_from(FMTS), shape=st.sampled_from(SHAPES),
       tp=st.sampled_from([1, 2, 4, 8]), ep=st.sampled_from([1, 2, 8, 32]), alpha=st.sampled_from([None, 1.01, 1.2]))
def test_time_never_decreases_when_tokens_grow(gpu, fmt, shape, tp, ep, alpha):
    H, I, k, E = shape
    if E % ep:
        return
    T = np.unique(np.round(np.exp(np.linspace(0, np.log(65536), 200))))
    t = moe_cost(T, H, I, k, E, tp, ep, fmt, get_hardware(gpu), alpha=alpha).time_s
    assert np.all(np.isfinite(t)) and np.all(t > 0)
    assert np.all(np.diff(t) >= -1e-12 * t[1:])


@settings(max_examples=30, deadline=None)
@given(gpu=st.sampled_from(GPUS), fmt=st.sampled_from(FMTS), shape=st.sampled_from(SHAPES), factor=st.floats(1.0, 4.0),
       alpha=st.sampled_from([None, 1.2]))
def test_more_hbm_bandwidth_never_slows_the_moe(gpu, fmt, shape, factor, alpha):
    hw = get_hardware(gpu)
    faster = more_hbm(hw, factor)
    T = np.array([1.0, 8.0, 64.0, 512.0, 4096.0])
    a = moe_cost(T, *shape, 1, 8 if shape[3] % 8 == 0 else 1, fmt, hw, alpha=alpha).time_s
    b = moe_cost(T, *shape, 1, 8 if shape[3] % 8 == 0 else 1, fmt, faster, alpha=alpha).time_s
    assert np.all(b <= a * (1 + 1e-12))


def test_no_nan_or_negative_for_zero_tokens_and_extreme_layouts():
    T = np.array([0.0, 1.0, 3.0, 1e6])
    for gpu in ("h100_sxm", "b200_sxm", "mi355x", "l40s"):
        for fmt in FMTS:
            for alpha in (None, 1.01, 1.2, 2.0):
                c = moe_cost(T, 7168, 2048, 8, 256, np.array([1, 2, 4, 32]), np.array([256, 128, 1, 8]), fmt, get_hardware(gpu), alpha=alpha)
                for leg in (c.time_s, c.flops, c.mem_bytes, c.compute_s, c.memory_s):
                    assert np.all(np.isfinite(leg)) and np.all(leg >= 0)
                assert c.flops[0] == 0


def test_tiny_batches_read_the_touched_experts_weights():
    hw = get_hardware("h100_sxm")
    H, I, E = 7168, 2048, 256
    expert_bytes = 3 * H * I * 1.0  # FP8
    one = moe_cost(1, H, I, 8, E, 1, 1, "fp8", hw)
    # one token with top-8 touches ~8 experts: all their weights stream even though FLOPs are tiny
    assert 7.5 * expert_bytes < one.mem_bytes < 9 * expert_bytes
    assert one.bound == "memory"
    # many tokens touch every local expert: weight bytes saturate at E / EP experts
    many = moe_cost(16384, H, I, 8, E, 1, 8, "fp8", hw)
    assert many.mem_bytes > E / 8 * expert_bytes


def test_expert_parallelism_splits_the_work():
    hw = get_hardware("b200_sxm")
    a = moe_cost(8192, 7168, 2048, 8, 256, 1, 1, "nvfp4", hw)
    b = moe_cost(8192, 7168, 2048, 8, 256, 1, 8, "nvfp4", hw)
    assert b.flops == pytest.approx(a.flops / 8)
    assert b.time_s < a.time_s / 4


def test_skewed_routing_loads_the_busiest_rank_more_and_touches_fewer_experts():
    pairs, touched = power_law_rank_load(np.array([4096.0]), 8, 256, 32, 1.2)
    mean = 4096 * 8 / 32
    assert pairs[0] > 1.2 * mean
    assert touched[0] <= 256 / 32
    hw = get_hardware("h100_sxm")
    bal = moe_cost(8192, 4096, 1536, 8, 128, 1, 32, "bf16", hw)
    skew = moe_cost(8192, 4096, 1536, 8, 128, 1, 32, "bf16", hw, alpha=1.2)
    assert skew.time_s > bal.time_s
    # without expert parallelism every expert is local: skew changes nothing about the rank's pairs
    np.testing.assert_allclose(moe_cost(8192, 4096, 1536, 8, 128, 1, 1, "bf16", hw, alpha=1.2).flops,
                               moe_cost(8192, 4096, 1536, 8, 128, 1, 1, "bf16", hw).flops)


def test_calibration_dtype_and_distribution_spellings():
    assert csv_format("bfloat16") == "bf16"
    assert csv_format("w4a16_mxfp4") == "w4a16"
    assert csv_format("w4a8_mxfp4_mxfp8") == "mxfp4"
    assert routing_alpha("balanced") is None
    assert routing_alpha("power_law_1.01") == pytest.approx(1.01)


@pytest.mark.skipif(not KERNELS.exists(), reason="calibration data not available")
@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm"])
def test_calibrated_predictions_land_near_measured_kernels(gpu):
    with (KERNELS / f"{gpu}__moe.csv").open() as fh:
        rows = list(csv.DictReader(fh))[::100]  # 60 rows spread over the file
    hw = get_hardware(gpu)
    gated = moe_gated({c: np.array([float(r[c]) for r in rows]) for c in ("hidden_size", "inter_size", "num_experts", "topk")})
    pred = np.array([
        moe_cost(float(r["num_tokens"]), float(r["hidden_size"]), float(r["inter_size"]), float(r["topk"]), float(r["num_experts"]),
                 float(r["moe_tp_size"]), float(r["moe_ep_size"]), csv_format(r["dtype"]), hw, alpha=routing_alpha(r["distribution"]),
                 gated=bool(g)).time_s
        for r, g in zip(rows, gated)]) * 1e6
    meas = np.array([float(r["latency_us"]) for r in rows])
    assert np.median(np.abs(pred / meas - 1)) < 0.25
    assert np.mean(np.abs(np.log(pred / meas))) < 0.35


def test_tokens_routed_to_other_ranks_still_cost_the_routing_and_token_passes():
    from simfront.kernel_ops import OPS, op_params

    hw = get_hardware("b200_sxm")
    p = op_params(OPS["moe"], hw)
    local_only = dict(p, selection_traffic_fraction=0.0, all_token_fraction=0.0)
    walk_all = dict(p, selection_traffic_fraction=0.2, all_token_fraction=1.0)
    T = np.array([1024.0, 4096.0, 16384.0])
    a = moe_cost(T, 4096, 1536, 8, 128, 1, 64, "nvfp4", hw, p=local_only)
    b = moe_cost(T, 4096, 1536, 8, 128, 1, 64, "nvfp4", hw, p=walk_all)
    # at EP 64 only ~12% of the tokens have a local expert; walking all T·k selections adds HBM traffic
    assert np.all(b.mem_bytes > a.mem_bytes) and np.all(b.time_s > a.time_s)
    # the useful FLOPs are the balanced local work either way
    np.testing.assert_allclose(a.flops, b.flops)
    # without EP every token and selection is local: the fractions change nothing but the token passes
    c = moe_cost(T, 4096, 1536, 8, 128, 1, 1, "nvfp4", hw, p=dict(local_only, pair_traffic_fraction=0.5))
    d = moe_cost(T, 4096, 1536, 8, 128, 1, 1, "nvfp4", hw, p=dict(local_only, pair_traffic_fraction=0.5, all_token_fraction=1.0))
    np.testing.assert_allclose(c.time_s, d.time_s)


def test_every_held_expert_costs_its_group_setup_with_or_without_tokens():
    """The grouped path pays ``local_expert_s`` per expert the rank holds: at a fixed small batch, holding 512
    experts costs 512 x that term more than holding none of it, whatever few experts the tokens touch; the
    fused FP4 kernel (no per-group setup) does not pay it."""
    from simfront.kernel_ops import OPS, op_params

    hw = get_hardware("h100_sxm")
    p = op_params(OPS["moe"], hw)
    T = np.array([1.0, 2.0, 4.0, 16.0])
    for ep, local in [(1, 512.0), (4, 128.0)]:
        a = moe_cost(T, 4096, 1024, 10, 512, 8, ep, "fp8_block", hw, p=dict(p, local_expert_s_fp8_block=0.0))
        b = moe_cost(T, 4096, 1024, 10, 512, 8, ep, "fp8_block", hw, p=dict(p, local_expert_s_fp8_block=3e-7))
        np.testing.assert_allclose(b.time_s - a.time_s, local * 3e-7, rtol=1e-9)
        np.testing.assert_allclose(a.flops, b.flops)
    bw = get_hardware("b200_sxm")
    pb = op_params(OPS["moe"], bw)
    paths0 = moe_path_costs(T, 7168, 2048, 8, 256, 8, 1, "nvfp4", bw, p=dict(pb, local_expert_s_fp4=0.0))
    paths1 = moe_path_costs(T, 7168, 2048, 8, 256, 8, 1, "nvfp4", bw, p=dict(pb, local_expert_s_fp4=3e-7))
    np.testing.assert_allclose(paths1["fused"].time_s, paths0["fused"].time_s)
    np.testing.assert_allclose(paths1["grouped"].time_s - paths0["grouped"].time_s, 256 * 3e-7, rtol=1e-9)


def test_engines_serving_without_grouped_problem_lists_pay_no_held_expert_setup():
    """Block-FP8 experts on datacenter Blackwell: the calibration timed DeepGEMM (setup per held expert), engines serve
    them with trtllm-gen's FP8 block-scale MoE (``served_without_group_setup`` in hardware/kernels.yaml): serving
    prices drop the held-expert term, the timed kernel keeps it; Hopper's engines pay it either way."""
    from simfront import kernels
    from simfront.kernel_ops import OPS, op_params

    T = np.array([1.0, 8.0, 64.0])
    for gpu, skips in [("b200_sxm", True), ("h100_sxm", False)]:
        hw = get_hardware(gpu)
        assert kernels.served_without_group_setup("moe", "fp8_block", hw) is skips
        assert not kernels.served_without_group_setup("moe", "fp8", hw)
        p = op_params(OPS["moe"], hw)
        serve = [moe_cost(T, 7168, 2048, 8, 256, 8, 1, "fp8_block", hw, p=dict(p, local_expert_s_fp8_block=v)).time_s for v in (0.0, 3e-7)]
        timed = [moe_path_costs(T, 7168, 2048, 8, 256, 8, 1, "fp8_block", hw, p=dict(p, local_expert_s_fp8_block=v),
                                timed_kernel=True)["grouped"].time_s for v in (0.0, 3e-7)]
        np.testing.assert_allclose(timed[1] - timed[0], 256 * 3e-7, rtol=1e-9)
        np.testing.assert_allclose(serve[1] - serve[0], 0.0 if skips else 256 * 3e-7, atol=1e-15, rtol=1e-9)


@pytest.mark.skipif(not KERNELS.exists(), reason="calibration data not available")
def test_measured_small_batches_cost_more_with_more_held_experts():
    """The measured trend the per-held-expert term describes (H100 block-FP8 rows, 1-8 tokens, moe TP >= 2):
    time grows with experts held at about the fitted rate, and the calibrated model keeps the median
    predicted/measured of these rows near 1 with either few or many experts held."""
    rows = [r for r in csv.DictReader(open(KERNELS / "h100_sxm__moe.csv"))
            if r["dtype"] == "fp8_block" and int(r["num_tokens"]) <= 8 and int(r["moe_tp_size"]) >= 2]
    from simfront.kernel_validate import validate_kernel_rows

    ratio = {}
    for r in validate_kernel_rows(rows, "moe")["rows"]:
        local = int(r["num_experts"]) // int(r["moe_ep_size"])
        ratio.setdefault(local >= 192, []).append(float(r["predicted_latency_us"]) / float(r["latency_us"]))
    assert len(ratio[True]) >= 15 and len(ratio[False]) >= 15
    for many in (False, True):
        assert 0.8 < np.median(ratio[many]) < 1.2, (many, np.median(ratio[many]))


def test_unmeasured_block_scaled_class_borrows_block_scale_costs_from_the_block_scaled_class():
    """A family with no NVFP4 rows (Hopper) gives the fp4 class its per-tensor FP8 sibling's tensor-pipeline
    values, but the block-scale costs (per-expert setup, quantize/expand passes) of the measured
    block-scaled class (moe.PARAM_CLASS_FALLBACK); a fitted fp4 value is never replaced."""
    import importlib.util
    from pathlib import Path

    from simfront.kernel_ops import OPS

    path = Path(__file__).resolve().parents[1] / "scripts" / "calibrate_kernels.py"
    spec = importlib.util.spec_from_file_location("calibrate_kernels_borrow", path)
    ck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ck)
    kind_ops = {"moe": OPS["moe"]}
    params = {k: v[0] for k, v in OPS["moe"]["params"].items()}
    params.update(expert_overhead_s_fp8=2e-7, expert_overhead_s_fp8_block=5e-7, eta_aux_fp8=0.6, eta_aux_fp8_block=0.3,
                  eta_compute_fp8=1.1, eta_compute_fp8_block=0.9)
    free = ["expert_overhead_s_fp8", "expert_overhead_s_fp8_block", "eta_aux_fp8", "eta_aux_fp8_block", "eta_compute_fp8",
            "eta_compute_fp8_block"]
    out = ck.borrow_classes(kind_ops, params, free)
    for cls in ("fp4", "mxfp4"):
        assert out[f"expert_overhead_s_{cls}"] == 5e-7 and out[f"eta_aux_{cls}"] == 0.3  # block-scaled sibling
        assert out[f"eta_compute_{cls}"] == 1.1  # per-tensor FP8 sibling: the tensor pipeline
    # without fp8_block rows the class falls back to its default sibling
    out = ck.borrow_classes(kind_ops, params, ["expert_overhead_s_fp8"])
    assert out["expert_overhead_s_fp4"] == 2e-7
    # a value fitted on the family's own rows stays
    out = ck.borrow_classes(kind_ops, dict(params, expert_overhead_s_fp4=9e-7), free + ["expert_overhead_s_fp4"])
    assert out["expert_overhead_s_fp4"] == 9e-7


def test_benchmark_balanced_rows_through_the_grouped_router():
    """The calibration benchmark's min-latency rows route every model through DeepSeek-V3's grouped router (8 groups,
    4 kept). Its balanced logits give each token one expert per group (k = 8), the groups tie and every token keeps the
    same four: a DeepSeek-shaped row at 160 tokens touches 128 of 256 experts (the balanced spread would touch all),
    and under EP 8 the measured rank 0 (group 0) carries each token's group-0 expert plus the four tie-broken ones:
    5 x 160 pairs, not 160."""
    from simfront.moe import collector_grouped_rank_load

    pairs, touched, heavy, heavy_pairs = collector_grouped_rank_load([160, 160], 8, 256, [1, 8])
    assert list(pairs) == [1280.0, 800.0] and list(touched) == [128.0, 32.0]
    assert list(heavy) == [4.0, 4.0] and list(heavy_pairs) == [160.0, 160.0]
    # k = 4 keeps every intended expert (four groups hold them), so the router changes nothing
    p4, t4, _, _ = collector_grouped_rank_load(256, 4, 128, 1)
    assert float(p4) == 1024.0 and float(t4) == 128.0


def test_only_benchmark_rows_take_the_collector_router():
    """Serving prices a trained router (no ties): moe_cost is the faster of the paths without the benchmark's router,
    while the fused path of a balanced benchmark row streams half the experts' weights."""
    hw = get_hardware("b200")
    args = (160, 7168, 2048, 8, 256, 2, 1, "nvfp4", hw)
    bench = moe_path_costs(*args, spread_balanced=True, collector_router=True)["fused"].time_s
    plain = moe_path_costs(*args, spread_balanced=True)["fused"].time_s
    assert float(bench) < float(plain)  # half the experts' weights streamed
    serving = moe_cost(*args, spread_balanced=True).time_s
    assert float(serving) == pytest.approx(min(float(plain), float(moe_path_costs(*args, spread_balanced=True)["grouped"].time_s)))


@pytest.mark.parametrize("fmt,gpu", [("fp8_block", "h200_sxm"), ("nvfp4", "gb200"), ("fp8_block", "b200_sxm")])
def test_an_all_to_all_dispatch_hands_the_kernels_only_the_ranks_own_tokens(fmt, gpu):
    """With attention-DP the tokens reach their experts by an all-to-all dispatch: a rank routes only its own tokens
    and its kernels walk only the tokens dispatched to it, so the op is never slower than when every token enters it
    (the calibration benchmark's all-gather), the saving grows with the EP width, the work is the same, and EP 1 is
    unchanged."""
    hw = get_hardware(gpu)
    saving = []
    for ep in (1, 8, 32):
        T = 256.0 * ep  # 256 tokens of each attention-DP rank
        kw = dict(alpha=1.01)
        allg = moe_cost(T, 7168, 2048, 8, 256, 1, ep, fmt, hw, **kw)
        disp = moe_cost(T, 7168, 2048, 8, 256, 1, ep, fmt, hw, dispatched=ep > 1, routed_tokens=256.0, **kw)
        assert float(disp.time_s) <= float(allg.time_s) and float(disp.flops) == float(allg.flops)
        saving.append(1.0 - float(disp.time_s) / float(allg.time_s))
    assert saving[0] == 0.0 and saving[1] < saving[2]

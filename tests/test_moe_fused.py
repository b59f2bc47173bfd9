"""Fused FP4 MoE kernel beside the CUTLASS grouped path (simfront/moe.py ``moe_path_costs``) and the
calibration residual that fits both kernels on unlabelled rows (scripts/calibrate_kernels.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront.hardware import catalog, get_hardware
from simfront.kernel_ops import MOE_PATHS, OPS, op_params, predict_moe, predict_moe_paths
from simfront.moe import FUSED_FP4_COMPUTE_CAPABILITIES, has_fused_path, moe_cost, moe_path_costs

# the datacenter Blackwell parts of the catalog (compute capability 10.x in hardware/*.yaml)
FUSED_FP4_GPUS = frozenset({"b200_sxm", "b300_sxm", "gb200", "gb300"})

FMTS = ["bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "w4a16"]
# (hidden, inter, topk, experts): DeepSeek-V3, Qwen3-235B, Llama-4-Maverick-like, Mixtral-like
SHAPES = [(7168, 2048, 8, 256), (4096, 1536, 8, 128), (5120, 8192, 1, 128), (4096, 14336, 2, 8)]
TOKENS = np.unique(np.round(np.exp(np.linspace(0, np.log(65536), 150))))
FUSED = dict(fused_launch_fraction=st.floats(0.05, 1.0), fused_compute_gain=st.floats(1.0, 4.0),
             fused_cta_s=st.floats(1e-9, 1e-5))


def _params(gpu, **fused):
    return dict(op_params(OPS["moe"], get_hardware(gpu)), **fused)


def test_fused_kernel_exists_only_for_gated_fp4_experts_on_datacenter_blackwell():
    for gpu, hw in catalog().items():
        for fmt in FMTS:
            for gated in (True, False):
                paths = moe_path_costs(np.array([1.0, 64.0, 4096.0]), 7168, 2048, 8, 256, 1, 8, fmt, hw, gated=gated)
                assert ("fused" in paths) == (gpu in FUSED_FP4_GPUS and fmt in ("nvfp4", "mxfp4") and gated), (gpu, fmt, gated)
                assert has_fused_path(fmt, hw, gated) == ("fused" in paths)
                # MXFP4 experts there run trtllm-gen only (hardware/kernels.yaml moe_fused_mxfp4, sole_moe_kernel): the
                # grouped path is never picked; NVFP4 keeps the CUTLASS grouped path beside the fused kernel
                if "fused" in paths:
                    assert np.all(np.isinf(paths["grouped"].time_s)) == (fmt == "mxfp4"), (gpu, fmt)
                    best = moe_cost(np.array([1.0, 64.0, 4096.0]), 7168, 2048, 8, 256, 1, 8, fmt, hw, gated=gated)
                    assert np.all(np.isfinite(best.time_s))
    assert FUSED_FP4_GPUS == {g for g, hw in catalog().items() if hw.compute_capability in FUSED_FP4_COMPUTE_CAPABILITIES}
    # same family, other SM (sm_120): CUTLASS only
    assert get_hardware("rtx_pro_6000_server").family == "blackwell"
    assert not has_fused_path("nvfp4", get_hardware("rtx_pro_6000_server"))


@settings(max_examples=30, deadline=None)
@given(gpu=st.sampled_from(sorted(FUSED_FP4_GPUS)), shape=st.sampled_from(SHAPES), tp=st.sampled_from([1, 2, 8]),
       ep=st.sampled_from([1, 4, 32]), alpha=st.sampled_from([None, 1.01, 1.2]), spread=st.booleans(), **FUSED)
def test_prediction_is_the_faster_kernel_and_tokens_never_make_either_faster(gpu, shape, tp, ep, alpha, spread, **fused):
    H, I, k, E = shape
    if E % ep:
        return
    hw, p = get_hardware(gpu), _params(gpu, **fused)
    args = (TOKENS, H, I, k, E, tp, ep, "nvfp4", hw)
    paths = moe_path_costs(*args, alpha=alpha, p=p, spread_balanced=spread)
    best = moe_cost(*args, alpha=alpha, p=p, spread_balanced=spread)
    np.testing.assert_array_equal(best.time_s, np.minimum(paths["grouped"].time_s, paths["fused"].time_s))
    pick = paths["fused"].time_s < paths["grouped"].time_s
    np.testing.assert_array_equal(best.mem_bytes, np.where(pick, paths["fused"].mem_bytes, paths["grouped"].mem_bytes))
    for c in (paths["grouped"], paths["fused"], best):
        for leg in (c.time_s, c.flops, c.mem_bytes, c.compute_s, c.memory_s):
            assert np.all(np.isfinite(leg)) and np.all(leg >= 0)
        assert np.all(c.time_s > 0)
        assert np.all(np.diff(c.time_s) >= -1e-12 * c.time_s[1:])  # more tokens never faster, on either kernel
    # the same work: FLOPs equal, and the fused kernel moves no more HBM bytes (no permuted copy)
    np.testing.assert_allclose(paths["fused"].flops, paths["grouped"].flops)
    assert np.all(paths["fused"].mem_bytes <= paths["grouped"].mem_bytes * (1 + 1e-12))


@settings(max_examples=30, deadline=None)
@given(gpu=st.sampled_from(sorted(FUSED_FP4_GPUS)), shape=st.sampled_from(SHAPES), ep=st.sampled_from([1, 8, 32]),
       alpha=st.sampled_from([None, 1.2]), launch=st.floats(0.05, 1.0), gain=st.floats(1.0, 4.0))
def test_fused_kernel_is_never_slower_apart_from_its_launch_grid(gpu, shape, ep, alpha, launch, gain):
    """Its fixed cost is a share of the grouped path's, its tensor rate at least the grouped GEMM's, its
    bytes no more and it has no per-expert group setup; only the empty CTAs of its worst-case grid
    (``fused_cta_s``) can make it the slower kernel."""
    H, I, k, E = shape
    if E % ep:
        return
    p = _params(gpu, fused_launch_fraction=launch, fused_compute_gain=gain, fused_cta_s=0.0)
    paths = moe_path_costs(TOKENS, H, I, k, E, 1, ep, "nvfp4", get_hardware(gpu), alpha=alpha, p=p)
    assert np.all(paths["fused"].time_s <= paths["grouped"].time_s * (1 + 1e-12))


def test_empty_ctas_of_the_fused_grid_cost_time_under_expert_parallelism():
    hw = get_hardware("b200_sxm")
    T = np.array([256.0, 1024.0, 4096.0])
    cheap = moe_path_costs(T, 7168, 2048, 8, 256, 1, 32, "nvfp4", hw, p=_params("b200_sxm", fused_cta_s=1e-9))["fused"]
    dear = moe_path_costs(T, 7168, 2048, 8, 256, 1, 32, "nvfp4", hw, p=_params("b200_sxm", fused_cta_s=1e-6))["fused"]
    assert np.all(dear.time_s > cheap.time_s)
    np.testing.assert_allclose(dear.mem_bytes, cheap.mem_bytes)


@pytest.mark.parametrize("gpu", ["h100_sxm", "h200_sxm", "rtx_pro_6000_server", "mi355x"])
def test_gpus_without_the_fused_kernel_ignore_its_parameters(gpu):
    hw = get_hardware(gpu)
    base = op_params(OPS["moe"], hw)
    odd = dict(base, fused_launch_fraction=0.05, fused_compute_gain=4.0, fused_cta_s=1e-5)
    for fmt in FMTS:
        for alpha in (None, 1.2):
            a = moe_cost(TOKENS, 7168, 2048, 8, 256, 2, 8, fmt, hw, alpha=alpha, p=base)
            b = moe_cost(TOKENS, 7168, 2048, 8, 256, 2, 8, fmt, hw, alpha=alpha, p=odd)
            np.testing.assert_array_equal(a.time_s, b.time_s)
            np.testing.assert_array_equal(a.time_s, moe_path_costs(TOKENS, 7168, 2048, 8, 256, 2, 8, fmt, hw, alpha=alpha, p=base)["grouped"].time_s)


def _rows(n, **over):
    cols = {"dtype": np.array(["nvfp4"] * n), "num_tokens": np.geomspace(1, 16384, n).round(), "hidden_size": np.full(n, 7168.0),
            "inter_size": np.full(n, 2048.0), "topk": np.full(n, 8.0), "num_experts": np.full(n, 256.0),
            "moe_tp_size": np.full(n, 1.0), "moe_ep_size": np.full(n, 8.0), "distribution": np.array(["balanced"] * n)}
    cols.update(over)
    return cols


@pytest.mark.parametrize("gpu,fused", [("b200_sxm", True), ("h100_sxm", False)])
def test_registry_paths_are_per_kernel_and_the_prediction_is_their_minimum(gpu, fused):
    hw = get_hardware(gpu)
    p = op_params(OPS["moe"], hw)
    cols = _rows(12)
    cols["dtype"][::3] = "fp8"
    paths = predict_moe_paths(cols, hw, p)
    assert paths.shape == (len(MOE_PATHS), 12) and OPS["moe"]["paths"] is predict_moe_paths
    assert np.all(np.isfinite(paths[0]))
    assert np.isfinite(paths[1]).tolist() == [fused and d == "nvfp4" for d in cols["dtype"]]
    np.testing.assert_allclose(predict_moe(cols, hw, p), paths.min(axis=0), rtol=1e-12)
    # and that minimum is the faster of the MoE op's kernels (moe_path_costs, balanced spread as in the benchmark, whose
    # min-latency rows route through its grouped router: moe.COLLECTOR_N_GROUP)
    for i, d in enumerate(cols["dtype"]):
        costs = moe_path_costs(cols["num_tokens"][i], 7168, 2048, 8, 256, 1, 8, d, hw, p=p, spread_balanced=True,
                               collector_router=True)
        t = min(float(c.time_s) for c in costs.values())
        np.testing.assert_allclose(predict_moe(cols, hw, p)[i], t, rtol=1e-12)


def _calibrate_module():
    path = Path(__file__).resolve().parents[1] / "scripts" / "calibrate_kernels.py"
    spec = importlib.util.spec_from_file_location("calibrate_kernels_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fit_residual_takes_each_row_on_its_nearest_kernel_and_scoring_takes_the_minimum():
    ck = _calibrate_module()
    meas = np.array([10.0, 20.0, 30.0, 40.0])
    fast, slow = np.array([10.0, 10.0, 15.0, np.inf]), np.array([25.0, 21.0, 28.0, 44.0])

    entry = {"predict": lambda cols, hw, p: np.minimum(fast, slow) * 1e-6,
             "paths": lambda cols, hw, p: np.stack([slow, fast]) * 1e-6}
    r = ck.log_residual(entry, {"latency_us": meas}, None, {})
    np.testing.assert_allclose(r, np.log([10 / 10, 21 / 20, 28 / 30, 44 / 40]))
    # scoring never uses the assignment: the prediction is the op's own (faster kernel)
    np.testing.assert_allclose(ck.predict_op(entry, {"latency_us": meas}, None, {}), [10, 10, 15, 44])
    # ops with one kernel: plain log(pred / measured)
    single = {"predict": entry["predict"]}
    np.testing.assert_allclose(ck.log_residual(single, {"latency_us": meas}, None, {}), np.log([10 / 10, 10 / 20, 15 / 30, 44 / 40]))


def test_fused_kernel_only_within_its_router_expert_limit():
    """The fused FP4 kernel's router handles at most ``max_experts`` experts (hardware/kernels.yaml,
    moe_fused_fp4): a 384-expert model (Kimi-K2-like) runs the CUTLASS grouped path on B200, a 256-expert
    one (DeepSeek-V3) may take the fused kernel; arrays mixing both price each element on its own paths."""
    from simfront import kernels

    b200 = get_hardware("b200_sxm")
    limit = kernels.max_experts("moe_fused_fp4", b200)
    assert limit == 256
    assert kernels.max_experts("moe_fused_fp4", get_hardware("h100_sxm")) == 0.0  # no native kernel there
    assert has_fused_path("nvfp4", b200, True, 256) and not has_fused_path("nvfp4", b200, True, 384)
    T = np.array([4.0, 64.0, 1024.0])
    big = moe_path_costs(T, 7168, 2048, 8, 384, 1, 8, "nvfp4", b200)
    assert "fused" not in big
    assert np.array_equal(moe_cost(T, 7168, 2048, 8, 384, 1, 8, "nvfp4", b200).time_s, big["grouped"].time_s)
    mixed = moe_path_costs(4.0, 7168, 2048, 8, np.array([256.0, 384.0]), 1, 8, "nvfp4", b200)
    assert np.isfinite(mixed["fused"].time_s[0]) and np.isinf(mixed["fused"].time_s[1])
    picked = moe_cost(4.0, 7168, 2048, 8, np.array([256.0, 384.0]), 1, 8, "nvfp4", b200).time_s
    assert np.isfinite(picked).all() and picked[1] == mixed["grouped"].time_s[1]

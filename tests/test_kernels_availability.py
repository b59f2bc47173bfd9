"""Kernel availability per platform (hardware/kernels.yaml, simfront.kernels) and the paths the cost modules price."""

from __future__ import annotations

import numpy as np
import pytest

from simfront import kernels
from simfront.gemm import dtype_class
from simfront.hardware import catalog, get_hardware
from simfront.mla import mla_decode_cost
from simfront.moe import has_fused_path
from simfront.precision import get_format

MLA_NATIVE = {"h100_sxm", "h100_pcie", "h800_sxm", "h200_sxm", "h20", "b200_sxm", "b300_sxm", "gb200", "gb300", "mi300x", "mi325x", "mi355x"}


def test_every_catalog_gpu_has_a_platform_and_every_op_a_source():
    for gid, hw in catalog().items():
        assert kernels.platform_of(hw), f"{gid}: needs compute_capability (NVIDIA) or gfx_target (AMD)"
        paths = kernels.kernel_paths(hw)
        assert {p.op for p in paths} == set(kernels.table())
        assert all(p.source for p in paths)
    for op, spec in kernels.table().items():
        assert spec.fallback.source and all(k.source for k in spec.native), op


def test_amd_parts_carry_their_gfx_target():
    assert get_hardware("mi300x").gfx_target == get_hardware("mi325x").gfx_target == "gfx942"
    assert get_hardware("mi355x").gfx_target == "gfx950"
    assert all(hw.gfx_target is None for hw in catalog().values() if hw.vendor == "nvidia")


def test_mla_decode_native_only_on_hopper_datacenter_blackwell_and_cdna():
    native = {g for g, hw in catalog().items() if kernels.has_native("mla_decode", hw)}
    assert native == MLA_NATIVE
    for g in ("a100_sxm", "l40s", "rtx_pro_6000_server"):
        p = kernels.kernel_path("mla_decode", get_hardware(g))
        assert not p.native and p.kernel == "triton-mla-decode"
        assert any("mla_decode" in n and "triton-mla-decode" in n for n in kernels.fallback_notes(get_hardware(g)))
    assert not any("mla_decode" in n for n in kernels.fallback_notes(get_hardware("h100_sxm")))


def _latent_tb_s(gpu, heads, batch=64, kv=32768, kvb=2):
    t = mla_decode_cost(batch, kv, heads, kvb, get_hardware(gpu)).time_s
    return float(batch * kv * 576 * kvb / t / 1e12)


def test_mla_fallback_rereads_latent_rows_per_head_block():
    # Native kernels read the latent rows once: long-KV time is flat in the head count below one tile.
    assert _latent_tb_s("h100_sxm", 16) == pytest.approx(_latent_tb_s("h100_sxm", 32), rel=0.02)
    # The Triton grouped kernel streams them once per 16 heads: twice the heads, about half the rate.
    head_block = kernels.fallback("mla_decode")["head_block"]
    for gpu in ("a100_sxm", "l40s", "rtx_pro_6000_server"):
        r1, r2 = _latent_tb_s(gpu, head_block), _latent_tb_s(gpu, 2 * head_block)
        assert r2 == pytest.approx(r1 / 2, rel=0.1)


def test_mla_fallback_is_in_the_measured_range_not_the_native_rate():
    # issue 13: MLA decode on Ampere / Ada / SM 12.0 measured 0.44-0.58 TB/s effective on long KV. The
    # fallback lands in that neighbourhood (0.25-0.8 TB/s) where the latent rows are streamed 1-4 times
    # (16-64 local heads; A100 64, RTX PRO 6000 32, L40S 16), not at the native rate of 0.7-1.7 TB/s.
    for gpu, heads in (("a100_sxm", 64), ("rtx_pro_6000_server", 32), ("l40s", 16)):
        assert 0.25 <= _latent_tb_s(gpu, heads) <= 0.8, gpu


def test_fused_fp4_moe_follows_the_data_file():
    for g, hw in catalog().items():
        assert has_fused_path("nvfp4", hw) == (kernels.platform_of(hw) in kernels.platforms("moe_fused_fp4") and "nvfp4" in hw.fp4_formats)


def test_fused_mxfp4_moe_follows_the_data_file_and_is_the_only_kernel_there():
    for g, hw in catalog().items():
        native = kernels.platform_of(hw) in kernels.platforms("moe_fused_mxfp4")
        assert has_fused_path("mxfp4", hw) == (native and "mxfp4" in hw.fp4_formats), g
        assert kernels.sole_moe_kernel("moe_fused_mxfp4", hw) == native, g
        assert not kernels.sole_moe_kernel("moe_fused_fp4", hw), g  # NVFP4 keeps the CUTLASS grouped path beside it
    # a kernel that removes the grouped path says where that fact comes from
    for spec in kernels.table().values():
        for k in spec.native:
            assert not k.sole_moe_kernel or k.sole_moe_kernel_source, k.kernel


@pytest.mark.parametrize("op,fmt", [("moe_grouped_fp8", "fp8"), ("moe_grouped_fp4", "nvfp4"), ("moe_grouped_fp4", "mxfp4")])
def test_grouped_moe_format_availability_agrees_with_the_format_path(op, fmt):
    """Where kernels.yaml lists no native grouped kernel for the format, the cost model runs it weight-only."""
    f = get_format(fmt)
    for g, hw in catalog().items():
        fast = dtype_class(f, hw) != "wonly"
        if fmt == "nvfp4" and hw.vendor == "amd":
            continue  # no NVFP4 on AMD: a generic fp4 checkpoint resolves to MXFP4 there (precision.resolve_format)
        assert fast == kernels.has_native(op, hw), f"{g}: {fmt} {'runs natively' if fast else 'runs weight-only'}, {op} disagrees"


def test_weight_only_and_smoothquant_kernels_on_ampere_and_ada():
    for g in ("a100_sxm", "l40s"):
        hw = get_hardware(g)
        assert kernels.has_native("gemm_weight_only", hw) and kernels.has_native("gemm_smoothquant", hw)


def test_rocm_libraries_on_cdna():
    for g in ("mi300x", "mi325x", "mi355x"):
        names = {p.op: p.kernel for p in kernels.kernel_paths(g)}
        assert "hipblaslt" in names["gemm"] and "aiter" in names["mla_decode"] and "aiter" in names["moe_grouped_fp8"]
    assert kernels.has_native("moe_grouped_fp4", get_hardware("mi355x")) and not kernels.has_native("moe_grouped_fp4", get_hardware("mi300x"))


def test_unknown_op_is_an_error():
    from simfront.errors import SimfrontError

    with pytest.raises(SimfrontError, match="unknown kernel op"):
        kernels.has_native("nope", get_hardware("h100_sxm"))


def test_native_mla_unchanged_by_the_fallback_path():
    # H100: the native path with its 64-row head tile; no re-read factor
    t16 = mla_decode_cost(np.array([8.0]), 4096, 16, 2, get_hardware("h100_sxm")).time_s
    t64 = mla_decode_cost(np.array([8.0]), 4096, 64, 2, get_hardware("h100_sxm")).time_s
    assert t64[0] < 1.5 * t16[0]


def test_cheaper_fp8_grouped_decode_only_where_the_kernel_exists():
    """XQA's Hopper FP8-KV grouped kernel (hardware/kernels.yaml) has a lower fixed cost; on B200 an FP8
    cache pays the 16-bit kernel's fixed cost. Same parameters on both GPUs, so only the data file differs."""
    from simfront.attention import attention_decode_cost, _params

    h100, b200 = get_hardware("h100_sxm"), get_hardware("b200_sxm")
    assert kernels.has_native("attention_decode_fp8_grouped", h100)
    assert not kernels.has_native("attention_decode_fp8_grouped", b200)
    p = _params(None, h100)
    assert p["decode_launch_grouped_fp8_frac"] < 1.0
    shape = dict(batch=1, kv_len=16, n_heads=32, n_kv_heads=8, head_dim=128, window=0)  # launch-bound
    for hw, cheaper in ((h100, True), (b200, False)):
        fp8 = float(attention_decode_cost(**shape, kv_bytes=1, hw=hw, p=p).time_s)
        bf16 = float(attention_decode_cost(**shape, kv_bytes=2, hw=hw, p=p).time_s)
        if cheaper:
            assert fp8 < 0.9 * bf16
        else:  # only the halved bytes differ: the fixed cost is the 16-bit kernel's
            assert fp8 > 0.9 * bf16


def test_16bit_grouped_decode_prices_tma_ctas_only_where_trtllm_gen_runs():
    """On sm_100 / sm_103 TensorRT-LLM decodes 16-bit caches with trtllm-gen (hardware/kernels.yaml
    attention_decode_tma_grouped), whose CTAs cost what the TMA FP8 kernel's do; on Hopper the 16-bit
    grouped kernel is XQA's mma.sync kernel with its own per-CTA lump. Same parameters on both GPUs."""
    from simfront.attention import _params, attention_decode_cost

    h100, b200 = get_hardware("h100_sxm"), get_hardware("b200_sxm")
    assert kernels.has_native("attention_decode_tma_grouped", b200)
    assert not kernels.has_native("attention_decode_tma_grouped", h100)
    assert not kernels.has_native("attention_decode_tma_grouped", get_hardware("rtx_pro_6000_server"))
    shape = dict(batch=1024, kv_len=16, n_heads=32, n_kv_heads=8, head_dim=128, window=0, kv_bytes=2)  # per-CTA bound
    p = _params(None, h100)
    heavy = dict(p, decode_grouped_kv16_unit_s=p["decode_grouped_kv16_unit_s"] * 10)
    for hw, uses_lump in ((h100, True), (b200, False)):
        base = float(attention_decode_cost(**shape, hw=hw, p=p).time_s)
        more = float(attention_decode_cost(**shape, hw=hw, p=heavy).time_s)
        assert (more > 2 * base) if uses_lump else more == pytest.approx(base)


def test_mla_decode_launch_counts_are_kernel_library_data_with_sources():
    # FlashMLA (sm_90): metadata, split-KV and combine kernels; trtllm-gen (sm_100/103): one kernel;
    # the Triton fallback: stage 1 and the reduce stage (hardware/kernels.yaml `launches`).
    assert kernels.launches("mla_decode", get_hardware("h100_sxm")) == 3
    assert kernels.launches("mla_decode", get_hardware("b200_sxm")) == 1
    assert kernels.launches("mla_decode", get_hardware("mi300x")) == 2
    assert kernels.launches("mla_decode", get_hardware("l40s")) == 2
    for k in kernels.table()["mla_decode"].native:
        assert k.launches and k.launches_source, k.kernel
    assert kernels.fallback("mla_decode")["launches_source"]
    cost = kernels.launch_cost()
    assert 0 < cost.per_launch_s < 1e-5 and "us" in cost.source
    h100 = get_hardware("h100_sxm")
    assert kernels.launch_seconds("mla_decode", h100) == pytest.approx(3 * cost.per_launch_s)


def test_mla_decode_prices_each_launch_of_its_kernel_library():
    # Same fitted parameters on both GPUs: at a tiny shape the fixed cost differs by the launch counts (3 vs 1)
    # times the per-launch cost, and nothing else of that size.
    from simfront.mla import DECODE_PARAMS

    p = {k: v[0] for k, v in DECODE_PARAMS.items()}
    h100, b200 = get_hardware("h100_sxm"), get_hardware("b200_sxm")
    t_h = mla_decode_cost(1, 2, 1, 2, h100, p=p).time_s
    t_b = mla_decode_cost(1, 2, 1, 2, b200, p=p).time_s
    assert float(t_h - t_b) == pytest.approx(2 * kernels.launch_cost().per_launch_s, rel=0.1)
    # an op without launch counts says so instead of guessing
    with pytest.raises(Exception, match="launches"):
        kernels.launches("gemm", h100)


def test_a_kernel_caveat_is_a_note_only_where_the_prediction_prices_the_op():
    """Block-scaled FP8 experts on datacenter Blackwell: the calibration times DeepGEMM, engines may serve another
    MoE kernel there, and the prediction says so where it prices FP8-block experts, as on Hopper (CUTLASS, which only
    TensorRT-LLM serves there by itself; vLLM TP and SGLang run Triton's fused MoE); not for an NVFP4-only search."""
    from simfront.models import get_model
    from simfront.priced import priced_configs

    b200, h100 = get_hardware("b200_sxm"), get_hardware("h100_sxm")
    path = kernels.kernel_path("moe_fp8_block_grouped", b200)
    assert path.kernel == "deepgemm-moe" and "trtllm-gen FP8 block-scale MoE" in path.caveat
    assert "Triton" in kernels.kernel_path("moe_fp8_block_grouped", h100).caveat
    assert any("moe_fp8_block_grouped" in n and "may be optimistic" in n for n in kernels.caveat_notes(b200))
    assert [n for n in kernels.caveat_notes(h100) if "moe_fp8_block_grouped" in n and "may be optimistic" in n]
    assert not kernels.caveat_notes(h100, priced_configs(get_model("deepseek-r1"), h100, [("bf16", "bf16", 8)]))
    model = get_model("deepseek-r1")
    fp8_notes = kernels.caveat_notes(b200, priced_configs(model, b200, [("fp8_block", "fp8", 8)]))
    assert any("moe_fp8_block_grouped" in n for n in fp8_notes) and not any("gemm_nvfp4" in n for n in fp8_notes)
    # NVFP4 experts price neither block-FP8 op; their dense NVFP4 GEMMs price the served tactic, which says so
    fp4_notes = kernels.caveat_notes(b200, priced_configs(model, b200, [("nvfp4", "fp8", 8)]))
    assert not any("moe_fp8_block_grouped" in n for n in fp4_notes)
    assert [n for n in fp4_notes if "gemm_nvfp4" in n and "untuned fallback tactic" in n]


def test_an_engine_that_runs_native_mla_only_at_some_heads_prices_the_fallback_elsewhere():
    """SGLang's ROCm MLA backend is aiter only at 16 or 128 KV heads per --tp-size rank (simfront/engines/scheduler.yaml
    mla_native_heads), Triton elsewhere: on MI355X DeepSeek-R1 (128 KV heads) at TP 4 prices the fallback, which
    rereads the latent rows per head block, and at TP 8 or attention DP 8 the native kernel; vLLM and NVIDIA GPUs are
    untouched by the rule. The mask passes through to the op cost."""
    from simfront import api
    from simfront.models import get_model
    from simfront.scheduler import scheduler_settings
    from simfront.step import mla_native_mask

    rule = scheduler_settings("sglang").mla_native_heads
    att = get_model("deepseek-r1").arch.attention
    mi355x, b200 = get_hardware("mi355x"), get_hardware("b200_sxm")
    mask = mla_native_mask(rule, mi355x, att, np.array([8.0, 4.0, 1.0, 2.0]), np.array([1.0, 1.0, 8.0, 1.0]))
    assert mask.tolist() == [True, False, True, False]
    assert mla_native_mask(rule, b200, att, 4.0, 1.0) is None and mla_native_mask((), mi355x, att, 4.0, 1.0) is None
    native = mla_decode_cost(8, 4096, 32, 1, mi355x)
    forced = mla_decode_cost(8, 4096, 32, 1, mi355x, native=False)
    assert forced.mem_bytes > native.mem_bytes and forced.time_s > native.time_s
    both = mla_decode_cost(8, 4096, 32, 1, mi355x, native=np.array([True, False]))
    assert np.allclose(both.time_s, [native.time_s, forced.time_s])

    def attn(engine, tp):
        res = api.explain("deepseek-r1", "8xMI355X", tp=tp, batch=8, ctx=4096, phase="decode", precision="fp8_block",
                          engine=engine)
        return sum(o["time_s"] for o in res["ops"] if o["op"] == "mla.attn_decode")

    assert attn("sglang", 4) > 1.1 * attn("vllm", 4)
    assert attn("sglang", 8) == pytest.approx(attn("vllm", 8))


def test_the_mla_fallback_rule_is_said_where_it_prices():
    """explain says when its layout's MLA decode is priced as the fallback by the engine's rule, and predict says the
    search prices it so at some layouts; neither says it for an engine or GPU the rule does not cover."""
    from simfront import api

    def explain_note(engine, tp):
        return api.explain("deepseek-r1", "8xMI355X", tp=tp, batch=8, ctx=4096, phase="decode", precision="fp8_block",
                           engine=engine)["note"]

    assert "mla_native_heads" in explain_note("sglang", 4) and "has 32" in explain_note("sglang", 4)
    assert "mla_native_heads" not in explain_note("sglang", 8) and "mla_native_heads" not in explain_note("vllm", 4)
    said = lambda engine, gpus: any("Triton fallback" in n for n in api.predict("deepseek-r1", gpus, engine=engine)["notes"])  # noqa: E731
    assert said("sglang", "8xMI355X") and not said("vllm", "8xMI355X") and not said("sglang", "8xB200")

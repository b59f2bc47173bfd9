"""Forward-step invariants: FLOPs, monotonicity, no NaN, split-independence of useful FLOPs."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from simfront.hardware import get_hardware
from simfront.models import get_model
from simfront.step import ELEMENTWISE_OPS, StepBatch, forward_step

MODELS = ["deepseek-r1", "llama-3.1-70b", "kimi-k3", "qwen3.5-397b-a17b", "gpt-oss-120b", "glm-5.3", "llama-4-scout", "mixtral-8x7b"]


def _weights_ratio(model_id, tp, dp, ep, phase, tokens_per_req=1024, batch=8):
    """Useful weight FLOPs of a balanced step over 2 x active params x tokens (LM head on sampled tokens)."""
    m = get_model(model_id)
    hw = get_hardware("b200")
    if phase == "decode":
        sb = StepBatch(decode_reqs=batch, decode_ctx=tokens_per_req)
        tokens, sampled = batch, batch
    else:
        sb = StepBatch(prefill_tokens=batch * tokens_per_req, prefill_seqs=batch)
        tokens, sampled = batch * tokens_per_req, batch
    s = forward_step(m, m.native, hw, tp, 1, dp, ep, sb, routing_alpha=None)
    attn = ("attn.decode", "attn.prefill", "mla.attn_decode", "mla.attn_prefill", "dsa.indexer_decode", "dsa.indexer_prefill",
            "linear_attn.decode", "linear_attn.prefill") + ELEMENTWISE_OPS
    w = sum(float(np.asarray(r.count)) * float(r.cost.flops) * (1 if r.replicated else tp) for r in s.ops if r.name not in attn) * dp
    pc = m.params
    ref = (2.0 * (pc.active - pc.lm_head_active) * tokens + 2.0 * pc.lm_head_active * sampled) * dp
    return w / ref


@pytest.mark.parametrize("mid", MODELS)
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_step_flops_match_active_params(mid, phase):
    """Weight FLOPs = 2 x active params x tokens within 5% (attention and elementwise excluded)."""
    tp = 8 if mid != "mixtral-8x7b" else 2
    ep = tp if get_model(mid).arch.is_moe else 1
    assert abs(_weights_ratio(mid, tp, 1, ep, phase) - 1) < 0.05


def test_useful_flops_do_not_depend_on_split():
    m = get_model("deepseek-r1")
    hw = get_hardware("h200")
    totals = []
    for tp, dp, ep in [(8, 1, 8), (1, 8, 8), (2, 4, 8), (4, 2, 4)]:
        # the same 64 requests spread over the dp ranks
        sb = StepBatch(decode_reqs=64 / dp, decode_ctx=2048)
        s = forward_step(m, m.native, hw, tp, 1, dp, ep, sb, routing_alpha=None)
        totals.append(float(s.model_flops(tp, dp)))
    assert max(totals) / min(totals) - 1 < 0.02, totals


@settings(max_examples=30, deadline=None)
@given(mid=st.sampled_from(MODELS), gpu=st.sampled_from(["h100", "b200", "mi355x", "l40s", "gb200"]),
       b=st.integers(1, 512), ctx=st.integers(1, 200_000), pre=st.integers(0, 16384), tp=st.sampled_from([1, 2, 4, 8]))
def test_no_nan_or_negative(mid, gpu, b, ctx, pre, tp):
    m = get_model(mid)
    if m.arch.attention.n_heads % tp:
        tp = 1
    s = forward_step(m, m.native, get_hardware(gpu), tp, 1, 1, tp if m.arch.is_moe else 1,
                     StepBatch(decode_reqs=b, decode_ctx=ctx, prefill_tokens=pre, prefill_seqs=1 if pre else 0))
    for r in s.ops:
        for leg in (r.cost.time_s, r.cost.flops, r.cost.mem_bytes):
            assert np.all(np.isfinite(leg)) and np.all(np.asarray(leg) >= 0), r.name
    assert float(s.time_s) > 0


@pytest.mark.parametrize("mid", ["deepseek-r1", "llama-3.1-70b", "kimi-k3"])
def test_more_work_never_faster(mid):
    m = get_model(mid)
    hw = get_hardware("h200" if mid != "kimi-k3" else "b300")
    b = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
    t_b = forward_step(m, m.native, hw, 8, 1, 1, 8 if m.arch.is_moe else 1, StepBatch(decode_reqs=b, decode_ctx=4096)).time_s
    assert np.all(np.diff(t_b) >= -1e-12)
    ctx = np.array([128, 1024, 8192, 65536])
    t_c = forward_step(m, m.native, hw, 8, 1, 1, 8 if m.arch.is_moe else 1, StepBatch(decode_reqs=32, decode_ctx=ctx)).time_s
    assert np.all(np.diff(t_c) >= -1e-12)


def test_more_bandwidth_never_slows_decode():
    m = get_model("llama-3.1-70b")
    hw = get_hardware("h100")
    ach = hw.achievable.model_copy(update={"hbm_bandwidth_bytes_per_s": hw.achievable.hbm_bandwidth_bytes_per_s.model_copy(
        update={"value": hw.achievable.hbm_bandwidth_bytes_per_s.value * 2})})  # kernel ops run on achievable peaks
    fast = hw.model_copy(update={"hbm_bandwidth_bytes_per_s": hw.hbm_bandwidth_bytes_per_s * 2, "achievable": ach})
    sb = StepBatch(decode_reqs=16, decode_ctx=4096)
    assert float(forward_step(m, m.native, fast, 8, 1, 1, 1, sb).time_s) < float(forward_step(m, m.native, hw, 8, 1, 1, 1, sb).time_s)


def test_vectorised_equals_scalar():
    m = get_model("deepseek-r1")
    hw = get_hardware("h200")
    tp = np.array([8, 1, 2])[:, None]
    dp = np.array([1, 8, 4])[:, None]
    b = np.array([1, 16, 128])[None, :]
    vec = forward_step(m, m.native, hw, tp, 1, dp, 8, StepBatch(decode_reqs=b, decode_ctx=3000)).time_s
    for i in range(3):
        for j in range(3):
            one = forward_step(m, m.native, hw, int(tp[i, 0]), 1, int(dp[i, 0]), 8, StepBatch(decode_reqs=int(b[0, j]), decode_ctx=3000)).time_s
            assert vec[i, j] == pytest.approx(float(one), rel=1e-9)


def test_every_layer_prices_its_norm_and_activation_kernels():
    """Each layer runs two fused residual-add + RMSNorm kernels; an MLA layer also normalises its query and KV latents
    (q_a_layernorm, kv_a_layernorm: one kernel each) and a shared expert runs its SiLU-and-multiply like a dense MLP;
    a GQA model with a plain MLP has neither extra op."""
    hw = get_hardware("b200")
    sb = StepBatch(decode_reqs=16, decode_ctx=2048)

    def counts(mid):
        m = get_model(mid)
        s = forward_step(m, m.native, hw, 8, 1, 1, 8 if m.arch.is_moe else 1, sb, routing_alpha=None)
        out = {}
        for r in s.ops:
            out[r.name] = out.get(r.name, 0.0) + float(np.asarray(r.count))
        return m.arch.n_layers, out

    n, ds = counts("deepseek-r1")
    assert ds["norms+residual"] == 2 * n
    assert ds["mla.latent_norms"] == 2 * n  # DeepSeek-V3/R1 compress the query too (q_lora_rank 1536)
    assert ds["moe.shared_act"] == sum(layer.ffn == "moe" for layer in get_model("deepseek-r1").arch.layers) == 58
    n, ll = counts("llama-3.1-70b")
    assert ll["norms+residual"] == 2 * n and "mla.latent_norms" not in ll and "moe.shared_act" not in ll


def test_gemms_after_a_norm_or_the_gated_activation_read_their_input_already_quantized():
    """NORM_OR_ACT_INPUT names GEMMs the step emits; in a serving step those GEMMs cost what gemm_cost gives for an input
    that arrives quantized (no quantize pass in FP8 and NVFP4, gemm.FUSED_QUANT_CLASSES), while the attention output
    projection, which reads the attention kernel's output, keeps its pass."""
    from simfront.gemm import gemm_cost
    from simfront.models import apply_precision
    from simfront.step import NORM_OR_ACT_INPUT

    hw = get_hardware("b200")
    sb = StepBatch(decode_reqs=8, decode_ctx=2048)
    emitted = set()
    for mid in MODELS:
        m = get_model(mid)
        emitted |= {r.name for r in forward_step(m, m.native, hw, 8, 1, 1, 8 if m.arch.is_moe else 1, sb, routing_alpha=None).ops}
    assert NORM_OR_ACT_INPUT & emitted >= {"attn.qkv_proj", "mlp.gate_up", "mlp.down", "mla.q_a_proj", "mla.kv_a_proj",
                                          "mla.q_b_proj", "moe.shared_gate_up", "moe.shared_down"}
    assert not {"attn.o_proj", "mla.o_proj", "mla.kv_b_proj", "lm_head"} & NORM_OR_ACT_INPUT
    m = get_model("llama-3.1-70b")
    a, tp, H = m.arch.attention, 8, m.arch.hidden
    inter = m.arch.dense_inter / tp
    for fmt in ("nvfp4", "fp8"):
        ops = {r.name: r.cost for r in forward_step(m, apply_precision(m, fmt), hw, tp, 1, 1, 1, sb, routing_alpha=None).ops}
        # the step prices the served kernel (gemm.served_values: the tuned NVFP4 tactic on this GPU)
        down = gemm_cost(8, H, inter, fmt, hw, static_act_scale=True, fused_act_quant=True, served=True)
        assert float(ops["mlp.down"].time_s) == pytest.approx(float(down.time_s), rel=1e-9)
        o_proj = gemm_cost(8, H, a.n_heads / tp * a.head_dim_v, fmt, hw, static_act_scale=True, served=True)
        assert float(ops["attn.o_proj"].time_s) == pytest.approx(float(o_proj.time_s), rel=1e-9)
        assert float(ops["mlp.down"].time_s) < float(gemm_cost(8, H, inter, fmt, hw, static_act_scale=True, served=True).time_s)

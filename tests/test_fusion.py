"""The engines' TP all-reduce + residual add + RMSNorm fusion (simfront.fusion, scheduler.yaml allreduce_norm_fusion)."""

import numpy as np
import pytest

from simfront.errors import SimfrontError
from simfront.fusion import fused, parse_rules
from simfront.hardware import get_hardware
from simfront.models import get_model
from simfront.scheduler import release_families, scheduler_settings
from simfront.step import StepBatch, forward_step

H = 2 * 8192  # BF16 bytes of one Llama-3.1-70B activation row


def _rules(engine, version):
    return scheduler_settings(engine, version).allreduce_norm_fusion


def test_every_release_family_rule_parses_and_a_bad_key_is_named():
    for engine in ("vllm", "sglang", "trtllm", "default"):
        for fam in release_families(engine):
            scheduler_settings(engine, fam["since"])  # parses its rules
    with pytest.raises(SimfrontError, match="allreduce_norm_fusion has unknown keys.*'max_gb'"):
        parse_rules({"platforms": ["9.0"], "max_gb": 1}, "here")


def test_every_release_family_after_the_first_names_its_release_date():
    """A row with a date and no release takes the newest family out by then: a family without a date would match every
    date (simfront.scheduler.release_family)."""
    for engine in ("vllm", "sglang", "trtllm", "default"):
        from simfront.scheduler import _table, release_key

        fams = sorted(_table()[engine], key=lambda f: release_key(f["since"]))
        assert all(f.get("released") for f in fams[1:]), (engine, [f["since"] for f in fams[1:] if not f.get("released")])


def test_vllm_fuses_from_0_17_on_hopper_and_b200_up_to_flashinfers_message_size():
    arch, h100 = get_model("llama-3.1-70b").arch, get_hardware("h100_sxm")
    tp = np.array([1, 2, 4, 8])
    assert not fused(_rules("vllm", "0.16.0"), arch, h100, tp, 1, 8, 8 * H).any()  # off at every level before 0.17
    new = _rules("vllm", "0.18.0")
    assert fused(new, arch, h100, tp, 1, 8, 8 * H).tolist() == [False, True, True, True]
    # 1 MiB at TP 8 on sm90 (64 tokens of 16 KiB), 2 MiB at TP 4, 64 MiB at TP 2
    big = 200 * H  # 3.1 MiB
    assert fused(new, arch, h100, tp, 1, 200, big).tolist() == [False, True, False, False]
    assert fused(new, arch, get_hardware("b200_sxm"), tp, 1, 200, big).tolist() == [False, True, True, False]  # 32 MiB at TP 4
    assert not fused(new, arch, get_hardware("b300_sxm"), 8, 1, 8, 8 * H).any()  # no threshold for 10.3 in vLLM's table


def test_sglang_fuses_the_models_it_lists_without_attention_dp_inside_one_hopper_host():
    r1, qwen_dense, h100 = get_model("deepseek-r1").arch, get_model("qwen3-32b").arch, get_hardware("h100_sxm")
    rules = _rules("sglang", "0.5.9")
    assert fused(rules, r1, h100, 8, 1, 64, 64 * 2 * r1.hidden).all()
    assert not fused(rules, r1, h100, 8, 2, 64, 64 * 2 * r1.hidden).any()  # attention DP
    assert not fused(rules, r1, h100, 16, 1, 64, 64 * 2 * r1.hidden).any()  # two hosts on sm90
    assert not fused(rules, r1, h100, 8, 1, 4096, 4096 * 2 * r1.hidden).any()  # above 2,048 tokens
    assert not fused(rules, qwen_dense, h100, 8, 1, 64, 64 * 2 * qwen_dense.hidden).any()  # not a listed model
    assert not fused(rules, r1, get_hardware("h20"), 8, 1, 64, 64 * 2 * r1.hidden).any()  # left out on H20
    assert not fused(_rules("sglang", "0.5.6"), r1, h100, 8, 1, 64, 64 * 2 * r1.hidden).any()  # sm100 only then
    assert fused(_rules("sglang", "0.5.6"), r1, get_hardware("b200_sxm"), 8, 1, 64, 64 * 2 * r1.hidden).all()


def test_tensorrt_llm_fuses_llama_above_hidden_4096_only_and_not_without_peer_links():
    rules = _rules("trtllm", "1.2.0")
    h100 = get_hardware("h100_sxm")
    assert fused(rules, get_model("llama-3.1-70b").arch, h100, 4, 1, 16, 16 * H).all()
    assert not fused(rules, get_model("llama-3.1-8b").arch, h100, 4, 1, 16, 16 * 2 * 4096).any()
    assert not fused(rules, get_model("llama-3.1-70b").arch, get_hardware("h100_pcie"), 4, 1, 16, 16 * H).any()
    assert not fused(rules, get_model("llama-3.1-70b").arch, h100, 4, 1, 1024, 1024 * H).any()  # 16 MB > 8 MB workspace


def test_a_fused_step_drops_the_norms_that_follow_its_all_reduces_and_nothing_else():
    m, hw = get_model("llama-3.1-70b"), get_hardware("h100_sxm")
    rules = _rules("trtllm", "1.2.0")
    dec = StepBatch(decode_reqs=16, decode_ctx=2048, q_tokens=1)
    for tp, expect_norms in ((4, 0.0), (1, 2.0 * m.arch.n_layers)):
        plain = forward_step(m, m.precision, hw, tp, 1, 1, 1, dec)
        fus = forward_step(m, m.precision, hw, tp, 1, 1, 1, dec, allreduce_norm_fusion=rules)
        norms = {r.name: float(np.sum(r.count)) for r in fus.ops}["norms+residual"]
        assert norms == expect_norms
        gone = [r for r in plain.ops if r.name == "norms+residual"]
        saved = sum(float(np.sum(np.asarray(r.count) * r.expand(r.cost_rows.time_s))) for r in gone) if tp > 1 else 0.0
        assert float(plain.time_s) - float(fus.time_s) == pytest.approx(saved, rel=1e-9, abs=1e-12)
    # a prefill step beyond the fused kernel's message size keeps its norms
    pre = StepBatch(prefill_tokens=8192, prefill_seqs=1, sampled=1)
    assert float(forward_step(m, m.precision, hw, 4, 1, 1, 1, pre, allreduce_norm_fusion=rules).time_s) == \
        float(forward_step(m, m.precision, hw, 4, 1, 1, 1, pre).time_s)


def test_an_attention_dp_moe_layer_keeps_the_norm_after_its_all_to_all():
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    rules = _rules("vllm", "0.18.0")  # fuses under data parallelism too
    dec = StepBatch(decode_reqs=8, decode_ctx=2048, q_tokens=1)
    st = forward_step(m, m.precision, hw, 2, 1, 4, 8, dec, allreduce_norm_fusion=rules)
    counts = {(r.name, r.group): float(np.sum(r.count)) for r in st.ops}
    dense = sum(1 for layer in m.arch.layers if layer.ffn == "dense")
    moe = m.arch.n_layers - dense
    assert counts[("norms+residual", "full/dense")] == 0.0  # both norms follow a TP all-reduce
    assert counts[("norms+residual", "full/moe")] == moe  # the one after the MoE combine stays


def test_explain_prices_the_fusion_of_the_release_it_is_asked_for():
    from simfront import api

    old = api.explain("gpt-oss-120b", "8xH100", tp=8, batch=8, isl=1024, osl=1024, engine="vllm", engine_version="0.16.0")
    new = api.explain("gpt-oss-120b", "8xH100", tp=8, batch=8, isl=1024, osl=1024, engine="vllm", engine_version="0.18.0")
    assert new.step_time_s < old.step_time_s
    assert "as one kernel" in new.note and "as one kernel" not in old.note  # says why the norms left the op list
    one_old = api.explain("gpt-oss-120b", "1xH100", tp=1, batch=8, isl=1024, osl=1024, engine="vllm", engine_version="0.16.0")
    one_new = api.explain("gpt-oss-120b", "1xH100", tp=1, batch=8, isl=1024, osl=1024, engine="vllm", engine_version="0.18.0")
    assert one_new.step_time_s == one_old.step_time_s


def test_explains_profile_stays_numbers_when_the_engine_has_fusion_rules():
    """The ``profile`` of ``explain --json`` is the engine's numbers; the rules it prices with (not numbers, with
    unbounded token caps) stay out of it, as the fuzzer found (scripts/fuzz_api.py: non-finite values)."""
    import math

    from simfront import api

    for engine in ("trtllm", "sglang", "vllm"):
        prof = api.explain("deepseek-r1", "8xB200", tp=8, ep=8, batch=1, ctx=4096, engine=engine).profile
        assert all(isinstance(v, float) and math.isfinite(v) for v in prof.values()), engine


def test_predict_prices_the_fusion_of_the_engine_version_named():
    """--engine-version reaches the workload the search prices (its fusion rules), not only the fitted profile (plan builds
    its workload the same way)."""
    from simfront import api

    kw = dict(isl=1024, osl=1024, modes=["agg"], engine="vllm")
    old = api.predict("gpt-oss-120b", "8xH100", engine_version="0.16.0", **kw).points
    new = api.predict("gpt-oss-120b", "8xH100", engine_version="0.18.0", **kw).points
    for tp in (8, 1):
        a, b = old["tpot_ms"][old["tp"] == tp], new["tpot_ms"][new["tp"] == tp]
        assert a.size == b.size > 0 and np.all(b <= a * (1 + 1e-12))
        # TP 8: steps up to FlashInfer's 1 MiB (182 tokens of gpt-oss) fuse, larger ones do not; TP 1 has no all-reduce
        assert np.any(b < a) if tp > 1 else np.allclose(a, b)

"""Memory accounting: KV bytes per token, weights per GPU, fit verdicts (with the arithmetic)."""

import numpy as np
import pytest

from simfront.hardware import get_hardware, parse_gpus
from simfront.memory import kv_bytes_per_token, kv_geometry, plan_memory, weight_bytes, weight_bytes_per_gpu
from simfront.models import apply_precision, get_model
from simfront.sizing import memory_verdict, min_gpus

# KV bytes per token with BF16 KV, from shared/reference/specs.md §B (derived from the configs):
# GQA 2*L*kv*hd*2; MLA L*576*2; DSA adds 132 B per indexer layer; windowed layers excluded.
SPEC_KV = {
    "kimi-k2": 70272, "kimi-k2.5": 70272, "kimi-k3": 27648, "deepseek-v3": 70272, "deepseek-r1": 70272,
    "deepseek-v3.2": 70272 + 8052, "glm-5": 89856 + 10296, "glm-5.3": 89856 + 2772,
    "qwen3-235b-a22b": 192512, "qwen3-30b-a3b": 98304, "qwen3-32b": 262144, "qwen3-8b": 147456,
    "qwen3.5-397b-a17b": 30720, "llama-3.1-8b": 131072, "llama-3.1-70b": 327680, "llama-3.3-70b": 327680,
    "llama-3.1-405b": 516096, "llama-4-scout": 49152, "llama-4-maverick": 49152, "llama-2-70b": 327680,
    "gpt-oss-120b": 36864, "gpt-oss-20b": 24576, "mixtral-8x7b": 131072, "mixtral-8x22b": 229376,
    "minimax-m2.5": 253952,
}


@pytest.mark.parametrize("mid,expected", sorted(SPEC_KV.items()))
def test_kv_bytes_per_token(mid, expected):
    assert kv_bytes_per_token(get_model(mid), "bf16") == expected


def test_windowed_and_state_parts():
    # Llama 4: 36 chunked layers (8192 window) hold 36*2*8*128*2 = 147,456 B/token up to 8k tokens
    g = kv_geometry(get_model("llama-4-scout"), "bf16")
    assert g.windowed_per_token == 147456 and g.window == 8192
    assert g.seq_bytes(100_000) == 49152 * 100_000 + 147456 * 8192
    # gpt-oss sliding layers cap at 128 tokens: 18*2*8*64*2*128 = 4.72 MB per sequence
    g = kv_geometry(get_model("gpt-oss-120b"), "bf16")
    assert g.windowed_per_token * g.window == 18 * 2 * 8 * 64 * 2 * 128
    # Kimi K3: 69 KDA layers x 96 heads x 128 x 128 x 4 B state + conv state, per sequence
    g = kv_geometry(get_model("kimi-k3"), "bf16")
    assert g.per_seq >= 69 * 96 * 128 * 128 * 4
    assert kv_geometry(get_model("kimi-k3"), "bf16", tp=8).per_seq == pytest.approx(g.per_seq / 8)


def test_fp8_kv_halves_and_mla_not_split_by_tp():
    m = get_model("deepseek-r1")
    assert kv_bytes_per_token(m, "fp8") == 70272 / 2
    assert kv_geometry(m, "bf16", tp=8).per_token == kv_geometry(m, "bf16", tp=1).per_token
    # GQA heads are split by TP until TP exceeds the KV heads, then replicated
    l70 = get_model("llama-3.1-70b")
    per = [float(kv_geometry(l70, "bf16", tp=t).per_token) for t in (1, 2, 8, 16)]
    assert per == [327680, 163840, 40960, 40960]


def test_weights_split_and_replication():
    m = get_model("deepseek-r1")
    p = m.native
    total = weight_bytes(m, p)
    one = weight_bytes_per_gpu(m, p, 1, 1, 1, 1)
    assert one == pytest.approx(total, rel=1e-9)
    tp8 = weight_bytes_per_gpu(m, p, 8, 1, 1, 8)
    dpa8 = weight_bytes_per_gpu(m, p, 1, 1, 8, 8)  # attention replicated on every DP rank
    assert dpa8 > tp8 > total / 8 * 0.99
    # more GPUs in any axis never increases bytes per GPU
    assert weight_bytes_per_gpu(m, p, 8, 2, 1, 8) < tp8


def test_kimi_k3_does_not_fit_8xb200_but_fits_8xb300():
    # Kimi K3: ~2.7T routed-expert params in MXFP4 (0.53125 B) + ~90B BF16 elsewhere ~= 1,560 GB.
    # Over 8 GPUs that is ~181.6 GiB per GPU: more than B200's 180 GiB, well inside B300's 268.6 GiB.
    k3 = get_model("kimi-k3")
    v = memory_verdict(k3, k3.precision, parse_gpus("8xB200"), 1024, 1024)
    assert not v.fits and v.min_gpus == 16 and "fits on 16x" in v.reason
    assert "8xb300_sxm" in v.alternatives
    assert memory_verdict(k3, k3.precision, parse_gpus("8xB300"), 1024, 1024).fits


def test_deepseek_r1_fp8_needs_more_than_8xh100():
    # 671B params in block FP8 (~1 B each) + BF16 embeddings = 673 GB: 78.4 GiB per H100 before any
    # runtime reserve or KV, against 80 GiB. 8xH200 (141 GiB each) leaves ~50 GiB per GPU for KV.
    r1 = get_model("deepseek-r1")
    assert not memory_verdict(r1, r1.precision, parse_gpus("8xH100"), 1024, 1024).fits
    v = memory_verdict(r1, r1.precision, parse_gpus("8xH200"), 1024, 1024)
    assert v.fits and v.max_concurrency > 100


def test_small_model_fits_one_gpu_and_lower_precision_fits_sooner():
    l8 = get_model("llama-3.1-8b")
    assert min_gpus(l8, l8.native, get_hardware("h100"), 2048) == 1
    l405 = get_model("llama-3.1-405b")
    n16 = min_gpus(l405, l405.native, get_hardware("h100"), 2048)
    n4 = min_gpus(l405, apply_precision(l405, "nvfp4"), get_hardware("b200"), 2048)
    assert n16 == 16 and n4 is not None and n4 <= 4


def test_capacity_grows_with_memory_and_shrinks_with_context():
    m = get_model("llama-3.1-70b")
    h100, h200 = get_hardware("h100"), get_hardware("h200")
    a = plan_memory(m, m.native, h100, 8, 1, 1, 1, 1, 4096)
    b = plan_memory(m, m.native, h200, 8, 1, 1, 1, 1, 4096)
    c = plan_memory(m, m.native, h200, 8, 1, 1, 1, 1, 32768)
    assert b.max_concurrency > a.max_concurrency > 0
    assert c.max_concurrency < b.max_concurrency
    assert np.all(np.isfinite(b.kv_budget_bytes_per_gpu))


# ---------------------------------------------------------------- engines' memory fractions

from simfront.memory import KV_CACHE_FRACTION, kv_budget_bytes, memory_fraction_for_pool  # noqa: E402
from simfront.scheduler import KV_MEMORY_RULES, scheduler_settings  # noqa: E402

GIB = 2**30


@pytest.mark.parametrize("rule", KV_MEMORY_RULES)
def test_each_engine_rule_turns_a_fraction_into_a_pool_and_back(rule):
    hbm, w, r = 180 * GIB, np.array([8.0, 78.4, 150.0]) * GIB, 4.8 * GIB
    pool = kv_budget_bytes(hbm, w, r)  # what simfront prices: KV_CACHE_FRACTION of the free memory
    assert np.allclose(pool, KV_CACHE_FRACTION * (hbm - w - r))
    f = memory_fraction_for_pool(hbm, w, r, pool, rule)
    assert np.all((f > 0) & (f <= 1))
    assert np.allclose(kv_budget_bytes(hbm, w, r, f, rule), pool)
    # a larger fraction never gives a smaller pool, under every rule
    assert np.all(np.diff(kv_budget_bytes(hbm, w[1], r, np.linspace(0.5, 1.0, 11), rule)) >= 0)


def test_the_rules_mean_what_the_engines_say():
    hbm, w, r = 180 * GIB, 78.4 * GIB, 4.8 * GIB
    # TensorRT-LLM free_gpu_memory_fraction: a share of what is free after weights and runtime
    assert kv_budget_bytes(hbm, w, r, 0.9, "free") == pytest.approx(0.9 * (hbm - w - r))
    # vLLM gpu_memory_utilization: weights, runtime and pool together in the share
    assert kv_budget_bytes(hbm, w, r, 0.9, "total") == pytest.approx(0.9 * hbm - w - r)
    # SGLang mem_fraction_static: weights and pool in the share (activations and graphs outside it)
    assert kv_budget_bytes(hbm, w, r, 0.82, "total_static") == pytest.approx(0.82 * hbm - w)
    # weights beyond the share: no pool at all (SGLang would not start)
    assert kv_budget_bytes(hbm, 150 * GIB, r, 0.82, "total_static") == 0.0
    with pytest.raises(Exception, match="unknown KV memory rule"):
        kv_budget_bytes(hbm, w, r, 0.9, "half")
    assert {e: scheduler_settings(e).kv_memory_rule for e in ("trtllm", "vllm", "sglang")} == \
        {"trtllm": "free", "vllm": "total", "sglang": "total_static"}

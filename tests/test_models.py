"""Model catalog, config parsing, precision and parameter counts."""

import json

import pytest

from simfront.architecture import parse_arch
from simfront.errors import SimfrontError
from simfront.models import all_models, apply_precision, catalog_ids, get_model, model_from_config

REQUIRED_IDS = """kimi-k3 kimi-k2 kimi-k2.5 deepseek-v3 deepseek-r1 deepseek-v3.2 glm-5 glm-5.3 qwen3-8b qwen3-32b
qwen3-30b-a3b qwen3-235b-a22b qwen3.5-397b-a17b llama-3.1-8b llama-3.1-70b llama-3.3-70b llama-3.1-405b llama-4-scout
llama-4-maverick llama-2-70b gpt-oss-20b gpt-oss-120b mixtral-8x7b mixtral-8x22b minimax-m2.5""".split()


def test_catalog_has_required_ids():
    assert set(REQUIRED_IDS) <= set(catalog_ids())


@pytest.mark.parametrize("mid", catalog_ids())
def test_param_counts_match_published(mid):
    """Total within 3% and active within 8% (or the figure's rounding) of the authors' figures, in their convention."""
    m = get_model(mid)
    assert m.published_total and m.published_active, f"{mid} lacks a published figure"
    pc = m.params
    active = m.active_in_published_convention()
    assert abs(pc.total / m.published_total - 1) <= 0.03, (mid, pc.total)
    assert abs(active - m.published_active) <= max(0.08 * m.published_active, m.published_active_rounding / 2), (mid, active)


def test_active_leaves_out_the_embedding_lookup_but_counts_the_lm_head():
    """gpt-oss: OpenAI model card 5.1B (120b) and 3.6B (20b) active, embedding table not counted."""
    for mid, published in (("gpt-oss-120b", 5.1e9), ("gpt-oss-20b", 3.6e9)):
        pc = get_model(mid).params
        assert abs(pc.active / published - 1) < 0.02, (mid, pc.active)
    # the same rule for every model: active = total - embedding - inactive experts (untied head)
    for m in all_models():
        pc = m.params
        head_extra = pc.lm_head_active if m.arch.tie_embeddings else 0.0
        assert pc.active == pytest.approx(pc.total - pc.embedding - (pc.experts - pc.experts_active) + head_extra), m.id
    dense = get_model("llama-3.1-8b").params
    assert dense.total - dense.active == 128256 * 4096  # exactly the input-embedding table


def test_exact_known_recounts():
    # Llama-3.1-8B: 32 layers x (4096*(4096+2*1024) + 4096*4096 + 3*4096*14336) + 2*128256*4096 + norms
    m = get_model("llama-3.1-8b")
    layer = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336 + 2 * 4096
    expected = 32 * layer + 2 * 128256 * 4096 + 4096
    assert m.params.total == expected


@pytest.mark.parametrize("name,mid,prec", [
    ("moonshotai/Kimi-K3", "kimi-k3", None),
    ("deepseek-ai/DeepSeek-R1", "deepseek-r1", None),
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1", None),
    ("nvidia/DeepSeek-R1-0528-FP4", "deepseek-r1", "nvfp4"),
    ("nvidia/Llama-3.1-405B-Instruct-FP4", "llama-3.1-405b", "nvfp4"),
    ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", "fp8_block"),
    ("KIMI-K3", "kimi-k3", None),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b", None),
])
def test_hf_ids_resolve(name, mid, prec):
    m = get_model(name)
    assert m.id == mid
    assert m.name_precision == prec


def test_nvfp4_modelopt_recipe_keeps_attention_bf16_and_fp8_kv():
    m = get_model("nvidia/DeepSeek-V3.2-NVFP4")
    p = m.precision
    assert (p.attention, p.experts, p.kv) == ("bf16", "nvfp4", "fp8")


@pytest.mark.parametrize("mid,experts,attn", [
    ("deepseek-r1", "fp8_block", "fp8_block"), ("gpt-oss-120b", "mxfp4", "bf16"),
    ("kimi-k3", "mxfp4", "bf16"), ("kimi-k2.5", "w4a16", "bf16"), ("minimax-m2.5", "fp8_block", "fp8_block"),
    ("llama-3.1-70b", "bf16", "bf16"),
])
def test_native_precision_from_quantization_config(mid, experts, attn):
    p = get_model(mid).native
    assert (p.experts, p.attention) == (experts, attn)


def test_precision_override():
    m = get_model("deepseek-r1")
    p = apply_precision(m, "nvfp4", "fp8")
    # NVIDIA's DeepSeek-R1 FP4 checkpoint leaves attention in BF16 (ModelOpt quantises from BF16 weights)
    assert (p.experts, p.dense, p.attention, p.kv) == ("nvfp4", "nvfp4", "bf16", "fp8")
    assert get_model("nvidia/DeepSeek-R1-0528-FP4").precision.attention == "bf16"
    # other 4-bit recipes keep an 8-bit native attention
    assert apply_precision(m, "mxfp4").attention == "fp8_block"
    dense = apply_precision(get_model("llama-3.1-70b"), "nvfp4")
    assert dense.attention == "nvfp4"
    with pytest.raises(SimfrontError, match="precision"):
        apply_precision(m, "fp3")
    with pytest.raises(SimfrontError, match="kv-dtype"):
        apply_precision(m, None, "int2")


def test_architecture_features():
    k3 = get_model("kimi-k3").arch
    assert k3.count(mixer="linear") == 69 and k3.count(mixer="full") == 24
    assert k3.moe.latent_dim == 3584 and k3.moe.n_shared == 2 and k3.attention.kind == "mla"
    oss = get_model("gpt-oss-120b").arch
    assert oss.count(mixer="sliding") == 18 and oss.layers[0].mixer == "sliding" and oss.layers[0].window == 128
    scout = get_model("llama-4-scout").arch
    assert scout.count(mixer="chunked") == 36 and scout.count(mixer="full") == 12
    mav = get_model("llama-4-maverick").arch
    assert mav.count(ffn="moe") == 24 and mav.count(ffn="dense") == 24
    ds = get_model("deepseek-v3.2").arch
    assert ds.attention.index_topk == 2048 and ds.count(ffn="dense") == 3 and ds.mtp_layers == 1
    glm = get_model("glm-5.3").arch
    assert glm.count(indexer="full") == 21 and glm.count(indexer="shared") == 57
    qwen = get_model("qwen3.5-397b-a17b").arch
    assert qwen.linear.kind == "gdn" and qwen.count(mixer="linear") == 45
    assert qwen.moe.n_shared == 1


def test_model_from_config_path(tmp_path):
    cfg = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
           "intermediate_size": 4096, "vocab_size": 32000, "torch_dtype": "bfloat16"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = get_model(str(p))
    assert m.arch.attention.n_kv_heads == 2 and m.arch.n_layers == 4
    assert m.params.total == 4 * (1024 * (1024 + 2 * 256) + 1024 * 1024 + 3 * 1024 * 4096 + 2 * 1024) + 2 * 32000 * 1024 + 1024


def test_bad_configs(tmp_path):
    with pytest.raises(SimfrontError, match="num_hidden_layers"):
        parse_arch({"hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 4}, "x")
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(SimfrontError, match="malformed"):
        model_from_config(bad)
    with pytest.raises(SimfrontError, match="did you mean"):
        get_model("kimi-k33")
    # a file that is not a catalog name is read as the config.json it was given as, whatever its suffix
    other = tmp_path / "notes.txt"
    other.write_text("these are my notes\n")
    with pytest.raises(SimfrontError, match="notes.txt: malformed config.json"):
        get_model(str(other))


def test_config_file_without_json_suffix(tmp_path):
    cfg = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
           "intermediate_size": 4096, "vocab_size": 32000, "torch_dtype": "bfloat16"}
    p = tmp_path / "my-model-config"
    p.write_text(json.dumps(cfg))
    assert get_model(str(p)).arch.n_layers == 4


def test_every_catalog_model_parses_and_describes():
    for m in all_models():
        assert m.params.total >= m.params.active > 0
        assert m.arch.describe()
        assert m.warnings == (), (m.id, m.warnings)  # every key of a shipped config is known (config_keys.yaml)

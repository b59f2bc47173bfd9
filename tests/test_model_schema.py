"""Hostile config.json files (issue 15 items 3-5): one SimfrontError line each, naming the field, its
value and what would be valid; nothing nonsensical accepted, nothing hangs. Plus the CLI contract."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simfront.errors import SimfrontError
from simfront.model_schema import MAX_LAYERS, unknown_keys
from simfront.models import get_model

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "models" / "configs"

DENSE = {"model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 2, "intermediate_size": 4096, "vocab_size": 32000, "torch_dtype": "bfloat16"}
MOE = dict(DENSE, model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=512, decoder_sparse_step=1)
MLA = dict(DENSE, model_type="deepseek_v3", kv_lora_rank=512, q_lora_rank=0, qk_nope_head_dim=128, qk_rope_head_dim=64,
           v_head_dim=128, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=512, first_k_dense_replace=1)
LLAMA4 = dict(DENSE, model_type="llama4_text", num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2,
              intermediate_size_mlp=4096)


def _write(tmp_path: Path, cfg, name="config.json") -> Path:
    p = tmp_path / name
    p.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return p


def _one_line_error(path: Path) -> str:
    with pytest.raises(SimfrontError) as ei:
        get_model(str(path))
    msg = str(ei.value)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


# (case id, config (dict or raw text), words the one-line error must contain)
REPROS = [
    ("num_attention_heads 0", dict(DENSE, num_attention_heads=0), ["num_attention_heads", "= 0", ">= 1"]),
    ("hidden_size string", dict(DENSE, hidden_size="big"), ["hidden_size", '"big"', "whole number"]),
    ("hidden_size list", dict(DENSE, hidden_size=[4096]), ["hidden_size", "[4096]", "whole number"]),
    ("hidden_size NaN", '{"hidden_size": NaN, "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 10, "intermediate_size": 8}',
     ["hidden_size", "NaN", "finite"]),
    ("vocab Infinity", '{"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": Infinity, "intermediate_size": 8}',
     ["vocab_size", "Infinity", "finite"]),
    ("rope NaN", '{"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 10, "intermediate_size": 8, "rope_theta": -Infinity}',
     ["rope_theta", "-Infinity"]),
    ("layer_types int", dict(DENSE, layer_types=5), ["layer_types", "= 5", "list"]),
    ("layer_types unknown kind", dict(DENSE, layer_types=["full_attention", "mamba", "full_attention", "full_attention"]),
     ["layer_types[1]", '"mamba"', "full_attention"]),
    ("layer_types length", dict(DENSE, layer_types=["full_attention"] * 3), ["layer_types", "one entry per layer", "4"]),
    ("quantization_config string", dict(DENSE, quantization_config="fp8"), ["quantization_config", '"fp8"', "JSON object"]),
    ("quant_method unknown", dict(DENSE, quantization_config={"quant_method": "eetq"}), ["quant_method", '"eetq"', "awq"]),
    ("gptq 3-bit", dict(DENSE, quantization_config={"quant_method": "gptq", "bits": 3}), ["bits", "= 3", "4-bit"]),
    ("text_config string", dict(DENSE, text_config="x"), ["text_config", '"x"', "JSON object"]),
    ("text_config bad field", {"model_type": "gemma3", "text_config": {"hidden_size": -5, "num_hidden_layers": 2}},
     ["text_config.hidden_size", "-5", ">= 1"]),
    ("interleave_moe_layer_step 0", dict(LLAMA4, interleave_moe_layer_step=0), ["interleave_moe_layer_step", "= 0", ">= 1"]),
    ("negative hidden_size", dict(DENSE, hidden_size=-4096), ["hidden_size", "-4096", ">= 1"]),
    ("hidden_size 0", dict(DENSE, hidden_size=0), ["hidden_size", "= 0", ">= 1"]),
    ("kv heads 0", dict(DENSE, num_key_value_heads=0), ["num_key_value_heads", "= 0", ">= 1"]),
    ("kv heads above heads", dict(DENSE, num_key_value_heads=16), ["num_key_value_heads", "16", "<= num_attention_heads (8)"]),
    ("kv heads not dividing", dict(DENSE, num_key_value_heads=3), ["num_key_value_heads", "= 3", "divide", "1, 2, 4, 8"]),
    ("vocab 0", dict(DENSE, vocab_size=0), ["vocab_size", "= 0", ">= 1"]),
    ("negative head_dim", dict(DENSE, head_dim=-128), ["head_dim", "-128", ">= 1"]),
    ("negative kv_lora_rank", dict(MLA, kv_lora_rank=-512), ["kv_lora_rank", "-512", ">= 0"]),
    ("negative sliding_window", dict(DENSE, model_type="mistral", sliding_window=-4096), ["sliding_window", "-4096", ">= 0"]),
    ("negative experts", dict(MOE, num_experts=-8), ["num_experts", "-8", ">= 0"]),
    ("negative shared experts", dict(MLA, n_shared_experts=-1), ["n_shared_experts", "-1", ">= 0"]),
    ("top-k above experts", dict(MOE, num_experts_per_tok=16), ["num_experts_per_tok", "16", "<= the number of experts (8)"]),
    ("fractional hidden_size", dict(DENSE, hidden_size=1024.5), ["hidden_size", "1024.5", "whole number"]),
    ("integral float", dict(DENSE, intermediate_size=4096.0), ["intermediate_size", "4096.0", "JSON integer (4096)"]),
    ("boolean size", dict(DENSE, num_hidden_layers=True), ["num_hidden_layers", "= true", "whole number", "a boolean"]),
    ("boolean flag as string", dict(DENSE, tie_word_embeddings="yes"), ["tie_word_embeddings", '"yes"', "true or false"]),
    ("10^7 layers", dict(DENSE, num_hidden_layers=10**7), ["num_hidden_layers", "10000000", f"<= {MAX_LAYERS}", "MAX_LAYERS"]),
    ("hidden not multiple of heads", dict(DENSE, hidden_size=1001), ["hidden_size", "1001", "multiple of num_attention_heads"]),
    ("missing field", {k: v for k, v in DENSE.items() if k != "vocab_size"}, ["missing required field", "vocab_size"]),
    ("first_k_dense beyond layers", dict(MLA, first_k_dense_replace=9), ["first_k_dense_replace", "<= num_hidden_layers (4)"]),
    ("kda layer beyond layers", dict(DENSE, linear_attn_config={"num_heads": 8, "head_dim": 64, "kda_layers": [1, 9]}),
     ["kda_layers", "<= num_hidden_layers (4)"]),
    ("sliding layers without window", dict(DENSE, layer_types=["sliding_attention"] * 4), ["sliding_window"]),
    ("top-level array", "[1, 2, 3]", ["JSON object"]),
    ("malformed json", "{not json", ["malformed config.json"]),
    ("deeply nested", "[" * 100000 + "]" * 100000, ["malformed config.json", "nested"]),
]


@pytest.mark.parametrize("case,cfg,words", REPROS, ids=[r[0] for r in REPROS])
def test_hostile_config_gives_one_line_error(tmp_path, case, cfg, words):
    msg = _one_line_error(_write(tmp_path, cfg))
    for w in words:
        assert w in msg, (case, w, msg)


def test_binary_garbage(tmp_path):
    p = tmp_path / "config.json"
    p.write_bytes(bytes(range(256)) * 8)
    assert "not UTF-8" in _one_line_error(p)


@pytest.mark.parametrize("n,words", [(10**7, ["too large for a config.json", "16 MiB"]), (5 * 10**5, ["num_hidden_layers", "500000", "MAX_LAYERS"])])
def test_huge_layer_lists_do_not_hang(tmp_path, n, words):
    """10^7 layers with one layer_types entry each (180 MB): refused by the file-size bound before parsing;
    5x10^5 (9 MB): parsed, refused by the layer bound. Both within seconds."""
    p = _write(tmp_path, dict(DENSE, num_hidden_layers=n, layer_types=["full_attention"] * n))
    t0 = time.perf_counter()
    msg = _one_line_error(p)
    assert all(w in msg for w in words), msg
    assert time.perf_counter() - t0 < 30


def test_a_config_at_the_layer_bound_is_accepted(tmp_path):
    m = get_model(str(_write(tmp_path, dict(DENSE, num_hidden_layers=MAX_LAYERS))))
    assert m.arch.n_layers == MAX_LAYERS


@pytest.mark.parametrize("hq,words", [
    ("{broken", ["hf_quant_config.json", "malformed"]),
    ('"NVFP4"', ["hf_quant_config.json", '"NVFP4"', "JSON object"]),
    ('{"quantization": {"quant_algo": 4}}', ["quantization.quant_algo", "= 4", "string"]),
    ('{"quantization": {"quant_algo": "INT3_MAGIC"}}', ["quant_algo", '"INT3_MAGIC"', "NVFP4"]),
    ('{"quantization": {"quant_algo": "NVFP4", "exclude_modules": "lm_head"}}', ["exclude_modules", '"lm_head"', "list"]),
    ('{"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "INT2"}}', ["kv_cache_quant_algo", '"INT2"', "FP8"]),
])
def test_malformed_hf_quant_config_beside_the_config(tmp_path, hq, words):
    _write(tmp_path, DENSE)
    (tmp_path / "hf_quant_config.json").write_text(hq)
    msg = _one_line_error(tmp_path / "config.json")
    for w in words:
        assert w in msg, (w, msg)


def test_valid_hf_quant_config_beside_the_config_is_read(tmp_path):
    _write(tmp_path, MOE)
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "exclude_modules": ["model.layers.0.self_attn*"]}}))
    p = get_model(str(tmp_path / "config.json")).native
    assert (p.attention, p.experts, p.kv) == ("bf16", "nvfp4", "fp8")


@pytest.mark.parametrize("qc", [
    {"bits": 4, "group_size": 128, "quant_method": "awq", "version": "gemm", "zero_point": True},
    {"bits": 4, "group_size": 128, "desc_act": False, "quant_method": "gptq", "sym": True},
    {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
    {"quant_method": "compressed-tensors", "format": "pack-quantized",
     "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}, "targets": ["Linear"]}}},
])
def test_int4_weight_only_checkpoints_read_as_w4a16(tmp_path, qc):
    p = get_model(str(_write(tmp_path, dict(DENSE, quantization_config=qc)))).native
    assert (p.attention, p.dense, p.experts, p.embedding) == ("w4a16", "w4a16", "w4a16", "bf16")


def test_bitsandbytes_8bit_is_reported_not_guessed(tmp_path):
    msg = _one_line_error(_write(tmp_path, dict(DENSE, quantization_config={"quant_method": "bitsandbytes", "load_in_8bit": True})))
    assert "load_in_4bit" in msg and "w4a16" in msg


def test_unknown_keys_are_warnings_on_the_model(tmp_path):
    # a key simfront neither reads nor knows (hybrid_override_pattern, which marks Mamba layers, is refused instead:
    # tests/test_model_configs_unsupported.py)
    m = get_model(str(_write(tmp_path, dict(DENSE, residual_multiplier_v2=0.5, rms_norm_eps=1e-5))))
    assert len(m.warnings) == 1 and "residual_multiplier_v2" in m.warnings[0] and "rms_norm_eps" not in m.warnings[0]
    assert unknown_keys({"text_config": {"new_field": 1}, "rope_theta": 1.0}) == ["text_config.new_field"]
    assert get_model(str(_write(tmp_path, DENSE, "plain.json"))).warnings == ()


def test_every_shipped_config_passes_the_schema_without_warnings():
    for p in sorted(CONFIGS.glob("*_config.json")):
        if "hf_quant" in p.name:
            continue
        m = get_model(str(p))
        assert m.warnings == (), (p.name, m.warnings)


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "simfront.cli", *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("cfg", [dict(DENSE, num_attention_heads=0), dict(DENSE, num_hidden_layers=10**7), "\x00\x01garbage",
                                 dict(DENSE, quantization_config="fp8")], ids=["heads0", "1e7layers", "binary", "quant-string"])
def test_cli_bad_config_is_one_error_line_exit_2(tmp_path, cfg):
    p = _write(tmp_path, cfg)
    r = _cli("memory", "--model", str(p), "--gpus", "8xH100")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr, r.stderr

"""Configs whose layers simfront does not cost (Mamba / state-space hybrids, RWKV, recurrent blocks) are refused with
the reason, not costed as transformer layers with the unknown keys ignored (models/config_keys.yaml)."""

from __future__ import annotations

import json

import pytest

from simfront.errors import SimfrontError
from simfront.models import get_model, model_from_config

# Trimmed from the public Hugging Face configs of nvidia/NVIDIA-Nemotron-Nano-9B-v2 (nemotron_h), ai21labs/Jamba-v0.1
# (jamba) and ibm-granite/granite-4.0-h-tiny (granitemoehybrid): the fields that name their layer kinds kept
NEMOTRON_H = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4480,
              "intermediate_size": 15680, "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 56,
              "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-", "mamba_num_heads": 128,
              "mamba_head_dim": 80, "ssm_state_size": 128, "vocab_size": 131072, "head_dim": 128, "torch_dtype": "bfloat16"}
JAMBA = {"architectures": ["JambaForCausalLM"], "model_type": "jamba", "hidden_size": 4096, "intermediate_size": 14336,
         "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "attn_layer_period": 8,
         "attn_layer_offset": 4, "expert_layer_period": 2, "num_experts": 16, "num_experts_per_tok": 2, "mamba_d_state": 16,
         "vocab_size": 65536, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("cfg,needle", [
    (NEMOTRON_H, "model_type 'nemotron_h' marks Mamba-2 / attention / MLP hybrid layers"),
    (JAMBA, "model_type 'jamba' marks Mamba / attention hybrid layers"),
    ({**NEMOTRON_H, "model_type": "custom_hybrid"}, "key hybrid_override_pattern marks Mamba-2 / attention / MLP hybrid"),
    ({"model_type": "llava", "text_config": {**JAMBA, "model_type": "custom"}}, "key text_config.attn_layer_period marks"),
])
def test_a_config_with_layers_simfront_does_not_cost_is_refused_with_the_reason(tmp_path, cfg, needle):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(SimfrontError, match="which simfront does not cost") as e:
        model_from_config(path)
    assert needle in str(e.value) and "no prediction" in str(e.value)


def test_linear_attention_models_that_carry_mamba_like_keys_are_still_costed():
    """Qwen3.5's Gated DeltaNet state dtype is spelled mamba_ssm_dtype: a linear-attention layer simfront costs."""
    from pathlib import Path

    cfg = json.loads((Path(__file__).resolve().parent.parent / "models" / "configs" / "Qwen--Qwen3.5-397B-A17B_config.json").read_text())
    assert "mamba_ssm_dtype" in json.dumps(cfg)
    assert get_model("qwen3.5-397b-a17b").params.total == pytest.approx(397e9, rel=0.02)  # the published 397B

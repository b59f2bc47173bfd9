"""Generated config.json files (hypothesis): valid and broken model specs through the library and the CLI.

Each case starts from a valid config of one architecture family (dense GQA, MoE, MLA + MoE, a Gemma-3
style ``text_config`` nesting) and applies up to three mutations: a field set to a value of a random
type or range (negative, zero, fractional, boolean, text, list, object, null, NaN, +-Infinity, 10^30),
a field removed, ``text_config`` replaced by junk, an unknown key added; some cases are raw text
(truncated or non-JSON). The outcome must be either one ``SimfrontError`` line (library) / one
``error:`` line with exit status 2 (``simfront memory``), or a model whose parameter counts and KV bytes
are finite and positive. No traceback, no hang.

Generated cases in CI: 250 + 100 = 350 here, 390 in tests/test_properties.py: 740 in total.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from simfront.errors import SimfrontError
from simfront.memory import kv_bytes_per_token
from simfront.models import get_model
from cli_runner import run_cli as _run_cli

FUZZ = settings(deadline=None, derandomize=True,  # the same cases on every CI run: a failure reproduces
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

DENSE = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 32000, "torch_dtype": "bfloat16",
         "max_position_embeddings": 8192}
MOE = dict(DENSE, model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=256,
           decoder_sparse_step=1)
MLA = dict(DENSE, model_type="deepseek_v3", kv_lora_rank=128, q_lora_rank=0, qk_nope_head_dim=64, qk_rope_head_dim=32,
           v_head_dim=64, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=256, first_k_dense_replace=1,
           n_shared_experts=1)
NESTED = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
          "text_config": dict(DENSE, model_type="gemma3_text", head_dim=64, sliding_window=1024,
                              layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"])}
BASES = {"dense": DENSE, "moe": MOE, "mla": MLA, "nested": NESTED}

ODD_VALUES = st.one_of(
    st.integers(-5, 5), st.integers(-(10**9), 10**9), st.just(10**30), st.just(-(10**30)),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, 1024.5, 4096.0, float("nan"), float("inf")]),
    st.booleans(), st.none(), st.text(max_size=6), st.just("4096"), st.lists(st.integers(0, 8), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def configs(draw) -> str:
    """The text of a config.json: a valid family config with up to three mutations, or raw junk."""
    family = draw(st.sampled_from(sorted(BASES)))
    cfg = json.loads(json.dumps(BASES[family]))
    target = cfg["text_config"] if family == "nested" else cfg
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["set", "set", "set", "drop", "text_config", "unknown"]))
        keys = sorted(target)
        if kind == "set":
            target[draw(st.sampled_from(keys))] = draw(ODD_VALUES)
        elif kind == "drop" and keys:
            target.pop(draw(st.sampled_from(keys)))
        elif kind == "text_config":
            cfg["text_config"] = draw(st.one_of(ODD_VALUES, st.just(dict(DENSE, hidden_size=-1))))
        else:
            target[draw(st.text(min_size=1, max_size=8))] = draw(ODD_VALUES)
    event(f"family: {family}")
    text = json.dumps(cfg)  # NaN / Infinity written as the non-standard tokens real files sometimes carry
    if draw(st.integers(0, 19)) == 0:
        text = text[: draw(st.integers(0, len(text)))]  # truncated file
    return text


def _check_model(model) -> None:
    pc = model.params
    for name in ("total", "active"):
        v = getattr(pc, name)
        assert math.isfinite(v) and v > 0, (name, v)
    assert pc.active <= pc.total * (1 + 1e-9)
    kv = kv_bytes_per_token(model, model.precision.kv)
    assert math.isfinite(kv) and kv >= 0


def _write(text: str, directory: str) -> Path:
    path = Path(directory) / "config.json"
    path.write_text(text)
    return path


@settings(FUZZ, max_examples=250)
@given(text=configs())
def test_generated_configs_load_or_fail_with_one_line(text):
    with tempfile.TemporaryDirectory() as d:
        path = _write(text, d)
        try:
            model = get_model(str(path))
        except SimfrontError as e:
            msg = str(e)
            assert msg and "\n" not in msg and len(msg) < 600, msg
            event("outcome: one-line error")
            return
        event("outcome: model")
        _check_model(model)
        kv = kv_bytes_per_token(model, model.precision.kv)
        if "layer_types" not in text and "sliding_window" not in text:
            assert kv > 0  # every layer is full attention: each token adds KV




@settings(FUZZ, max_examples=100)
@given(text=configs())
def test_generated_configs_through_simfront_memory(text, capsys):
    with tempfile.TemporaryDirectory() as d:
        path = _write(text, d)
        code, out, err = _run_cli(["memory", "--model", path, "--gpus", "8xH100", "--json"], capsys)
    assert "Traceback" not in err
    if code != 0:
        assert code == 2, (code, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) > len("error: "), err
        event("outcome: error line")
        return
    event("outcome: success")
    res = json.loads(out, parse_constant=lambda name: (_ for _ in ()).throw(AssertionError(f"non-standard JSON {name}")))
    assert res["weights_bytes"] > 0 and math.isfinite(res["weights_bytes"])
    assert res["kv_bytes_per_token"] >= 0 and math.isfinite(res["kv_bytes_per_token"])
    assert isinstance(res["fits"], bool)

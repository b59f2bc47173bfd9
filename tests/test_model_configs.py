"""Common models outside the original catalog read from their real config.json (issue 16 item 3):
KV bytes per token and parameter counts within 2% of published figures.

Published KV figures are the published architecture (layers, KV heads, head dim, window pattern from
the model card or technical report, written out below, not read from the config) times 2 (K and V)
times 2 bytes (BF16). Configs live in models/configs/ with their sources in models/catalog.yaml.
"""

import pytest

from simfront.memory import kv_bytes_per_token, kv_geometry
from simfront.models import get_model

BF16 = 2

# (catalog id, published total params, source, published KV bytes/token (BF16, growing part), source)
PUBLISHED = [
    ("qwen3-next-80b-a3b", 80e9, "Qwen3-Next model card: 80B total",
     12 * 2 * 2 * 256 * BF16, "48 layers, full attention every 4th (12 layers), 2 KV heads x 256 (model card: 'Gated Attention: 16 Q / 2 KV heads, head dim 256; layout 12 x (3 x Gated DeltaNet + 1 x Gated Attention)')"),
    ("gemma-3-27b", 27.016e9, "Gemma 3 technical report Table 1: 1,416M embedding + 25,600M non-embedding",
     10 * 2 * 16 * 128 * BF16, "62 layers, 5 local : 1 global -> 10 global layers, 16 KV heads x 128 (Gemma 3 report §2; local layers capped at 1024 tokens)"),
    ("ministral-8b", 8_019_808_256, "Ministral-8B-Instruct-2410 model card: 8,019,808,256",
     36 * 2 * 8 * 128 * BF16, "36 layers, 8 KV heads x head dim 128 (model card table); the 32k window equals the 32k context limit of the config"),
    ("phi-4", 14.7e9, "microsoft/phi-4 model page: 14.7B params",
     40 * 2 * 10 * 128 * BF16, "40 layers, 10 KV heads x 128 (phi-4 technical report arXiv 2412.08905 §2: GQA, 5120 hidden / 40 heads)"),
    ("mistral-large-2411", 123e9, "Mistral-Large-Instruct-2411 model card: 123B",
     88 * 2 * 8 * 128 * BF16, "88 layers, 8 KV heads x 128"),
    ("qwen2.5-72b-awq", 72.7e9, "Qwen2.5-72B-Instruct model card: 72.7B (AWQ pads the MLP by 0.4%)",
     80 * 2 * 8 * 128 * BF16, "Qwen2.5-72B model card: 80 layers, GQA 64 Q / 8 KV heads, head dim 128"),
]


@pytest.mark.parametrize("mid,total,total_src,kv,kv_src", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_real_config_matches_published_counts_and_kv(mid, total, total_src, kv, kv_src):
    m = get_model(mid)
    assert abs(m.params.total / total - 1) <= 0.02, (mid, m.params.total, total_src)
    assert abs(kv_bytes_per_token(m, "bf16") / kv - 1) <= 0.02, (mid, kv_bytes_per_token(m, "bf16"), kv_src)
    assert m.warnings == ()


def test_dense_models_active_equals_published_less_the_embedding_lookup():
    """Dense models: every weight is active except the input-embedding table (2% of the published total)."""
    for mid, total, *_ in PUBLISHED:
        m = get_model(mid)
        if m.arch.is_moe:
            continue
        assert abs(m.active_in_published_convention() / total - 1) <= 0.02, mid


def test_qwen3_next_hybrid_layout_and_constant_state():
    m = get_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    a = m.arch
    assert a.count(mixer="full") == 12 and a.count(mixer="linear") == 36  # full_attention_interval 4, not 48 full layers
    assert [l.mixer for l in a.layers[:4]] == ["linear", "linear", "linear", "full"]
    assert a.attention.output_gate  # gated attention (model-type default, models/model_type_defaults.yaml)
    assert a.moe.n_experts == 512 and a.moe.top_k == 10 and a.moe.n_shared == 1
    # Gated DeltaNet state per sequence: 36 layers x (32 value heads x 128 x 128 FP32 + BF16 conv window
    # of 3 steps over q, k, v channels (2 x 16 x 128 + 32 x 128))
    state = 36 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2)
    assert float(kv_geometry(m, "bf16").per_seq) == state
    # active: published '3B' (one significant digit) in Qwen's non-embedding convention
    assert 2.5e9 <= m.active_in_published_convention() < 3.5e9


def test_gemma3_defaults_window_pattern_and_tied_embeddings():
    m = get_model("google/gemma-3-27b-it")
    a = m.arch
    assert a.vocab == 262208 and a.tie_embeddings  # Gemma3TextConfig defaults: the config omits both
    assert a.count(mixer="sliding") == 52 and a.count(mixer="full") == 10
    assert [l.mixer for l in a.layers[:6]] == ["sliding"] * 5 + ["full"]
    assert a.layers[0].window == 1024 and a.attention.head_dim == 128
    assert m.params.lm_head == 0  # tied: the head is not stored twice
    # at 32k context the sliding layers hold 1024 tokens: ~5x less KV than all-global
    geo = kv_geometry(m, "bf16")
    seq = float(geo.seq_bytes(32768))
    assert seq == (10 * 32768 + 52 * 1024) * 2 * 16 * 128 * BF16
    assert 62 * 32768 * 2 * 16 * 128 * BF16 / seq > 5


def test_ministral_reports_kv_per_token():
    """A sliding window as long as the context limit drops nothing: Ministral-8B has 147,456 B/token, not 0."""
    m = get_model("mistralai/Ministral-8B-Instruct-2410")
    assert m.arch.count(mixer="full") == 36 and kv_bytes_per_token(m, "bf16") > 0


def test_awq_checkpoint_is_int4_weight_only():
    m = get_model("Qwen/Qwen2.5-72B-Instruct-AWQ")
    p = m.native
    assert (p.attention, p.dense, p.kv, p.embedding) == ("w4a16", "w4a16", "bf16", "bf16")
    assert m.arch.attention.bias  # Qwen2 q/k/v projections carry biases (model-type default, no config field)


def test_mistral_7b_sliding_window_on_every_layer():
    """Mistral-7B-v0.1: 7,241,732,096 parameters (model page), and a 4,096-token window on all 32 layers ('Mistral 7B',
    arXiv 2310.06825 Table 1): no KV grows past the window, 32 x 2 x 8 x 128 x 2 B = 131,072 B per token within it."""
    m = get_model("mistralai/Mistral-7B-Instruct-v0.1")
    assert m.id == "mistral-7b" and m.params.total == 7_241_732_096 and m.warnings == ()
    assert m.arch.count(mixer="sliding") == 32 and m.arch.layers[0].window == 4096
    geo = kv_geometry(m, "bf16")
    within = 32 * 2 * 8 * 128 * BF16
    assert float(geo.per_token) == 0.0 and float(geo.windowed_per_token) == within
    assert float(geo.seq_bytes(1024)) == 1024 * within and float(geo.seq_bytes(32768)) == 4096 * within


def test_memory_verdict_names_the_sliding_window_part_of_the_kv():
    """`kv_bytes_per_token` counts the KV that grows with every token; the verdict gives the sliding layers' part and
    their window beside it (JSON and text), so an all-sliding model does not read as 0 bytes of KV per token."""
    from simfront import api
    from simfront.report import print_memory

    v = api.memory("mistral-7b", "1xH100", isl=8192, osl=1024)
    assert (v.kv_bytes_per_token, v.kv_windowed_bytes_per_token, v.kv_window_tokens) == (0.0, 131072.0, 4096)
    g = api.memory("gemma-3-27b", "1xH200").to_json()
    assert g["kv_bytes_per_token"] == 10 * 2 * 16 * 128 * BF16 and g["kv_windowed_bytes_per_token"] == 52 * 2 * 16 * 128 * BF16
    assert g["kv_window_tokens"] == 1024
    plain = api.memory("llama-3.1-8b", "1xH100").to_json()
    assert plain["kv_windowed_bytes_per_token"] == 0.0 and plain["kv_window_tokens"] is None
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_memory(v.to_json())
    line = next(x for x in buf.getvalue().splitlines() if "KV bytes per token" in x)
    assert "131,072 B sliding-window layers up to their 4,096-token window" in line


def test_models_json_gives_the_window_beside_the_growing_kv():
    from simfront import api

    rows = {r["name"]: r for r in api.list_models()}
    assert (rows["mistral-7b"]["kv_bytes_per_token_bf16"], rows["mistral-7b"]["kv_windowed_bytes_per_token_bf16"],
            rows["mistral-7b"]["kv_window_tokens"]) == (0.0, 131072.0, 4096)
    assert rows["llama-3.1-8b"]["kv_window_tokens"] is None


def test_window_note_says_what_keeping_every_token_would_hold():
    """A context past the sliding windows gets a note with the factor an engine that keeps every token's KV would hold:
    Mistral-7B at 9,216 tokens keeps 4,096 of them, so 9,216 / 4,096 = 2.25x; below the window, or without windowed
    layers, or where the windowed share is small (Llama-4's 8k chunks at 9k), there is nothing to say."""
    from simfront.memory import window_note

    note = window_note(get_model("mistral-7b"), "bf16", 9216)
    assert note is not None and "4,096-token window" in note and "2.2x" in note
    assert window_note(get_model("mistral-7b"), "bf16", 4096) is None
    assert window_note(get_model("llama-3.1-8b"), "bf16", 100_000) is None
    assert window_note(get_model("llama-4-scout"), "bf16", 9216) is None  # 1.1x: under WINDOW_NOTE_MIN_RATIO


def test_predict_memory_and_plan_carry_the_window_note():
    from simfront import api

    v = api.memory("mistral-7b", "1xH100", isl=8192, osl=1024)
    assert any("sliding attention layers" in n for n in v.notes)
    res = api.predict("mistral-7b", "1xH100", isl=8192, osl=1024)
    assert any("4,096-token window" in n for n in res.notes)
    p = api.plan("mistral-7b", 2.0, isl=8192, osl=1024, hardware=["h100"])
    assert any("4,096-token window" in n for n in p.notes)
    assert not any("window" in n for n in api.memory("llama-3.1-8b", "1xH100", isl=8192, osl=1024).notes)

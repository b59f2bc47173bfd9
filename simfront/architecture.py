"""Model architecture read from a Hugging Face ``config.json``: what each layer is made of.

One parser covers dense GQA/MQA, sliding-window (given per layer, by pattern or for every layer) and chunked layers, MoE with shared experts and
dense leading layers, latent MoE (Kimi K3), MLA, DSA indexers (DeepSeek-V3.2, GLM-5.x), hybrid
linear attention (Kimi Delta Attention, Gated DeltaNet) with per-layer types, MTP layers, and
multimodal configs whose language model sits under ``text_config``. No network, no transformers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SimfrontError
from .model_schema import text_part, type_rules, validate_text_config

# Bytes of one DSA indexer key cache entry per token per layer: 128 FP8 elements + one FP32 scale
# (aiconfigurator common.indexer_cache_entry_bytes; specs.md B.2 "132 B/token/layer").
DSA_SCALE_BYTES = 4
# Linear-attention recurrent state dtype: FP32 (Qwen3.5 mamba_ssm_dtype float32; Kimi K3 state "fp32",
# specs.md B.1).
LINEAR_STATE_BYTES = 4


@dataclass(frozen=True)
class AttentionSpec:
    """Softmax attention geometry (full-attention layers)."""

    kind: str  # "gqa" or "mla"
    n_heads: int
    n_kv_heads: int
    head_dim: int  # q/k head dim (GQA); for MLA: qk_nope + qk_rope
    head_dim_v: int
    q_lora_rank: int = 0  # MLA only (0 = no q compression)
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    output_gate: bool = False  # gated attention output (Qwen3.5, Kimi K3 MLA)
    bias: bool = False
    # DSA lightning indexer (DeepSeek-V3.2, GLM-5.x); 0 = none
    index_topk: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0

    @property
    def mla_kv_elems(self) -> int:
        """Latent KV elements per token per layer (MLA): compressed KV + decoupled rope key."""
        return self.kv_lora_rank + self.qk_rope_dim


@dataclass(frozen=True)
class LinearAttentionSpec:
    """Delta-rule linear attention (KDA / Gated DeltaNet) geometry."""

    kind: str  # "kda" or "gdn"
    n_k_heads: int
    n_v_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_kernel: int
    full_rank_gate: bool = False

    @property
    def conv_channels(self) -> int:
        """Channels of the short causal convolution over q, k, v."""
        return 2 * self.n_k_heads * self.head_k_dim + self.n_v_heads * self.head_v_dim

    @property
    def state_bytes_per_seq_layer(self) -> int:
        """Recurrent state (FP32 dk x dv per value head) plus conv state, one sequence, one layer."""
        state = self.n_v_heads * self.head_k_dim * self.head_v_dim * LINEAR_STATE_BYTES
        conv = self.conv_channels * (self.conv_kernel - 1) * 2  # BF16 conv window
        return state + conv


@dataclass(frozen=True)
class MoESpec:
    n_experts: int
    top_k: int
    expert_inter: int  # intermediate size of one routed expert
    n_shared: int = 0
    shared_inter: int = 0  # intermediate size of one shared expert
    latent_dim: int = 0  # LatentMoE: experts run at this width (Kimi K3: 3584); 0 = hidden size
    gated: bool = True
    expert_bias: bool = False  # gpt-oss experts carry biases


@dataclass(frozen=True)
class Layer:
    mixer: str  # "full", "sliding", "chunked", "linear"
    window: int  # tokens attended (sliding / chunked); 0 = unbounded
    ffn: str  # "dense" or "moe"
    indexer: str = ""  # DSA: "full" (computes top-k), "shared" (reuses previous), "" none


@dataclass(frozen=True)
class ModelArch:
    name: str
    model_type: str
    hidden: int
    vocab: int
    tie_embeddings: bool
    layers: tuple[Layer, ...]
    attention: AttentionSpec
    linear: LinearAttentionSpec | None
    moe: MoESpec | None
    dense_inter: int  # intermediate size of dense FFN layers
    mtp_layers: int  # next-n prediction layers shipped with the checkpoint (excluded from param counts)
    max_position: int
    raw: dict = field(repr=False, compare=False, hash=False, default_factory=dict)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    def count(self, **match: Any) -> int:
        """Number of layers whose fields equal ``match`` (e.g. ``count(mixer="linear")``)."""
        return sum(all(getattr(layer, k) == v for k, v in match.items()) for layer in self.layers)

    def groups(self) -> dict[Layer, int]:
        """Distinct layer kinds and how many layers each has (the cost model works per group)."""
        out: dict[Layer, int] = {}
        for layer in self.layers:
            out[layer] = out.get(layer, 0) + 1
        return out

    def describe(self) -> str:
        """Short architecture text, e.g. 'MoE 256e top-8 +1 shared, MLA 128h, DSA, 61L'."""
        parts = []
        if self.moe:
            m = self.moe
            s = f"MoE {m.n_experts}e top-{m.top_k}"
            if m.n_shared:
                s += f" +{m.n_shared} shared"
            if m.latent_dim:
                s += f" latent {m.latent_dim}"
            parts.append(s)
        else:
            parts.append("dense")
        a = self.attention
        if a.kind == "mla":
            parts.append(f"MLA {a.n_heads}h")
        else:
            parts.append(f"GQA {a.n_heads}q/{a.n_kv_heads}kv")
        if a.index_topk:
            parts.append(f"DSA top-{a.index_topk}")
        n_lin = self.count(mixer="linear")
        if n_lin:
            parts.append(f"{n_lin} {self.linear.kind.upper()} + {self.n_layers - n_lin} attn layers")
        n_sw = self.count(mixer="sliding")
        if n_sw:
            parts.append(f"{n_sw} sliding-{self.layers[[l.mixer for l in self.layers].index('sliding')].window}")
        n_ch = self.count(mixer="chunked")
        if n_ch:
            parts.append(f"{n_ch} chunked")
        parts.append(f"{self.n_layers}L")
        if self.mtp_layers:
            parts.append(f"MTP {self.mtp_layers}")
        return ", ".join(parts)


# ---------------------------------------------------------------------------------------------
# Parsing

# Largest config file read: a config.json is a few kB (the largest shipped here, a ModelOpt
# hf_quant_config.json, is 16 kB); 16 MiB refuses a wrong file before it is parsed.
MAX_CONFIG_BYTES = 16 * 2**20


def read_json(path: str | Path, what: str = "config.json") -> Any:
    """Parse a JSON file, turning every way it can be unreadable into one SimfrontError line."""
    p = Path(path)
    if not p.exists():
        raise SimfrontError(f"{what} file not found: {p}")
    if not p.is_file():
        raise SimfrontError(f"{p}: not a file; give the path of a {what}")
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise SimfrontError(f"{p}: {size} bytes is too large for a {what} (at most {MAX_CONFIG_BYTES // 2**20} MiB)")
        raw = p.read_bytes()
    except OSError as e:
        raise SimfrontError(f"{p}: cannot read {what} ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SimfrontError(f"{p}: not a {what}: byte {e.start} is not UTF-8 text (a binary file?); expected a JSON object") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SimfrontError(f"{p}: malformed {what} ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise SimfrontError(f"{p}: malformed {what} (nested too deeply)") from None


def load_config(path: str | Path) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    data = read_json(p)
    if not isinstance(data, dict):
        raise SimfrontError(f"{p}: config.json must hold a JSON object, not {type(data).__name__}")
    return data


def text_config(cfg: dict) -> dict:
    """The language-model part of a (possibly multimodal) config."""
    return text_part(cfg, "model")[0]


def _require(value: Any, field: str, where: str, why: str) -> Any:
    if value is None:
        raise SimfrontError(f"{where}: config.json {why} but is missing required field {field!r}")
    return value


def _layer_types(s, c: dict, rules: dict, where: str) -> list[str]:
    """One HF layer type per layer: given, derived from full_attention_interval or the sliding pattern."""
    n = s.num_hidden_layers
    if s.layer_types is not None:
        return list(s.layer_types)
    if s.full_attention_interval and s.full_attention_interval > 1:
        # Qwen3-Next / Qwen3.5: every full_attention_interval-th layer is full attention, the rest
        # Gated DeltaNet (transformers Qwen3NextConfig.layer_types default)
        k = s.full_attention_interval
        return ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]
    window = s.sliding_window or 0
    if window and s.max_position_embeddings and window >= s.max_position_embeddings:
        window = 0  # a window as long as the context limit never drops a token: full attention
    scope = rules.get("sliding_layers", "none")
    if window and (s.sliding_window_pattern and ("sliding_window_pattern" in c or scope == "pattern")):
        k = s.sliding_window_pattern  # Gemma 2/3: (k-1) local layers, then one global
        return ["sliding_attention" if (i + 1) % k else "full_attention" for i in range(n)]
    if window and scope == "all":
        return ["sliding_attention"] * n
    if window and scope == "use_sliding_window" and s.use_sliding_window:
        first = s.max_window_layers or 0
        return ["sliding_attention" if i >= first else "full_attention" for i in range(n)]
    return ["full_attention"] * n


def parse_arch(cfg: dict, name: str = "model", where: str | None = None) -> ModelArch:
    """Build a :class:`ModelArch` from a config.json dict (validated by :mod:`simfront.model_schema`).

    ``where`` prefixes error messages (the config's path; default the model name)."""
    raw = cfg
    where = where or name
    s, c = validate_text_config(cfg, where)
    rules = type_rules(c, cfg)
    hidden = s.hidden_size
    n_layers = s.num_hidden_layers
    n_heads = s.num_attention_heads
    vocab = s.vocab_size
    n_kv = s.num_key_value_heads or n_heads
    top_type = raw.get("model_type")
    model_type = s.model_type or (top_type if isinstance(top_type, str) else "unknown")

    # --- attention geometry -------------------------------------------------------------
    if s.kv_lora_rank:
        nope, rope = s.qk_nope_head_dim, s.qk_rope_head_dim
        attn = AttentionSpec(
            kind="mla",
            n_heads=n_heads,
            n_kv_heads=n_heads,
            head_dim=nope + rope,
            head_dim_v=s.v_head_dim,
            q_lora_rank=s.q_lora_rank or 0,
            kv_lora_rank=s.kv_lora_rank,
            qk_nope_dim=nope,
            qk_rope_dim=rope,
            output_gate=bool(s.mla_use_output_gate),
            index_topk=s.index_topk or 0,
            index_n_heads=s.index_n_heads or 0,
            index_head_dim=s.index_head_dim or 0,
        )
    else:
        head_dim = s.head_dim or hidden // n_heads
        attn = AttentionSpec(
            kind="gqa",
            n_heads=n_heads,
            n_kv_heads=n_kv,
            head_dim=head_dim,
            head_dim_v=head_dim,
            output_gate=bool(s.attn_output_gate),
            bias=bool(s.attention_bias),
        )

    # --- linear attention -----------------------------------------------------------------
    linear = None
    linear_layers: set[int] = set()  # 0-based
    lac = s.linear_attn_config
    if lac is not None:  # Kimi Linear / Kimi K3 (1-based layer lists)
        linear = LinearAttentionSpec("kda", lac.num_heads, lac.num_heads, lac.head_dim, lac.head_dim,
                                     lac.short_conv_kernel_size, lac.use_full_rank_gate)
        linear_layers = {i - 1 for i in lac.kda_layers}
    layer_types = _layer_types(s, c, rules, where)
    if "linear_attention" in layer_types:  # Qwen3-Next / Qwen3.5 Gated DeltaNet
        why = "has linear_attention layers (Gated DeltaNet)"
        linear = LinearAttentionSpec(
            "gdn",
            _require(s.linear_num_key_heads, "linear_num_key_heads", where, why),
            _require(s.linear_num_value_heads, "linear_num_value_heads", where, why),
            _require(s.linear_key_head_dim, "linear_key_head_dim", where, why),
            _require(s.linear_value_head_dim, "linear_value_head_dim", where, why),
            s.linear_conv_kernel_dim or 4,  # transformers Qwen3NextConfig default linear_conv_kernel_dim=4
        )
        linear_layers = {i for i, t in enumerate(layer_types) if t == "linear_attention"}

    # --- per-layer mixer ----------------------------------------------------------------
    window = s.sliding_window or 0
    chunk = s.attention_chunk_size or 0
    if "sliding_attention" in layer_types and not window:
        raise SimfrontError(f"{where}: config.json has sliding_attention layers but no sliding_window (tokens each such layer attends to)")
    if "chunked_attention" in layer_types and not chunk:
        raise SimfrontError(f"{where}: config.json has chunked_attention layers but no attention_chunk_size")
    nope_layers = s.no_rope_layers or []
    mixers: list[tuple[str, int]] = []
    for i in range(n_layers):
        t = layer_types[i]
        if i in linear_layers:
            mixers.append(("linear", 0))
        elif t == "sliding_attention":
            mixers.append(("sliding", window))
        elif t == "chunked_attention":
            mixers.append(("chunked", chunk))
        elif chunk and model_type.startswith("llama4"):
            # Llama 4: every 4th layer is NoPE global attention, the rest chunked local attention
            # (no_rope_layers default; specs.md B.5).
            is_global = (nope_layers[i] == 0) if len(nope_layers) == n_layers else ((i + 1) % 4 == 0)
            mixers.append(("full", 0) if is_global else ("chunked", chunk))
        else:
            mixers.append(("full", 0))

    # --- FFN / MoE ----------------------------------------------------------------------
    n_experts = s.n_experts or 0
    moe = None
    ffn_kinds = ["dense"] * n_layers
    dense_inter = s.intermediate_size or 0
    if n_experts > 1:
        top_k = s.top_k
        expert_inter = s.moe_intermediate_size or 0
        n_shared = s.n_shared_experts or 0
        shared_inter = expert_inter
        if model_type.startswith("llama4"):
            expert_inter = _require(s.intermediate_size, "intermediate_size", where, "is a Llama 4 MoE")  # each expert AND the shared expert (specs.md B.5)
            dense_inter = s.intermediate_size_mlp or expert_inter
            n_shared, shared_inter = 1, expert_inter
        elif model_type in ("gpt_oss", "mixtral", "minimax_m2", "minimax"):
            expert_inter = _require(s.intermediate_size, "intermediate_size", where, "is a MoE whose per-expert size lives in intermediate_size")
            sh = s.shared_intermediate_size or 0
            n_shared, shared_inter = (1, sh) if sh else (0, 0)
        if s.shared_expert_intermediate_size:
            n_shared, shared_inter = 1, s.shared_expert_intermediate_size
        if expert_inter <= 0:
            raise SimfrontError(f"{where}: MoE config is missing 'moe_intermediate_size' (>= 1)")
        moe = MoESpec(
            n_experts=n_experts,
            top_k=top_k,
            expert_inter=expert_inter,
            n_shared=n_shared,
            shared_inter=shared_inter,
            latent_dim=s.routed_expert_hidden_size or 0,
            expert_bias=model_type == "gpt_oss",
        )
        first_dense = s.first_k_dense_replace or 0
        mlp_only = set(s.mlp_only_layers or [])
        mlp_types = s.mlp_layer_types
        step = s.interleave_moe_layer_step
        sparse_step = s.decoder_sparse_step or 1
        freq = s.moe_layer_freq or 1
        for i in range(n_layers):
            if mlp_types:  # GLM-5.2/5.3 explicit list
                is_moe = mlp_types[i] == "sparse"
            elif step is not None:  # Llama 4: MoE on layers step-1, 2*step-1, ...
                is_moe = (i + 1) % step == 0
            elif "decoder_sparse_step" in c:  # Qwen MoE convention
                is_moe = i not in mlp_only and (i + 1) % sparse_step == 0
            else:  # DeepSeek convention: dense leading layers, then MoE every moe_layer_freq
                is_moe = i >= first_dense and i % freq == 0
            ffn_kinds[i] = "moe" if is_moe else "dense"
        if any(k == "dense" for k in ffn_kinds) and dense_inter <= 0:
            raise SimfrontError(f"{where}: config has dense FFN layers but no 'intermediate_size' (>= 1)")
    elif dense_inter <= 0:
        raise SimfrontError(f"{where}: config.json is missing required field 'intermediate_size' (>= 1)")

    # --- DSA indexer per layer --------------------------------------------------------------
    idx_kinds = [""] * n_layers
    if attn.index_topk:
        it = s.indexer_types
        for i in range(n_layers):
            idx_kinds[i] = (it[i] if it else "full") if mixers[i][0] != "linear" else ""

    layers = tuple(Layer(m, w, f, ix) for (m, w), f, ix in zip(mixers, ffn_kinds, idx_kinds))
    mtp = s.num_nextn_predict_layers or s.mtp_num_hidden_layers or 0
    if not mtp and s.use_mtp:
        mtp = s.num_mtp_modules if s.num_mtp_modules is not None else 1
    return ModelArch(
        name=name,
        model_type=model_type,
        hidden=hidden,
        vocab=vocab,
        tie_embeddings=bool(s.tie_word_embeddings),
        layers=layers,
        attention=attn,
        linear=linear,
        moe=moe,
        dense_inter=dense_inter,
        mtp_layers=mtp,
        max_position=s.max_position_embeddings or 0,
        raw=raw,
    )

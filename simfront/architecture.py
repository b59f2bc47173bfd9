"""Model architecture read from a Hugging Face ``config.json``: what each layer is made of.

One parser covers dense GQA/MQA, sliding-window and chunked layers, MoE with shared experts and
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


def _first(cfg: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def _need(cfg: dict, key: str, where: str, *alts: str) -> Any:
    v = _first(cfg, key, *alts)
    if v is None:
        names = " or ".join((key, *alts))
        raise SimfrontError(f"{where}: config.json is missing required field {names!r}")
    return v


def text_config(cfg: dict) -> dict:
    """The language-model part of a (possibly multimodal) config."""
    tc = cfg.get("text_config")
    if isinstance(tc, dict) and ("hidden_size" in tc or "num_hidden_layers" in tc):
        merged = dict(tc)
        # some fields live only at the top level of multimodal configs
        for k in ("quantization_config", "tie_word_embeddings"):
            if k not in merged and k in cfg:
                merged[k] = cfg[k]
        return merged
    return cfg


def load_config(path: str | Path) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.exists():
        raise SimfrontError(f"config file not found: {p}")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise SimfrontError(f"{p}: malformed config.json ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict):
        raise SimfrontError(f"{p}: config.json must hold a JSON object")
    return data


def parse_arch(cfg: dict, name: str = "model") -> ModelArch:
    """Build a :class:`ModelArch` from a config.json dict."""
    raw = cfg
    c = text_config(cfg)
    where = name
    hidden = int(_need(c, "hidden_size", where, "d_model"))
    n_layers = int(_need(c, "num_hidden_layers", where, "num_layers", "n_layers"))
    n_heads = int(_need(c, "num_attention_heads", where, "n_heads"))
    vocab = int(_need(c, "vocab_size", where))
    n_kv = int(_first(c, "num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", default=n_heads))
    model_type = str(_first(c, "model_type", default=raw.get("model_type", "unknown")))

    # --- attention geometry -------------------------------------------------------------
    if _first(c, "kv_lora_rank"):
        nope = int(_need(c, "qk_nope_head_dim", where))
        rope = int(_need(c, "qk_rope_head_dim", where))
        attn = AttentionSpec(
            kind="mla",
            n_heads=n_heads,
            n_kv_heads=n_heads,
            head_dim=nope + rope,
            head_dim_v=int(_need(c, "v_head_dim", where)),
            q_lora_rank=int(_first(c, "q_lora_rank", default=0) or 0),
            kv_lora_rank=int(c["kv_lora_rank"]),
            qk_nope_dim=nope,
            qk_rope_dim=rope,
            output_gate=bool(_first(c, "mla_use_output_gate", default=False)),
            index_topk=int(_first(c, "index_topk", default=0) or 0),
            index_n_heads=int(_first(c, "index_n_heads", default=0) or 0),
            index_head_dim=int(_first(c, "index_head_dim", default=0) or 0),
        )
    else:
        head_dim = int(_first(c, "head_dim", default=0) or hidden // n_heads)
        attn = AttentionSpec(
            kind="gqa",
            n_heads=n_heads,
            n_kv_heads=n_kv,
            head_dim=head_dim,
            head_dim_v=head_dim,
            output_gate=bool(_first(c, "attn_output_gate", default=False)),
            bias=bool(_first(c, "attention_bias", default=False)),
        )

    # --- linear attention -----------------------------------------------------------------
    linear = None
    lac = c.get("linear_attn_config")
    linear_layers: set[int] = set()  # 0-based
    if isinstance(lac, dict):  # Kimi Linear / Kimi K3 (1-based layer lists)
        nh = int(_need(lac, "num_heads", where + " linear_attn_config"))
        hd = int(_need(lac, "head_dim", where + " linear_attn_config"))
        linear = LinearAttentionSpec("kda", nh, nh, hd, hd, int(lac.get("short_conv_kernel_size", 4)), bool(lac.get("use_full_rank_gate", False)))
        linear_layers = {int(i) - 1 for i in lac.get("kda_layers", [])}
    layer_types = c.get("layer_types")
    if layer_types is not None and len(layer_types) != n_layers:
        raise SimfrontError(f"{where}: layer_types has {len(layer_types)} entries but num_hidden_layers is {n_layers}")
    if layer_types and "linear_attention" in layer_types:  # Qwen3-Next / Qwen3.5 Gated DeltaNet
        linear = LinearAttentionSpec(
            "gdn",
            int(_need(c, "linear_num_key_heads", where)),
            int(_need(c, "linear_num_value_heads", where)),
            int(_need(c, "linear_key_head_dim", where)),
            int(_need(c, "linear_value_head_dim", where)),
            int(_first(c, "linear_conv_kernel_dim", default=4)),
        )
        linear_layers = {i for i, t in enumerate(layer_types) if t == "linear_attention"}

    # --- per-layer mixer ----------------------------------------------------------------
    window = int(_first(c, "sliding_window", default=0) or 0)
    chunk = int(_first(c, "attention_chunk_size", default=0) or 0)
    mixers: list[tuple[str, int]] = []
    for i in range(n_layers):
        if i in linear_layers:
            mixers.append(("linear", 0))
        elif layer_types and layer_types[i] == "sliding_attention":
            mixers.append(("sliding", window))
        elif chunk and model_type.startswith("llama4"):
            # Llama 4: every 4th layer is NoPE global attention, the rest chunked local attention
            # (no_rope_layers default; specs.md B.5).
            nope_layers = c.get("no_rope_layers") or []
            is_global = (nope_layers[i] == 0) if len(nope_layers) == n_layers else ((i + 1) % 4 == 0)
            mixers.append(("full", 0) if is_global else ("chunked", chunk))
        elif window and not layer_types and model_type in ("mistral",):
            mixers.append(("sliding", window))
        else:
            mixers.append(("full", 0))

    # --- FFN / MoE ----------------------------------------------------------------------
    n_experts = int(_first(c, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts", default=0) or 0)
    moe = None
    ffn_kinds = ["dense"] * n_layers
    dense_inter = int(_first(c, "intermediate_size", default=0) or 0)
    if n_experts > 1:
        top_k = int(_need(c, "num_experts_per_tok", where, "num_experts_per_token", "experts_per_token", "moe_topk"))
        expert_inter = int(_first(c, "moe_intermediate_size", default=0) or 0)
        n_shared = int(_first(c, "n_shared_experts", "num_shared_experts", default=0) or 0)
        shared_inter = expert_inter
        if model_type.startswith("llama4"):
            expert_inter = int(c["intermediate_size"])  # each expert AND the shared expert (specs.md B.5)
            dense_inter = int(_first(c, "intermediate_size_mlp", default=expert_inter))
            n_shared, shared_inter = 1, expert_inter
        elif model_type in ("gpt_oss", "mixtral", "minimax_m2", "minimax"):
            expert_inter = int(c["intermediate_size"])  # per-expert size lives in intermediate_size
            sh = int(_first(c, "shared_intermediate_size", default=0) or 0)
            n_shared, shared_inter = (1, sh) if sh else (0, 0)
        if _first(c, "shared_expert_intermediate_size"):
            n_shared, shared_inter = 1, int(c["shared_expert_intermediate_size"])
        if expert_inter <= 0:
            raise SimfrontError(f"{where}: MoE config is missing 'moe_intermediate_size'")
        moe = MoESpec(
            n_experts=n_experts,
            top_k=top_k,
            expert_inter=expert_inter,
            n_shared=n_shared,
            shared_inter=shared_inter,
            latent_dim=int(_first(c, "routed_expert_hidden_size", default=0) or 0),
            expert_bias=model_type == "gpt_oss",
        )
        first_dense = int(_first(c, "first_k_dense_replace", default=0) or 0)
        mlp_only = set(_first(c, "mlp_only_layers", default=[]) or [])
        mlp_types = c.get("mlp_layer_types")
        for i in range(n_layers):
            if mlp_types and len(mlp_types) == n_layers:  # GLM-5.2/5.3 explicit list
                is_moe = mlp_types[i] == "sparse"
            elif "interleave_moe_layer_step" in c:  # Llama 4: MoE on layers step-1, 2*step-1, ...
                is_moe = (i + 1) % int(c["interleave_moe_layer_step"]) == 0
            elif "decoder_sparse_step" in c:  # Qwen MoE convention
                is_moe = i not in mlp_only and (i + 1) % int(c["decoder_sparse_step"] or 1) == 0
            else:  # DeepSeek convention: dense leading layers, then MoE every moe_layer_freq
                is_moe = i >= first_dense and i % int(_first(c, "moe_layer_freq", default=1) or 1) == 0
            ffn_kinds[i] = "moe" if is_moe else "dense"
        if any(k == "dense" for k in ffn_kinds) and dense_inter <= 0:
            raise SimfrontError(f"{where}: config has dense FFN layers but no 'intermediate_size'")
    elif dense_inter <= 0:
        raise SimfrontError(f"{where}: config.json is missing required field 'intermediate_size'")

    # --- DSA indexer per layer --------------------------------------------------------------
    idx_kinds = [""] * n_layers
    if attn.index_topk:
        it = c.get("indexer_types")
        for i in range(n_layers):
            idx_kinds[i] = (it[i] if it and len(it) == n_layers else "full") if mixers[i][0] != "linear" else ""

    layers = tuple(Layer(m, w, f, ix) for (m, w), f, ix in zip(mixers, ffn_kinds, idx_kinds))
    mtp = int(_first(c, "num_nextn_predict_layers", "mtp_num_hidden_layers", default=0) or 0)
    if not mtp and _first(c, "use_mtp"):
        mtp = int(_first(c, "num_mtp_modules", default=1))
    return ModelArch(
        name=name,
        model_type=model_type,
        hidden=hidden,
        vocab=vocab,
        tie_embeddings=bool(_first(c, "tie_word_embeddings", default=raw.get("tie_word_embeddings", False))),
        layers=layers,
        attention=attn,
        linear=linear,
        moe=moe,
        dense_inter=dense_inter,
        mtp_layers=mtp,
        max_position=int(_first(c, "max_position_embeddings", default=0) or 0),
        raw=raw,
    )

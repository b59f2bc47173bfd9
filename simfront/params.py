"""Parameter counts per component, total and active per token (language model only).

``total`` counts every stored weight: embeddings and LM head included (once when tied); vision
towers and MTP layers are not. ``active`` counts the weights one token's forward pass multiplies:
the input-embedding lookup is a row read, not compute, so it is left out; the LM head GEMM is
counted (it is the embedding matrix itself when the two are tied). This is the convention of
OpenAI's gpt-oss model card (5.1B / 3.6B active). Norm weights are counted (they are tiny). Each
count is the element count of the weight matrices named in the comment next to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .architecture import AttentionSpec, LinearAttentionSpec, ModelArch, MoESpec


@dataclass(frozen=True)
class LayerParams:
    """Parameter elements of one layer, split by how they are sharded and quantised."""

    attention: float  # attention / linear-attention projections (+ indexer), split by attention TP
    dense_ffn: float  # dense FFN (dense layers only), split by TP
    shared: float  # shared experts + router + latent projections (every token uses them)
    experts_total: float  # all routed experts
    experts_active: float  # routed experts one token uses (top-k)
    norms: float


def gqa_attention_params(a: AttentionSpec, hidden: int) -> float:
    q = hidden * a.n_heads * a.head_dim  # W_q
    kv = 2 * hidden * a.n_kv_heads * a.head_dim  # W_k, W_v
    o = a.n_heads * a.head_dim_v * hidden  # W_o
    gate = hidden * a.n_heads * a.head_dim if a.output_gate else 0  # output gate doubles q_proj (Qwen3.5)
    bias = (a.n_heads * a.head_dim + 2 * a.n_kv_heads * a.head_dim + hidden) if a.bias else 0
    return q + kv + o + gate + bias


def mla_attention_params(a: AttentionSpec, hidden: int) -> float:
    qk = a.qk_nope_dim + a.qk_rope_dim
    if a.q_lora_rank:
        q = hidden * a.q_lora_rank + a.q_lora_rank * a.n_heads * qk + a.q_lora_rank  # q_a, q_b, q_a norm
    else:
        q = hidden * a.n_heads * qk
    kv_a = hidden * (a.kv_lora_rank + a.qk_rope_dim) + a.kv_lora_rank  # kv_a_proj_with_mqa + norm
    kv_b = a.kv_lora_rank * a.n_heads * (a.qk_nope_dim + a.head_dim_v)  # up-projection to K_nope and V
    o = a.n_heads * a.head_dim_v * hidden
    gate = hidden * a.n_heads * a.head_dim_v if a.output_gate else 0  # output gate (Kimi K3)
    return q + kv_a + kv_b + o + gate


def indexer_params(a: AttentionSpec, hidden: int) -> float:
    """DSA lightning indexer: query from the q latent, one shared key head, per-head weights."""
    if not a.index_topk:
        return 0.0
    q_in = a.q_lora_rank or hidden
    wq = q_in * a.index_n_heads * a.index_head_dim  # wq_b
    wk = hidden * a.index_head_dim + 2 * a.index_head_dim  # wk + k_norm
    w = hidden * a.index_n_heads  # weights_proj
    return wq + wk + w


def linear_attention_params(la: LinearAttentionSpec, hidden: int) -> float:
    qk = 2 * hidden * la.n_k_heads * la.head_k_dim  # W_q, W_k
    v = hidden * la.n_v_heads * la.head_v_dim  # W_v
    o = la.n_v_heads * la.head_v_dim * hidden  # W_o
    conv = la.conv_channels * la.conv_kernel  # short depthwise conv over q, k, v
    if la.kind == "gdn":
        # Gated DeltaNet: z (output gate) projection, beta and alpha (decay) per value head
        extra = hidden * la.n_v_heads * la.head_v_dim + 2 * hidden * la.n_v_heads
    else:
        # KDA: per-channel decay gate f (low-rank H->dk->H_k*dk, or full rank), output gate g
        # (low rank H->dv->heads*dv), beta per head.
        f = hidden * la.n_k_heads * la.head_k_dim if la.full_rank_gate else hidden * la.head_k_dim + la.head_k_dim * la.n_k_heads * la.head_k_dim
        g = hidden * la.head_v_dim + la.head_v_dim * la.n_v_heads * la.head_v_dim
        extra = f + g + hidden * la.n_v_heads
    return qk + v + o + conv + extra


def ffn_params(hidden: int, inter: int, gated: bool = True) -> float:
    """One (gated) MLP: up, gate, down."""
    return (3 if gated else 2) * hidden * inter


def moe_params(m: MoESpec, hidden: int) -> tuple[float, float, float]:
    """(shared-path params, all routed experts, routed experts active per token)."""
    width = m.latent_dim or hidden
    one = ffn_params(width, m.expert_inter, m.gated) + (m.expert_inter * 2 + width if m.expert_bias else 0)
    router = hidden * m.n_experts  # gating matrix
    latent = 2 * hidden * m.latent_dim if m.latent_dim else 0  # LatentMoE down/up projections
    shared = m.n_shared * ffn_params(hidden, m.shared_inter, m.gated)
    return shared + router + latent, m.n_experts * one, m.top_k * one


def layer_params(arch: ModelArch, mixer: str, ffn: str, indexer: str = "") -> LayerParams:
    h = arch.hidden
    if mixer == "linear":
        attn = linear_attention_params(arch.linear, h)
    elif arch.attention.kind == "mla":
        attn = mla_attention_params(arch.attention, h)
    else:
        attn = gqa_attention_params(arch.attention, h)
    if indexer:
        attn += indexer_params(arch.attention, h)
    dense = shared = e_tot = e_act = 0.0
    if ffn == "moe":
        shared, e_tot, e_act = moe_params(arch.moe, h)
    else:
        dense = ffn_params(h, arch.dense_inter)
    return LayerParams(attn, dense, shared, e_tot, e_act, norms=2 * h)


@dataclass(frozen=True)
class ParamCounts:
    total: float
    active: float
    embedding: float  # stored input-embedding table
    lm_head: float  # stored separate LM head (0 when tied to the embedding)
    lm_head_active: float  # LM head weights multiplied per sampled token (vocab x hidden, tied or not)
    attention: float
    dense_ffn: float
    shared: float  # shared experts, routers, latent projections
    experts: float  # all routed experts
    experts_active: float
    norms: float


def count_params(arch: ModelArch) -> ParamCounts:
    attn = dense = shared = experts = experts_act = norms = 0.0
    for layer, n in arch.groups().items():
        lp = layer_params(arch, layer.mixer, layer.ffn, layer.indexer)
        attn += n * lp.attention
        dense += n * lp.dense_ffn
        shared += n * lp.shared
        experts += n * lp.experts_total
        experts_act += n * lp.experts_active
        norms += n * lp.norms
    emb = arch.vocab * arch.hidden  # token embedding table
    head = 0.0 if arch.tie_embeddings else arch.vocab * arch.hidden  # LM head
    norms += arch.hidden  # final norm
    head_active = arch.vocab * arch.hidden  # the logits GEMM reads the head (or tied embedding) once
    body = attn + dense + shared + norms
    return ParamCounts(
        total=emb + head + body + experts,
        active=body + experts_act + head_active,
        embedding=emb,
        lm_head=head,
        lm_head_active=head_active,
        attention=attn,
        dense_ffn=dense,
        shared=shared,
        experts=experts,
        experts_active=experts_act,
        norms=norms,
    )

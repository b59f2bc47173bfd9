"""Memory accounting: weights per GPU, KV cache per token and per sequence, runtime reserve, capacity.

Everything is vectorised over layout arrays (``tp, pp, dp, ep``) so the configuration search can
size thousands of layouts at once. Per-GPU figures are for the busiest GPU of a worker.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .architecture import DSA_SCALE_BYTES
from .errors import SimfrontError
from .hardware import Hardware
from .models import Model, Precision
from .params import layer_params
from .precision import FORMATS, kv_bytes
from .scheduler import KV_MEMORY_RULES
from .units import GiB

# --- Runtime reserve (named, documented) ------------------------------------------------------
# CUDA context, CUDA-graph pools, cuBLAS/attention workspaces and allocator slack per GPU:
# aiconfigurator systems/*.yaml `other_mem` "for safer deployment" (modeling-notes.md §7).
RUNTIME_OTHER_BYTES = 3.5 * GiB
# NCCL / custom all-reduce buffers when a worker spans more than one GPU: aiconfigurator `nccl_mem`
# 342-392 MB at TP 2-8 (modeling-notes.md §7).
COMM_BUFFER_BYTES = 0.4 * GiB
# Share of the memory left after weights and reserve that the engine hands to the KV cache:
# TensorRT-LLM `free_gpu_memory_fraction` default 0.9 (ecosystem.md §8.3 / §9.3).
KV_CACHE_FRACTION = 0.90
# Live hidden-size activation tensors per token in flight (residual, norm output, attention
# output, MLP input/output, all-reduce staging ...): 8 is a round upper estimate; an 8k-token
# prefill at H=5120 needs ~80 MB per such tensor (scaling-book inference.md, modeling-notes §7).
ACTIVATION_TENSORS_PER_TOKEN = 8
# Token budget per step assumed for activation sizing (vLLM/TRT-LLM default max_num_batched_tokens
# 8192; ecosystem.md §8).
DEFAULT_MAX_NUM_TOKENS = 8192
ACTIVATION_BYTES = 2.0  # BF16 activations


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def weight_bytes(model: Model, precision: Precision) -> float:
    """Total bytes of the language-model weights in ``precision`` (one copy)."""
    pc = model.params
    b = FORMATS
    return (
        pc.attention * b[precision.attention].bytes_per_element
        + (pc.dense_ffn + pc.shared) * b[precision.dense].bytes_per_element
        + pc.experts * b[precision.experts].bytes_per_element
        + (pc.embedding + pc.lm_head) * b[precision.embedding].bytes_per_element
        + pc.norms * 2.0
    )


def weight_bytes_per_gpu(model: Model, precision: Precision, tp, pp, dp, ep) -> np.ndarray:
    """Weight bytes held by the busiest GPU of a worker under the layout (replication included).

    Attention, dense FFN and shared experts are split over ``tp`` and replicated over ``dp``;
    routed experts are split over all ``tp*dp`` GPUs (``ep`` x ``moe_tp``); embedding and LM head
    are vocab-parallel over ``tp`` and sit on the first and last pipeline stages.
    """
    other, experts = weight_parts_per_gpu(model, precision, tp, pp, dp, ep)
    return other + experts


def weight_parts_per_gpu(model: Model, precision: Precision, tp, pp, dp, ep) -> tuple[np.ndarray, np.ndarray]:
    """(weight bytes every token reads, routed-expert weight bytes) on the busiest GPU of a worker: the
    two parts of :func:`weight_bytes_per_gpu` (a decode step reads the second only for the experts it touches)."""
    tp, pp, dp, ep = (_f(x) for x in (tp, pp, dp, ep))
    arch = model.arch
    b = FORMATS
    per_layer_tp = 0.0  # bytes split by tp (summed over layers)
    per_layer_group = 0.0  # bytes split by tp*dp (routed experts)
    norms = (model.params.norms) * 2.0  # BF16 norm weights, replicated on every GPU
    for layer, n, lp in _layer_params(arch):
        per_layer_tp += n * (
            lp.attention * b[precision.attention].bytes_per_element
            + (lp.dense_ffn + lp.shared) * b[precision.dense].bytes_per_element
        )
        per_layer_group += n * lp.experts_total * b[precision.experts].bytes_per_element
    # the busiest pipeline stage holds ceil(L/pp) of the L layers
    stage_share = np.ceil(arch.n_layers / pp) / arch.n_layers
    experts = per_layer_group / (tp * dp) * stage_share  # routed experts of the busiest stage, split over tp*dp GPUs
    pc = model.params
    emb = pc.embedding * b[precision.embedding].bytes_per_element
    head = pc.lm_head * b[precision.embedding].bytes_per_element
    edge = np.where(pp > 1, np.maximum(emb, head), emb + head) / tp  # vocab-parallel over tp
    return per_layer_tp / tp * stage_share + edge + norms * stage_share, experts


@dataclass(frozen=True)
class KvGeometry:
    """KV-cache bytes of one sequence on one GPU, split into parts that scale differently."""

    per_token: np.ndarray  # bytes per context token (full-attention layers, DSA index keys)
    windowed_per_token: np.ndarray  # bytes per token of sliding/chunked layers, up to their window
    window: int  # window of those layers (tokens)
    per_seq: np.ndarray  # constant bytes per sequence (linear-attention recurrent + conv state)

    def seq_bytes(self, context_tokens) -> np.ndarray:
        """Bytes one sequence of ``context_tokens`` occupies."""
        ctx = _f(context_tokens)
        capped = np.minimum(ctx, self.window) if self.window else ctx * 0
        return self.per_token * ctx + self.windowed_per_token * capped + self.per_seq


_LAYER_PARAMS: dict[int, tuple] = {}  # id(arch) -> (arch, (layer kind, layers, its parameters) per group)


def _layer_params(arch) -> list:
    """(layer kind, layers, :func:`layer_params`) per layer group, computed once per architecture."""
    hit = _LAYER_PARAMS.get(id(arch))
    if hit is None or hit[0] is not arch:
        groups = [(layer, n, layer_params(arch, layer.mixer, layer.ffn, layer.indexer)) for layer, n in arch.groups().items()]
        hit = _LAYER_PARAMS[id(arch)] = (arch, groups)
    return hit[1]


_LAYER_KINDS: dict[int, tuple] = {}  # id(arch) -> (arch, its layer counts): the architectures are immutable


def _layer_kinds(arch) -> tuple[int, int, int, int, int]:
    """(full-attention layers, sliding or chunked layers, layers with a DSA indexer, linear-attention layers,
    largest window) of an architecture, counted once per architecture (searches ask for every layout)."""
    hit = _LAYER_KINDS.get(id(arch))
    if hit is None or hit[0] is not arch:
        kinds = (arch.count(mixer="full"), arch.count(mixer="sliding") + arch.count(mixer="chunked"), arch.count(indexer="full"),
                 arch.count(mixer="linear"), max([l.window for l in arch.layers if l.mixer in ("sliding", "chunked")], default=0))
        hit = _LAYER_KINDS[id(arch)] = (arch, kinds)
    return hit[1]


def kv_geometry(model: Model, kv_dtype: str, tp=1, pp=1) -> KvGeometry:
    """KV bytes per GPU of one sequence (its requests live on one attention-DP rank).

    GQA: ``2 * ceil(n_kv/tp) * head_dim`` elements per layer (heads replicated when tp > n_kv).
    MLA: the ``kv_lora_rank + rope`` latent per layer, NOT split by TP. DSA: 128 FP8 index-key
    bytes + a 4-byte scale per layer that computes its own top-k. Sliding/chunked layers hold at
    most their window. Linear-attention layers hold a constant FP32 state per sequence, split by TP.
    """
    tp, pp = _f(tp), _f(pp)
    arch = model.arch
    a = arch.attention
    b_kv = kv_bytes(kv_dtype)
    if a.kind == "mla":
        per_layer = _f(a.mla_kv_elems * b_kv) + 0 * tp  # latent shared by all heads: not split
    else:
        kv_heads = np.ceil(a.n_kv_heads / tp)  # replicated once tp exceeds the KV heads
        per_layer = 2 * kv_heads * a.head_dim * b_kv
    idx_per_layer = (a.index_head_dim + DSA_SCALE_BYTES) if a.index_topk else 0  # FP8 keys + scale
    n_full, n_win, n_idx, n_lin, window = _layer_kinds(arch)
    stage = 1.0 / pp  # layers are spread over pipeline stages
    lin_state = arch.linear.state_bytes_per_seq_layer / tp if arch.linear else 0.0
    return KvGeometry(
        per_token=(n_full * per_layer + n_idx * idx_per_layer) * stage,
        windowed_per_token=n_win * per_layer * stage,
        window=window,
        per_seq=n_lin * lin_state * stage,
    )


def kv_bytes_per_token(model: Model, kv_dtype: str) -> float:
    """Model-wide KV bytes each context token adds (full-attention layers + DSA keys; one copy, TP=1).

    Sliding-window and chunked layers are left out: they stop growing at their window (see
    :func:`kv_geometry`); linear-attention layers hold a constant state per sequence.
    """
    return float(kv_geometry(model, kv_dtype).per_token)


# Where engines keep a windowed layer's KV to its window: vLLM's hybrid KV cache manager reserves a sliding-window
# layer's slots for its most recent window tokens only (docs.vllm.ai design/hybrid_kv_cache_manager); TensorRT-LLM keeps
# one KV pool per attention window size, the windows set when the engine is created (kv_cache_config.max_attention_window,
# nvidia.github.io/TensorRT-LLM features/kvcache). One that did not: TensorRT-LLM 0.17's TensorRT-engine flow served
# Mistral-7B (32 sliding layers) at Llama-3.1-8B's throughput with 20k-token prompts (measurements/offline_throughput.csv).
WINDOW_NOTE_MIN_RATIO = 1.5  # say so where keeping every token would hold at least this many times the priced KV


def window_note(model: Model, kv_dtype: str, context_tokens: float) -> str | None:
    """Where a sequence of ``context_tokens`` outgrows a model's sliding-window or chunked layers enough to matter: that
    simfront prices their KV as stopping at the window, and how much more an engine that keeps every token's KV holds."""
    geo = kv_geometry(model, kv_dtype)
    win = float(geo.windowed_per_token)
    if not (win > 0 and geo.window and context_tokens > geo.window):
        return None
    priced = float(geo.seq_bytes(context_tokens))  # one sequence's KV with the windows kept
    ratio = (priced + win * (context_tokens - geo.window)) / priced  # every token kept in the windowed layers too
    if ratio < WINDOW_NOTE_MIN_RATIO:
        return None
    kinds = {layer.mixer: n for layer, n in model.arch.groups().items() if layer.window}
    layers = " and ".join(f"{n} {mixer}" for mixer, n in kinds.items())
    return (f"{model.id}: the KV of its {layers} attention layers is priced up to their {geo.window:,}-token window, as vLLM "
            f"(hybrid KV cache manager) and TensorRT-LLM (per-window pools, max_attention_window) keep it; an engine that "
            f"keeps every token holds {ratio:.1f}x the KV per sequence at {context_tokens:,.0f} tokens (TensorRT-LLM 0.17's "
            f"TensorRT-engine flow did for Mistral-7B: measurements/offline_throughput.csv)")


def runtime_reserve_bytes(model: Model, tp, pp, dp, ep, max_num_tokens=DEFAULT_MAX_NUM_TOKENS, max_batch=256) -> np.ndarray:
    """Per-GPU memory that is neither weights nor KV: context/graphs, comm buffers, activations."""
    tp, pp, dp, ep = (_f(x) for x in (tp, pp, dp, ep))
    arch = model.arch
    worker = tp * dp * pp
    comm = np.where(worker > 1, COMM_BUFFER_BYTES, 0.0)
    act = ACTIVATION_TENSORS_PER_TOKEN * max_num_tokens * arch.hidden * ACTIVATION_BYTES  # hidden-size buffers
    logits = max_batch * arch.vocab / tp * 4.0  # FP32 logits of the sampled tokens, vocab-parallel
    return RUNTIME_OTHER_BYTES + comm + act + logits


@dataclass
class MemoryPlan:
    weights_bytes: float  # one full copy of the weights
    weights_bytes_per_gpu: np.ndarray
    reserve_bytes_per_gpu: np.ndarray
    kv_budget_bytes_per_gpu: np.ndarray  # bytes left for KV cache on each GPU
    kv_bytes_per_token: float  # model-wide, TP=1
    kv_bytes_per_token_per_gpu: np.ndarray
    seq_bytes_per_gpu: np.ndarray  # one sequence of the workload's context
    kv_capacity_tokens: np.ndarray  # context tokens one attention-DP rank can hold
    max_concurrency: np.ndarray  # concurrent sequences of the workload the whole GPU set holds
    fits: np.ndarray  # weights + reserve fit and at least one sequence fits


def kv_budget_bytes(hbm_bytes: float, weights_bytes, reserve_bytes, fraction: float = KV_CACHE_FRACTION,
                    rule: str = "free") -> np.ndarray:
    """KV-cache pool per GPU an engine allocates under its memory ``fraction`` read by its ``rule``
    (see ``KV_MEMORY_RULES``)."""
    free = hbm_bytes - weights_bytes - reserve_bytes  # memory left after weights and runtime reserve
    if rule == "free":
        return np.maximum(free, 0.0) * fraction  # a share of the free memory
    if rule == "total":
        return np.maximum(fraction * hbm_bytes - weights_bytes - reserve_bytes, 0.0)  # the share minus all but KV
    if rule == "total_static":
        return np.maximum(np.minimum(fraction * hbm_bytes - weights_bytes, free), 0.0)  # the share minus weights
    raise SimfrontError(f"unknown KV memory rule {rule!r}; valid: {', '.join(KV_MEMORY_RULES)}")


def memory_fraction_for_pool(hbm_bytes: float, weights_bytes, reserve_bytes, kv_bytes, rule: str) -> np.ndarray:
    """The memory fraction that gives a KV pool of ``kv_bytes`` per GPU under an engine's ``rule``: the inverse of
    :func:`kv_budget_bytes` (what a launch line writes so that the engine holds the pool simfront priced)."""
    if rule == "free":
        return kv_bytes / np.maximum(hbm_bytes - weights_bytes - reserve_bytes, 1.0)  # share of the free memory
    if rule == "total":
        return (weights_bytes + reserve_bytes + kv_bytes) / hbm_bytes  # weights, runtime and pool over the GPU
    if rule == "total_static":
        return (weights_bytes + kv_bytes) / hbm_bytes  # weights and pool over the GPU
    raise SimfrontError(f"unknown KV memory rule {rule!r}; valid: {', '.join(KV_MEMORY_RULES)}")


def plan_memory(model: Model, precision: Precision, hw: Hardware, tp, pp, dp, ep, replicas, context_tokens,
                memory_fraction: float = KV_CACHE_FRACTION, kv_memory_rule: str = "free") -> MemoryPlan:
    """Memory verdict for layouts (arrays broadcast) serving sequences of ``context_tokens``, the KV pool sized
    by an engine's ``memory_fraction`` under its ``kv_memory_rule`` (default: TensorRT-LLM's)."""
    tp, pp, dp, ep, replicas = (_f(x) for x in (tp, pp, dp, ep, replicas))
    w_gpu = weight_bytes_per_gpu(model, precision, tp, pp, dp, ep)
    reserve = runtime_reserve_bytes(model, tp, pp, dp, ep)
    free = hw.hbm_bytes - w_gpu - reserve  # memory left after weights and runtime reserve
    budget = kv_budget_bytes(hw.hbm_bytes, w_gpu, reserve, memory_fraction, kv_memory_rule)  # handed to the KV cache
    geo = kv_geometry(model, precision.kv, tp, pp)
    seq = geo.seq_bytes(context_tokens)
    per_tok = geo.per_token + geo.windowed_per_token
    cap_tokens = np.where(per_tok > 0, np.floor(budget / np.maximum(per_tok, 1e-9)), np.inf)
    seqs_per_rank = np.floor(budget / np.maximum(seq, 1e-9))
    max_conc = seqs_per_rank * dp * replicas  # each attention-DP rank and replica holds its own sequences
    fits = (free > 0) & (seqs_per_rank >= 1)
    return MemoryPlan(
        weights_bytes=weight_bytes(model, precision),
        weights_bytes_per_gpu=w_gpu,
        reserve_bytes_per_gpu=reserve,
        kv_budget_bytes_per_gpu=budget,
        kv_bytes_per_token=kv_bytes_per_token(model, precision.kv),
        kv_bytes_per_token_per_gpu=per_tok + 0 * tp,
        seq_bytes_per_gpu=seq,
        kv_capacity_tokens=cap_tokens,
        max_concurrency=max_conc,
        fits=fits,
    )

"""The validated model spec between a ``config.json`` and the architecture (pydantic).

``validate_text_config`` takes the language-model part of a Hugging Face config (``text_config`` when
the model is multimodal), fills the defaults its model type implies (``models/model_type_defaults.yaml``),
and checks every field simfront reads: JSON type, range, divisibility and cross-field rules. A bad value
raises one :class:`SimfrontError` line naming the field, the value and what would be valid.
``validate_quant_configs`` does the same for ``quantization_config`` and a ModelOpt
``hf_quant_config.json``. ``unknown_keys`` lists config keys simfront does not understand (warnings).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from . import yamlio
from .errors import SimfrontError

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"

# Most layers a config may declare. The deepest published LLMs have 126 (Llama-3.1-405B) and 93
# (Kimi K3) layers; 1024 leaves 8x headroom while keeping the per-layer parsing and costing (a Python
# loop over layers) well under a second, so a config with 10^7 layers is refused instead of hanging.
MAX_LAYERS = 1024
# Layer kinds simfront can cost (HF `layer_types` values): softmax attention over the whole context,
# over a sliding window, over fixed chunks (Llama 4), and delta-rule linear attention (Qwen3-Next/3.5).
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")
# Weight-only bit widths simfront has a format for: 4-bit integer -> precision.FORMATS["w4a16"].
WEIGHT_ONLY_BITS = (4,)
# quant_method values of `quantization_config` that simfront reads as weight formats.
QUANT_METHODS = ("fp8", "fbgemm_fp8", "mxfp4", "compressed-tensors", "modelopt", "awq", "gptq", "auto-round", "bitsandbytes")
# JSON type names for error messages (Python type -> the word a config.json author knows).
_JSON_TYPE = {str: "a string", float: "a number", int: "an integer", bool: "a boolean", list: "a list", dict: "an object", type(None): "null"}


def _size(ge: int, *names: str, le: int | None = None):
    """An optional integer config field (JSON integer, not float/bool/string) with its HF spellings."""
    return Annotated[Optional[StrictInt], Field(default=None, ge=ge, le=le, validation_alias=AliasChoices(*names))]


def _flag(name: str):
    return Annotated[Optional[StrictBool], Field(default=None, validation_alias=AliasChoices(name))]


class LinearAttnConfig(BaseModel):
    """Kimi Linear / Kimi K3 ``linear_attn_config`` (Kimi Delta Attention)."""

    model_config = ConfigDict(extra="allow")
    num_heads: Annotated[StrictInt, Field(ge=1)]
    head_dim: Annotated[StrictInt, Field(ge=1)]
    short_conv_kernel_size: Annotated[StrictInt, Field(ge=1)] = 4
    use_full_rank_gate: StrictBool = False
    kda_layers: list[Annotated[StrictInt, Field(ge=1, le=MAX_LAYERS)]] = []


class QuantizationConfig(BaseModel):
    """``quantization_config`` of a quantised checkpoint (the fields simfront reads)."""

    model_config = ConfigDict(extra="allow")
    quant_method: Literal[QUANT_METHODS]  # type: ignore[valid-type]
    bits: Optional[StrictInt] = None  # AWQ / GPTQ / auto-round
    weight_block_size: Optional[list[Annotated[StrictInt, Field(ge=1)]]] = None  # block FP8
    load_in_4bit: Optional[StrictBool] = None  # bitsandbytes
    load_in_8bit: Optional[StrictBool] = None
    config_groups: Optional[dict[str, dict]] = None  # compressed-tensors
    format: Optional[StrictStr] = None
    ignore: Optional[list[StrictStr]] = None
    quant_algo: Optional[StrictStr] = None  # modelopt


class HfQuantSection(BaseModel):
    model_config = ConfigDict(extra="allow")
    quant_algo: Optional[StrictStr] = None
    kv_cache_quant_algo: Optional[StrictStr] = None
    exclude_modules: list[StrictStr] = []


class HfQuantConfig(BaseModel):
    """NVIDIA ModelOpt ``hf_quant_config.json`` (the fields simfront reads)."""

    model_config = ConfigDict(extra="allow")
    quantization: Optional[HfQuantSection] = None


class TextSpec(BaseModel):
    """The language-model fields of a config.json that simfront reads, with their alternative spellings."""

    model_config = ConfigDict(extra="allow", populate_by_name=False)

    model_type: Optional[StrictStr] = None
    hidden_size: Annotated[StrictInt, Field(ge=1, validation_alias=AliasChoices("hidden_size", "d_model"))]
    num_hidden_layers: Annotated[StrictInt, Field(ge=1, le=MAX_LAYERS, validation_alias=AliasChoices("num_hidden_layers", "num_layers", "n_layers"))]
    num_attention_heads: Annotated[StrictInt, Field(ge=1, validation_alias=AliasChoices("num_attention_heads", "n_heads"))]
    vocab_size: Annotated[StrictInt, Field(ge=1)]
    num_key_value_heads: _size(1, "num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
    head_dim: _size(1, "head_dim")
    intermediate_size: _size(0, "intermediate_size")
    intermediate_size_mlp: _size(1, "intermediate_size_mlp")
    moe_intermediate_size: _size(0, "moe_intermediate_size")
    shared_expert_intermediate_size: _size(0, "shared_expert_intermediate_size")
    shared_intermediate_size: _size(0, "shared_intermediate_size")
    kv_lora_rank: _size(0, "kv_lora_rank")
    q_lora_rank: _size(0, "q_lora_rank")
    qk_nope_head_dim: _size(0, "qk_nope_head_dim")
    qk_rope_head_dim: _size(0, "qk_rope_head_dim")
    v_head_dim: _size(1, "v_head_dim")
    index_topk: _size(0, "index_topk")
    index_n_heads: _size(0, "index_n_heads")
    index_head_dim: _size(0, "index_head_dim")
    sliding_window: _size(0, "sliding_window")
    sliding_window_pattern: _size(1, "sliding_window_pattern")
    use_sliding_window: _flag("use_sliding_window")
    max_window_layers: _size(0, "max_window_layers")
    attention_chunk_size: _size(0, "attention_chunk_size")
    full_attention_interval: _size(1, "full_attention_interval")
    layer_types: Optional[list[Literal[LAYER_TYPES]]] = None  # type: ignore[valid-type]
    mlp_layer_types: Optional[list[Literal["dense", "sparse"]]] = None
    indexer_types: Optional[list[Literal["full", "shared"]]] = None
    no_rope_layers: Optional[list[Annotated[StrictInt, Field(ge=0, le=1)]]] = None
    mlp_only_layers: Optional[list[Annotated[StrictInt, Field(ge=0)]]] = None
    n_experts: _size(0, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts")
    top_k: _size(1, "num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_topk")
    n_shared_experts: _size(0, "n_shared_experts", "num_shared_experts")
    first_k_dense_replace: _size(0, "first_k_dense_replace")
    moe_layer_freq: _size(1, "moe_layer_freq")
    decoder_sparse_step: _size(1, "decoder_sparse_step")
    interleave_moe_layer_step: _size(1, "interleave_moe_layer_step")
    routed_expert_hidden_size: _size(0, "routed_expert_hidden_size")
    num_nextn_predict_layers: _size(0, "num_nextn_predict_layers")
    mtp_num_hidden_layers: _size(0, "mtp_num_hidden_layers")
    num_mtp_modules: _size(0, "num_mtp_modules")
    use_mtp: _flag("use_mtp")
    max_position_embeddings: _size(1, "max_position_embeddings")
    tie_word_embeddings: _flag("tie_word_embeddings")
    attention_bias: _flag("attention_bias")
    attn_output_gate: _flag("attn_output_gate")
    mla_use_output_gate: _flag("mla_use_output_gate")
    linear_attn_config: Optional[LinearAttnConfig] = None
    linear_num_key_heads: _size(1, "linear_num_key_heads")
    linear_num_value_heads: _size(1, "linear_num_value_heads")
    linear_key_head_dim: _size(1, "linear_key_head_dim")
    linear_value_head_dim: _size(1, "linear_value_head_dim")
    linear_conv_kernel_dim: _size(1, "linear_conv_kernel_dim")
    torch_dtype: Optional[StrictStr] = None
    dtype: Optional[StrictStr] = None
    quantization_config: Any = None  # checked by validate_quantization_config


# ---------------------------------------------------------------------------------------------
# Error messages


def _show(v: Any) -> str:
    """A value as the user wrote it, on one short line."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    try:
        s = json.dumps(v, default=str)  # as written in JSON: "big", true, null, [4096]
    except (TypeError, ValueError, RecursionError):
        s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "literal"):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def _valid(err: dict) -> str:
    """What would be valid, from a pydantic error."""
    t, ctx, v = err["type"], err.get("ctx") or {}, err.get("input")
    got = _JSON_TYPE.get(type(v), type(v).__name__)
    if t == "int_type":
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            return f"write a JSON integer ({int(v)}), not a decimal number"
        return f"must be a whole number (a JSON integer), not {got}"
    if t in ("greater_than_equal", "greater_than"):
        return f"must be >= {ctx.get('ge', ctx.get('gt'))}"
    if t in ("less_than_equal", "less_than"):
        bound = ctx.get("le", ctx.get("lt"))
        if bound == MAX_LAYERS:
            return f"must be <= {MAX_LAYERS} (simfront's MAX_LAYERS: 8x the deepest published LLM)"
        return f"must be <= {bound}"
    if t == "bool_type":
        return f"must be true or false, not {got}"
    if t == "string_type":
        return f"must be a string, not {got}"
    if t in ("list_type", "tuple_type"):
        return f"must be a list, not {got}"
    if t in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a JSON object, not {got}"
    if t == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    if t == "missing":
        return "is required"
    return err.get("msg", "is invalid")


def _raise(e: ValidationError, where: str, file: str, prefix: tuple = ()) -> None:
    err = e.errors(include_url=False)[0]
    loc = _loc(prefix + tuple(err["loc"]))
    if err["type"] == "missing":
        raise SimfrontError(f"{where}: {file} is missing required field {loc!r}") from None
    raise SimfrontError(f"{where}: {file} field {loc} = {_show(err.get('input'))} is invalid: {_valid(err)}") from None


# ---------------------------------------------------------------------------------------------
# Data files


@lru_cache(maxsize=None)
def model_type_defaults() -> dict[str, dict]:
    return yamlio.load(MODELS_DIR / "model_type_defaults.yaml")["model_types"]


@lru_cache(maxsize=None)
def known_keys() -> frozenset[str]:
    data = yamlio.load(MODELS_DIR / "config_keys.yaml")
    return frozenset(data["read"]) | frozenset(data["no_cost_effect"])


@lru_cache(maxsize=None)
def _unsupported() -> tuple[dict[str, str], dict[str, str]]:
    data = yamlio.load(MODELS_DIR / "config_keys.yaml")
    return dict(data.get("unsupported_keys") or {}), dict(data.get("unsupported_model_types") or {})


def check_supported_layers(cfg: dict, where: str) -> None:
    """Refuse a config whose layers simfront does not cost (Mamba / state-space, RWKV, recurrent blocks: the
    ``unsupported_keys`` and ``unsupported_model_types`` of models/config_keys.yaml), naming what marks them."""
    keys, types = _unsupported()
    for prefix, part in (("", cfg), ("text_config.", cfg.get("text_config"))):
        if not isinstance(part, dict):
            continue
        mt = part.get("model_type")
        hits = [(f"model_type {mt!r}", types[mt])] if isinstance(mt, str) and mt in types else []
        hits += [(f"key {prefix}{k}", keys[k]) for k in part if k in keys]
        if hits:
            what, reason = hits[0]
            raise SimfrontError(f"{where}: config.json {what} marks {reason}, which simfront does not cost (it models "
                                f"transformer layers with full, sliding, chunked or linear attention): no prediction for this model")


# ---------------------------------------------------------------------------------------------
# Validation


def check_finite(obj: Any, where: str, path: str = "") -> None:
    """Reject NaN / Infinity anywhere in a parsed config (JSON has no such numbers)."""
    stack = [(path, obj)]
    while stack:
        p, o = stack.pop()
        if isinstance(o, float) and not math.isfinite(o):
            raise SimfrontError(f"{where}: config.json field {p or '(top level)'} = {_show(o)} is invalid: must be a finite number (NaN and Infinity are not JSON)")
        if isinstance(o, dict):
            stack.extend((f"{p}.{k}" if p else str(k), v) for k, v in o.items())
        elif isinstance(o, list):
            stack.extend((f"{p}[{i}]", v) for i, v in enumerate(o))


def text_part(cfg: dict, where: str) -> tuple[dict, str]:
    """(language-model fields, prefix for error paths) of a possibly multimodal config."""
    tc = cfg.get("text_config")
    if tc is None:
        return cfg, ""
    if not isinstance(tc, dict):
        raise SimfrontError(f"{where}: config.json field text_config = {_show(tc)} is invalid: must be a JSON object holding the language model's fields")
    if not tc:
        return cfg, ""
    merged = dict(tc)
    # fields multimodal configs keep only at the top level
    for k in ("quantization_config", "tie_word_embeddings", "torch_dtype", "dtype", "vocab_size"):
        if k not in merged and k in cfg:
            merged[k] = cfg[k]
    if "model_type" not in merged and isinstance(cfg.get("model_type"), str):
        merged["model_type"] = cfg["model_type"]
    return merged, "text_config."


def type_rules(c: dict, top: dict | None = None) -> dict:
    """The model_type_defaults.yaml entry for the text model type (falling back to the top-level type)."""
    table = model_type_defaults()
    for mt in (c.get("model_type"), (top or {}).get("model_type")):
        if isinstance(mt, str) and mt in table:
            return table[mt]
    return {}


def with_defaults(c: dict, top: dict | None = None) -> dict:
    """``c`` with the fields its model type implies filled where the config leaves them out (or null)."""
    rules = type_rules(c, top)
    out = dict(c)
    for k, v in (rules.get("defaults") or {}).items():
        if out.get(k) is None:
            out[k] = v
    return out


def validate_text_config(cfg: dict, where: str) -> tuple[TextSpec, dict]:
    """Validate the language-model part of ``cfg``: (spec, the text dict with model-type defaults)."""
    check_finite(cfg, where)
    check_supported_layers(cfg, where)
    c, prefix = text_part(cfg, where)
    c = with_defaults(c, cfg)
    try:
        spec = TextSpec.model_validate(c)
    except ValidationError as e:
        _raise(e, where, "config.json", (prefix.rstrip("."),) if prefix else ())
    validate_quantization_config(c.get("quantization_config"), where)
    _cross_field_rules(spec, where, prefix)
    return spec, c


def _bad(where: str, field: str, value: Any, valid: str) -> SimfrontError:
    return SimfrontError(f"{where}: config.json field {field} = {_show(value)} is invalid: {valid}")


def _cross_field_rules(s: TextSpec, where: str, p: str) -> None:
    n_layers = s.num_hidden_layers
    mla = bool(s.kv_lora_rank)
    if mla:
        for f in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if getattr(s, f) is None:
                raise SimfrontError(f"{where}: config.json has kv_lora_rank (MLA) but is missing required field {p + f!r}")
    else:
        kv = s.num_key_value_heads
        if kv is not None and kv > s.num_attention_heads:
            raise _bad(where, p + "num_key_value_heads", kv, f"must be <= num_attention_heads ({s.num_attention_heads})")
        if kv is not None and s.num_attention_heads % kv:
            divisors = [d for d in range(1, s.num_attention_heads + 1) if s.num_attention_heads % d == 0]
            shown = ", ".join(map(str, divisors[:12])) + (", ..." if len(divisors) > 12 else "")
            raise _bad(where, p + "num_key_value_heads", kv, f"must divide num_attention_heads ({s.num_attention_heads}): one of {shown}")
        if s.head_dim is None and s.hidden_size % s.num_attention_heads:
            raise _bad(where, p + "hidden_size", s.hidden_size,
                       f"must be a multiple of num_attention_heads ({s.num_attention_heads}) when head_dim is not given; or set head_dim")
    if s.n_experts is not None and s.n_experts > 1:
        if s.top_k is None:
            raise SimfrontError(f"{where}: config.json has {s.n_experts} experts but is missing required field {p + 'num_experts_per_tok'!r}")
        if s.top_k > s.n_experts:
            raise _bad(where, p + "num_experts_per_tok", s.top_k, f"must be <= the number of experts ({s.n_experts})")
    if s.first_k_dense_replace is not None and s.first_k_dense_replace > n_layers:
        raise _bad(where, p + "first_k_dense_replace", s.first_k_dense_replace, f"must be <= num_hidden_layers ({n_layers})")
    for f in ("layer_types", "mlp_layer_types", "indexer_types", "no_rope_layers"):
        v = getattr(s, f)
        if v is not None and f != "no_rope_layers" and len(v) != n_layers:
            raise _bad(where, p + f, v, f"must have one entry per layer ({n_layers} = num_hidden_layers), not {len(v)}")
    for i in s.mlp_only_layers or []:
        if i >= n_layers:
            raise _bad(where, p + "mlp_only_layers", s.mlp_only_layers, f"layer indices must be < num_hidden_layers ({n_layers})")
    if s.linear_attn_config is not None:
        for i in s.linear_attn_config.kda_layers:
            if i > n_layers:
                raise _bad(where, p + "linear_attn_config.kda_layers", s.linear_attn_config.kda_layers,
                           f"1-based layer numbers must be <= num_hidden_layers ({n_layers})")
    if s.index_topk:
        for f in ("index_n_heads", "index_head_dim"):
            if not getattr(s, f):
                raise SimfrontError(f"{where}: config.json has index_topk (DSA indexer) but {p + f!r} is missing or 0; it must be >= 1")


def validate_quantization_config(qc: Any, where: str, field: str = "quantization_config") -> QuantizationConfig | None:
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise SimfrontError(f"{where}: config.json field {field} = {_show(qc)} is invalid: must be a JSON object with a quant_method (one of {', '.join(QUANT_METHODS)})")
    try:
        q = QuantizationConfig.model_validate(qc)
    except ValidationError as e:
        _raise(e, where, "config.json", (field,))
    if q.quant_method in ("awq", "gptq", "auto-round"):
        if q.bits not in WEIGHT_ONLY_BITS:
            raise _bad(where, f"{field}.bits", q.bits, f"simfront models {'/'.join(map(str, WEIGHT_ONLY_BITS))}-bit weight-only {q.quant_method} checkpoints (format w4a16)")
    if q.quant_method == "bitsandbytes" and not q.load_in_4bit:
        raise SimfrontError(f"{where}: config.json {field} is bitsandbytes without load_in_4bit; simfront models only 4-bit weight-only checkpoints (format w4a16), not LLM.int8")
    return q


def validate_hf_quant_config(data: Any, path: str) -> HfQuantConfig:
    if not isinstance(data, dict):
        raise SimfrontError(f"{path}: hf_quant_config.json = {_show(data)} is invalid: must be a JSON object with a 'quantization' object")
    check_finite(data, path)
    try:
        return HfQuantConfig.model_validate(data if "quantization" in data else {"quantization": data})
    except ValidationError as e:
        _raise(e, path, "hf_quant_config.json")


def unknown_keys(cfg: dict) -> list[str]:
    """Config keys (top level and text_config) simfront neither reads nor knows to be irrelevant."""
    known = known_keys()
    out = [k for k in cfg if k not in known]
    tc = cfg.get("text_config")
    if isinstance(tc, dict):
        out += [f"text_config.{k}" for k in tc if k not in known]
    return out

"""Model catalog (``models/catalog.yaml``), name resolution and per-component precision.

``get_model`` accepts a catalog id (``kimi-k3``), an alias, a Hugging Face id
(``deepseek-ai/DeepSeek-R1-0528``, ``nvidia/DeepSeek-V3.2-NVFP4``, ``Qwen/Qwen3-32B-FP8``) or a path
to a config.json on disk. A precision carried by the name (``-FP8``, ``-NVFP4``, ``-FP4``) becomes
the model's precision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path


from . import yamlio
from .architecture import ModelArch, load_config, parse_arch, read_json
from .errors import SimfrontError, unknown
from .model_schema import text_part, unknown_keys, validate_hf_quant_config, validate_quantization_config
from .params import ParamCounts, count_params
from .precision import FORMATS, KV_FORMATS, normalize_format

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
CONFIG_DIR = MODELS_DIR / "configs"


@dataclass(frozen=True)
class Precision:
    """Weight format per component and the KV-cache dtype."""

    attention: str  # attention / linear-attention / indexer projections
    dense: str  # dense FFN layers and shared experts
    experts: str  # routed experts
    kv: str  # KV cache
    embedding: str = "bf16"  # embedding table and LM head (kept in BF16 by every checkpoint here)

    @property
    def label(self) -> str:
        """Short name: the routed-expert (or dense) format, plus KV when not BF16."""
        main = self.experts if self.experts != self.dense and self.experts != "bf16" else self.dense
        if self.attention != main and self.attention != "bf16" and main == "bf16":
            main = self.attention
        return main if self.kv in ("bf16", "fp16") else f"{main}+kv{self.kv}"


@dataclass(frozen=True)
class Model:
    id: str
    arch: ModelArch
    native: Precision
    hf_id: str | None
    published_total: float | None = None
    published_active: float | None = None
    published_active_convention: str = "includes_embedding"  # or excludes_embedding, non_embedding (catalog.yaml)
    published_active_rounding: float = 0.0  # the published active figure is rounded to this many parameters
    published_source: str = ""
    name_precision: str | None = None  # precision carried by the name the user typed
    # config keys simfront did not understand and ignored (shown by the CLI/API as warnings)
    warnings: tuple[str, ...] = ()

    @cached_property
    def params(self) -> ParamCounts:
        """Parameter counts of the architecture (counted once per model: a search asks for every layout)."""
        return count_params(self.arch)

    def active_in_published_convention(self) -> float:
        """simfront's active count (no input embedding, LM head in) restated in the authors' convention."""
        pc = self.params
        if self.published_active_convention == "includes_embedding":
            return pc.active + (0.0 if self.arch.tie_embeddings else pc.embedding)
        if self.published_active_convention == "non_embedding":
            return pc.active - pc.lm_head_active
        return pc.active

    @property
    def precision(self) -> Precision:
        """The precision simfront uses by default: the one in the name, else the checkpoint's."""
        if self.name_precision:
            return apply_precision(self, self.name_precision)
        return self.native


# ---------------------------------------------------------------------------------------------
# Native precision from quantization_config / hf_quant_config.json


def _dtype_format(cfg: dict) -> str:
    d = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").lower()
    return "fp16" if d in ("float16", "fp16", "half") else "bf16"


def _modelopt_format(algo: str, base: str, where: str, field: str) -> str:
    """Weight format of a ModelOpt quant_algo ('FP8', 'NVFP4', 'W4A16_AWQ', 'MXFP4', ...)."""
    a = algo.lower()
    if not a or a == "none":
        return base
    for key, fmt in (("nvfp4", "nvfp4"), ("mxfp4", "mxfp4"), ("fp8", "fp8"), ("w4a16", "w4a16"), ("int4", "w4a16")):
        if key in a:
            return fmt
    raise SimfrontError(f"{where}: {field} = \"{algo}\" is not a weight format simfront models; valid: FP8, NVFP4, MXFP4, W4A16_AWQ / INT4_AWQ or null")


def native_precision(cfg: dict, arch: ModelArch, hf_quant: dict | None = None) -> Precision:
    """Per-component formats of a checkpoint, read from its quantization config (validated).

    ModelOpt ``hf_quant_config.json`` first; else ``quantization_config``: block/per-tensor FP8,
    MXFP4 (gpt-oss), compressed-tensors, ModelOpt, and the 4-bit weight-only integer formats of
    AWQ, GPTQ, auto-round and bitsandbytes (``w4a16``: every linear layer; embeddings stay BF16).
    """
    where = arch.name
    tc, _ = text_part(cfg, where)
    base = _dtype_format(tc)
    if hf_quant is not None:  # ModelOpt (NVIDIA) checkpoints
        q = validate_hf_quant_config(hf_quant, f"{where} hf_quant_config.json").quantization
        if q is None:
            return Precision(base, base, base, "bf16")
        kv_algo = (q.kv_cache_quant_algo or "").upper()
        if kv_algo not in ("", "NONE", "FP8"):
            raise SimfrontError(f"{where}: hf_quant_config.json quantization.kv_cache_quant_algo = \"{q.kv_cache_quant_algo}\" is not modelled; valid: FP8 or null")
        kv = "fp8" if kv_algo == "FP8" else "bf16"
        fmt = _modelopt_format(q.quant_algo or "", base, where, "hf_quant_config.json quantization.quant_algo")
        excluded = " ".join(q.exclude_modules)
        attn = base if "self_attn" in excluded else fmt
        return Precision(attention=attn, dense=fmt, experts=fmt, kv=kv)
    qc = validate_quantization_config(tc.get("quantization_config"), where)
    if qc is None:
        return Precision(base, base, base, "bf16")
    method = qc.quant_method
    if method in ("fp8", "fbgemm_fp8"):
        fmt = "fp8_block" if qc.weight_block_size else "fp8"
        return Precision(fmt, fmt, fmt, "bf16")
    if method == "mxfp4":  # gpt-oss: experts MXFP4, attention/router/embeddings BF16
        return Precision(base, base, "mxfp4", "bf16")
    if method in ("awq", "gptq", "auto-round", "bitsandbytes"):  # 4-bit integer weight-only (validated)
        return Precision("w4a16", "w4a16", "w4a16", "bf16")
    if method == "compressed-tensors":
        groups = qc.config_groups or {}
        w = next(iter(groups.values()), {}).get("weights", {}) if groups else {}
        if not isinstance(w, dict):
            raise SimfrontError(f"{where}: config.json quantization_config.config_groups weights = {w!r} is invalid: must be a JSON object with num_bits and type")
        fmt_name = (qc.format or "").lower()
        if "mxfp4" in fmt_name or (w.get("type") == "float" and w.get("num_bits") == 4):
            fmt = "mxfp4"
        elif w.get("num_bits") == 4:
            fmt = "w4a16"
        elif w.get("num_bits") == 8:
            fmt = "fp8"
        else:
            fmt = base
        ignore = " ".join(qc.ignore or [])
        attn = base if "self_attn" in ignore else fmt
        dense = base if ("shared_experts" in ignore or "mlp" in ignore) else fmt
        experts = fmt if arch.is_moe else dense
        return Precision(attn, dense if arch.is_moe else fmt, experts, "bf16")
    # modelopt (the only method left after validation)
    fmt = _modelopt_format(qc.quant_algo or "", base, where, "quantization_config.quant_algo")
    return Precision(fmt, fmt, fmt, "bf16")


def apply_precision(model: Model, precision: str | None = None, kv_dtype: str | None = None) -> Precision:
    """The model's precision with a user override (``--precision``, ``--kv-dtype``) applied.

    Recipes: ``bf16``/``fp8``/``fp8_block``: every linear layer in that format. 4-bit formats
    (``nvfp4``, ``mxfp4``, ``w4a16``): routed experts and dense FFNs; dense models quantise attention
    too. Attention projections of MoE models: BF16 under ``nvfp4`` (NVIDIA ModelOpt quantises from
    BF16 weights and leaves self-attention out: nvidia/DeepSeek-R1-0528-FP4, whose v2 "additionally
    quantizes the wo module", and the exclude_modules of nvidia/DeepSeek-V3.2-NVFP4's
    hf_quant_config.json), else an 8-bit native format or BF16 (as the OpenAI checkpoints keep it).
    """
    p = model.native
    if precision and precision != "native":
        fmt = normalize_format(precision)
        if fmt not in FORMATS:
            raise SimfrontError(f"unknown --precision {precision!r}; valid: native, {', '.join(FORMATS)}")
        if fmt in ("nvfp4", "mxfp4", "w4a16"):
            if model.arch.is_moe:
                keep_8bit = fmt != "nvfp4" and FORMATS[p.attention].bytes_per_element <= 1.1
                p = replace(p, attention=p.attention if keep_8bit else "bf16", dense=fmt, experts=fmt)
            else:
                p = replace(p, attention=fmt, dense=fmt, experts=fmt)
        else:
            p = replace(p, attention=fmt, dense=fmt, experts=fmt)
    if kv_dtype and kv_dtype != "native":
        k = normalize_format(kv_dtype)
        if k not in KV_FORMATS:
            raise SimfrontError(f"unknown --kv-dtype {kv_dtype!r}; valid: native, {', '.join(KV_FORMATS)}")
        p = replace(p, kv=k)
    return p


# ---------------------------------------------------------------------------------------------
# Catalog


@lru_cache(maxsize=None)
def _catalog_entries() -> dict[str, dict]:
    data = yamlio.load(MODELS_DIR / "catalog.yaml")
    return {e["id"]: e for e in data["models"]}


def catalog_ids() -> list[str]:
    return list(_catalog_entries())


_PRECISION_SUFFIX = re.compile(r"[-_](nvfp4|fp4|mxfp4|fp8|fp8-dynamic|fp8_dynamic|bf16|int4|awq)$", re.I)


def _norm(s: str) -> str:
    return re.sub(r"[\s_]+", "-", s.strip().lower())


@lru_cache(maxsize=None)
def _index() -> dict[str, str]:
    idx: dict[str, str] = {}
    for mid, e in _catalog_entries().items():
        for name in [mid, *e.get("aliases", []), *e.get("hf_ids", [])]:
            idx[_norm(name)] = mid
            idx[_norm(name.split("/")[-1])] = mid
    return idx


def resolve_name(name: str) -> tuple[str, str | None]:
    """(catalog id, precision in the name or None) for a catalog id, alias or HF id."""
    raw = name.strip()
    key = _norm(raw)
    idx = _index()
    prec = None
    for cand in (key, key.split("/")[-1]):
        if cand in idx:
            return idx[cand], _name_precision(raw)
    stem = key.split("/")[-1]
    m = _PRECISION_SUFFIX.search(stem)
    if m:
        prec = _name_precision(raw)
        stem = stem[: m.start()]
    # drop common suffixes in published repo names: -instruct, -chat, -hf, -base, -0528, -2507
    for _ in range(3):
        if stem in idx:
            return idx[stem], prec
        stem2 = re.sub(r"-(instruct|chat|hf|base|thinking|\d{4}|v\d+(\.\d+)?)$", "", stem)
        if stem2 == stem:
            break
        stem = stem2
    if stem in idx:
        return idx[stem], prec
    raise unknown("model", name, catalog_ids())


def _name_precision(name: str) -> str | None:
    s = name.lower()
    if re.search(r"nvfp4|[-_]fp4\b", s):
        return "nvfp4"
    if "mxfp4" in s:
        return "mxfp4"
    if re.search(r"[-_]fp8", s):
        return "fp8_block"
    if re.search(r"[-_](int4|awq|gptq)", s):
        return "w4a16"
    return None


@lru_cache(maxsize=None)
def _load_catalog_model(mid: str) -> Model:
    e = _catalog_entries()[mid]
    cfg = load_config(CONFIG_DIR / e["config"])
    arch = parse_arch(cfg, mid)
    pub = e.get("published") or {}
    return Model(
        id=mid,
        arch=arch,
        native=native_precision(cfg, arch),
        hf_id=(e.get("hf_ids") or [None])[0],
        published_total=float(pub["total"]) if "total" in pub else None,  # YAML 1.1 reads 2.8e12 as text
        published_active=float(pub["active"]) if "active" in pub else None,
        published_active_convention=pub.get("active_convention", "includes_embedding"),
        published_active_rounding=float(pub.get("active_rounded_to", 0.0)),
        published_source=pub.get("source", ""),
        warnings=config_warnings(cfg),
    )


def get_model(name: str) -> Model:
    """Resolve a catalog id, alias, Hugging Face id or config.json path to a :class:`Model`."""
    if isinstance(name, Model):
        return name
    p = Path(name)
    if (p.suffix == ".json" or p.is_dir()) and (p.exists() or p.suffix == ".json"):
        return model_from_config(p)
    try:
        mid, prec = resolve_name(name)
    except SimfrontError:
        if p.is_file():  # not a catalog name but a file: read it as the config.json it was given as
            return model_from_config(p)
        raise
    model = _load_catalog_model(mid)
    if prec:
        e = _catalog_entries()[mid]
        qfile = (e.get("quant_configs") or {}).get(prec)
        if qfile:  # a shipped ModelOpt recipe says exactly which modules are quantised
            hq = read_json(CONFIG_DIR / qfile, "hf_quant_config.json")
            cfg = load_config(CONFIG_DIR / e["config"])
            return replace(model, native=native_precision(cfg, model.arch, hq), hf_id=name if "/" in name else model.hf_id)
        return replace(model, name_precision=prec, hf_id=name if "/" in name else model.hf_id)
    if "/" in name:
        model = replace(model, hf_id=name)
    return model


def config_warnings(cfg: dict) -> tuple[str, ...]:
    """One warning per config key simfront neither reads nor knows to be irrelevant to cost."""
    keys = unknown_keys(cfg)
    if not keys:
        return ()
    shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
    return (f"config.json keys simfront does not understand were ignored: {shown} "
            "(if they change the architecture, the prediction may be off)",)


def model_from_config(path: str | Path) -> Model:
    """A model straight from a config.json on disk (not in the catalog)."""
    cfg = load_config(path)
    p = Path(path)
    name = p.parent.name if p.name == "config.json" else (p.name if p.is_dir() else p.stem)
    arch = parse_arch(cfg, name, where=str(p / "config.json" if p.is_dir() else p))
    hq_path = (p if p.is_dir() else p.parent) / "hf_quant_config.json"
    hq = read_json(hq_path, "hf_quant_config.json") if hq_path.exists() else None
    return Model(id=name, arch=arch, native=native_precision(cfg, arch, hq), hf_id=None, warnings=config_warnings(cfg))


def all_models() -> list[Model]:
    return [_load_catalog_model(m) for m in catalog_ids()]

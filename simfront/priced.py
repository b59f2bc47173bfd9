"""What a prediction prices: the model's attention kind and MoE, the weight formats and KV dtypes of its
configurations with the efficiency classes those run on the GPU, and whether a worker spans more GPUs than one
scale-up domain.

Provenance notes name only what the shown numbers rely on: a GPU's fallback kernel for FP4 MoE experts or
its estimated INT8 peak says nothing about an FP8 frontier of a dense model, so
:func:`simfront.efficiency.provenance` and :func:`simfront.kernels.fallback_notes` filter their notes with a
:class:`Priced` (``None``: everything, as for a GPU listing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from .errors import SimfrontError
from .gemm import dtype_class
from .moe import moe_class
from .precision import get_format, weights_of

# the 16-bit formats every model prices somewhere (attention, embeddings, LM head and BF16 layers)
ALWAYS_RATE_DTYPES = frozenset({"bf16"})


def _formats(weights: Iterable[str]):
    """The formats simfront knows among weight-format names (a label it does not know prices nothing more)."""
    for w in weights:
        try:
            yield get_format(w)
        except SimfrontError:
            continue


@dataclass(frozen=True)
class Priced:
    attention: frozenset[str]  # attention kinds of the model: "gqa", "mla"
    moe: bool  # routed experts
    weights: frozenset[str]  # weight formats of the configurations (precision names: fp8_block, nvfp4, ...)
    kv: frozenset[str]  # KV-cache dtypes of the configurations
    multinode: bool  # a worker spans more GPUs than one scale-up domain (collectives cross the NIC)
    classes: frozenset[tuple[str, str]] = frozenset()  # (efficiency kind, dtype class) the weight formats run on the GPU

    def rate_dtypes(self) -> frozenset[str]:
        """Tensor-core rates (keys of ``achievable.matmul_flops_per_s``) the configurations' GEMMs run at."""
        out = set(ALWAYS_RATE_DTYPES)
        for f in _formats(self.weights):
            out |= {f.name, f.compute_dtype, f.fallback_dtype}
        if "fp8" in self.kv:
            out.add("fp8")  # attention math over an FP8 cache
        return frozenset(out)

    def prices_peak(self, name: str) -> bool:
        """Whether the achievable figure ``name`` (``matmul_flops_per_s.int8``, ``collectives.nic``, ...) is priced."""
        if name.startswith("matmul_flops_per_s."):
            return name.split(".", 1)[1] in self.rate_dtypes()
        if name == "collectives.nic":
            return self.multinode
        return True


def worker_gpus(point: Mapping) -> int:
    """GPUs of the largest worker of a frontier point (decode or aggregated worker; prefill worker of disagg)."""
    dec = int(point.get("tp") or 1) * int(point.get("pp") or 1) * int(point.get("attention_dp") or 1)
    pre = int(point.get("prefill_tp") or 0) * int(point.get("prefill_attention_dp") or 1) if point.get("mode") == "disagg" else 0
    return max(dec, pre)


def priced_configs(model, hw, configs: Iterable[tuple[str, str, int]]) -> Priced:
    """What configurations ``(precision label or weight format, KV dtype, GPUs per worker)`` of ``model`` price on ``hw``."""
    cfg = list(configs)
    weights = frozenset(weights_of(w) for w, _, _ in cfg)
    classes = {c for f in _formats(weights) for c in (("gemm", dtype_class(f, hw)), ("moe", moe_class(f, hw)))}
    return Priced(attention=frozenset({model.arch.attention.kind}), moe=model.arch.is_moe, weights=weights,
                  kv=frozenset(str(kv) for _, kv, _ in cfg), multinode=any(n > hw.scaleup.domain_gpus for _, _, n in cfg),
                  classes=frozenset(classes))


def priced_of(model, points: Iterable[Mapping], hw) -> Priced:
    """What frontier points (dicts with precision, kv_dtype and layout sizes) of ``model`` price on ``hw``."""
    return priced_configs(model, hw, ((p["precision"], p["kv_dtype"], worker_gpus(p)) for p in points))


def priced_of_columns(model, cols: Mapping, hw) -> Priced:
    """What every configuration of a search's column arrays (``precision``, ``kv_dtype``, ``mode`` and the layout
    sizes, as :func:`worker_gpus` reads them from one point) prices on ``hw``: the distinct (precision, KV dtype,
    worker size) combinations, found without a loop over the configurations."""
    import numpy as np

    dec = np.asarray(cols["tp"]) * np.asarray(cols["pp"]) * np.asarray(cols["attention_dp"])
    pre = np.where(np.asarray(cols["mode"]) == "disagg",
                   np.asarray(cols["prefill_tp"]) * np.maximum(np.asarray(cols["prefill_attention_dp"]), 1), 0)
    workers = np.maximum(dec, pre).astype(np.int64)
    combos = np.unique(np.stack([np.asarray(cols["precision"]).astype(str), np.asarray(cols["kv_dtype"]).astype(str),
                                 workers.astype(str)], axis=1), axis=0)
    return priced_configs(model, hw, ((w, kv, int(n)) for w, kv, n in combos))

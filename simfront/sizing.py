"""Does it fit, and on how many GPUs? The memory verdict for a model on a GPU set.

Builds on :mod:`memory` (bytes) and :mod:`layout` (valid splits): for a GPU count it picks the
valid layout with the most KV room, finds the fewest GPUs of the type that hold the model, and
lists other catalog GPUs that would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import hardware as hwmod
from .engine_memory import EngineFraction
from .hardware import GpuSet, Hardware
from .layout import Layout, check_layout, enumerate_layouts
from .memory import KV_CACHE_FRACTION, kv_geometry, plan_memory
from .models import Model, Precision

# GPU counts tried when searching for the fewest GPUs that hold a model: single nodes, then whole
# 8-GPU nodes / NVL72 racks.
CANDIDATE_COUNTS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 72, 96, 128, 144, 192, 256, 288, 384, 512)


@dataclass
class MemoryVerdict:
    model: str
    gpus: str
    precision: str
    kv_dtype: str
    fits: bool
    layout: Layout | None
    weights_bytes: float
    weights_bytes_per_gpu: float
    reserve_bytes_per_gpu: float
    kv_budget_bytes_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_state_bytes_per_seq: float
    kv_capacity_tokens: float
    max_concurrency: int
    context_tokens: int
    min_gpus: int | None
    reason: str | None = None
    alternatives: list[str] = field(default_factory=list)
    engine: str | None = None  # the engine whose memory fraction sized the KV pool (None: simfront's launch lines' pool)
    memory_fraction: float | None = KV_CACHE_FRACTION  # that fraction under the chosen layout, in the engine's terms
    kv_memory_rule: str = "free"  # how the fraction reads (simfront.scheduler.KV_MEMORY_RULES)
    # sliding-window / chunked layers: KV bytes each token adds up to their window (model-wide, one copy), and the window
    kv_windowed_bytes_per_token: float = 0.0
    kv_window_tokens: int | None = None

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["layout"] = None if self.layout is None else {
            "tp": self.layout.tp, "pp": self.layout.pp, "attention_dp": self.layout.dp,
            "ep": self.layout.ep, "replicas": self.layout.replicas, "idle_gpus": self.layout.idle, "label": self.layout.label()}
        for k in ("kv_capacity_tokens",):
            d[k] = None if not np.isfinite(d[k]) else int(d[k])
        return d


def _layout_arrays(model: Model, gpus: GpuSet, layout: Layout | None) -> dict[str, np.ndarray]:
    if layout is not None:
        check_layout(model.arch, layout, gpus.count)
        return {k: np.array([v]) for k, v in (("tp", layout.tp), ("pp", layout.pp), ("dp", layout.dp), ("ep", layout.ep), ("replicas", layout.replicas), ("idle", layout.idle))}
    # TP within the scale-up domain; replicas of a smaller worker when one worker cannot use them all
    return enumerate_layouts(model.arch, gpus.count, max_tp=gpus.hardware.scaleup.domain_gpus)


def _plan(model: Model, precision: Precision, hw: Hardware, lay: dict, context_tokens: int, memory: EngineFraction | None):
    if memory is None:  # the pool simfront's launch lines give every engine
        return plan_memory(model, precision, hw, lay["tp"], lay["pp"], lay["dp"], lay["ep"], lay["replicas"], context_tokens)
    return plan_memory(model, precision, hw, lay["tp"], lay["pp"], lay["dp"], lay["ep"], lay["replicas"], context_tokens,
                       memory.fractions(hw.hbm_bytes, lay["tp"], lay["pp"], lay["dp"]), memory.rule)


def _pool_fields(memory: EngineFraction | None, hw: Hardware, layout: Layout | None = None) -> dict:
    """The verdict's ``engine``, ``kv_memory_rule`` and ``memory_fraction``: simfront's pool (no ``memory``), or the
    engine's fraction under ``layout`` (without one, the fraction the run set; None for a per-server default)."""
    if memory is None:
        return {"engine": None, "kv_memory_rule": "free", "memory_fraction": KV_CACHE_FRACTION}
    frac = memory.fraction if layout is None else float(memory.fractions(hw.hbm_bytes, layout.tp, layout.pp, layout.dp))
    return {"engine": memory.engine, "kv_memory_rule": memory.rule, "memory_fraction": frac}


def best_fit(model: Model, precision: Precision, gpus: GpuSet, context_tokens: int, layout: Layout | None = None,
             memory: EngineFraction | None = None):
    """(plan arrays, index of the layout with the largest concurrency) or (plan, None) if none is valid."""
    lay = _layout_arrays(model, gpus, layout)
    if lay["tp"].size == 0:
        return lay, None, None
    plan = _plan(model, precision, gpus.hardware, lay, context_tokens, memory)
    # prefer layouts that fit, then fewer idle GPUs, then the most concurrent sequences; among
    # layouts that do not fit, the one closest to fitting
    score = np.where(plan.fits, plan.max_concurrency - 1e9 * lay["idle"], -plan.weights_bytes_per_gpu - 1e15)
    return lay, plan, int(np.argmax(score))


def min_gpus(model: Model, precision: Precision, hw: Hardware, context_tokens: int, memory: EngineFraction | None = None) -> int | None:
    """Fewest GPUs of type ``hw`` that hold the model and at least one sequence, or None."""
    for n in CANDIDATE_COUNTS:
        lay, plan, i = best_fit(model, precision, GpuSet(count=n, hardware=hw), context_tokens, memory=memory)
        if i is not None and plan.fits[i]:
            return n
    return None


def memory_verdict(model: Model, precision: Precision, gpus: GpuSet, isl: int, osl: int, layout: Layout | None = None,
                   alternatives: bool = True, memory: EngineFraction | None = None) -> MemoryVerdict:
    """The verdict with the KV pool of simfront's launch lines, or with ``memory``: an engine's own fraction or default."""
    ctx = int(isl + osl)
    lay, plan, i = best_fit(model, precision, gpus, ctx, layout, memory)
    hw = gpus.hardware
    mg = min_gpus(model, precision, hw, ctx, memory)
    if i is None:
        return MemoryVerdict(model.id, gpus.label, precision.label, precision.kv, False, None, 0, 0, 0, 0, 0, 0, 0, 0, 0, ctx, mg,
                             reason=f"no valid parallel layout of {model.id} over {gpus.count} GPUs (heads/experts/layers do not divide)",
                             **_pool_fields(memory, gpus.hardware), **_window_fields(model, precision))
    lo = Layout(int(lay["tp"][i]), int(lay["pp"][i]), int(lay["dp"][i]), int(lay["ep"][i]), int(lay["replicas"][i]), int(lay["idle"][i]))
    fits = bool(plan.fits[i])
    reason = None
    if not fits:
        need = plan.weights_bytes_per_gpu[i] + plan.reserve_bytes_per_gpu[i]
        reason = (f"{model.id} ({precision.label}) needs {plan.weights_bytes / 1e9:,.0f} GB of weights: "
                  f"{plan.weights_bytes_per_gpu[i] / 2**30:,.1f} GiB per GPU under {lo.label()} plus "
                  f"{plan.reserve_bytes_per_gpu[i] / 2**30:.1f} GiB runtime reserve, against {hw.hbm_bytes / 2**30:,.0f} GiB of HBM"
                  if need > hw.hbm_bytes else
                  f"weights fit but no room is left for the KV cache of one {ctx}-token sequence")
        if mg:
            reason += f"; it fits on {mg}x{hw.id}"
    alts: list[str] = []
    if not fits and alternatives:
        for other in hwmod.catalog().values():
            if other.id == hw.id:
                continue
            n = min_gpus(model, precision, other, ctx, memory)
            if n is not None and n <= max(gpus.count, 8):
                alts.append(f"{n}x{other.id}")
    return MemoryVerdict(
        model=model.id, gpus=gpus.label, precision=precision.label, kv_dtype=precision.kv, fits=fits, layout=lo,
        weights_bytes=float(plan.weights_bytes), weights_bytes_per_gpu=float(plan.weights_bytes_per_gpu[i]),
        reserve_bytes_per_gpu=float(plan.reserve_bytes_per_gpu[i]), kv_budget_bytes_per_gpu=float(plan.kv_budget_bytes_per_gpu[i]),
        kv_bytes_per_token=float(plan.kv_bytes_per_token), kv_bytes_per_token_per_gpu=float(np.ravel(plan.kv_bytes_per_token_per_gpu)[i if np.size(plan.kv_bytes_per_token_per_gpu) > 1 else 0]),
        kv_state_bytes_per_seq=float(model.arch.linear.state_bytes_per_seq_layer * model.arch.count(mixer="linear")) if model.arch.linear else 0.0,
        kv_capacity_tokens=float(plan.kv_capacity_tokens[i]), max_concurrency=int(plan.max_concurrency[i]),
        context_tokens=ctx, min_gpus=mg, reason=reason, alternatives=alts,
        **_pool_fields(memory, hw, lo), **_window_fields(model, precision),
    )


def _window_fields(model: Model, precision: Precision) -> dict:
    """KV bytes per token of the sliding-window / chunked layers (model-wide, one copy) and their window, which
    ``kv_bytes_per_token`` (the part that grows with every token) leaves out."""
    geo = kv_geometry(model, precision.kv)
    return {"kv_windowed_bytes_per_token": float(geo.windowed_per_token), "kv_window_tokens": int(geo.window) or None}

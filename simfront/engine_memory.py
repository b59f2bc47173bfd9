"""The GPU memory fraction an engine release hands its KV pool when a run does not set one.

A measured run that records its fraction (``--gpu-memory-utilization``, ``--mem-fraction-static``,
``free_gpu_memory_fraction``) is priced with the pool that fraction gives (``simfront.memory.kv_budget_bytes``
under the engine's ``kv_memory_rule``). A run that does not record one ran with its engine's default, which
is a constant for vLLM and TensorRT-LLM and, for SGLang, a heuristic of the GPU's memory, the server's
parallel sizes, its chunked-prefill size, its CUDA-graph batch sizes and speculative decoding
(``sglang/srt/server_args.py``). The defaults are data in ``simfront/engines/scheduler.yaml``
(``memory_default`` of each release family, with their sources); this module turns them into fractions,
vectorised over layouts.

Kinds of ``memory_default``:
  fixed                  ``fraction``: the engine's constant default
  by_parallel            ``table`` [[GPUs per stage at least, fraction], ...]: SGLang before June 2025
  reserve_by_gpu_mem     (GPU memory - reserve) / GPU memory, the reserve in GiB per GPU-memory bucket plus a
                         share per GPU of the server, more with speculative decoding or attention DP (SGLang
                         June - September 2025, sgl-project/sglang#7054)
  reserve_by_activation  (GPU memory - reserve) / GPU memory, the reserve in MiB for a chunked-prefill step's
                         activations, the CUDA graphs and the parallel sizes (SGLang from sgl-project/sglang#10975
                         and #11076, September 2025; piecewise CUDA graphs from v0.5.10)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import SimfrontError
from .scheduler import release_family, scheduler_settings, settings_key
from .units import GiB, MiB

KINDS = ("fixed", "by_parallel", "reserve_by_gpu_mem", "reserve_by_activation")


def _bucket(table, gpu_mem_gib: float) -> list:
    """The row of a ``[[below GiB, values...], ...]`` table that holds a GPU of ``gpu_mem_gib``."""
    for row in table:
        if gpu_mem_gib < float(row[0]):
            return list(row[1:])
    return list(table[-1][1:])


def piecewise_graph_sizes(max_tokens: float) -> int:
    """Token counts SGLang captures piecewise CUDA graphs at, up to ``max_tokens``
    (server_args.py ``_generate_piecewise_cuda_graph_tokens``: 4-32 by 4, 48-256 by 16, 288-512 by 32, 576-1024 by
    64, 1280-4096 by 256, then by 512)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, int(max_tokens) + 1, 512)))
    return sum(1 for s in sizes if s <= max_tokens)


def default_memory_fraction(memory_default: dict, gpu_mem_bytes: float, gpus_per_stage, pp, dp, token_budget: float,
                            speculative: bool, mla: bool = False) -> np.ndarray:
    """The engine's default GPU memory fraction for servers of ``gpus_per_stage`` GPUs (attention TP x attention-DP
    ranks: SGLang's ``--tp``) x ``pp`` stages with ``dp`` attention-DP ranks, on a GPU of ``gpu_mem_bytes``, whose
    default chunked-prefill size is ``token_budget`` (the whole server's), with or without speculative decoding;
    ``mla`` (the model uses multi-head latent attention) sets SGLang's piecewise-graph token range. Broadcasts."""
    g, pp, dp = (np.asarray(x, dtype=np.float64) for x in (gpus_per_stage, pp, dp))
    kind = memory_default.get("kind")
    mem_mib = gpu_mem_bytes / MiB  # SGLang reads the GPU's total memory in MiB (nvidia-smi)
    if kind == "fixed":
        return np.broadcast_to(float(memory_default["fraction"]), np.broadcast(g, pp, dp).shape).astype(np.float64)
    if kind == "by_parallel":
        out = np.zeros(np.broadcast(g, pp, dp).shape)
        size = np.broadcast_to(g, out.shape)
        for least, frac in sorted(memory_default["table"], key=lambda r: r[0]):  # largest matching bound last
            out = np.where(size >= float(least), float(frac), out)
        return out
    if kind == "reserve_by_gpu_mem":
        base_gib, per_gpu_gib = (float(v) for v in _bucket(memory_default["reserve_gib_by_gpu_mem_gib"], gpu_mem_bytes / GiB))
        reserve_mib = (base_gib + per_gpu_gib * g * pp) * 1024.0  # activations + CUDA graphs, grown with the server
        reserve_mib = reserve_mib + (float(memory_default["speculative_gib"]) * 1024.0 if speculative else 0.0)
        reserve_mib = reserve_mib + np.where(dp > 1, float(memory_default["dp_attention_gib"]) * 1024.0, 0.0)
        return np.round((mem_mib - reserve_mib) / mem_mib, 3)
    if kind == "reserve_by_activation":
        q = memory_default
        small, large = (float(v) for v in _bucket(q["cuda_graph_max_bs_by_gpu_mem_gib"], gpu_mem_bytes / GiB))
        graph_bs = np.where(g < float(q["cuda_graph_large_from_tp"]), small, large)  # SGLang: 'tp_size < 4'
        # MiB: constant metadata + one chunked-prefill step's activations + the CUDA graphs' buffers + a share per GPU
        reserve = (float(q["base_mib"]) + float(q["per_chunk_token_mib"]) * max(token_budget, float(q["min_chunk_tokens"]))
                   + float(q["per_graph_bs_mib"]) * graph_bs + float(q["per_parallel_gpu_mib"]) * g * pp)
        # attention DP pads every rank's graphs: more per captured batch and rank, more again for large graphs
        dpa = float(q["dp_per_graph_bs_rank_mib"]) + np.where(graph_bs > float(q["dp_large_graph_bs"]),
                                                              float(q["dp_large_per_graph_bs_rank_mib"]), 0.0)
        reserve = reserve + np.where(dp > 1, dpa * graph_bs * dp, 0.0)
        if q.get("piecewise_graph_mib"):  # piecewise CUDA graphs (default on from v0.5.10): their non-torch memory
            tokens = float(q["piecewise_mla_max_tokens"]) if mla else token_budget
            reserve = reserve + float(q["piecewise_graph_mib"]) * piecewise_graph_sizes(tokens)
        if mem_mib > float(q["floor_above_gpu_mem_gib"]) * 1024.0:
            reserve = np.maximum(reserve, float(q["floor_mib"]))
        reserve = reserve + (float(q["speculative_mib"]) if speculative else 0.0)  # draft model and its graphs
        return np.round((mem_mib - reserve) / mem_mib, 3)
    raise SimfrontError(f"memory_default kind {kind!r} unknown; valid: {', '.join(KINDS)}")


@dataclass(frozen=True)
class EngineFraction:
    """The memory fraction an engine sizes its KV pool with, read by its ``rule`` (simfront.scheduler.KV_MEMORY_RULES):
    ``fraction`` as a run set it, or (None) its release's own default for each GPU and server (hashable, so measured
    rows that share one share an evaluation group)."""

    rule: str
    fraction: float | None = None
    engine: str | None = None  # for the default: the engine (None: the default engine), its release or measurement date
    version: str | None = None
    measured_on: str | None = None
    speculative: bool = False  # the run drafts tokens (EAGLE / MTP reserve)
    mla: bool = False  # the model uses multi-head latent attention (SGLang's piecewise-graph range)

    def fractions(self, gpu_mem_bytes: float, tp, pp, dp) -> np.ndarray:
        """The fraction of servers of attention TP ``tp`` x ``dp`` attention-DP ranks x ``pp`` stages on a GPU of
        ``gpu_mem_bytes`` (broadcasts)."""
        tp, pp, dp = (np.asarray(x, dtype=np.float64) for x in (tp, pp, dp))
        if self.fraction is not None:
            return np.broadcast_to(float(self.fraction), np.broadcast(tp, pp, dp).shape).astype(np.float64)
        key = settings_key(self.engine)
        fam = release_family(key, self.version, self.measured_on)
        # the server's default chunked-prefill size on this GPU (SGLang's reserve grows with it)
        budget = scheduler_settings(key, self.version, gpu_mem_gib=gpu_mem_bytes / GiB, measured_on=self.measured_on).token_budget
        return default_memory_fraction(fam["memory_default"], gpu_mem_bytes, tp * dp, pp, dp, float(budget), self.speculative,
                                       self.mla)


def engine_default(engine: str | None, version: str | None = None, measured_on: str | None = None,
                   speculative: bool = False, mla: bool = False) -> EngineFraction:
    """The default memory fraction of ``engine`` at release ``version`` (or the release out on ``measured_on``; the
    newest without either), read by that release's rule."""
    rule = scheduler_settings(settings_key(engine), version, measured_on=measured_on).kv_memory_rule
    return EngineFraction(rule, None, engine, version, measured_on, bool(speculative), bool(mla))


__all__ = ["default_memory_fraction", "engine_default", "EngineFraction", "piecewise_graph_sizes", "KINDS"]

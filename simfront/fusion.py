"""Where a serving engine runs its tensor-parallel all-reduce, the residual add and the RMSNorm after it as one kernel.

vLLM (``fuse_allreduce_rms``), SGLang (``--enable-flashinfer-allreduce-fusion``) and TensorRT-LLM (``AllReduceFusionOp
.RESIDUAL_RMS_NORM``) each fuse the RMSNorm that follows a TP all-reduce into the all-reduce kernel, for decode-size
messages, on some models and platforms: the separate residual-add + RMSNorm kernel (its reads, its writes and its
launch) is gone. Which engine release does it where is data (``allreduce_norm_fusion`` of a release family in
simfront/engines/scheduler.yaml, with sources); :func:`fused` evaluates a rule for a step's layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import SimfrontError

# the keys a rule may hold (simfront/engines/scheduler.yaml)
RULE_KEYS = ("architectures", "min_hidden_exclusive", "platforms", "max_mib", "max_mb", "max_tokens", "attention_dp",
             "single_node", "needs_nvlink", "exclude_gpus")
MIB = float(1 << 20)  # bytes per MiB (vLLM's FlashInfer thresholds)
MB = 1e6  # bytes per decimal MB (TensorRT-LLM's custom all-reduce workspace)


@dataclass(frozen=True)
class AllreduceNormFusion:
    """One engine release family's rule (hashable: it rides in :class:`simfront.serving.Workload`)."""

    architectures: tuple[str, ...] | None  # HF ``architectures[0]`` the engine fuses for; None: every model
    min_hidden_exclusive: int = 0  # fused only above this hidden size (TensorRT-LLM's Llama: 4096)
    platforms: tuple[str, ...] = ()  # compute capabilities the fused kernel runs on
    # largest all-reduce message fused, bytes, per (compute capability, TP size); () with max_tokens: a token cap
    max_bytes: tuple[tuple[str, int, float], ...] = ()
    max_tokens: float = float("inf")  # largest step fused, in tokens per rank
    attention_dp: bool = False  # also fused under attention-DP (False: the engine fuses TP-attention workers only)
    single_node: tuple[str, ...] = ()  # compute capabilities where only a worker inside one host fuses
    needs_nvlink: bool = False  # only where the GPUs have peer links (a PCIe box takes NCCL and an unfused norm)
    exclude_gpus: tuple[str, ...] = ()  # hardware ids the engine leaves out (SGLang: H20, a FlashInfer bug)

    def limit_bytes(self, cc: str | None, tp) -> np.ndarray:
        """Largest fused message in bytes at TP size ``tp`` on compute capability ``cc`` (inf: no size limit;
        0: the pair is not fused)."""
        tp = np.asarray(tp, dtype=np.float64)
        if not self.max_bytes:
            return np.full(tp.shape, np.inf)
        out = np.zeros(tp.shape)
        for c, t, b in self.max_bytes:
            if c == cc or c == "*":
                out = np.where(tp == t, b, out)
        return out


def parse_rules(raw, where: str) -> tuple[AllreduceNormFusion, ...]:
    """The rules of a release family (``raw``: its ``allreduce_norm_fusion``, one mapping or a list of them, each a
    set of models the engine fuses for; None or absent: none)."""
    if not raw:
        return ()
    return tuple(_parse_rule(r, where) for r in (raw if isinstance(raw, list) else [raw]))


def _parse_rule(raw: dict, where: str) -> AllreduceNormFusion:
    bad = sorted(set(raw) - set(RULE_KEYS))
    if bad:
        raise SimfrontError(f"{where}: allreduce_norm_fusion has unknown keys {bad}; valid: {', '.join(RULE_KEYS)}")
    archs = raw.get("architectures", "all")
    platforms = tuple(str(p) for p in raw.get("platforms", ()))
    single = raw.get("single_node", False)
    max_bytes = []
    for key, unit in (("max_mib", MIB), ("max_mb", MB)):
        for cc, by_tp in (raw.get(key) or {}).items():
            for tp, size in by_tp.items():
                max_bytes.append((str(cc), int(tp), float(size) * unit))
    return AllreduceNormFusion(
        architectures=None if archs == "all" else tuple(str(a) for a in archs),
        min_hidden_exclusive=int(raw.get("min_hidden_exclusive", 0)),
        platforms=platforms,
        max_bytes=tuple(max_bytes),
        max_tokens=float(raw.get("max_tokens", float("inf"))),
        attention_dp=bool(raw.get("attention_dp", False)),
        single_node=platforms if single is True else tuple(str(p) for p in (single or ())),
        needs_nvlink=bool(raw.get("needs_nvlink", False)),
        exclude_gpus=tuple(str(g) for g in raw.get("exclude_gpus", ())))


def fused(rules: tuple[AllreduceNormFusion, ...], arch, hw, tp, dp, tokens, message_bytes) -> np.ndarray:
    """Whether the RMSNorms after a step's TP all-reduces run inside them (bool array over the step's layouts): one of
    the engine's rules holds for the model and the GPU, the worker has TP > 1 (and no attention-DP where the engine
    fuses TP-attention workers only, inside one host where it must), and the step's all-reduce message is within
    the fused kernel's size."""
    tp, dp, tokens, msg = (np.asarray(x, dtype=np.float64) for x in (tp, dp, tokens, message_bytes))
    out = np.zeros(np.broadcast_shapes(tp.shape, dp.shape, tokens.shape, msg.shape), dtype=bool)
    names = tuple((arch.raw or {}).get("architectures") or ())
    cc = str(hw.compute_capability)
    for rule in rules or ():
        model_ok = rule.architectures is None or (bool(names) and names[0] in rule.architectures)
        gpu_ok = (cc in rule.platforms and hw.id not in rule.exclude_gpus
                  and not (rule.needs_nvlink and hw.scaleup.topology == "pcie"))
        if not (model_ok and gpu_ok and arch.hidden > rule.min_hidden_exclusive):
            continue
        ok = (tp > 1) & (tokens <= rule.max_tokens) & (msg <= rule.limit_bytes(cc, tp))
        if not rule.attention_dp:
            ok &= dp <= 1
        if cc in rule.single_node:
            ok &= tp * dp <= hw.gpus_per_node
        out = out | ok
    return out


__all__ = ["AllreduceNormFusion", "parse_rules", "fused"]

"""The record every cost function returns: work and time of one op, as broadcast numpy arrays.

``compute_s``, ``memory_s`` and ``network_s`` are the three roofline legs after efficiency
derating; ``time_s`` is what the op is predicted to take (the max of the legs plus fixed
costs, or whatever the op's model says). ``bound`` names the leg that dominates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


# the numeric fields, in declaration order
_FIELDS = ("time_s", "flops", "mem_bytes", "net_bytes", "compute_s", "memory_s", "network_s")


@dataclass
class Cost:
    time_s: np.ndarray  # predicted wall time of the op on one GPU
    flops: np.ndarray  # floating-point operations on one GPU
    mem_bytes: np.ndarray  # HBM bytes moved on one GPU
    net_bytes: np.ndarray = field(default_factory=lambda: np.zeros(()))  # bytes sent over links by one GPU
    compute_s: np.ndarray = field(default_factory=lambda: np.zeros(()))  # flops / achieved FLOP/s
    memory_s: np.ndarray = field(default_factory=lambda: np.zeros(()))  # bytes / achieved HBM bytes/s
    network_s: np.ndarray = field(default_factory=lambda: np.zeros(()))  # communication time
    kernel: str = ""  # which kernel runs, where the op has more than one (MoE: "cutlass-grouped" / "fused-fp4")

    def __post_init__(self) -> None:
        for name in _FIELDS:
            setattr(self, name, _arr(getattr(self, name)))

    @property
    def bound(self) -> np.ndarray:
        """'compute', 'memory' or 'communication' per element."""
        legs = np.stack(np.broadcast_arrays(self.compute_s, self.memory_s, self.network_s))
        names = np.array(["compute", "memory", "communication"])
        return names[np.argmax(legs, axis=0)]

    @property
    def arithmetic_intensity(self) -> np.ndarray:
        """FLOPs per HBM byte."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.mem_bytes > 0, self.flops / np.maximum(self.mem_bytes, 1e-30), np.inf)

    def scaled(self, factor) -> "Cost":
        """The same op repeated ``factor`` times (e.g. once per layer)."""
        f = _arr(factor)
        return Cost(*(getattr(self, n) * f for n in _FIELDS))

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(*(getattr(self, n) + getattr(other, n) for n in _FIELDS))

"""Memory-bound kernels: norms, rotary, activations, router softmax, quantize, embedding gather, sampling.

``t = fixed + max(bytes / (eta_hbm·BW), flops / (eta_simt·P_fp32))`` (modeling-notes.md §1.10).
The kernel calibration set has no standalone elementwise timings, so the parameters are the
aiconfigurator priors (``mem_bw_empirical_scaling_factor`` 0.8, ``mem_empirical_constant_latency``
3 µs; specs.md A.3), written to ``hardware/efficiency/elementwise.yaml`` unfitted.
"""

from __future__ import annotations

import numpy as np

from .cost import Cost
from .gemm import resolve_params

PARAMS: dict[str, tuple[float, float, float]] = {
    # achieved fraction of the ACHIEVABLE HBM bandwidth: AIC's 0.8 of datasheet (systems/*.yaml) over the
    # achievable/datasheet share 0.90 of H100 (hardware/h100_sxm.yaml achievable, scripts/achievable_hbm.py) = 0.89
    "eta_hbm": (0.89, 0.89, 0.89),
    "fixed_s": (3e-6, 3e-6, 3e-6),  # per-kernel constant latency (AIC systems/*.yaml)
    "eta_simt": (0.5, 0.5, 0.5),  # fraction of non-tensor FP32 peak for elementwise math (assumed)
}

FAMILY_DEFAULTS: dict[str, dict[str, float]] = {}


def memory_op_cost(bytes_moved, hw, flops=0, p: dict | None = None) -> Cost:
    """Time of one memory-bound kernel moving ``bytes_moved`` HBM bytes (broadcasts)."""
    q = resolve_params("elementwise", hw, p, PARAMS, FAMILY_DEFAULTS)
    b, f = np.broadcast_arrays(np.maximum(np.asarray(bytes_moved, dtype=np.float64), 0.0), np.maximum(np.asarray(flops, dtype=np.float64), 0.0))
    memory_s = b / (q["eta_hbm"] * hw.achievable_hbm_bytes_per_s)
    simt_rate = hw.peak_flops_per_s.get("fp32") or hw.peak_flops_per_s["bf16"]  # vector FP32 peak (BF16 if unlisted)
    compute_s = f / (q["eta_simt"] * simt_rate)
    time_s = q["fixed_s"] + np.maximum(memory_s, compute_s)
    return Cost(time_s=time_s, flops=f, mem_bytes=b, compute_s=compute_s, memory_s=memory_s)

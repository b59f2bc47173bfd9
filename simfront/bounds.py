"""Physical lower bounds that no engine can beat, used to tell a measurement that contradicts its own setup.

A decode step of ``b`` requests on one GPU must at least stream, once, the weights every token reads, the
routed experts the step's tokens touch and the KV cache of the ``b`` requests, at the datasheet HBM bandwidth
(the fastest the memory can go, above any kernel's achieved rate). A measured time per output token below
that floor means fewer requests were decoding together than the run's concurrency, max batch and KV
capacity allow, so the row cannot be read as that configuration at that load.
"""

from __future__ import annotations

import numpy as np

from .memory import kv_geometry, weight_parts_per_gpu


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def decode_step_floor_s(model, precision, hw, tp, pp, dp, ep, batch, context_tokens, tokens_per_request=1.0) -> np.ndarray:
    """Least time of one decode step of ``batch`` requests per attention-DP rank, each holding
    ``context_tokens`` of KV and verifying ``tokens_per_request`` tokens: the busiest GPU's bytes at peak HBM bandwidth.

    Pipeline stages are not multiplied in (each stage's share alone), so the bound stays a lower one.
    """
    tp, pp, dp, ep, b = (_f(x) for x in (tp, pp, dp, ep, batch))
    shared_bytes, expert_bytes = weight_parts_per_gpu(model, precision, tp, pp, dp, ep)
    arch = model.arch
    if arch.moe is not None and arch.moe.n_experts > 0:
        # tokens entering one MoE group per step (all attention-DP ranks), each routed to top_k of n_experts:
        # the expected share of experts hit at least once, 1 - exp(-pairs / experts) (balanced routing)
        pairs = b * dp * _f(tokens_per_request) * arch.moe.top_k
        touched_share = -np.expm1(-pairs / arch.moe.n_experts)
    else:
        touched_share = 1.0
    kv_bytes = b * kv_geometry(model, precision.kv, tp, pp).seq_bytes(context_tokens)  # KV of the rank's requests
    return (shared_bytes + expert_bytes * touched_share + kv_bytes) / hw.hbm_bandwidth_bytes_per_s

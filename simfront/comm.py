"""Collectives and point-to-point transfers: alpha-beta time per NCCL protocol, min over protocols.

Inside the scale-up domain (modeling-notes.md §3): ``t = base + steps·step + S·busfactor / BW_eff``
for each NCCL protocol (LL, LL128, Simple; Epoch AI inference-economics notebook), the fastest
protocol wins. ``BW_eff`` is the per-GPU one-direction scale-up bandwidth scaled to the link's
ACHIEVABLE all-reduce bus bandwidth (``Hardware.collective_peak``: nccl-tests / rccl-tests figures per
link kind), times a fitted link efficiency, reduced when few peers share the ring (NCCL drives fewer
NVLink paths at 2-4 ranks; specs.md A.3 shows 349 vs 445 GB/s busbw at 4 vs 8 H100s). Meshes (AMD
Infinity Fabric) reach ``(n-1)`` peer links only. The protocol latencies are fitted in units of the
link's achievable small-message (8 KiB all-reduce) latency, so they transfer across GPUs and links.
Beyond the domain the collective is hierarchical: intra-domain phases plus an inter-node ring over the
NICs at their achievable bandwidth. ``message_bytes`` is the buffer size as nccl-tests reports it.
"""

from __future__ import annotations

import numpy as np

from .cost import Cost
from .errors import SimfrontError
from .gemm import resolve_params

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "p2p")
PROTOCOLS = ("ll", "ll128", "simple")

# Reference small-message latency the protocol-latency priors below were written against: the 8 KiB
# all-reduce on 8xH100 SXM, 16 µs (aiconfigurator NCCL data, specs.md A.3).
_PRIOR_LATENCY_S = 16e-6

PARAMS: dict[str, tuple[float, float, float]] = {
    # fixed and per-ring-step latency of each protocol, in units of the link's achievable small-message
    # latency (Hardware.collective_peak().latency_s). Priors: Epoch defaults LL 6.8 + 0.6/step µs,
    # LL128 14 + 1.25/step, Simple 28/step (AIC NCCL data: 16 µs at 8 KiB on 8xH100, specs.md A.3),
    # divided by 16 µs. Each protocol's fixed latency is the previous one's plus an extra (LL < LL128 < Simple).
    "ll_base": (5e-6 / _PRIOR_LATENCY_S, 1e-6 / _PRIOR_LATENCY_S, 5e-5 / _PRIOR_LATENCY_S),
    "ll_step": (0.6e-6 / _PRIOR_LATENCY_S, 1e-8 / _PRIOR_LATENCY_S, 2e-5 / _PRIOR_LATENCY_S),
    "ll128_extra_base": (5e-6 / _PRIOR_LATENCY_S, 1e-8 / _PRIOR_LATENCY_S, 1e-4 / _PRIOR_LATENCY_S),
    "ll128_step": (1.25e-6 / _PRIOR_LATENCY_S, 1e-8 / _PRIOR_LATENCY_S, 2e-5 / _PRIOR_LATENCY_S),
    "simple_extra_base": (5e-6 / _PRIOR_LATENCY_S, 1e-8 / _PRIOR_LATENCY_S, 2e-4 / _PRIOR_LATENCY_S),
    "simple_step": (3e-6 / _PRIOR_LATENCY_S, 1e-8 / _PRIOR_LATENCY_S, 5e-5 / _PRIOR_LATENCY_S),
    # bandwidth fraction each protocol reaches (Epoch notebook: LL x0.5, LL128 x0.95, Simple x1); the
    # fit also folds in NCCL's channel count for the mid-size messages each protocol serves. Upper
    # bounds are the protocols' payload shares: LL sends 8 data bytes per 16-byte line (flag + data),
    # LL128 120 per 128-byte line (NCCL docs / nccl src/include/protocol.h), so neither can beat them;
    # LL128 is bounded below by LL's share (NCCL picks it over LL only where it moves more data).
    "ll_bw_fraction": (0.5, 0.05, 0.5),
    "ll128_bw_fraction": (0.9, 0.5, 0.9375),
    "simple_bw_fraction": (1.0, 1.0, 1.0),
    # all-to-all sends to all peers at once: latency steps per peer as a fraction of a ring step
    "alltoall_peer_step_fraction": (0.25, 0.01, 2.0),
    # achieved fraction of the link's ACHIEVABLE all-reduce bus bandwidth per collective (the
    # achievable figure is the large-message all-reduce, so all-reduce sits near 1; specs.md A.3 shows
    # all-gather / all-to-all at 0.7-0.9 of it)
    "link_efficiency_all_reduce": (1.0, 0.2, 1.5),
    "link_efficiency_all_gather": (0.9, 0.2, 1.5),
    "link_efficiency_reduce_scatter": (0.9, 0.2, 1.5),
    "link_efficiency_alltoall": (0.75, 0.2, 1.5),
    # ring-peer shortfall: BW_eff scales by (n-1)/(n-1+c)
    "few_peer_penalty": (0.3, 0.0, 3.0),
    # scale-out (not in the calibration data): fraction of the NIC's achievable bandwidth (the achievable
    # entry already carries IB/RoCE's ~0.95 of line rate, specs.md A.3); per transfer the NIC's achievable
    # latency (AIC p2p_latency 10 µs); 5 µs per inter-node ring step (Epoch LL: 5·log2 nodes)
    "net_efficiency": (1.0, 1.0, 1.0),
    "net_step_s": (5e-6, 5e-6, 5e-6),
    # fixed time of an all-to-all whose peers sit behind the NICs (MoE dispatch / combine across nodes):
    # GPU-initiated RDMA to every peer plus the arrival signalling. DeepEP's published low-latency
    # kernels (README "Low-latency kernels with pure RDMA": H800 + CX7 400 Gb/s, 128 tokens per rank,
    # hidden 7168, top-8, FP8 dispatch / BF16 combine) take 118/195 us at EP16, 155/273 at EP32 and
    # 173/314 at EP64; minus the bytes at the NIC's achievable rate that leaves 38-44 us in all six
    # (tests/test_comm.py::test_cross_node_alltoall_matches_deepep). Not fitted to serving data.
    "net_alltoall_base_s": (40e-6, 40e-6, 40e-6),
    # Synchronisation a serving step pays at each collective whose ranks sit on different nodes, beyond the
    # lockstep microbenchmarks above (nccl-tests, DeepEP's test loop): the ranks of a multi-node worker reach each
    # collective at different times (every node launches and runs its own kernels), so each cross-node collective
    # waits for the last rank. DeepEP's issues show the gap between its test loop and an engine (deepseek-ai/DeepEP
    # #261: internode combine 3-4 ms in test_internode.py, 10-12 ms and more inside an inference engine; #760:
    # straggler ranks in low-batch decode traces). Not identifiable from the single-node calibration kernels: chosen by
    # scripts/fit_crossnode_sync.py on the multi-node serving runs of the calibration set (two-node H100 decode and
    # prefill workers, an eight-node B200 one; TensorRT-LLM and SGLang), leaving the microbenchmark-matched latencies
    # above as they are. All-to-all (MoE dispatch or combine across nodes): 60 us, within the range each engine's runs
    # alone choose (SGLang 60, TensorRT-LLM 80). Ring collectives over the NICs (all-reduce, all-gather,
    # reduce-scatter): 0, because the engines' runs disagree (SGLang's would take 35 us, TensorRT-LLM's 0), so the
    # SGLang TP16 shortfall is not the collective's. (70 us until the round-52 profile refit moved the choice.)
    "net_sync_s": (0.0, 0.0, 0.0),
    "net_alltoall_sync_s": (60e-6, 60e-6, 60e-6),
}

FAMILY_DEFAULTS: dict[str, dict[str, float]] = {}


def _bus_factor(kind: str, n):
    """Bytes each GPU sends per message byte (nccl-tests PERFORMANCE.md busbw factors)."""
    if kind == "all_reduce":
        return 2.0 * (n - 1.0) / n
    if kind in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1.0) / n
    return np.ones_like(n)  # p2p: the whole message


def _ring_steps(kind: str, n, q):
    """Sequential latency steps of the collective."""
    if kind == "all_reduce":
        return 2.0 * (n - 1.0)
    if kind in ("all_gather", "reduce_scatter"):
        return n - 1.0
    if kind == "alltoall":
        return (n - 1.0) * q["alltoall_peer_step_fraction"]
    return np.ones_like(n)


def _link_bandwidth(n, hw):
    """Achievable one-direction bytes/s a GPU drives into its scale-up peers (mesh: only n-1 links).

    The datasheet link (or, on a mesh, the n-1 peer links) scaled by the link kind's achievable share:
    the achievable all-reduce bus bandwidth over the full datasheet link."""
    su = hw.scaleup
    share = hw.collective_peak("scaleup").bus_bandwidth_bytes_per_s / su.bandwidth_bytes_per_s
    if su.topology == "mesh" and su.peer_bandwidth_bytes_per_s:
        return share * np.minimum(su.bandwidth_bytes_per_s, (n - 1.0) * su.peer_bandwidth_bytes_per_s)
    return np.full_like(n, share * su.bandwidth_bytes_per_s)


def _latency_view(q: dict, hw) -> dict:
    """Protocol latencies in seconds: the fitted multiples times the link's achievable small-message latency."""
    lat = hw.collective_peak("scaleup").latency_s
    out = dict(q)
    for name in ("ll_base", "ll_step", "ll128_extra_base", "ll128_step", "simple_extra_base", "simple_step"):
        out[f"{name}_s"] = q[name] * lat
    nic = hw.collective_peak("scaleout")
    out["net_base_s"] = nic.latency_s
    out["net_bw"] = nic.bus_bandwidth_bytes_per_s * q["net_efficiency"]
    return out


def _intra(kind: str, S, n, hw, q):
    """Time of a collective among ``n`` GPUs of one scale-up domain."""
    eff_key = "all_gather" if kind == "p2p" else kind
    peers = np.maximum(n - 1.0, 1.0)
    # achieved per-GPU bandwidth: link x efficiency x ring-peer shortfall
    bw = _link_bandwidth(np.maximum(n, 2.0), hw) * q[f"link_efficiency_{eff_key}"] * peers / (peers + q["few_peer_penalty"])
    wire = S * _bus_factor(kind, n)  # bytes on the busiest link
    steps = _ring_steps(kind, n, q)
    best = None
    base = {"ll": q["ll_base_s"]}
    base["ll128"] = base["ll"] + q["ll128_extra_base_s"]
    base["simple"] = base["ll128"] + q["simple_extra_base_s"]  # seconds (see _latency_view)
    for proto in PROTOCOLS:
        t = base[proto] + steps * q[f"{proto}_step_s"] + wire / (bw * q[f"{proto}_bw_fraction"])
        best = t if best is None else np.minimum(best, t)
    return best, wire


def _inter(kind: str, S, nodes, hw, q):
    """Ring over ``nodes`` scale-out peers (one NIC per GPU), message ``S`` per GPU."""
    bw = q["net_bw"]
    wire = S * _bus_factor(kind, nodes)
    steps = _ring_steps(kind, nodes, {"alltoall_peer_step_fraction": 1.0})
    t = q["net_base_s"] + steps * q["net_step_s"] + wire / bw + q["net_sync_s"]  # + the wait for the last node's ranks
    return np.where(nodes > 1, t, 0.0), np.where(nodes > 1, wire, 0.0)


def collective_cost(kind: str, message_bytes, n_gpus, hw, p: dict | None = None) -> Cost:
    """Time of one collective of ``message_bytes`` over ``n_gpus`` GPUs (broadcasts; 0 for n <= 1)."""
    if kind not in KINDS:
        raise SimfrontError(f"unknown collective {kind!r}; valid: {', '.join(KINDS)}")
    q = _latency_view(resolve_params("comm", hw, p, PARAMS, FAMILY_DEFAULTS), hw)
    S, n = np.broadcast_arrays(np.asarray(message_bytes, dtype=np.float64), np.asarray(n_gpus, dtype=np.float64))
    S = np.maximum(S, 0.0)
    n = np.maximum(n, 1.0)
    domain = float(hw.scaleup.domain_gpus)
    local = np.minimum(n, domain)  # GPUs per scale-up domain taking part
    nodes = np.ceil(n / local)
    if kind == "p2p":
        t, wire = _intra("p2p", S, np.full_like(n, 2.0), hw, q)
    elif kind == "all_reduce":
        # reduce-scatter inside, all-reduce of the 1/local shard across domains, all-gather inside
        flat, wire_flat = _intra(kind, S, local, hw, q)
        rs, w1 = _intra("reduce_scatter", S, local, hw, q)
        ag, w2 = _intra("all_gather", S, local, hw, q)
        x, w3 = _inter(kind, S / local, nodes, hw, q)
        t = np.where(nodes > 1, rs + x + ag, flat)
        wire = np.where(nodes > 1, w1 + w2 + w3, wire_flat)
    elif kind in ("all_gather", "reduce_scatter"):
        a, w1 = _intra(kind, S, local, hw, q)
        x, w2 = _inter(kind, S / local, nodes, hw, q)
        t, wire = a + x, w1 + w2
    else:  # alltoall: the off-domain share goes through the NIC while the rest uses the scale-up links
        a, w1 = _intra(kind, S * local / n, local, hw, q)
        remote = S * (n - local) / n
        x = q["net_alltoall_base_s"] + remote / q["net_bw"] + q["net_alltoall_sync_s"]  # + the wait for the last node's ranks
        t = np.where(nodes > 1, np.maximum(a, x), a)
        wire = w1 + np.where(nodes > 1, remote, 0.0)
    t = np.where(n > 1, t, 0.0)
    wire = np.where(n > 1, wire, 0.0)
    zero = np.zeros_like(t)
    return Cost(time_s=t, flops=zero, mem_bytes=zero, net_bytes=wire, network_s=t)


def p2p_cost(message_bytes, hw, scope: str = "scaleup", p: dict | None = None) -> Cost:
    """One point-to-point send (pipeline stage boundary, KV transfer) inside or across domains."""
    if scope not in ("scaleup", "scaleout"):
        raise SimfrontError(f"unknown p2p scope {scope!r}; valid: scaleup, scaleout")
    q = _latency_view(resolve_params("comm", hw, p, PARAMS, FAMILY_DEFAULTS), hw)
    S = np.maximum(np.asarray(message_bytes, dtype=np.float64), 0.0)
    if scope == "scaleup":
        t, wire = _intra("p2p", S, np.full_like(S, 2.0), hw, q)
    else:
        t = q["net_base_s"] + S / q["net_bw"]
        wire = S
    t = np.where(S > 0, t, 0.0)
    zero = np.zeros_like(t)
    return Cost(time_s=t, flops=zero, mem_bytes=zero, net_bytes=wire, network_s=t)


# Serving engines all-reduce tensor-parallel activations inside one NVLink / xGMI domain with their own
# single-kernel collectives (vLLM and SGLang custom all-reduce, TensorRT-LLM's ONESHOT / TWOSHOT strategies),
# captured in CUDA graphs, and fall back to NCCL above a buffer size or across domains. Fixed time of one
# such all-reduce: SGLang PR #22734 (graph-captured low-latency all-reduce, 8x H200 TP8) measures
# 5.9-6.0 us at 2-8 KiB, where graph-captured pynccl takes 16.8-17.2 us (the 16 us NCCL floor of this
# project's H100 data, specs.md A.3). Not fitted to serving data.
ENGINE_ALLREDUCE_LATENCY_S = 6e-6
# largest buffer the engines' own all-reduce takes: vLLM CustomAllreduce max_size 8 MiB (SGLang's
# custom all-reduce keeps the same default); beyond it NCCL runs
ENGINE_ALLREDUCE_MAX_BYTES = 8.0 * 2**20


def engine_allreduce_cost(message_bytes, n_gpus, hw, p: dict | None = None) -> Cost:
    """A serving engine's tensor-parallel all-reduce: the faster of NCCL and the engine's own kernels.

    Inside one switch or mesh domain and up to ``ENGINE_ALLREDUCE_MAX_BYTES`` the engine runs a one-shot
    all-reduce (each GPU reads the other ``n-1`` buffers over its links, one barrier) or a two-shot one
    (reduce-scatter then all-gather, ``2 S (n-1)/n`` bytes, two barriers); PCIe-only boxes and groups that
    span domains get NCCL (vLLM disables its custom all-reduce without full NVLink)."""
    nccl = collective_cost("all_reduce", message_bytes, n_gpus, hw, p)
    S, n = np.broadcast_arrays(np.asarray(message_bytes, dtype=np.float64), np.asarray(n_gpus, dtype=np.float64))
    S, n = np.maximum(S, 0.0), np.maximum(n, 1.0)
    usable = (n > 1) & (n <= hw.scaleup.domain_gpus) & (S <= ENGINE_ALLREDUCE_MAX_BYTES) & (hw.scaleup.topology != "pcie")
    if not np.any(usable):
        return nccl
    bw = _link_bandwidth(np.maximum(n, 2.0), hw)  # achievable one-direction bytes/s into the peers
    one_wire = S * (n - 1.0)  # one-shot: every peer's whole buffer crosses this GPU's links
    two_wire = 2.0 * S * (n - 1.0) / n  # two-shot: reduce-scatter + all-gather shares
    one = ENGINE_ALLREDUCE_LATENCY_S + one_wire / bw
    two = 2.0 * ENGINE_ALLREDUCE_LATENCY_S + two_wire / bw
    own, own_wire = np.where(one <= two, one, two), np.where(one <= two, one_wire, two_wire)
    take = usable & (own < nccl.time_s)
    t = np.where(take, own, nccl.time_s)
    wire = np.where(take, own_wire, nccl.net_bytes)
    zero = np.zeros_like(t)
    return Cost(time_s=t, flops=zero, mem_bytes=zero, net_bytes=wire, network_s=t)

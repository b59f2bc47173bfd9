"""Collectives and point-to-point transfers (simfront/comm.py): invariants, topology, calibration."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront.comm import KINDS, collective_cost, p2p_cost
from simfront.errors import SimfrontError
from simfront.hardware import catalog, get_hardware
from kernel_data import KERNEL_DIR

KERNELS = KERNEL_DIR
GPUS = sorted(catalog())
SIZES = np.exp2(np.arange(6, 34, 0.5))  # 64 B .. 16 GiB


@pytest.mark.parametrize("kind", KINDS)
def test_one_gpu_costs_nothing(kind):
    c = collective_cost(kind, SIZES, 1, get_hardware("h100_sxm"))
    assert np.all(c.time_s == 0) and np.all(c.net_bytes == 0)


@settings(max_examples=40, deadline=None)
@given(gpu=st.sampled_from(GPUS), kind=st.sampled_from(KINDS), n=st.sampled_from([2, 3, 4, 8, 16, 64, 72, 144]))
def test_time_never_decreases_with_message_size_and_is_finite(gpu, kind, n):
    c = collective_cost(kind, SIZES, n, get_hardware(gpu))
    assert np.all(np.isfinite(c.time_s)) and np.all(c.time_s > 0)
    assert np.all(np.diff(c.time_s) >= 0)
    np.testing.assert_array_equal(c.network_s, c.time_s)


@settings(max_examples=40, deadline=None)
@given(gpu=st.sampled_from(GPUS), kind=st.sampled_from(KINDS), n=st.sampled_from([2, 4, 8, 16]), factor=st.floats(1.0, 4.0))
def test_more_link_bandwidth_never_slows_a_collective(gpu, kind, n, factor):
    hw = get_hardware(gpu)
    su = hw.scaleup.model_copy(update={
        "bandwidth_bytes_per_s": hw.scaleup.bandwidth_bytes_per_s * factor,
        "peer_bandwidth_bytes_per_s": (hw.scaleup.peer_bandwidth_bytes_per_s or 0) * factor or None,
    })
    a = hw.achievable
    coll = {k: v.model_copy(update={"bus_bandwidth_bytes_per_s": v.bus_bandwidth_bytes_per_s * factor}) for k, v in a.collectives.items()}
    faster = hw.model_copy(update={"scaleup": su, "scaleout_bandwidth_bytes_per_s": hw.scaleout_bandwidth_bytes_per_s * factor,
                                   "achievable": a.model_copy(update={"collectives": coll})})
    assert np.all(collective_cost(kind, SIZES, n, faster).time_s <= collective_cost(kind, SIZES, n, hw).time_s * (1 + 1e-12))


def test_bytes_on_the_wire_follow_the_nccl_bus_factors_inside_one_domain():
    hw = get_hardware("h100_sxm")
    S = 1 << 26
    assert collective_cost("all_reduce", S, 8, hw).net_bytes == pytest.approx(2 * 7 / 8 * S)
    for kind in ("all_gather", "reduce_scatter", "alltoall"):
        assert collective_cost(kind, S, 8, hw).net_bytes == pytest.approx(7 / 8 * S)


def test_large_all_reduce_approaches_the_link_and_small_ones_pay_latency():
    hw = get_hardware("h100_sxm")
    big = collective_cost("all_reduce", 1 << 29, 8, hw).time_s
    busbw = (1 << 29) * 2 * 7 / 8 / big
    assert 0.5 * hw.scaleup.bandwidth_bytes_per_s < busbw <= 1.2 * hw.scaleup.bandwidth_bytes_per_s
    small = collective_cost("all_reduce", 8192, 8, hw).time_s
    assert 5e-6 < small < 60e-6  # NCCL floor: 16 µs at 8 KiB on 8xH100 (specs.md A.3)


def test_leaving_the_scale_up_domain_drops_to_nic_bandwidth():
    h100, gb200 = get_hardware("h100_sxm"), get_hardware("gb200")
    S = 1 << 28
    inside, across = collective_cost("all_reduce", S, np.array([8, 16]), h100).time_s
    # 16 GPUs span two HGX nodes: the 1/8 shard crosses 50 GB/s NICs on top of the NVLink phases
    assert across > 1.3 * inside
    assert collective_cost("all_reduce", S, 16, h100).net_bytes > collective_cost("all_reduce", S, 8, h100).net_bytes
    # NVL72 keeps 16 GPUs on NVLink (900 GB/s)
    assert collective_cost("all_reduce", S, 16, gb200).time_s < across / 2
    for kind in ("all_gather", "reduce_scatter", "alltoall"):
        assert collective_cost(kind, S, 16, h100).time_s > collective_cost(kind, S, 8, h100).time_s


def test_mesh_topology_uses_only_the_peer_links_it_has():
    mi = get_hardware("mi300x")
    S = 1 << 28
    two, eight = collective_cost("all_gather", S, np.array([2, 8]), mi).time_s
    # 2 GPUs share one 64 GB/s link; 8 GPUs drive seven links at once
    bw2 = S / 2 / two
    bw8 = S * 7 / 8 / eight
    assert bw2 <= mi.scaleup.peer_bandwidth_bytes_per_s * 1.2
    assert bw8 > 3 * bw2


def test_p2p_inside_and_across_domains():
    hw = get_hardware("b200_sxm")
    S = np.array([0.0, 1e3, 1e8])
    up, out = p2p_cost(S, hw, "scaleup"), p2p_cost(S, hw, "scaleout")
    assert up.time_s[0] == 0 and out.time_s[0] == 0
    assert out.time_s[2] > 5 * up.time_s[2]
    assert out.time_s[2] >= 1e8 / hw.scaleout_bandwidth_bytes_per_s
    np.testing.assert_array_equal(out.net_bytes, S)
    with pytest.raises(SimfrontError):
        p2p_cost(1.0, hw, "moon")


def test_unknown_collective_is_a_user_error():
    with pytest.raises(SimfrontError):
        collective_cost("broadcast_all", 1, 2, get_hardware("h100_sxm"))


@pytest.mark.skipif(not KERNELS.exists(), reason="calibration data not available")
@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm"])
def test_calibrated_predictions_land_near_measured_collectives(gpu):
    with (KERNELS / f"{gpu}__nccl.csv").open() as fh:
        rows = list(csv.DictReader(fh))[::25]
    hw = get_hardware(gpu)
    pred = np.array([collective_cost(r["collective"], float(r["message_bytes"]), float(r["num_gpus"]), hw).time_s for r in rows]) * 1e6
    meas = np.array([float(r["latency_us"]) for r in rows])
    assert np.mean(np.abs(pred / meas - 1)) < 0.25


def test_pcie_collectives_run_at_the_measured_pcie_bus_bandwidth_not_the_link_rate():
    # aiconfigurator's 8xL40S NCCL data: ~1-2 GB/s all-reduce busbw over PCIe with no P2P path (specs.md A.3)
    hw = get_hardware("l40s")
    S = 512 * 2**20
    t = collective_cost("all_reduce", S, 8, hw).time_s
    busbw = S * 2 * 7 / 8 / t
    assert 0.5e9 < busbw < 3e9  # not the 32 GB/s PCIe Gen4 link rate
    # 8xH100 NVSwitch reaches hundreds of GB/s on the same message
    h100 = get_hardware("h100_sxm")
    assert S * 2 * 7 / 8 / collective_cost("all_reduce", S, 8, h100).time_s > 300e9


def test_small_message_latency_follows_the_links_achievable_latency():
    # the protocol latencies are fitted in units of the link's 8 KiB all-reduce latency
    h100 = get_hardware("h100_sxm")
    slow = h100.achievable.collectives["nvswitch"].model_copy(update={"latency_s": 2 * h100.collective_peak().latency_s})
    h100_slow = h100.model_copy(update={"achievable": h100.achievable.model_copy(update={"collectives": {**h100.achievable.collectives, "nvswitch": slow}})})
    t1 = collective_cost("all_reduce", 8192, 8, h100).time_s
    t2 = collective_cost("all_reduce", 8192, 8, h100_slow).time_s
    assert 1.7 * t1 < t2 < 2.1 * t1


def test_cross_node_alltoall_matches_deepep():
    """MoE dispatch/combine across nodes against DeepEP's published low-latency table (H800 + CX7 400 Gb/s,
    128 tokens per rank, hidden 7168, top-8, FP8 dispatch, BF16 combine): within 12% from EP16 to EP256."""
    from simfront.comm import collective_cost
    from simfront.hardware import get_hardware

    from simfront import efficiency

    hw = get_hardware("h100_sxm")  # same 400 Gb/s NIC per GPU as the H800 DeepEP measured on
    published_us = {16: (118, 195), 32: (155, 273), 64: (173, 314), 128: (192, 369), 256: (194, 360)}
    # the lockstep test loop: no serving-step synchronisation (net_alltoall_sync_s, below)
    with efficiency.using({"comm": {"default": {"net_alltoall_sync_s": 0.0}}}):
        for ep, (dispatch_us, combine_us) in published_us.items():
            for width_bytes, meas in ((1.0, dispatch_us), (2.0, combine_us)):
                t_us = float(collective_cost("alltoall", 128 * 8 * 7168 * width_bytes, ep, hw).time_s) * 1e6
                assert abs(t_us / meas - 1.0) < 0.12, (ep, width_bytes, t_us, meas)
    # inside one NVLink domain the NIC's fixed cost does not apply
    assert float(collective_cost("alltoall", 128 * 8 * 7168, 8, hw).time_s) < 60e-6


def test_cross_node_sync_adds_to_cross_node_collectives_only():
    """The serving-step synchronisation (comm.PARAMS net_alltoall_sync_s / net_sync_s) adds its value once to a
    collective whose ranks span nodes, and nothing inside one scale-up domain."""
    from simfront import efficiency
    from simfront.comm import PARAMS, collective_cost

    hw = get_hardware("h100_sxm")
    sizes = np.array([8.0, 64e3, 8e6])
    for kind, name in (("alltoall", "net_alltoall_sync_s"), ("all_reduce", "net_sync_s"), ("all_gather", "net_sync_s")):
        with efficiency.using({"comm": {"default": {name: 0.0}}}):
            bare_x, bare_in = collective_cost(kind, sizes, 16, hw).time_s, collective_cost(kind, sizes, 8, hw).time_s
        with efficiency.using({"comm": {"default": {name: 50e-6}}}):
            sync_x, sync_in = collective_cost(kind, sizes, 16, hw).time_s, collective_cost(kind, sizes, 8, hw).time_s
        assert np.allclose(sync_x - bare_x, 50e-6, rtol=0, atol=1e-12), kind
        assert np.array_equal(sync_in, bare_in), kind
    # shipped: the all-to-all wait chosen on the multi-node serving runs, none for ring collectives
    assert PARAMS["net_alltoall_sync_s"][0] == 60e-6 and PARAMS["net_sync_s"][0] == 0.0


# --- serving engines' own tensor-parallel all-reduce (comm.engine_allreduce_cost) -------------------------

@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("n", [2, 4, 8, 16, 72])
def test_engine_allreduce_is_never_slower_than_nccl_and_grows_with_size(gpu, n):
    from simfront.comm import engine_allreduce_cost
    hw = get_hardware(gpu)
    own = engine_allreduce_cost(SIZES, n, hw).time_s
    nccl = collective_cost("all_reduce", SIZES, n, hw).time_s
    assert np.all(np.isfinite(own)) and np.all(own <= nccl + 1e-15)
    assert np.all(np.diff(own) >= -1e-12)


def test_engine_allreduce_matches_a_published_graph_captured_one_shot_kernel():
    """SGLang PR #22734, 8x H200 TP8, graph-captured low-latency all-reduce: 5.9 / 8.2 / 10.6 / 14.0 us at
    2 KiB / 64 KiB / 256 KiB / 1 MiB (pynccl graph 16.8-27.0 us): within 20 %, and the NCCL path stays NCCL."""
    from simfront.comm import engine_allreduce_cost
    hw = get_hardware("h200_sxm")
    sizes = np.array([2048, 65536, 262144, 1 << 20])
    published_us = np.array([5.86, 8.20, 10.56, 14.01])
    got_us = engine_allreduce_cost(sizes, 8, hw).time_s * 1e6
    assert np.all(np.abs(got_us / published_us - 1) < 0.2), got_us


def test_engine_allreduce_is_nccl_across_nodes_on_pcie_and_above_its_buffer():
    from simfront.comm import ENGINE_ALLREDUCE_MAX_BYTES, engine_allreduce_cost
    h100, l40s = get_hardware("h100_sxm"), get_hardware("l40s")
    for hw, n, s in ((h100, 16, 65536.0), (l40s, 4, 65536.0), (h100, 8, 4 * ENGINE_ALLREDUCE_MAX_BYTES)):
        assert engine_allreduce_cost(s, n, hw).time_s == pytest.approx(collective_cost("all_reduce", s, n, hw).time_s)


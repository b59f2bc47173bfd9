"""Client and workload models of the simulation (simfront.clients) and engine scheduler settings."""

import numpy as np
import pytest

from simfront import clients as cl
from simfront.errors import SimfrontError
from simfront.scheduler import scheduler_settings


def test_random_range_lengths_match_the_vllm_random_dataset():
    L = cl.Lengths(1024, 1024, 0.8)
    isl, osl = L.sample(np.random.default_rng(0), (4, 20000))
    assert isl.min() == 819 and isl.max() == 1024  # uniform integers in [floor(0.8 L), L]
    assert abs(isl.mean() - L.mean_isl) < 1.0 and abs(L.mean_isl - 921.5) < 1e-9


def test_closed_loop_plan_defaults_to_ten_prompts_per_user():
    c = cl.ClosedLoop(64, cl.Lengths(1000, 100))
    p = cl.plan_closed(c, [64, 8], 2)
    assert list(p.n) == [640, 80] and p.first_wave
    assert np.all(p.isl == 1000) and np.all(p.cached == 0)


def test_fixed_length_closed_loop_plan_is_one_value_per_field_not_a_filled_grid():
    """Identical requests (the tail simulation's clients) need no (deployments x requests) arrays: each field is a
    read-only view of one value, equal to what a filled grid would hold; spread lengths keep real arrays."""
    c = cl.ClosedLoop(8, cl.Lengths(1024, 256), num_prompts=24, prefix_hit=0.5, think_s=0.2)
    plan = cl.plan_closed(c, [8, 4], 2)
    assert plan.isl.shape == plan.cached.shape == plan.after_s.shape == (2, 24)
    assert np.all(plan.isl == 1024) and np.all(plan.osl == 256) and np.all(plan.cached == 512)
    assert np.all(plan.arrival_s == 0) and np.all(plan.after_s == 0.2)
    assert not plan.isl.flags.writeable and plan.isl.strides == (0, 0)
    spread = cl.plan_closed(cl.ClosedLoop(8, cl.Lengths(1024, 256, 0.8), num_prompts=24), [8, 4], 2)
    assert spread.isl.flags.writeable and len(np.unique(spread.isl)) > 1
    assert np.array_equal(spread.cached, np.zeros((2, 24)))


def test_open_loop_poisson_rate():
    o = cl.OpenLoop(5.0, cl.Lengths(100, 10), num_prompts=20000)
    p = cl.plan_open(o, 1.0, 1, seed=1)
    gaps = np.diff(p.arrival_s[0])
    assert p.arrival_s[0, 0] == 0 and abs(1 / gaps.mean() - 5.0) < 0.15
    with pytest.raises(SimfrontError):
        cl.OpenLoop(0.0, cl.Lengths(1, 1))


def test_agentic_prompts_grow_and_round_robin_hits_one_in_r():
    a = cl.AgenticCoding(sessions=4, turns=4, first_prompt=1000, output_tokens=100, tool_tokens=400, routing="round-robin", replicas=4)
    assert list(a.turn_prompt(np.arange(4))) == [1000, 1500, 2000, 2500]
    assert a.route_hit() == 0.25 and cl.AgenticCoding(routing="kv-aware", replicas=4).route_hit() == 1.0
    p = cl.plan_agentic(a, 4, 1, seed=3)
    later = p.extra["turn"] > 0
    hit = (p.cached > 0)[np.broadcast_to(later, p.cached.shape)]
    assert abs(hit.mean() - 0.25) < 0.08
    # round-robin spreads every session's context over all R replicas: a cache that holds half of
    # what one session per replica leaves there keeps half of it
    ctx = np.mean(a.turn_prompt(np.arange(4)) + 100)
    assert a.resident_share(0.5 * 4 * ctx, 1) == pytest.approx(0.5)
    with pytest.raises(SimfrontError):
        cl.AgenticCoding(routing="random")


def test_scheduler_defaults_follow_engine_source_by_gpu_memory():
    assert scheduler_settings("sglang", gpu_mem_gib=80).token_budget == 8192
    assert scheduler_settings("sglang", gpu_mem_gib=180).token_budget == 16384
    assert scheduler_settings("vllm", gpu_mem_gib=40).token_budget == 2048
    assert scheduler_settings("Dynamo + SGLang [lmsysorg/sglang:v0.5.12]").policy == "prefill_first"
    assert scheduler_settings("TensorRT-LLM").admission == "reserve"
    s = scheduler_settings("vllm").with_overrides(token_budget=2048)
    assert s.token_budget == 2048
    with pytest.raises(SimfrontError):
        scheduler_settings("vllm").with_overrides(policy="lifo")
    with pytest.raises(SimfrontError):
        scheduler_settings("tgi")

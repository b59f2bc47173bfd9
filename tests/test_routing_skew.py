"""--routing-skew: the MoE routing skew is a workload input (balanced, or a measured power-law exponent)."""

from __future__ import annotations

import pytest

from simfront import api
from simfront.errors import SimfrontError
from simfront.step import DEFAULT_ROUTING_ALPHA


def _tput(res):
    return [(p["tok_s_user"], p["tok_s_gpu"]) for p in res.frontier]


def test_default_is_the_production_typical_skew_and_is_reported():
    res = api.predict("deepseek-r1", "8xB200", modes=["agg"])
    assert res.workload.routing_alpha == DEFAULT_ROUTING_ALPHA
    assert api.predict("deepseek-r1", "8xB200", modes=["agg"], routing_skew="balanced").workload.routing_alpha is None


def test_skew_moves_moe_costs_and_leaves_dense_models_alone():
    skews = ("balanced", None, 2.0)
    moe = {s: _tput(api.predict("deepseek-r1", "8xB200", modes=["agg"], routing_skew=s)) for s in skews}
    assert moe["balanced"] != moe[None] != moe[2.0]
    dense = {s: _tput(api.predict("llama-3.1-8b", "1xH100", modes=["agg"], routing_skew=s)) for s in skews}
    assert dense["balanced"] == dense[None] == dense[2.0]


def test_heavier_skew_never_speeds_up_a_large_expert_parallel_batch():
    """At many tokens per rank the busiest EP rank sets the step, and a heavier skew loads it more."""
    from simfront.hardware import get_hardware
    from simfront.models import get_model
    from simfront.serving import Workload, decode_raw

    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    steps = [float(decode_raw(m, m.native, hw, 1, 1, 8, 8, 256, Workload(routing_alpha=a))[0].sum()) for a in (1.01, 1.5, 2.5)]
    assert steps[0] <= steps[1] <= steps[2]


@pytest.mark.parametrize("bad", ["0", "-1", "9", "skewed", "nan"])
def test_bad_skew_is_a_one_line_error(bad):
    with pytest.raises(SimfrontError, match="--routing-skew"):
        api.predict("deepseek-r1", "8xB200", routing_skew=bad)


def test_the_simulation_steps_with_the_workloads_routing_skew():
    """The step-level simulation (tails) costs its steps with the workload's skew, as the evaluator does:
    a heavier skew makes a large expert-parallel decode step slower in the simulation's step table too."""
    import numpy as np

    from simfront.deployment import Layouts
    from simfront.hardware import get_hardware
    from simfront.models import get_model
    from simfront.serving import NEUTRAL_PROFILE
    from simfront.step_table import build_step_table

    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    lay = Layouts.of([1.0], 1, [8.0], [8.0])
    tabs = {a: build_step_table(m, m.native, hw, lay, dict(NEUTRAL_PROFILE), isl_new=1024, prefix=0, ctx_lo=1024, ctx_hi=2048,
                                b_max=256, p_max=1, routing_alpha=a) for a in (None, 1.01, 2.5)}
    step = {a: float(t(np.array([256.0]), np.array([0.0]), np.array([1536.0]))[0]) for a, t in tabs.items()}
    assert step[None] < step[1.01] < step[2.5]

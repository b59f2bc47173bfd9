"""--workload agentic-coding: the prefix-cache hit rate routing gives, and what it does to the frontier."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simfront import api
from simfront.agentic import agentic_workload
from simfront.errors import SimfrontError
from simfront.pareto import frontier_shift
from cli_runner import run_cli


def test_hit_rate_closed_form_on_a_two_turn_session():
    """Turn 0 sends 1000 tokens; turn 1 sends 1000 + 100 out + 100 tool = 1200, of which 1100 are cached."""
    knobs = {"turns": 2, "first_prompt": 1000, "output_tokens": 100, "tool_tokens": 100}
    kv = agentic_workload("kv-aware", 4, knobs)
    rr = agentic_workload("round-robin", 4, knobs)
    assert (kv["isl"], kv["osl"]) == (1100, 100)
    assert math.isclose(kv["prefix_hit"], 1100 / 2200) and math.isclose(rr["prefix_hit"], 1100 / 2200 / 4)
    assert math.isclose(agentic_workload("round-robin", 1, knobs)["prefix_hit"], kv["prefix_hit"])  # one replica: always home


@pytest.mark.parametrize("model,gpus", [("glm-5.3", "8xB200"), ("kimi-k3", "16xB200")])
def test_kv_aware_routing_pushes_the_frontier_out_by_the_hit_rates(model, gpus):
    res = {r: api.predict(model, gpus, workload="agentic-coding", routing=r, modes=["agg"]) for r in ("kv-aware", "round-robin")}
    kv, rr = res["kv-aware"], res["round-robin"]
    # the search ran on the closed-form hit rates
    assert math.isclose(kv.workload.prefix_hit, agentic_workload("kv-aware")["prefix_hit"])
    assert math.isclose(rr.workload.prefix_hit, agentic_workload("round-robin")["prefix_hit"])
    shift = frontier_shift([p["tok_s_user"] for p in rr.frontier], [p["tok_s_gpu"] for p in rr.frontier],
                           [p["tok_s_user"] for p in kv.frontier], [p["tok_s_gpu"] for p in kv.frontier])
    assert shift["verdict"] == "pushes the frontier out"
    # at most the prompt work saved: tok/s/GPU cannot rise by more than the ratio of tokens computed per request
    work_rr = (1 - rr.workload.prefix_hit) * rr.workload.isl + rr.workload.osl
    work_kv = (1 - kv.workload.prefix_hit) * kv.workload.isl + kv.workload.osl
    assert 0 < shift["median_gain"] <= work_rr / work_kv - 1
    # lowest-load TTFT falls with the prompt tokens left to prefill
    t_kv = min(p["ttft_ms"] for p in kv.frontier)
    t_rr = min(p["ttft_ms"] for p in rr.frontier)
    assert t_kv < t_rr


def test_workload_preset_errors_name_the_flag():
    with pytest.raises(SimfrontError, match="--isl"):
        api.predict("llama-3.1-8b", "1xH100", isl=2048, workload="agentic-coding")
    with pytest.raises(SimfrontError, match="--routing only applies"):
        api.predict("llama-3.1-8b", "1xH100", routing="round-robin")
    with pytest.raises(SimfrontError, match="unknown; valid: agentic-coding"):
        api.predict("llama-3.1-8b", "1xH100", workload="chat")
    with pytest.raises(SimfrontError, match="valid: kv-aware, round-robin"):
        agentic_workload("random")
    with pytest.raises(SimfrontError, match="--replicas 0"):
        agentic_workload("round-robin", 0)
    with pytest.raises(SimfrontError, match="turns=.x. is not a number"):
        agentic_workload("kv-aware", None, {"turns": "x"})


def test_cli_preset_in_table_and_json(capsys):
    code, out, _ = run_cli(["predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--workload", "agentic-coding", "--routing",
                            "round-robin", "--replicas", "4", "--workload-set", "turns=4"], capsys)
    assert code == 0 and "agentic-coding (4 turns, round-robin over 4 replicas)" in out
    import json

    code, out, _ = run_cli(["predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--workload", "agentic-coding", "--json"], capsys)
    j = json.loads(out)
    assert j["workload"]["preset"]["routing"] == "kv-aware" and j["workload"]["isl"] == agentic_workload()["isl"]
    assert np.isfinite(j["frontier"][0]["tok_s_gpu"])
    code, _, err = run_cli(["predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--workload-set", "turns=4"], capsys)
    assert code == 2 and err.startswith("error: --workload-set only applies") and "Traceback" not in err

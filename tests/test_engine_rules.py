"""What each engine can start (simfront/engines/<engine>.yaml layout_rules) bounds the search, plan and --launch."""

import numpy as np
import pytest

from simfront.engine_rules import KNOWN_RULES, layout_rules, startable, why_not
from simfront.errors import SimfrontError
from simfront.launch import launchable


def test_rules_are_known_and_carry_their_reason():
    for engine in ("vllm", "sglang", "trtllm"):
        for name, why in layout_rules(engine).items():
            assert name in KNOWN_RULES and len(why) > 30  # a reason with its source, not a bare name
    assert layout_rules(None) == {}


def test_pipelined_workers_with_drafts_per_engine_and_release():
    # (tp, pp, attention_dp, ep, drafts): TP8 PP2 with MTP, TP8 PP2 without, TP16 with MTP, TP4 DPA2 EP8 PP2 with MTP
    tp, pp, dp, ep, drafts = [8, 8, 16, 4], [2, 2, 1, 2], [1, 1, 1, 2], [1, 1, 1, 8], [True, False, True, True]
    assert startable("trtllm", tp, pp, dp, ep, drafts).tolist() == [False, True, True, False]
    assert startable("vllm", tp, pp, dp, ep, drafts).tolist() == [True, True, True, True]
    # SGLang 0.5.23 drafts on stages of an aggregated server without attention DP (SGLANG_ENABLE_PP_SPEC); not before
    assert startable("sglang", tp, pp, dp, ep, drafts).tolist() == [True, True, True, False]
    assert startable("sglang", tp, pp, dp, ep, drafts, disagg=True).tolist() == [False, True, True, False]
    assert startable("sglang", tp, pp, dp, ep, drafts, version="0.5.12").tolist() == [False, True, True, False]
    assert startable(None, tp, pp, dp, ep, drafts).all()
    assert "PP2 with speculative decoding" in why_not("sglang", 8, 2, 1, 1, True, "0.5.12")
    assert "DPA2" in why_not("sglang", 4, 2, 2, 8, True)
    assert "disaggregated decode worker" in why_not("sglang", 8, 2, 1, 1, True, disagg=True)
    assert why_not("sglang", 8, 2, 1, 1, False) == "" and why_not("sglang", 8, 2, 1, 1, True) == ""


def test_the_layout_rules_broadcast_over_a_grid():
    ok = startable("vllm", np.array([[8], [8]]), 1, np.array([[1], [2]]), np.array([[1, 8, 16]]))
    assert ok.tolist() == [[True, True, False], [True, False, True]]  # experts over the whole stage or none


def test_frontier_points_with_drafts_on_a_pipeline():
    point = {"mode": "agg", "tp": 8, "pp": 2, "ep": 1, "attention_dp": 1, "spec": "mtp-k2@AL2.27"}
    assert launchable(point, "vllm") == (True, "") and launchable(point, "sglang") == (True, "")
    ok, why = launchable(point, "trtllm")
    assert not ok and why.startswith("server: PP2 with speculative decoding") and "feature-combination-matrix" in why
    ok, why = launchable(point, "sglang", "0.5.12")
    assert not ok and "disaggregated prefill" in why
    assert launchable({**point, "spec": "none"}, "trtllm") == (True, "")
    # a disaggregated decode worker drafts; its prefill worker (no stages) does not
    dis = {**point, "mode": "disagg", "prefill_tp": 8, "prefill_ep": 1, "prefill_attention_dp": 1}
    assert launchable(dis, "trtllm")[1].startswith("decode: PP2")
    assert launchable(dis, "sglang")[1].startswith("decode: PP2 with speculative decoding on a disaggregated decode worker")


@pytest.mark.parametrize("engine,version", [("trtllm", None), ("sglang", "0.5.12")])
def test_the_search_for_an_engine_offers_only_what_it_starts(engine, version):
    from simfront.api import GpuSet, get_model
    from simfront.hardware import get_hardware
    from simfront.search import SearchSpace, search
    from simfront.serving import Workload

    model, gpus, wl = get_model("deepseek-r1"), GpuSet(count=16, hardware=get_hardware("h100_sxm")), Workload(isl=1024, osl=1024)
    space = dict(precisions=["fp8_block"], modes=("agg",))

    def pipelined_drafts(res):
        return int(((np.asarray(res.points["pp"]) > 1) & (np.asarray(res.points["spec"]) != "none")).sum())

    assert pipelined_drafts(search(model, gpus, wl, SearchSpace(**space))) > 0  # the average engine offers them
    res = search(model, gpus, wl, SearchSpace(engine=engine, engine_version=version, **space))
    assert res.points and pipelined_drafts(res) == 0
    assert (np.asarray(res.points["pp"]) > 1).any()  # pipelines without drafts stay


def test_the_newest_sglang_drafts_on_stages_of_aggregated_tp_workers_only():
    from simfront.api import GpuSet, get_model
    from simfront.hardware import get_hardware
    from simfront.search import SearchSpace, search
    from simfront.serving import Workload

    model, gpus, wl = get_model("deepseek-r1"), GpuSet(count=16, hardware=get_hardware("h100_sxm")), Workload(isl=1024, osl=1024)
    res = search(model, gpus, wl, SearchSpace(precisions=["fp8_block"], engine="sglang"))
    p = {c: np.asarray(res.points[c]) for c in ("pp", "spec", "attention_dp", "mode")}
    staged = (p["pp"] > 1) & (p["spec"] != "none")
    assert staged.any() and (p["attention_dp"][staged] == 1).all() and (p["mode"][staged] == "agg").all()


def test_an_unknown_rule_in_an_engine_table_is_an_error(tmp_path, monkeypatch):
    import simfront.engine_rules as er

    (tmp_path / "vllm.yaml").write_text("layout_rules:\n  no_such_rule: because\n")
    monkeypatch.setattr(er, "RULES_DIR", tmp_path)
    er._rules.cache_clear()
    try:
        with pytest.raises(SimfrontError, match="no_such_rule"):
            er.layout_rules("vllm")
    finally:
        er._rules.cache_clear()


def test_plan_for_an_engine_chooses_what_it_starts():
    from simfront.planning import plan

    kw = dict(isl=1024, osl=1024, tpot_ms=30, hardware=["h100_sxm"])
    any_engine = plan("deepseek-r1", 20, **kw)["rows"][0]["point"]
    assert any_engine["pp"] > 1 and any_engine["spec"] != "none"  # the average engine's choice drafts on a pipeline
    for engine, version in (("sglang", None), ("sglang", "0.5.12"), ("trtllm", None)):
        p = plan("deepseek-r1", 20, engine=engine, engine_version=version, **kw)["rows"][0]["point"]
        assert launchable(p, engine, version)[0], (engine, version, p)


def test_a_measured_sweep_is_compared_with_what_its_engines_start():
    """Validation's frontier keeps what at least one of the sweep's engines starts (simfront.fidelity)."""
    from types import SimpleNamespace

    from simfront.fidelity import _sweep_engines

    def run(engine):
        return SimpleNamespace(engine=engine, engine_version=None, measured_on=None), None

    assert _sweep_engines([run("Dynamo + SGLang [lmsysorg/sglang:v0.5.8]"), run("trtllm"), run("sglang")]) == ("sglang", "trtllm")
    assert _sweep_engines([run("sglang"), run(None)]) is None  # a run of an unnamed engine: the average engine
    assert _sweep_engines([run("sglang"), run("some-other-engine")]) is None
    # each engine at the newest release its runs name (a run's date names the release family out then)
    dated = [(SimpleNamespace(engine="sglang", engine_version="0.5.8", measured_on=None), None),
             (SimpleNamespace(engine="sglang", engine_version="0.5.12", measured_on=None), None),
             (SimpleNamespace(engine="trtllm", engine_version=None, measured_on="2026-03-01"), None)]
    assert _sweep_engines(dated) == ("sglang@0.5.12", "trtllm@0.17")


def test_start_engines_keep_what_any_of_them_starts():
    from simfront.api import GpuSet, get_model
    from simfront.hardware import get_hardware
    from simfront.search import SearchSpace, search
    from simfront.serving import Workload

    model, gpus, wl = get_model("deepseek-r1"), GpuSet(count=16, hardware=get_hardware("h100_sxm")), Workload(isl=1024, osl=1024)

    def pipelined_drafts(**kw):
        res = search(model, gpus, wl, SearchSpace(precisions=["fp8_block"], modes=("agg",), **kw))
        return int(((np.asarray(res.points["pp"]) > 1) & (np.asarray(res.points["spec"]) != "none")).sum())

    assert pipelined_drafts(start_engines=("sglang@0.5.12", "trtllm")) == 0
    assert pipelined_drafts(start_engines=("sglang@0.5.12", "vllm")) > 0  # vLLM starts them
    assert pipelined_drafts(start_engines=("sglang", "trtllm")) > 0  # SGLang's newest release does too (no DPA)
    assert pipelined_drafts(engine="sglang", start_engines=("vllm",)) > 0  # the engines given override the priced one's


def test_an_all_engine_frontier_says_which_engines_start_its_points():
    from simfront.launch import startable_note

    pipelined = {"mode": "agg", "tp": 8, "pp": 2, "ep": 1, "attention_dp": 1, "spec": "mtp-k2@AL2.27"}
    plain = {"mode": "agg", "tp": 8, "pp": 1, "ep": 1, "attention_dp": 1, "spec": "none"}
    note = startable_note([pipelined, plain], "frontier point")
    assert "every frontier point" in note and "of the 2, vllm 2, sglang 2, trtllm 1" in note and "--engine E" in note
    assert startable_note([plain], "frontier point") is None and startable_note([], "frontier point") is None


def test_a_rule_can_bind_only_the_releases_before_a_version():
    """vLLM starts drafts on a pipelined worker since its V2 runner's pipelined drafters, not before."""
    args = ([8, 8], [2, 1], 1, 1, True)
    assert startable("vllm", *args).tolist() == [True, True]  # the newest release
    assert startable("vllm", *args, version="0.12.0").tolist() == [False, True]
    assert startable("vllm", *args, version="0.33.0").tolist() == [True, True]
    assert "V2 model runner" in why_not("vllm", 8, 2, 1, 1, True, "0.18.0")
    point = {"mode": "agg", "tp": 8, "pp": 2, "ep": 1, "attention_dp": 1, "spec": "mtp-k2@AL2.27"}
    assert launchable(point, "vllm") == (True, "") and not launchable(point, "vllm", "0.12.0")[0]

    from simfront.api import GpuSet, get_model
    from simfront.hardware import get_hardware
    from simfront.search import SearchSpace, search
    from simfront.serving import Workload

    model, gpus, wl = get_model("deepseek-r1"), GpuSet(count=16, hardware=get_hardware("h100_sxm")), Workload(isl=1024, osl=1024)
    res = search(model, gpus, wl, SearchSpace(precisions=["fp8_block"], modes=("agg",), engine="vllm", engine_version="0.12.0"))
    assert not ((np.asarray(res.points["pp"]) > 1) & (np.asarray(res.points["spec"]) != "none")).any()


def test_explain_says_when_the_engine_it_prices_would_not_start_the_worker():
    from simfront.api import explain

    kw = dict(tp=8, pp=2, batch=4, isl=1024, osl=1024, spec="mtp", spec_k=2, precision="fp8_block")
    assert "feature-combination-matrix" in explain("deepseek-r1", "16xH100", engine="trtllm", **kw)["engine_refuses"]
    assert explain("deepseek-r1", "16xH100", engine="sglang", **kw)["engine_refuses"] is None
    assert "disaggregated prefill" in explain("deepseek-r1", "16xH100", engine="sglang", engine_version="0.5.12", **kw)["engine_refuses"]
    assert explain("deepseek-r1", "16xH100", **kw)["engine_refuses"] is None  # the average engine: no rules

"""Capacity planning, launch commands for planned points, GPU-set comparison (simfront/planning.py)."""

from __future__ import annotations

import math
import shlex

import numpy as np
import pytest
import yaml

from simfront import api, report
from simfront.errors import SimfrontError
from simfront.hardware import get_hardware, parse_gpus
from simfront.models import get_model
from simfront.pareto import sla_mask
from simfront.planning import DEFAULT_HARDWARE, HOURS_PER_MONTH, launch_for, plan
from simfront.api import compare_gpus as compare
from simfront.results import FRONTIER_FIELDS, layout_label, point_dict
from simfront.search import SearchSpace, make_spec, search
from simfront.serving import DEFAULT_CHUNK_TOKENS, Workload

MODEL = "deepseek-r1"
ISL, OSL, RATE, TTFT, TPOT = 8192, 1024, 20.0, 2000.0, 30.0
LAYOUT_KEYS = ("mode", "tp", "pp", "ep", "attention_dp", "batch", "precision", "kv_dtype", "spec",
               "prefill_tp", "prefill_ep", "prefill_attention_dp", "prefill_batch")


@pytest.fixture(scope="module")
def planned() -> dict:
    return plan(MODEL, RATE, ISL, OSL, ttft_ms=TTFT, tpot_ms=TPOT)


@pytest.fixture(scope="module")
def planned_disagg() -> dict:
    """The same plan with only disaggregated deployments offered (whether disagg is the cheapest depends on the fit)."""
    return plan(MODEL, RATE, ISL, OSL, ttft_ms=TTFT, tpot_ms=TPOT, hardware=["b200", "h200"], modes=["disagg"])


def _feasible(res: dict) -> list[dict]:
    return [r for r in res["rows"] if r["feasible"]]


def test_plan_has_every_default_gpu_sorted_by_cost(planned):
    rows = planned["rows"]
    assert sorted(r["gpu"] for r in rows) == sorted(DEFAULT_HARDWARE)
    ok = _feasible(planned)
    assert len(ok) >= 4, [r.get("reason") for r in rows]
    costs = [r["usd_per_hour"] for r in ok]
    assert costs == sorted(costs)
    assert all(r["feasible"] for r in rows[: len(ok)])  # infeasible rows come last
    for r in rows[len(ok):]:
        assert r["reason"] and "\n" not in r["reason"]


def test_plan_is_plain_json(planned):
    import json

    doc = json.loads(json.dumps(planned))  # no numpy scalars, no NaN
    assert doc["workload"] == {"isl": ISL, "osl": OSL, "rate": RATE, "prefix_hit": 0.0}
    assert doc["sla"] == {"ttft_ms": TTFT, "tpot_ms": TPOT, "min_tok_s_user": None}


def test_feasible_rows_meet_sla_and_rate(planned):
    for r in _feasible(planned):
        p = r["point"]
        assert r["ttft_ms"] <= TTFT and r["tpot_ms"] <= TPOT
        assert r["headroom"] >= 1.0 and r["capacity_requests_s"] >= RATE
        assert r["headroom"] == pytest.approx(r["capacity_requests_s"] / RATE)
        price = get_hardware(r["gpu"]).price_usd_per_hour
        assert r["usd_per_hour"] == pytest.approx(r["num_gpus"] * price)
        assert r["monthly_usd"] == pytest.approx(r["usd_per_hour"] * HOURS_PER_MONTH)
        # the GPUs counted are exactly the workers of the configuration
        if r["mode"] == "agg":
            assert r["num_gpus"] == p["replicas"] * p["tp"] * p["attention_dp"] * p["pp"]
        else:
            assert r["num_gpus"] == (p["decode_workers"] * p["tp"] * p["attention_dp"] * p["pp"]
                                     + p["prefill_workers"] * p["prefill_tp"] * p["prefill_attention_dp"])
        assert p["layout"] == r["layout"] == layout_label(p)
        assert p["gpus_used"] == r["num_gpus"]
        assert set(FRONTIER_FIELDS) <= set(p)
        assert p["requests_s"] == pytest.approx(r["capacity_requests_s"], rel=1e-4)


def _space_for(p: dict, model) -> SearchSpace:
    weights = p["precision"].split("+kv")[0]
    spec = None
    if p["spec"] != "none":
        method, rest = p["spec"].split("-k")
        k, acc = rest.split("@")
        spec = [make_spec(method, int(k), None if acc.startswith("AL") else float(acc), model)]
    return SearchSpace(precisions=[weights], kv_dtypes=[p["kv_dtype"]], specs=spec or [make_spec("none")], modes=(p["mode"],))


def test_feasible_row_is_a_configuration_of_the_search(planned, monkeypatch):
    """Each row's layout is in the search of its GPU set, with the same latencies. The search here pairs every
    prefill and decode configuration: its pruning of large pair counts keeps a decode configuration only where none of
    its worker size decodes faster with more slots, which serves the frontier but not a TTFT bound (fewer slots, a
    shorter prefill queue), and the plan's pick under one can be such a configuration."""
    import simfront.search as search_module

    monkeypatch.setattr(search_module, "MAX_FULL_PAIRS", 10**12)
    m = get_model(MODEL)
    for r in _feasible(planned):
        p = r["point"]
        gset = parse_gpus(r["search_gpus"])
        assert gset.hardware.id == r["gpu"] and gset.count <= r["num_gpus"]
        pts = search(m, gset, Workload(isl=ISL, osl=OSL), _space_for(p, m)).points
        hit = np.ones(pts["tp"].size, dtype=bool)
        for k in LAYOUT_KEYS:
            col = pts[k]
            hit &= (col.astype(str) == p[k]) if isinstance(p[k], str) else (np.round(col.astype(float)) == p[k])
        assert hit.any(), f"{r['gpu']}: {r['layout']} not in the search of {r['search_gpus']}"
        i = np.nonzero(hit)[0]
        same = np.isclose(pts["tpot_ms"][i], p["tpot_ms"], rtol=1e-5)
        if p["mode"] == "agg":  # a disaggregated TTFT depends on the worker counts (prefill queue), sized per rate
            same &= np.isclose(pts["ttft_ms"][i], p["ttft_ms"], rtol=1e-5)
        assert same.any()
        j = i[same][0]
        # the search's rate for this configuration on its smallest set: one worker (agg); a disaggregated
        # row's rate is its own deployment's (worker counts grown until the evaluator serves the rate)
        if p["mode"] == "agg":
            assert pts["requests_s"][j] / pts["replicas"][j] == pytest.approx(r["worker_requests_s"], rel=1e-9)


def test_plan_rows_validate_to_themselves(planned):
    """A plan row, read back as a measured row of its deployment, is predicted as the plan reported it
    (the planner and validation share one deployment evaluator)."""
    from simfront.measured import predict_points

    rows = []
    for r in _feasible(planned):
        p = r["point"]
        row = {"model": MODEL, "gpu": r["gpu"], "isl": ISL, "osl": OSL, "mode": p["mode"], "concurrency": p["concurrency"],
               "precision": p["precision"].split("+kv")[0], "kv_dtype": p["kv_dtype"], "num_gpus": r["num_gpus"],
               "startup_wave_share": 0.0}  # a plan is a steady state, not a benchmark run with a first wave
        if p["spec"] != "none":
            row.update(spec_decoding=p["spec"].split("-k")[0], spec_k=int(p["spec"].split("-k")[1].split("@")[0]))
        if p["mode"] == "agg":
            row.update(tp=p["tp"], pp=p["pp"], ep=p["ep"], attention_dp=p["attention_dp"], batch_size=p["batch"])
        else:
            row.update(prefill_tp=p["prefill_tp"], prefill_ep=p["prefill_ep"], prefill_attention_dp=p["prefill_attention_dp"],
                       prefill_workers=p["prefill_workers"], prefill_batch=p["prefill_batch"] * p["prefill_attention_dp"],
                       decode_tp=p["tp"], decode_pp=p["pp"], decode_ep=p["ep"], decode_attention_dp=p["attention_dp"],
                       decode_workers=p["decode_workers"], decode_batch=p["batch"])
        rows.append((r, row))
    preds = predict_points([row for _, row in rows])
    for (r, _), pr in zip(rows, preds):
        assert "reason" not in pr, pr
        assert pr["predicted_tpot_ms"] == pytest.approx(r["tpot_ms"], rel=1e-3)
        assert pr["predicted_ttft_ms"] == pytest.approx(r["ttft_ms"], rel=1e-3)
        assert pr["predicted_request_throughput"] == pytest.approx(r["capacity_requests_s"], rel=1e-3)
        assert r["capacity_requests_s"] >= RATE


def test_aggregated_plan_is_the_fewest_gpus_over_the_search():
    """Brute force over the search's own points: k = ceil(rate / per-worker rate) workers."""
    rate = 7.0
    res = plan(MODEL, rate, ISL, OSL, ttft_ms=TTFT, tpot_ms=TPOT, hardware=["h200"], modes=["agg"])
    row = res["rows"][0]
    assert row["feasible"] and row["mode"] == "agg"
    pts = search(get_model(MODEL), parse_gpus("64xh200"), Workload(isl=ISL, osl=OSL), SearchSpace(modes=("agg",), chunk_tokens=(int(DEFAULT_CHUNK_TOKENS),))).points  # the plan sweeps one token budget
    worker = pts["tp"] * pts["attention_dp"] * pts["pp"]
    # the plan offers only launchable workers: a worker past one node fills whole nodes (planning._launchable)
    ok = sla_mask(pts, TTFT, TPOT) & ((worker <= 8) | (worker % 8 == 0))
    need = np.ceil(rate / (pts["requests_s"] / pts["replicas"])) * worker
    assert row["num_gpus"] == int(need[ok].min())
    k = row["replicas"]
    assert row["capacity_requests_s"] * (k - 1) / k < rate <= row["capacity_requests_s"]  # one worker fewer falls short


def test_impossible_sla_gives_reasons(planned):
    res = plan(MODEL, RATE, ISL, OSL, ttft_ms=TTFT, tpot_ms=0.1)
    assert len(res["rows"]) == len(DEFAULT_HARDWARE)
    for r in res["rows"]:
        assert r["feasible"] is False
        assert "TPOT" in r["reason"] and "best reachable" in r["reason"]


def test_a_rate_out_of_reach_without_an_sla_says_so():
    res = plan(MODEL, 1e7, ISL, OSL, hardware=["b200"], max_gpus=64)
    r = res["rows"][0]
    assert r["feasible"] is False and "serves 1e+07 req/s within 64 GPUs" in r["reason"] and "SLA" not in r["reason"]
    # the most the GPUs could serve is named, and it is an upper bound: a rate just under it is served
    most = float(r["reason"].split("at most about ")[1].split(" req/s")[0].replace(",", ""))
    assert 0 < most < 1e7
    assert plan(MODEL, 0.5 * most, ISL, OSL, hardware=["b200"], max_gpus=64)["rows"][0]["feasible"]
    assert not plan(MODEL, 1.01 * most, ISL, OSL, hardware=["b200"], max_gpus=64)["rows"][0]["feasible"]


def test_memory_reason_names_fewest_gpus():
    res = plan(MODEL, 1.0, ISL, OSL, hardware=["h100"], max_gpus=8)
    r = res["rows"][0]
    assert r["feasible"] is False and "fit" in r["reason"] and r["min_gpus"] and r["min_gpus"] > 8


def test_prices_override_changes_cost(planned):
    res = plan(MODEL, RATE, ISL, OSL, ttft_ms=TTFT, tpot_ms=TPOT, prices={"H200": 1.0, "gb200": 100.0})
    by = {r["gpu"]: r for r in res["rows"]}
    base = {r["gpu"]: r for r in planned["rows"]}
    assert by["h200_sxm"]["usd_per_hour"] == pytest.approx(by["h200_sxm"]["num_gpus"] * 1.0)
    assert by["h200_sxm"]["usd_per_hour"] < base["h200_sxm"]["usd_per_hour"]
    assert by["gb200"]["usd_per_hour"] == pytest.approx(by["gb200"]["num_gpus"] * 100.0)
    assert res["rows"][0]["gpu"] != "gb200" and [r["usd_per_hour"] for r in _feasible(res)] == sorted(r["usd_per_hour"] for r in _feasible(res))
    with pytest.raises(SimfrontError):
        plan(MODEL, RATE, ISL, OSL, prices={"H200": -1.0}, hardware=["h200"])


def test_progress_called_per_gpu_type():
    seen = []
    plan(MODEL, RATE, ISL, OSL, ttft_ms=TTFT, tpot_ms=TPOT, hardware=["b200", "gb200"], progress=seen.append)
    assert len(seen) == 2 and seen[0].startswith("b200_sxm") and seen[1].startswith("gb200")


@pytest.mark.parametrize("bad", [dict(rate=0), dict(rate=-1), dict(rate=1, hardware=["nosuchgpu"]), dict(rate=1, tpot_ms=-5),
                                 dict(rate=1, precision="fp7")])
def test_bad_input_is_one_line_error(bad):
    with pytest.raises(SimfrontError):
        plan(MODEL, isl=ISL, osl=OSL, **bad)


# ---------------------------------------------------------------------------------------------
# launch_for


def _val(cmd: str, flag: str) -> str:
    t = shlex.split(cmd)
    assert flag in t, f"{flag} missing from {cmd}"
    return t[t.index(flag) + 1]


def test_launch_for_disagg_plan_row_names_both_roles(planned_disagg):
    row = next(r for r in _feasible(planned_disagg) if r["mode"] == "disagg")
    p = row["point"]
    out = launch_for(p, MODEL, row["gpu"], "sglang", ISL, OSL)
    assert out["roles"] == ["prefill", "decode", "router"]
    pre, dec = out["commands"][0], out["commands"][1]
    assert _val(pre, "--tp-size") == str(p["prefill_tp"] * p["prefill_attention_dp"])
    assert _val(dec, "--tp-size") == str(p["tp"] * p["attention_dp"])
    if p["ep"] > 1:
        assert _val(dec, "--ep-size") == str(p["ep"])
    if p["attention_dp"] > 1:
        assert _val(dec, "--attn-dp-size") == str(p["attention_dp"])
    assert _val(dec, "--cuda-graph-max-bs-decode") == str(p["batch"])
    assert _val(dec, "--kv-cache-dtype") == ("fp8_e4m3" if p["kv_dtype"] == "fp8" else "auto")
    if p["spec"].startswith("mtp"):
        assert _val(dec, "--speculative-algorithm") == "NEXTN"
    assert out["commands"][2].count("--prefill") == p["prefill_workers"]
    side = yaml.safe_load(out["sidecar"])
    assert side["num_gpus"] == row["num_gpus"] == out["num_gpus"]
    assert side["prefill_workers"] == p["prefill_workers"] and side["decode_workers"] == p["decode_workers"]  # flat measured-point fields
    assert (side["decode_tp"], side["decode_ep"], side["decode_attention_dp"], side["decode_pp"]) == (p["tp"], p["ep"], p["attention_dp"], p["pp"])
    assert _val(out["benchmark"], "--max-concurrency") == str(p["concurrency"])


def test_launch_for_aggregated_frontier_point_all_engines():
    res = api.predict(MODEL, "8xH200", isl=1024, osl=1024, modes=["agg"], precision="fp8_block", kv_dtype="fp8")
    pts = res.points  # an attention-DP configuration the search offered (on the frontier or not)
    i = int(np.nonzero((pts["attention_dp"] > 1) & (pts["ep"] == pts["tp"] * pts["attention_dp"]) & (pts["tp"] == 1))[0][0])
    p = point_dict(pts, i)
    v = launch_for(p, MODEL, "8xH200", "vllm", 1024, 1024)["commands"][0]
    assert _val(v, "--tensor-parallel-size") == str(p["tp"]) and _val(v, "--data-parallel-size") == str(p["attention_dp"])
    assert "--enable-expert-parallel" in v and _val(v, "--max-num-seqs") == str(p["batch"] * p["pp"])
    assert _val(v, "--kv-cache-dtype") == "fp8"
    t = launch_for(p, MODEL, "h200_sxm", "trtllm", 1024, 1024)
    cmd = t["commands"][0]
    assert _val(cmd, "--tp_size") == str(p["tp"] * p["attention_dp"]) and _val(cmd, "--ep_size") == str(p["ep"])
    assert _val(cmd, "--max_batch_size") == str(p["batch"] * p["pp"])
    assert yaml.safe_load(t["files"]["extra_llm_api_options.yaml"])["enable_attention_dp"] is True
    with pytest.raises(SimfrontError):
        launch_for({"mode": "agg", "tp": 8}, MODEL, "h200", "vllm")


def test_engine_restricted_plan_is_launchable():
    res = plan(MODEL, RATE, ISL, OSL, ttft_ms=TTFT, tpot_ms=TPOT, hardware=["h200", "h100"], engine="trtllm")
    for r in _feasible(res):
        out = launch_for(r["point"], MODEL, r["gpu"], "trtllm", ISL, OSL)
        assert out["num_gpus"] == r["num_gpus"]


# ---------------------------------------------------------------------------------------------
# compare


def test_compare_sets_and_table(tmp_path):
    html = tmp_path / "cmp.html"
    res = compare(MODEL, ["8xH200", "8xB200"], isl=1024, osl=1024, prices={"b200": 6.0})
    report.write_compare_html(res, str(html))
    assert [s["gpus"] for s in res["sets"]] == ["8xh200_sxm", "8xb200_sxm"]
    assert all(s["fits"] and s["frontier"] for s in res["sets"])
    assert res["sets"][1]["price_usd_per_gpu_hour"] == 6.0
    lv = res["levels"]
    assert 3 <= len(lv) <= 6 and lv == sorted(lv)
    assert len(res["table"]) == len(lv) * 2
    for row in res["table"]:  # levels lie inside both frontiers
        s = next(s for s in res["sets"] if s["gpus"] == row["gpus"])
        assert row["tok_s_gpu"] is not None and row["tok_s_gpu"] > 0
        assert row["tok_s_per_usd_hour"] == pytest.approx(row["tok_s_gpu"] / s["price_usd_per_gpu_hour"])
        reach = [q["tok_s_gpu"] for q in s["frontier"] if q["tok_s_user"] >= row["tok_s_user"]]
        assert row["tok_s_gpu"] == pytest.approx(max(reach))
    assert html.exists() and "8xb200_sxm" in html.read_text()
    assert res["html"] == str(html)
    with pytest.raises(SimfrontError):
        compare(MODEL, [])
    assert not math.isnan(res["table"][0]["usd_per_mtok"])


def test_no_smaller_gpu_set_of_the_search_serves_the_rate_within_the_sla(planned):
    """The plan's GPU count is the search's minimum one node below it: no configuration the search prices on a set one
    scale-up node smaller serves RATE within the SLA. (The plan used to size each disaggregated side from its cheapest
    row alone, and on B200 reported 32 GPUs where 24 serve it: docs/model_changes.md round 28.)"""
    m = get_model(MODEL)
    for r in _feasible(planned):
        if r["gpu"] not in ("b200_sxm", "h200_sxm"):
            continue
        hw = get_hardware(r["gpu"])
        smaller = r["num_gpus"] - hw.scaleup.domain_gpus
        if smaller < 1:
            continue
        pts = search(m, parse_gpus(f"{smaller}x{hw.id}"), Workload(isl=ISL, osl=OSL)).points
        if not pts:
            continue
        ok = (np.asarray(pts["requests_s"]) >= RATE) & (np.asarray(pts["ttft_ms"]) <= TTFT) & (np.asarray(pts["tpot_ms"]) <= TPOT)
        assert not ok.any(), f"{r['gpu']}: plan says {r['num_gpus']} GPUs, the search of {smaller} serves {RATE} req/s"


def test_plan_restricted_to_no_speculation_and_aggregated_serving(capsys):
    """--spec none --mode agg: every row decodes without drafts, aggregated, on the fewest GPUs of a search restricted
    the same way (brute force), never on fewer GPUs than the unrestricted plan; the table shows each row's spec and the
    header the restriction; the JSON records it."""
    rate, kw = 7.0, dict(ttft_ms=TTFT, tpot_ms=TPOT, hardware=["h200"])
    free = plan(MODEL, rate, ISL, OSL, **kw)["rows"][0]
    res = plan(MODEL, rate, ISL, OSL, spec="none", modes=["agg"], **kw)
    row = res["rows"][0]
    assert row["feasible"] and row["spec"] == "none" and row["mode"] == "agg"
    assert row["num_gpus"] >= free["num_gpus"]
    assert res["search"] == {"precision": None, "kv_dtype": None, "spec": "none", "spec_k": None, "acceptance": None,
                             "modes": ["agg"], "layout": None, "max_pp": None, "routing_alpha": 1.01,
                             "two_batch_overlap": False}
    space = SearchSpace(specs=[make_spec("none")], modes=("agg",), chunk_tokens=(int(DEFAULT_CHUNK_TOKENS),))
    pts = search(get_model(MODEL), parse_gpus("64xh200"), Workload(isl=ISL, osl=OSL), space).points
    assert set(pts["spec"]) == {"none"}
    worker = pts["tp"] * pts["attention_dp"] * pts["pp"]
    ok = sla_mask(pts, TTFT, TPOT) & ((worker <= 8) | (worker % 8 == 0))
    assert row["num_gpus"] == int((np.ceil(rate / (pts["requests_s"] / pts["replicas"])) * worker)[ok].min())
    report.print_plan(api.plan(MODEL, rate, isl=ISL, osl=OSL, spec="none", modes=["agg"], **kw))
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("; --spec none, --mode agg")
    assert " spec " in out[1]
    mtp = plan(MODEL, rate, ISL, OSL, spec="mtp", spec_k=2, **kw)["rows"][0]
    assert mtp["spec"].startswith("mtp-k2@")
    with pytest.raises(SimfrontError, match="--spec-k 2 needs a speculative method"):
        plan(MODEL, rate, ISL, OSL, spec_k=2, **kw)


def test_plan_says_whose_acceptance_lengths_a_borrowed_drafter_uses():
    res = plan("minimax-m2.5", 5.0, 1024, 1024, hardware=["h200"])
    row = res["rows"][0]
    assert row["feasible"] and row["spec"].startswith("mtp-")
    assert any(n.startswith("speculative decoding: minimax-m2.5 has no measured acceptance lengths") for n in res["notes"])
    none = plan("minimax-m2.5", 5.0, 1024, 1024, hardware=["h200"], spec="none")
    assert not any("acceptance lengths" in n for n in none["notes"])


def test_plan_notes_chosen_deployments_wider_than_their_familys_calibration_runs(monkeypatch):
    """The wide-EP note of predict, for plan rows: with the calibrated EP range narrowed to 2, a B200 plan whose
    chosen deployment spreads experts over 4 or more ranks says so, names the GPU family, and the routing skew given;
    --routing-skew balanced prices the plan with balanced experts and records it."""
    import simfront.planning as planning

    monkeypatch.setattr(planning, "calibrated_layouts", lambda family=None: {"tp": [1, 8], "pp": [1, 1], "ep": [1, 2],
                                                                            "attention_dp": [1, 8], "gpus_per_worker": [1, 8],
                                                                            "spec_k": [0, 3]})
    res = api.plan(MODEL, 100.0, isl=ISL, osl=OSL, ttft_ms=3000, tpot_ms=20, hardware=["b200"])
    row = res["rows"][0]
    assert row["feasible"] and max(row["point"]["ep"], row["point"]["prefill_ep"] or 1) > 2
    said = [n for n in res["notes"] if "spread experts over more than 2 ranks" in n]
    assert len(said) == 1 and said[0].startswith("1 of the 1 chosen deployments on blackwell GPUs")
    assert "power law 1.01" in said[0]
    bal = api.plan(MODEL, 100.0, isl=ISL, osl=OSL, ttft_ms=3000, tpot_ms=20, hardware=["b200"], routing_skew="balanced")
    assert bal["search"]["routing_alpha"] is None
    assert not any("power law" in n for n in bal["notes"])


def test_gpu_compare_gives_a_note_every_set_has_once():
    """A note about the model (every set has it) is printed once, unnamed; a set's own notes keep its name."""
    from simfront.report import gpu_compare_notes

    res = {"sets": [{"gpus": "8xh100_sxm", "notes": ["model note", "h100_sxm: kernel note", "layout note"]},
                    {"gpus": "8xb200_sxm", "notes": ["model note", "layout note b"]}]}
    assert gpu_compare_notes(res) == ["model note", "h100_sxm: kernel note", "8xh100_sxm: layout note",
                                      "8xb200_sxm: layout note b"]
    one = {"sets": [{"gpus": "8xh100_sxm", "notes": ["model note"]}]}
    assert gpu_compare_notes(one) == ["8xh100_sxm: model note"]


def test_a_note_several_gpus_share_is_printed_once_naming_each():
    """The same caveat on three GPUs is one line naming the three, in order of first appearance; a note that names its
    GPU in its own words stays as it is; a note only one GPU has keeps that GPU's name."""
    from simfront.report import gpu_compare_notes, merge_named_notes

    pairs = [("b300_sxm", "b300_sxm: kernel caveat"), ("gb200", "gb200: peaks estimated"), ("gb200", "gb200: kernel caveat"),
             ("b200_sxm", "b200_sxm: kernel caveat"), ("mi355x", "mi355x (cdna4, no calibration data): borrowed"),
             ("b300_sxm", "b300_sxm: kernel caveat")]
    assert merge_named_notes(pairs) == ["b300_sxm, gb200, b200_sxm: kernel caveat", "gb200: peaks estimated",
                                        "mi355x (cdna4, no calibration data): borrowed"]
    res = {"sets": [{"gpus": "8xb200_sxm", "notes": ["b200_sxm: kernel caveat", "layout note"]},
                    {"gpus": "8xb300_sxm", "notes": ["b300_sxm: kernel caveat", "layout note"]},
                    {"gpus": "16xh100_sxm", "notes": ["layout note", "h100_sxm: other"]}]}
    assert gpu_compare_notes(res) == ["layout note", "b200_sxm, b300_sxm: kernel caveat", "h100_sxm: other"]


def test_plan_prints_a_caveat_blackwell_gpus_share_once(capsys):
    report.print_plan(api.plan("deepseek-r1", 2.0, isl=1024, osl=1024, spec="none", modes=["agg"],
                               hardware=["b200", "b300"], precision=["nvfp4"]))
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note: ") and "gemm_nvfp4 priced" in ln]
    assert len(notes) == 1, notes
    assert notes[0].startswith(("note: b200_sxm, b300_sxm: ", "note: b300_sxm, b200_sxm: ")), notes

"""Fidelity checks: residual trends by knob and measured frontiers against predicted ones."""

from __future__ import annotations

import math

from simfront import api
from simfront.export import measured_csv
from types import SimpleNamespace

from simfront.fidelity import knob_bins, layout_class, layout_classes, residual_trends, sweep_interpolated_best


def test_layout_classes_and_bins():
    assert layout_class(8, 1, 1) == "TP" and layout_class(8, 8, 1) == "TP+EP" and layout_class(1, 8, 8) == "DPA+EP"
    b = knob_bins({"mode": "agg", "tp": 1, "attention_dp": 8, "ep": 8, "num_gpus": 8, "concurrency": 512})
    assert b["requests per rank"] == "33-128" and b["layout class"] == "DPA+EP" and b["attention-DP size"] == "8"
    assert b["TP size"] == "1" and b["EP size"] == "8"
    d = knob_bins({"mode": "disagg", "decode_tp": 8, "decode_ep": 8, "decode_attention_dp": 1, "decode_workers": 2, "concurrency": 8})
    assert d["requests per rank"] == "2-8" and d["layout class"] == "TP+EP" and d["mode"] == "disagg"
    assert d["TP size"] == "8"  # a disaggregated row's knobs are its decode workers'


def test_engine_release_bins():
    from simfront.fidelity import engine_release

    assert engine_release("trtllm", "1.2.0rc6.post2") == "trtllm 1.2"  # major.minor from 1.0 on
    assert engine_release("sglang", "v0.5.12.post1") == "sglang 0.5.12"  # before 1.0 the patch number is a release
    assert engine_release("vllm", None) == "vllm ?" and engine_release("vllm", "nightly") == "vllm ?"
    b = knob_bins({"mode": "agg", "tp": 8, "engine": "trtllm", "engine_version": "1.3.0rc14", "concurrency": 4})
    assert b["engine release"] == "trtllm 1.3"


def test_layout_classes_of_arrays_match_the_scalar_rule():
    import numpy as np

    tp, ep, dp = np.array([8, 8, 1, 4]), np.array([1, 8, 8, 4]), np.array([1, 1, 8, 2])
    assert list(layout_classes(ep, dp)) == [layout_class(*x) for x in zip(tp, ep, dp)]


def test_measured_class_share_says_how_far_the_measured_class_is_from_the_frontier(tmp_path):
    """A frontier point of one class, measured at 0.7x its predicted throughput: the measured Pareto point's class
    share is its class's best over the frontier's best at that tok/s/user, in (0, 1], and 1 where they agree."""
    front = api.predict("deepseek-r1", "8xB200", modes=["agg"], precision=["nvfp4"], kv_dtype=["fp8"]).frontier
    path = tmp_path / "m.csv"
    path.write_text(measured_csv([dict(p, tok_s_gpu=p["tok_s_gpu"] * 0.7) for p in front], "deepseek-r1", "B200", 1024, 1024, "default"))
    rows = api.validate([str(path)], frontier=True)["fidelity"]["frontiers"]["points_by_mode"]
    assert rows
    for r in rows:
        share = r["measured_class_share"]
        assert share is not None and 0.0 <= share <= 1.0 + 1e-9
        if r["measured_class"] == r["predicted_class"]:
            assert share >= 0.999


def test_trends_are_medians_of_log_ratios():
    rows = [{"mode": "agg", "tp": 8, "concurrency": 4, "tpot_ms": 10.0, "predicted_tpot_ms": 10.0 * r} for r in (0.5, 1.0, 2.0)]
    t = {(r["knob"], r["bin"]): r for r in residual_trends(rows)}
    row = t[("layout class", "TP")]
    assert row["count"] == 3 and math.isclose(row["tpot_ms_ratio"], 1.0) and not row["judged"]


def test_predicted_frontier_validates_as_its_own_frontier(tmp_path):
    """A frontier written as measured rows compares to itself: ratio 1 at every point, layout classes agree."""
    front = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], precision=["fp8_block"], kv_dtype=["fp8"]).frontier
    path = tmp_path / "self.csv"
    path.write_text(measured_csv(front, "llama-3.1-70b", "H100", 1024, 1024, "default"))
    res = api.validate([str(path)], frontier=True)
    fid = res["fidelity"]
    s = fid["frontiers"]["summary_by_mode"]["all"]  # agg points against simfront's agg frontier: itself
    assert s["reached"] == s["points"] > 0
    assert 0.98 <= s["geomean_ratio"] <= 1.02
    assert s["class_agreement"] == 1.0 and s["class_and_drafting_agreement"] == 1.0
    # the measured class is the frontier's own there: its best predicted point is the frontier's (share 1)
    assert s["class_near"] == 1.0 and s["median_measured_class_share"] >= 0.99
    # simfront's best at each point is the point itself: flagged outside the calibration layouts as predict flags it
    flagged = [bool(p["outside_calibration"]) for p in front]
    assert any(flagged) and not all(flagged)  # this frontier pipelines (PP 2) at one end
    assert math.isclose(s["outside_share"], sum(flagged) / len(flagged), abs_tol=1e-3)
    assert 0.98 <= s["geomean_ratio_inside"] <= 1.02
    # each point drafts (or not) as itself: simfront's best drafting the same way there is the point itself
    assert 0.98 <= s["geomean_ratio_same_drafting"] <= 1.02
    assert sorted(map(bool, (r["predicted_outside_calibration"] for r in fid["frontiers"]["points_by_mode"]))) == sorted(flagged)
    # (b) simfront's best at each point's own concurrency is at least that point (it is among the candidates)
    assert s["at_load_points"] == s["points"] and s["at_load_geomean_ratio"] >= 0.99
    # against both modes simfront can only do as well or better (disagg searched too), never worse
    both = fid["frontiers"]["summary"]["all"]
    assert both["points"] == s["points"] and both["geomean_ratio"] >= 0.98
    assert all(r["measured_class"].startswith("agg ") for r in fid["frontiers"]["points"])
    assert all(abs(t["tpot_ms_log_ratio"]) < 0.01 for t in fid["trends"] if t["tpot_ms_log_ratio"] is not None)


def test_frontier_sweep_of_the_checkpoint_as_shipped_is_named_by_its_format(tmp_path):
    """DeepSeek-R1's block-FP8 checkpoint, measured as "fp8", is searched as the checkpoint as shipped and its
    sweep is reported as fp8_block (not "native")."""
    front = api.predict("deepseek-r1", "8xB200", modes=["agg"], precision=["native"], kv_dtype=["fp8"]).frontier[:3]
    path = tmp_path / "r1.csv"
    text = measured_csv(front, "deepseek-r1", "B200", 1024, 1024, "trtllm")
    path.write_text(text)
    fid = api.validate([str(path)], frontier=True)["fidelity"]["frontiers"]
    assert fid["points"] and {r["precision"] for r in fid["points"]} == {"fp8_block"}
    assert all("/fp8_block" in k for k in fid["summary"] if k != "all")


def _pt(x, y, tp=8, c=1):
    return SimpleNamespace(tok_s_per_user=x, output_tok_s_per_gpu=y, mode="agg", engine="e", num_gpus=8, tp=tp, concurrency=c)


def test_a_deployments_sweep_reads_as_a_line_between_its_measured_loads():
    # one deployment at two loads: 100 tok/s/user at 50 tok/s/GPU, 50 tok/s/user at 150
    sweep = [_pt(100.0, 50.0, c=4), _pt(50.0, 150.0, c=16)]
    assert sweep_interpolated_best(sweep, 75.0) == 100.0  # half way along the line (the step function says 50)
    assert sweep_interpolated_best(sweep, 100.0) == 50.0
    assert math.isnan(sweep_interpolated_best(sweep, 120.0))  # no point reaches it
    # another deployment measured once forms no line: its point counts as a step only
    other = [_pt(80.0, 90.0, tp=4)]
    assert sweep_interpolated_best(other, 70.0) == 90.0 and math.isnan(sweep_interpolated_best(other, 81.0))
    # the best of both: the line at 79 tok/s/user (150 - 29 / 50 * 100 = 92) beats the single point's 90
    assert math.isclose(sweep_interpolated_best(sweep + other, 79.0), 92.0)
    # at 80 tok/s/user the line and the single point both give 90
    assert sweep_interpolated_best(sweep + other, 80.0) == 90.0


def test_a_sweep_holds_every_kv_cache_format_of_its_runs(tmp_path):
    """Issue 12's sweep is (model, GPU, precision, ISL/OSL): runs with a BF16 KV cache at half the throughput of the
    FP8-cache runs are dominated in the one measured Pareto set, not a sweep of their own, and simfront's frontier
    for the sweep searches both formats."""
    front = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], precision=["fp8_block"], kv_dtype=["fp8"]).frontier
    alone = tmp_path / "fp8.csv"
    alone.write_text(measured_csv(front, "llama-3.1-70b", "H100", 1024, 1024, "default"))
    both = tmp_path / "both.csv"
    slower = [dict(p, kv_dtype="bf16", tok_s_gpu=p["tok_s_gpu"] * 0.5) for p in front]
    both.write_text(measured_csv(front + slower, "llama-3.1-70b", "H100", 1024, 1024, "default"))
    one = api.validate([str(alone)], frontier=True)["fidelity"]["frontiers"]["summary"]
    two = api.validate([str(both)], frontier=True)["fidelity"]["frontiers"]["summary"]
    assert two["all"]["points"] == one["all"]["points"] > 0
    assert set(two) == set(one)  # the same sweeps (one), named by GPU and precision


def test_validate_frontier_from_the_command_line(tmp_path):
    """`simfront validate FILE --frontier --frontier-html PAGE`: the knob-trend table and both frontier tables on
    stdout, an offline page with a measured and a predicted trace per sweep, and `--json` carrying the same
    `fidelity` section the API returns."""
    import json
    import subprocess
    import sys

    front = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], precision=["fp8_block"], kv_dtype=["fp8"]).frontier
    path = tmp_path / "self.csv"
    path.write_text(measured_csv(front, "llama-3.1-70b", "H100", 1024, 1024, "default"))
    page = tmp_path / "fid.html"

    def cli(*args):
        p = subprocess.run([sys.executable, "-m", "simfront", "validate", str(path), "--frontier", "-q", *args],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        return p.stdout

    out = cli("--frontier-html", str(page))
    assert "residual trends: median predicted/measured by knob bin" in out
    assert "frontiers, sweeps over both modes" in out and "frontiers, each mode apart" in out
    assert "layout class agrees" in out and "geomean pred/meas" in out
    html = page.read_text()
    assert "plotly" in html.lower()
    # plotly's JSON escapes the slash of "1024/1024"
    assert '"name":"measured h100_sxm fp8_block 1024\\u002f1024"' in html
    assert '"name":"predicted h100_sxm fp8_block 1024\\u002f1024"' in html
    doc = json.loads(cli("--json"))
    ref = api.validate([str(path)], frontier=True)["fidelity"]["frontiers"]["summary_by_mode"]["all"]
    got = doc["fidelity"]["frontiers"]["summary_by_mode"]["all"]
    assert got["points"] == ref["points"] > 0 and math.isclose(got["geomean_ratio"], ref["geomean_ratio"], rel_tol=1e-6)


def test_same_drafting_ratio_holds_simfront_to_the_measured_points_drafting(tmp_path):
    """DeepSeek-R1's frontier on 8xB200 drafts (MTP). Written as measured runs that did not draft, each point's
    same-drafting ratio is simfront's best without drafts there over the point: never above the whole frontier's
    ratio, and below it where the frontier's best drafts."""
    front = api.predict("deepseek-r1", "8xB200", modes=["agg"], precision=["nvfp4"], kv_dtype=["fp8"]).frontier
    assert any(p["spec"] != "none" for p in front)
    path = tmp_path / "nodraft.csv"
    path.write_text(measured_csv([dict(p, spec="none") for p in front], "deepseek-r1", "B200", 1024, 1024, "default"))
    fid = api.validate([str(path)], frontier=True)["fidelity"]["frontiers"]
    rows = [r for r in fid["points_by_mode"] if r["ratio"]]
    assert rows and all(r["measured_spec"] == "none" for r in rows)
    for r in rows:
        if r["ratio_same_drafting"] is not None:
            assert r["ratio_same_drafting"] <= r["ratio"] * (1 + 1e-9)
    assert any(r["ratio_same_drafting"] is None or r["ratio_same_drafting"] < 0.99 * r["ratio"] for r in rows)
    s = fid["summary_by_mode"]["all"]
    assert s["geomean_ratio_same_drafting"] is not None and s["geomean_ratio_same_drafting"] <= s["geomean_ratio"] + 1e-9
    # where simfront's best there drafts, the class may agree but the drafting does not
    for r in rows:
        if r["predicted_spec"] not in (None, "none"):
            assert r["class_and_drafting_agree"] is False
    assert s["class_and_drafting_agreement"] <= s["class_agreement"]

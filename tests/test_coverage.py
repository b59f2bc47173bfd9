"""Frontier points outside the layouts of the measured calibration runs are named, flagged and widened."""

from __future__ import annotations

from pathlib import Path

import pytest

from simfront import api
from simfront.coverage import calibrated_layouts, layout_ranges, outside_calibration, outside_note, point_workers, worker
from simfront.ingest import load_measurements
from simfront.measured import build_groups, measured_layout_ranges, measured_layout_ranges_by_family

from cli_runner import run_cli

ROOT = Path(__file__).resolve().parent.parent
RANGES = {"tp": [1, 16], "pp": [1, 1], "ep": [1, 16], "attention_dp": [1, 64], "gpus_per_worker": [1, 64], "spec_k": [0, 3]}


def _point(mode="agg", tp=8, pp=1, ep=1, dp=1, spec="none", ptp=0, pep=0, pdp=0):
    return {"mode": mode, "tp": tp, "pp": pp, "ep": ep, "attention_dp": dp, "spec": spec,
            "prefill_tp": ptp, "prefill_ep": pep, "prefill_attention_dp": pdp}


def test_outside_calibration_names_each_knob_outside_the_measured_range():
    assert outside_calibration(_point(), RANGES) == []
    assert outside_calibration(_point(pp=2), RANGES) == ["PP 2 (measured 1-1)"]
    # a worker of 8 x 2 x 8 = 128 GPUs is past the largest measured worker as well
    assert outside_calibration(_point(tp=8, pp=2, dp=8, ep=64), RANGES) == [
        "PP 2 (measured 1-1)", "EP 64 (measured 1-16)", "GPUs per worker 128 (measured 1-64)"]
    assert outside_calibration(_point(spec="mtp-k4@AL2.70"), RANGES) == ["draft tokens per step 4 (measured 0-3)"]
    # disaggregated: the prefill worker is checked too (no drafts there); each knob once, the value farthest out
    p = _point("disagg", tp=1, dp=8, ep=32, ptp=1, pep=64, pdp=8)
    assert outside_calibration(p, RANGES) == ["EP 64 (measured 1-16)"]
    assert outside_calibration(_point("disagg", tp=1, dp=8, ep=8, ptp=8, pep=8, pdp=1), RANGES) == []


def test_outside_note_names_the_knobs_in_order():
    assert outside_note("2 of 5 frontier points", [[], []]) is None
    n = outside_note("2 of 5 frontier points", [["EP 32 (measured 1-16)"], ["PP 2 (measured 1-1)", "EP 64 (measured 1-16)"]], 1.5)
    assert n.startswith("2 of 5 frontier points use a layout outside") and "(PP, EP;" in n and n.endswith("widened x1.5")
    assert "widened" not in outside_note("plan", [["PP 3 (measured 1-1)"]])


def test_point_workers_and_ranges():
    ws = point_workers(_point("disagg", tp=2, pp=2, dp=4, ep=8, spec="mtp-k2@AL2.27", ptp=4, pep=4, pdp=2))
    assert ws == [worker(2, 2, 8, 4, 2), worker(4, 1, 4, 2)]
    assert ws[0]["gpus_per_worker"] == 16 and ws[1]["spec_k"] == 0
    assert layout_ranges(ws) == {"tp": [2, 4], "pp": [1, 2], "ep": [4, 8], "attention_dp": [2, 4], "gpus_per_worker": [8, 16],
                                 "spec_k": [0, 2]}
    assert layout_ranges([]) == {}


def test_shipped_ranges_are_those_of_the_fitted_runs():
    """hardware/efficiency/serving.yaml's calibrated_layouts = the workers of the rows scripts/calibrate_serving.py fits."""
    ing = load_measurements([str(ROOT / "measurements" / n) for n in ("measured_serving.csv", "inferencemax_b200_h100.csv")])
    _, base = build_groups(ing.points)
    rows = [i for i, b in enumerate(base) if "reason" not in b and "measurement_flag" not in b]
    assert calibrated_layouts() == measured_layout_ranges(ing.points, rows)
    assert calibrated_layouts()["pp"] == [1, 1]  # no measured run pipelines: every PP > 1 point is flagged
    # per GPU family: each family's own runs; a family without runs (CDNA3) is judged against every run
    by = measured_layout_ranges_by_family(ing.points, rows)
    assert set(by) == {"hopper", "blackwell"}
    assert calibrated_layouts("hopper") == by["hopper"] and calibrated_layouts("blackwell") == by["blackwell"]
    assert calibrated_layouts("cdna3") == calibrated_layouts() == calibrated_layouts(None)
    assert by["hopper"]["gpus_per_worker"][1] < calibrated_layouts()["gpus_per_worker"][1]  # H100 workers: two nodes at most


@pytest.fixture(scope="module")
def hopper():
    # 16 H200s: two-node deployments (pipelines, 16-GPU workers) beside single-node ones on one frontier (48 H100s,
    # where DeepSeek-R1 fits no single node, now gives pipelines only)
    return api.predict("deepseek-r1", "16xH200")


def test_predict_flags_and_widens_points_outside(hopper):
    front = hopper["frontier"]
    flagged = [p for p in front if p["outside_calibration"]]
    inside = [p for p in front if not p["outside_calibration"]]
    assert flagged and inside
    for p in front:  # every pipelined point is flagged, by name
        assert (p["pp"] > 1) <= any(k.startswith("PP ") for k in p["outside_calibration"])
        assert p["outside_calibration"] == outside_calibration(p, calibrated_layouts("hopper"))

    def width(p):  # the band's log width around the prediction
        return p["tpot_ms_high"] / p["tpot_ms_low"]

    assert min(width(p) for p in flagged) > max(width(p) for p in inside)
    note = [n for n in hopper["notes"] if "outside the measured runs" in n]
    assert len(note) == 1 and note[0].startswith(f"{len(flagged)} of the {len(front)} frontier points")


def test_predict_inside_calibration_has_no_flag():
    res = api.predict("gpt-oss-120b", "8xB200", modes=["agg"])
    assert all(p["outside_calibration"] == [] for p in res["frontier"])
    assert not any("outside the measured runs" in n for n in res["notes"])


def test_table_marks_points_outside(capsys):
    code, out, _ = run_cli(["predict", "--model", "deepseek-r1", "--gpus", "48xH100", "--all"], capsys)
    assert code == 0
    rows = [ln for ln in out.splitlines() if " agg " in ln or " disagg " in ln]
    assert any(ln[1] == "~" and "PP" in ln for ln in rows)
    assert all(ln[1] == "~" for ln in rows if " PP" in ln)
    assert "~ = layout outside the measured calibration runs" in out


def test_plan_rows_carry_the_flag_and_a_note(capsys):
    res = api.plan("deepseek-r1", 20, isl=8192, osl=1024, ttft_ms=2000, tpot_ms=30, hardware=["h100_sxm", "b200_sxm"])
    rows = [r for r in res["rows"] if r["feasible"]]
    assert rows
    for r in rows:
        fam = {"h100_sxm": "hopper", "b200_sxm": "blackwell"}[r["gpu"]]  # each judged against its own family's runs
        assert r["outside_calibration"] == outside_calibration(r["point"], calibrated_layouts(fam)) == r["point"]["outside_calibration"]
    off = [r["gpu"] for r in rows if r["outside_calibration"]]
    assert bool(off) == any("outside the measured runs" in n for n in res["notes"])
    code, out, _ = run_cli(["plan", "--model", "deepseek-r1", "--rate", "20", "--isl", "8192", "--osl", "1024", "--ttft", "2000",
                            "--tpot", "30", "--hardware", "h100_sxm,b200_sxm", "--quiet"], capsys)
    assert code == 0
    for r in rows:
        line = next(ln for ln in out.splitlines() if ln.startswith(r["gpu"] + " "))
        assert ("~" + r["layout"] in line) == bool(r["outside_calibration"])

"""scripts/acceptance_from_itl.py: a run's acceptance length from its ITL / TPOT and the stream interval of its
image's runs without speculation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("acceptance_from_itl", ROOT / "scripts" / "acceptance_from_itl.py")
af = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(af)


def _run(hw, fw, image, spec, itl_ms, tpot_ms):
    return {"hardware": hw, "framework": fw, "image": image, "spec_method": spec, "isl": 1024, "osl": 1024, "conc": 8,
            "metrics": {"mean_itl": itl_ms / 1e3, "mean_tpot": tpot_ms / 1e3}}


def test_interval_from_plain_runs_of_the_same_image():
    runs = [_run("b200", "trt", "a", "none", 99.5, 10.0),  # streams every 10 steps
            _run("b200", "trt", "a", "mtp", 230.0, 10.0),  # 23 = 10 x 2.3 tokens per step
            _run("b200", "trt", "b", "mtp", 230.0, 10.0)]  # another image: its interval is not known
    rows, left = af.implied_acceptance(runs)
    assert len(rows) == 1 and rows[0]["stream_interval"] == 10
    assert abs(rows[0]["acceptance_length"] - 2.3) < 1e-9 and abs(rows[0]["step_ms"] - 23.0) < 1e-9
    assert sum(left.values()) == 1


def test_the_one_interval_that_gives_a_possible_acceptance():
    runs = [_run("gb200", "dynamo-trt", "x", "none", 200.0, 10.0), _run("gb200", "dynamo-trt", "x", "none", 950.0, 10.0),
            _run("gb200", "dynamo-trt", "x", "mtp", 2140.0, 10.0),  # 214: 2.25 at 95, 10.7 (impossible) at 20
            _run("gb200", "dynamo-trt", "x", "mtp", 600.0, 10.0)]  # 60: 3.0 at 20, 0.63 at 95 -> 20
    rows, _ = af.implied_acceptance(runs)
    assert sorted((r["stream_interval"], round(r["acceptance_length"], 3)) for r in rows) == [(20, 3.0), (95, 2.253)]


def test_engine_default_only_without_any_plain_run_and_token_streams_left_out():
    runs = [_run("h100", "dynamo-sglang", "s", "mtp", 43.0, 19.4),  # no plain run anywhere: SGLang's interval 1
            _run("mi325x", "sglang", "m", "none", 10.0, 10.0), _run("mi325x", "sglang", "m", "mtp", 12.0, 12.0)]
    rows, left = af.implied_acceptance(runs)
    assert [r["hardware"] for r in rows] == ["h100"] and abs(rows[0]["acceptance_length"] - 43.0 / 19.4) < 1e-9
    assert "engine default" in rows[0]["interval_from"]
    assert left == {"ITL equals TPOT: tokens streamed one by one, acceptance not visible": 1}


def test_shipped_snapshot_reads_the_h100_sglang_runs():
    import json

    runs = json.loads((ROOT / "measurements" / "inferencex_api_snapshot.json").read_text())
    rows, _ = af.implied_acceptance(runs)
    h100 = [r["acceptance_length"] for r in rows if r["hardware"] == "h100" and r["framework"] == "dynamo-sglang"]
    assert len(h100) == 15 and all(2.1 < a < 2.6 for a in h100)
    assert all(1.05 < r["acceptance_length"] <= 5.0 for r in rows)


def test_split_of_the_calibration_rows_into_acceptance_and_step():
    """The calibration file's MTP rows that are runs of the snapshot: simfront's acceptance for their recipes' drafts
    is within 15 % of what the runs' streams show (the two-node H100 TPOT gap is the step, not acceptance)."""
    import json

    runs = json.loads((ROOT / "measurements" / "inferencex_api_snapshot.json").read_text())
    rows, _ = af.implied_acceptance(runs)
    split = af.split_calibration_rows(rows)
    h100 = [r for r in split if "H100" in r["gpu"]]
    assert len(h100) == 15 and len(split) == 31
    assert all(0.85 < r["acceptance_measured"] / r["acceptance_predicted"] < 1.15 for r in split)
    for r in split:  # TPOT = step / acceptance on both sides
        assert abs(r["tpot_ratio"] - r["step_ratio"] * r["acceptance_measured"] / r["acceptance_predicted"]) < 0.15 * r["tpot_ratio"]

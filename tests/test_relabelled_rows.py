"""Rows of the serving CSV whose parallel layout cannot be told (calibration/README.md "quirks")."""

from __future__ import annotations

import csv
from pathlib import Path

from simfront.ingest import load_measurements

SERVING = Path(__file__).parent / "data" / "ingest" / "serving_excerpt.csv"


def _rows():
    with SERVING.open() as f:
        return list(csv.DictReader(f))


def _write(tmp_path, rows):
    path = tmp_path / "serving.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return str(path)


def test_tp_size_beyond_the_tp_the_row_id_names_is_skipped(tmp_path):
    base = next(r for r in _rows() if r["mode"] == "agg" and r["id"].endswith("_tp4_epnone_1"))
    ok = dict(base)
    bad = dict(base, id=base["id"].replace("_c192_", "_c96_"), tp_size="16.0", concurrency="96",
               silicon_tpot_ms=str(float(base["silicon_tpot_ms"]) * 0.9))  # another run: its own metrics
    res = load_measurements([_write(tmp_path, [ok, bad])])
    assert [p.tp for p in res.points] == [4]
    (problem,) = res.problems
    assert ":3:" in problem and "names tp4" in problem and "4x1" not in problem and "16x1 GPUs" in problem


def test_a_copy_of_a_doubtful_row_under_an_id_naming_no_tp_is_skipped_too(tmp_path):
    """The source records some runs twice: under an id naming their TP (whose tp_size column disagrees with it) and under
    a configuration id naming none (``..._cfg199``), with TTFT and TPOT equal to every digit. Both are one measurement
    whose layout cannot be told, wherever in the file either copy sits; a row with only one metric equal stays."""
    base = next(r for r in _rows() if r["mode"] == "agg" and r["id"].endswith("_tp4_epnone_1"))
    doubtful = dict(base, id=base["id"].replace("_c192_", "_c96_"), tp_size="16.0", concurrency="96",
                    silicon_tpot_ms=str(float(base["silicon_tpot_ms"]) * 0.9))
    copy = dict(doubtful, id="dsr1_h100_trtllm_agg_cfg7")  # same columns and metrics, an id that names no TP
    near = dict(copy, id="dsr1_h100_trtllm_agg_cfg8", silicon_tpot_ms=str(float(copy["silicon_tpot_ms"]) * 1.01))
    res = load_measurements([_write(tmp_path, [copy, base, doubtful, near])])
    assert [p.line for p in res.points] == [3, 5]  # the valid row and the one whose TPOT differs
    skipped = {int(p.split(":")[1]): p for p in res.problems}
    assert set(skipped) == {2, 4}
    assert "as line 4, whose layout cannot be told" in skipped[2] and "names tp4" in skipped[2]


def test_the_other_runs_of_a_copied_configuration_are_skipped_too(tmp_path):
    """A configuration id (the row id without its ISL x OSL and concurrency part) labels all its runs with one layout:
    when one run is a copy of a row whose layout cannot be told, the configuration's other runs carry the same doubtful
    labels and go too (as checks.relabelled treats the configurations of copies it finds); another configuration stays."""
    base = next(r for r in _rows() if r["mode"] == "agg" and r["id"].endswith("_tp4_epnone_1"))
    doubtful = dict(base, id=base["id"].replace("_c192_", "_c96_"), tp_size="16.0", concurrency="96",
                    silicon_tpot_ms=str(float(base["silicon_tpot_ms"]) * 0.9))
    copy = dict(doubtful, id="dsr1_h100_trtllm_agg_1024x1024_c96_cfg7")
    sibling = dict(copy, id="dsr1_h100_trtllm_agg_1024x1024_c48_cfg7", concurrency="48",
                   silicon_tpot_ms=str(float(copy["silicon_tpot_ms"]) * 0.8))  # its own run, same configuration
    other = dict(sibling, id="dsr1_h100_trtllm_agg_1024x1024_c48_cfg8")  # another configuration
    res = load_measurements([_write(tmp_path, [sibling, base, doubtful, copy, other])])
    assert [p.line for p in res.points] == [3, 6]
    skipped = {int(p.split(":")[1]): p for p in res.problems}
    assert set(skipped) == {2, 4, 5}
    assert "configuration 'dsr1_h100_trtllm_agg_cfg7' has a run (line 5)" in skipped[2]


def test_attention_dp_within_the_named_tp_is_kept(tmp_path):
    base = next(r for r in _rows() if r["mode"] == "agg" and r["id"].endswith("_tp4_epnone_1"))
    dpa = dict(base, tp_size="1.0", attention_dp_size="4.0")
    res = load_measurements([_write(tmp_path, [dpa])])
    assert res.problems == [] and (res.points[0].tp, res.points[0].attention_dp) == (1, 4)


def test_same_metrics_same_layout_is_not_a_relabelled_copy(tmp_path):
    """Identical metrics under the SAME layout (e.g. another engine build) stay, with a warning."""
    base = next(r for r in _rows() if r["mode"] == "agg" and r["id"].endswith("_tp4_epnone_1"))
    other = dict(base, id=base["id"].replace("_1", "_2"), backend_version="9.9")
    res = load_measurements([_write(tmp_path, [base, other])])
    assert res.problems == [] and len(res.points) == 2
    assert any("same metrics as" in w for w in res.points[1].warnings)


def test_metric_key_needs_both_metrics_and_survives_short_rows():
    from simfront.ingest.serving_csv import metric_key

    assert metric_key({"silicon_ttft_ms": " 181.5", "silicon_tpot_ms": "10.1 "}) == ("181.5", "10.1")
    assert metric_key({"silicon_ttft_ms": "181.5", "silicon_tpot_ms": ""}) is None
    assert metric_key({"silicon_ttft_ms": None, "silicon_tpot_ms": "10.1"}) is None  # csv.DictReader's fill for a short row

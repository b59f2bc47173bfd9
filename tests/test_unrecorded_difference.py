"""Runs of one recorded configuration that differ beyond run-to-run spread (simfront/ingest/checks.py::unrecorded_difference),
and the measured_serving.csv sidecar that labels the TensorRT-LLM 1.2.0rc6.post3 runs as MTP, checked against the
evidence its header gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simfront.ingest import load_measurements, serving_csv
from simfront.ingest.checks import REPEAT_SPREAD_LIMIT, unrecorded_difference
from simfront.ingest.schema import MeasuredPoint

ROOT = Path(__file__).resolve().parent.parent
SERVING = ROOT / "measurements" / "measured_serving.csv"
INFERENCEMAX = ROOT / "measurements" / "inferencemax_b200_h100.csv"
BASE = dict(model="deepseek-ai/DeepSeek-R1", gpu="B200", num_gpus=8, engine="sglang", engine_version="0.5.9", mode="agg", tp=8,
            ep=1, attention_dp=1, precision="fp8", isl=1024, osl=1024, concurrency=4, source_file="t.csv", format="serving_csv")


def _points(*rows):
    return [MeasuredPoint(**{**BASE, **extra}, line=n, tpot_ms=tpot, ttft_ms=150.0) for n, (tpot, extra) in enumerate(rows, 2)]


def test_runs_of_one_configuration_further_apart_than_repeats_go_together():
    pts = _points((6.7, {}), (9.61, {}),                    # 1.43x apart: one of them ran something unrecorded
                  (10.0, {"concurrency": 8}), (10.0 * REPEAT_SPREAD_LIMIT * 0.99, {"concurrency": 8}),  # within repeats
                  (6.7, {"concurrency": 16}),               # measured once
                  (6.7, {"concurrency": 32, "engine_version": "0.5.8"}), (9.6, {"concurrency": 32}))  # two builds
    out = unrecorded_difference(pts)
    assert sorted(out) == [0, 1]
    assert "2 times with TPOT 6.7-9.61 ms, 1.43x apart" in out[0] and "sglang 0.5.9" in out[0]


def test_runs_of_an_unnamed_build_are_not_compared():
    """Without an engine release the rows may be several releases apart (InferenceMAX's time series): no verdict."""
    pts = _points((6.7, {"engine_version": None}), (13.4, {"engine_version": None}))
    assert unrecorded_difference(pts) == {}


def test_the_check_reports_each_skipped_row_through_ingest(tmp_path):
    path = tmp_path / "runs.csv"
    cols = list(serving_csv.OPTIONAL + serving_csv.REQUIRED)  # the serving CSV reader's own columns
    row = dict(backend="sglang", backend_version="0.5.9", model_path="deepseek-ai/DeepSeek-R1", system="b200_sxm", precision="fp8",
               mode="agg", isl="1024", osl="1024", batch_size="4", tp_size="8", pp_size="1", attention_dp_size="1",
               moe_tp_size="8", moe_ep_size="1", silicon_ttft_ms="150", concurrency="4")
    rows = [",".join({**row, "id": f"r{i}", "silicon_tpot_ms": str(t)}.get(c, "") for c in cols) for i, t in enumerate((6.7, 9.61))]
    path.write_text("\n".join([",".join(cols), *rows]) + "\n")
    res = load_measurements([str(path)])
    assert res.points == []
    assert sum("something the file does not record" in str(p) and str(p).endswith("skipped") for p in res.problems) == 2


@pytest.mark.skipif(not SERVING.is_file() or not INFERENCEMAX.is_file(), reason="the shipped measurement files")
def test_the_post3_runs_sit_with_inferencemax_mtp_runs_of_their_configurations():
    """The evidence of measurements/measured_serving.simfront.yaml: its TensorRT-LLM 1.2.0rc6.post3 rows carry the TPOT of
    InferenceMAX's MTP runs of the same configuration, not that of its runs without MTP; its 1.2.0rc6.post2 rows the
    reverse. The sidecar then labels every post3 row MTP, with InferenceMAX's draft counts."""
    res = load_measurements([str(SERVING), str(INFERENCEMAX)])
    pts = res.points
    fields = ("gpu", "precision", "isl", "osl", "concurrency", "tp", "ep", "attention_dp", "mode")

    def key(p):
        return tuple(str(getattr(p, f)).lower().replace("b200_sxm", "b200") for f in fields)

    ix = {}
    for p in pts:
        if p.source_file.endswith("inferencemax_b200_h100.csv") and p.engine == "trtllm" and p.mode == "agg":
            ix.setdefault((key(p), p.spec_decoding or "none"), []).append(p.tpot_ms)

    def ratios(version, spec):
        return [p.tpot_ms / t for p in pts if p.source_file.endswith("measured_serving.csv") and p.engine_version == version
                for t in ix.get((key(p), spec), [])]

    post3_mtp, post3_none = ratios("1.2.0rc6.post3", "mtp"), ratios("1.2.0rc6.post3", "none")
    post2_mtp, post2_none = ratios("1.2.0rc6.post2", "mtp"), ratios("1.2.0rc6.post2", "none")
    assert min(map(len, (post3_mtp, post3_none, post2_mtp, post2_none))) >= 5
    assert 0.9 < np.median(post3_mtp) < 1.1 and np.median(post3_none) < 0.75
    assert 0.9 < np.median(post2_none) < 1.1 and np.median(post2_mtp) > 1.3
    post3 = [p for p in pts if p.engine_version == "1.2.0rc6.post3"]
    assert post3 and all(p.spec_decoding == "mtp" and p.spec_k == (3 if p.attention_dp == 1 else 1) for p in post3)

"""A guard on the held-out GPUs (measurements/inferencex_api_snapshot.json, never fitted on): a change that moves
predictions on GPUs outside the calibration data far from public measurements fails here, not only in the report of
scripts/validate_heldout_gpus.py. Bounds sit a few points outside today's figures (docs/heldout_gpus.md)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from simfront.uncertainty import calibrated_gpus
from simfront.validation import _gpu_id, validate_files

SNAPSHOT = Path(__file__).resolve().parent.parent / "measurements" / "inferencex_api_snapshot.json"
CALIBRATION_GPUS = set(calibrated_gpus())


@pytest.fixture(scope="module")
def snapshot_rows() -> list[dict]:
    """The snapshot's serving rows as `simfront validate` prices them (read once for the tests below)."""
    return validate_files([str(SNAPSHOT)])["serving"]["rows"]


def test_heldout_gpus_tpot_and_throughput_stay_near_measured(snapshot_rows):
    rows = [r for r in snapshot_rows if r.get("predicted_tpot_ms") and _gpu_id(r["gpu"]) not in CALIBRATION_GPUS]
    assert len(rows) >= 250  # seven GPUs, 275 runs predicted today
    tpot = np.array([r["predicted_tpot_ms"] / r["tpot_ms"] for r in rows])
    tput = np.array([r["predicted_tok_s_per_gpu"] / r["output_tok_s_per_gpu"] for r in rows
                     if r.get("predicted_tok_s_per_gpu") and r.get("output_tok_s_per_gpu")])
    assert np.all(np.isfinite(tpot)) and math.isfinite(float(np.median(tput)))
    assert 0.9 <= np.median(tpot) <= 1.2 and np.mean(np.abs(tpot - 1)) < 0.25  # today 1.11, 19.4 %
    assert 0.85 <= np.median(tput) <= 1.15 and np.mean(np.abs(tput - 1)) < 0.25  # today 0.93, 16.0 %
    gpus = {_gpu_id(r["gpu"]) for r in rows}
    assert {"mi300x", "mi325x", "mi355x", "h200_sxm", "b300_sxm", "gb200", "gb300"} <= gpus


def test_report_names_the_decoding_workers_layout():
    """scripts/validate_heldout_gpus.py groups rows by the layout of the worker that decodes them (a knob the search
    chooses): the server of an aggregated run, the decode worker of a disaggregated one."""
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("validate_heldout_gpus", root / "scripts" / "validate_heldout_gpus.py")
    vhg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vhg)
    assert vhg.decode_layout({"mode": "agg", "tp": 8, "ep": 8, "attention_dp": 1}) == "TP8 EP8"
    assert vhg.decode_layout({"mode": "agg", "tp": 4, "ep": None, "attention_dp": None}) == "TP4"
    assert vhg.decode_layout({"mode": "disagg", "tp": None, "decode_tp": 1, "decode_ep": 16,
                              "decode_attention_dp": 16}) == "decode TP1 DPA16 EP16"


def test_disaggregated_mtp_runs_carry_their_recipes_draft_counts(snapshot_rows):
    """measurements/inferencex_api_snapshot.simfront.yaml: the H200 / B300 / GB200 / GB300 TensorRT-LLM MTP runs whose
    layout and concurrency InferenceX's benchmark matrix names with an MTP 3 (or 2) recipe are priced with that many
    drafts; a run of an MTP 1 recipe, or one the matrix does not list, keeps the default (one)."""
    rows = {(_gpu_id(r["gpu"]), r["precision"], int(r["isl"]), int(r["osl"]), int(r["concurrency"])): r
            for r in snapshot_rows if r.get("predicted_tpot_ms") and r.get("mode") == "disagg"
            and r.get("spec_decoding") and "trt" in str(r.get("engine")).lower()}
    assert rows[("gb300", "fp4", 1024, 1024, 5)]["spec_k"] == 3  # ctx1_gen4_tep8_batch1_eplb0_mtp3
    assert rows[("gb200", "fp8", 8192, 1024, 666)]["spec_k"] == 3  # ctx5_gen1_dep16_batch32_eplb0_mtp3_666
    assert rows[("gb300", "fp4", 1024, 1024, 2253)].get("spec_k") in (None, 1)  # ctx3_gen1_dep16_batch128_eplb256_mtp1
    assert sum(r.get("spec_k") == 3 for k, r in rows.items() if k[0] in ("gb200", "gb300")) == 12
    assert rows[("b300_sxm", "fp8", 8192, 1024, 512)]["spec_k"] == 2  # ctx4_gen1_dp8_batch64_eplb0_mtp2_512
    assert rows[("b300_sxm", "fp8", 8192, 1024, 5)].get("spec_k") in (None, 1)  # no matrix entry at 5 clients
    assert rows[("h200_sxm", "fp8", 8192, 1024, 128)]["spec_k"] == 2  # c128_ctx2_gen1_dep8_batch32_eplb0_mtp2

"""A guard on the held-out GPUs (measurements/inferencex_api_snapshot.json, never fitted on): a change that moves
predictions on GPUs outside the calibration data far from public measurements fails here, not only in the report of
scripts/validate_heldout_gpus.py. Bounds sit a few points outside today's figures (docs/heldout_gpus.md)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from simfront.uncertainty import calibrated_gpus
from simfront.validation import _gpu_id, validate_files

SNAPSHOT = Path(__file__).resolve().parent.parent / "measurements" / "inferencex_api_snapshot.json"
CALIBRATION_GPUS = set(calibrated_gpus())


def test_heldout_gpus_tpot_and_throughput_stay_near_measured():
    res = validate_files([str(SNAPSHOT)])
    rows = [r for r in res["serving"]["rows"] if r.get("predicted_tpot_ms") and _gpu_id(r["gpu"]) not in CALIBRATION_GPUS]
    assert len(rows) >= 250  # seven GPUs, 275 runs predicted today
    tpot = np.array([r["predicted_tpot_ms"] / r["tpot_ms"] for r in rows])
    tput = np.array([r["predicted_tok_s_per_gpu"] / r["output_tok_s_per_gpu"] for r in rows
                     if r.get("predicted_tok_s_per_gpu") and r.get("output_tok_s_per_gpu")])
    assert np.all(np.isfinite(tpot)) and math.isfinite(float(np.median(tput)))
    assert 0.9 <= np.median(tpot) <= 1.2 and np.mean(np.abs(tpot - 1)) < 0.25  # today 1.08, 19.3 %
    assert 0.85 <= np.median(tput) <= 1.15 and np.mean(np.abs(tput - 1)) < 0.25  # today 0.95, 17.0 %
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

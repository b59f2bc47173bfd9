"""simfront calibrate, --calibration profiles, and prediction bands."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simfront import api, efficiency

ROOT = Path(__file__).resolve().parent.parent
SERVING = ROOT / "measurements" / "measured_serving.csv"


def run(*args):
    return subprocess.run([sys.executable, "-m", "simfront.cli", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture()
def small_serving(tmp_path):
    """~150 rows of the shipped serving set (Llama-3.1-70B and Qwen3-32B agg runs)."""
    lines = SERVING.read_text().splitlines()
    keep = [lines[0]] + [l for l in lines[1:] if (",agg," in l and ("Llama-3.1-70B" in l or "Qwen3-32B" in l))][:150]
    p = tmp_path / "serving.csv"
    p.write_text("\n".join(keep) + "\n")
    return p


def test_calibrate_writes_profile_and_reports_cv(small_serving, tmp_path):
    out = tmp_path / "profile.yaml"
    p = run("calibrate", str(small_serving), "-o", str(out), "--folds", "3", "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["fitted_rows"] > 50 and rep["folds"] == 3
    assert set(rep["after_cv"]) >= {"ttft_ms", "tpot_ms"} and set(rep["before"]) >= {"ttft_ms", "tpot_ms"}
    prof = yaml.safe_load(out.read_text())
    assert "serving" in prof["efficiency"] and "default" in prof["efficiency"]["serving"]
    human = run("predict", "--model", "llama-3.1-70b", "--gpus", "8xH100", "--calibration", str(out))
    assert human.returncode == 0 and "tok/s/GPU" in human.stdout
    efficiency.set_override(None)


def test_calibration_profile_changes_predictions(tmp_path):
    # kernels at half the speed (the fit's largest step scale): every step takes twice its GPU time
    prof = {"efficiency": {"serving": {"default": {"step_overhead_s": 0.0, "kernel_overlap": 0.0, "step_scale": 2.0,
                                                   "ttft_scale": 1.0, "ttft_overhead_s": 0.0}}}}
    f = tmp_path / "slow.yaml"
    f.write_text(yaml.safe_dump(prof))
    base = json.loads(run("predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--mode", "agg", "--json").stdout)
    slow = json.loads(run("predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--mode", "agg", "--json", "--calibration", str(f)).stdout)
    assert min(p["tpot_ms"] for p in slow["frontier"]) > 1.5 * min(p["tpot_ms"] for p in base["frontier"])


def test_bad_profile_is_one_line_error(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("just: text\n")
    p = run("predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--calibration", str(f))
    assert p.returncode == 2 and "calibration profile" in p.stderr and "Traceback" not in p.stderr


def test_bands_contain_prediction_and_widen_off_calibration():
    inside = api.predict("llama-3.1-70b", "8xH100", modes=["agg"])
    outside = api.predict("llama-3.1-70b", "8xMI355X", modes=["agg"])
    for res in (inside, outside):
        for p in res["frontier"]:
            assert p["tpot_ms_low"] <= p["tpot_ms"] <= p["tpot_ms_high"]
            assert p["tok_s_gpu_low"] <= p["tok_s_gpu"] <= p["tok_s_gpu_high"]
            assert p["ttft_ms_low"] <= p["ttft_ms"] <= p["ttft_ms_high"]
    # points whose layouts the calibration measured (a pipelined one is widened for that too: tests/test_coverage.py)
    p_in = next(p for p in inside["frontier"] if not p["outside_calibration"])
    p_out = next(p for p in outside["frontier"] if not p["outside_calibration"])
    w_in = math.log(p_in["tpot_ms_high"] / p_in["tpot_ms_low"])
    w_out = math.log(p_out["tpot_ms_high"] / p_out["tpot_ms_low"])
    assert w_out > w_in * 1.2


def test_partial_pooling_pulls_engine_profiles_toward_the_pooled_one(small_serving, monkeypatch):
    """An engine's profile moves toward the pooled default as the pooling weight grows."""
    import numpy as np

    from simfront import calibration
    from simfront.ingest import load_measurements

    points = load_measurements([str(small_serving)]).points
    f = calibration.Fitter(points)

    def spread(weight):
        monkeypatch.setattr(calibration, "POOLING_WEIGHT", weight)
        prof = f.fit()
        engines = [e for e in prof if e != "default"]
        assert engines, "the excerpt should hold at least one engine with enough rows"
        span = {n: hi - lo for n, (_, lo, hi) in calibration.PARAMS.items()}
        return max(abs(prof[e][n] - prof["default"][n]) / span[n] for e in engines for n in span)

    loose, tight = spread(0.0), spread(30.0)
    assert np.isfinite(loose) and tight < loose
    assert tight < 0.05


@pytest.mark.parametrize("name, says", [("burst_fraction", "--prompts-per-client"), ("group_share", "arrival group")])
def test_profile_with_a_retired_parameter_says_where_it_went(tmp_path, name, says):
    f = tmp_path / "old.yaml"
    f.write_text(yaml.safe_dump({"efficiency": {"serving": {"default": {name: 0.1}}}}))
    p = run("predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--calibration", str(f))
    assert p.returncode == 2 and says in p.stderr and p.stderr.count("\n") == 1


def test_params_at_bounds_reads_attention_and_mla_ranges():
    """Attention and MLA keep their ranges in CALIBRATION_OPS, not PARAMS: the bounds report must see them."""
    import importlib.util

    from simfront import attention, mla

    spec = importlib.util.spec_from_file_location("params_at_bounds", Path(__file__).resolve().parent.parent / "scripts" / "params_at_bounds.py")
    pab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pab)
    for mod in (attention, mla):
        ranges = pab.module_params(mod)
        assert any(k.startswith("decode_") for k in ranges) and any(k.startswith("prefill_") for k in ranges)
    assert "decode_cta_bytes_per_s" in pab.module_params(mla)


def test_the_fit_scores_tpot_by_its_log_ratio_and_ttft_by_its_relative_error(small_serving):
    """TPOT is fitted on log(predicted / measured), which a robust fit centres on the median ratio (a fit on relative
    error settles below it: optimism a search would find everywhere); TTFT keeps the relative error of its MAPE."""
    import numpy as np

    from simfront import calibration
    from simfront.ingest import load_measurements
    from simfront.serving import engine_profile

    points = load_measurements([str(small_serving)]).points
    f = calibration.Fitter(points)
    prof = engine_profile(None)
    pred = f.predict({"default": prof})
    rows = sorted(i for i in f.rows if pred[i].get("predicted_tpot_ms") and pred[i].get("predicted_ttft_ms"))[:5]
    # measurements at half of each prediction: predicted / measured = 2 for both metrics
    f.points = [p.model_copy(update={"tpot_ms": pred[i]["predicted_tpot_ms"] / 2, "ttft_ms": pred[i]["predicted_ttft_ms"] / 2,
                                     "output_tok_s_total": None}) if i in rows else p for i, p in enumerate(points)]
    res = f.residuals(prof, set(rows), f.groups)
    assert sorted(np.round(res, 6)) == sorted([round(float(np.log(2.0)), 6)] * len(rows) + [1.0] * len(rows))

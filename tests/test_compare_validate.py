"""frontier --compare and validate (kernel files, serving files, built-in dataset)."""

import json
import subprocess
import sys
from pathlib import Path


from simfront import api

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "ingest"


def test_compare_precision_pushes_out():
    res = api.frontier_compare("deepseek-r1", "8xB200", "precision", ["fp8_block", "nvfp4"], isl=1024, osl=1024)
    assert len(res["sets"]) == 2 and res["verdicts"][0]["verdict"] == "pushes the frontier out"


def test_compare_cli_gpus_and_json():
    p = subprocess.run([sys.executable, "-m", "simfront.cli", "frontier", "--model", "llama-3.1-70b", "--compare", "gpus=8xH100,8xB200", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert [s["gpus"] for s in res["sets"]] == ["8xh100_sxm", "8xb200_sxm"] and res["verdicts"]
    bad = subprocess.run([sys.executable, "-m", "simfront.cli", "frontier", "--model", "llama-3.1-70b", "--gpus", "8xH100", "--compare", "colour=red,blue"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "valid knobs" in bad.stderr


def test_validate_kernel_file_keeps_columns_and_order(tmp_path):
    f = tmp_path / "h100_sxm__gemm.csv"
    f.write_text("gpu,dtype,m,n,k,latency_us,my_note\nh100_sxm,bfloat16,1024,4096,4096,30.0,a\nh100_sxm,fp8,1,4096,4096,9.0,b\n"
                 "tpu_v9,bfloat16,8,8,8,1.0,c\n")
    p = subprocess.run([sys.executable, "-m", "simfront.cli", "validate", str(f), "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    rows = res["rows"]
    assert [r["my_note"] for r in rows] == ["a", "b", "c"]
    assert rows[0]["predicted_latency_us"] > 0 and rows[2]["predicted_latency_us"] is None and rows[2]["reason"]
    assert "gemm" in res["summary"]


def test_validate_serving_sample_files():
    files = [str(p) for p in sorted(DATA.glob("*")) if p.suffix in (".json", ".jsonl", ".csv") and "bad" not in p.name and "wrong" not in p.name
             and "trunc" not in p.name and "dup" not in p.name]
    res = api.validation_flat(api.validate(files))
    assert res["rows"]
    for r in res["rows"]:
        assert any(k.startswith("predicted_") for k in r) or r.get("reason")
    assert "metrics" in res["summary"]


def test_builtin_validation_error_bounds():
    """CI tracks the accuracy on the shipped measurements: fail if it gets worse than the stated bounds."""
    res = api.validate(api.builtin_measurements())
    s = res["serving"]["summary"]
    # coverage of the rows the reader can use: rows skipped as malformed, implausible or of a layout that
    # cannot be told (calibration README "quirks") are the file's defects, not the model's
    assert s["usable_coverage_pct"] >= 80 and s["usable_rows"] < s["rows"]
    assert s["metrics"]["tpot_ms"]["mape_pct"] <= 22
    assert s["metrics"]["ttft_ms"]["mape_pct"] <= 40
    assert s["metrics"]["output_tok_s_total"]["median_ape_pct"] <= 25


def test_validate_serving_one_row_per_input_row_duplicates_marked(tmp_path):
    """Every input row comes back in input order; an exact duplicate carries the prediction of the row it
    repeats, marked duplicate_of, and counts once in the error statistics."""
    src = (DATA / "bad_duplicates.csv").read_text().splitlines()
    f = tmp_path / "runs.csv"
    f.write_text("\n".join(src) + "\n")
    res = api.validate([str(f)])["serving"]
    rows = res["rows"]
    assert [r["line"] for r in rows] == list(range(2, len(src) + 1))
    dups = [r for r in rows if "duplicate_of" in r]
    assert dups and all(r["duplicate_of"].endswith(":2") for r in dups)
    first = next(r for r in rows if r["line"] == 2)
    assert all(d.get("predicted_tpot_ms") == first.get("predicted_tpot_ms") for d in dups)
    s = res["summary"]
    assert s["rows"] == len(src) - 1
    assert s["metrics"]["tpot_ms"]["count"] == sum(1 for r in rows if r.get("predicted_tpot_ms") and "duplicate_of" not in r)


def test_a_gpu_or_model_that_fills_no_row_is_said():
    """--gpu / --model fill only rows that do not name their own; where every row does, the option is named as unused."""
    res = api.validate([str(DATA / "serving_excerpt.csv")], {"gpu": "H200", "model": "llama-3.1-8b"})
    said = [p for p in res["problems"] if "so it filled none" in p]
    assert len(said) == 2 and any(p.startswith("--gpu H200: every row names its own GPU") for p in said)
    res = api.validate([str(DATA / "aiperf_llama70b_fp8_h100_c32.json")], {"gpu": "H100", "tp": 8})
    assert not [p for p in res["problems"] if "filled none" in p]  # a client file names no GPU: --gpu fills it

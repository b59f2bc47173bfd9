"""CLI: human output, --json, and one-line errors with a non-zero exit and no traceback."""

import json
import subprocess
import sys

import pytest


def run(*args, ok=True):
    p = subprocess.run([sys.executable, "-m", "simfront.cli", *args], capture_output=True, text=True, timeout=120)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def test_models_table_and_json():
    assert "kimi-k3" in run("models").stdout
    rows = json.loads(run("models", "--json").stdout)
    names = {r["name"] for r in rows}
    assert {"kimi-k3", "deepseek-r1", "gpt-oss-120b"} <= names
    r = next(r for r in rows if r["name"] == "deepseek-r1")
    assert r["native_precision"] == "fp8_block" and 6.6e11 < r["total_params"] < 6.8e11
    assert {"name", "total_params", "active_params", "architecture", "native_precision"} <= set(r)


def test_hardware_table_and_json():
    assert "b200_sxm" in run("hardware").stdout
    rows = json.loads(run("hardware", "--json").stdout)
    b200 = next(r for r in rows if r["id"] == "b200_sxm")
    assert b200["bf16_tflops"] == 2250 and b200["scaleup_gb_s"] == 900


def test_memory_json_verdicts():
    v = json.loads(run("memory", "--model", "kimi-k3", "--gpus", "8xB200", "--json").stdout)
    assert v["fits"] is False and v["min_gpus"] == 16 and v["reason"]
    for key in ("weights_bytes", "weights_bytes_per_gpu", "kv_bytes_per_token", "kv_capacity_tokens", "max_concurrency"):
        assert key in v
    v = json.loads(run("memory", "--model", "kimi-k3", "--gpus", "8xB300", "--json").stdout)
    assert v["fits"] is True and v["max_concurrency"] > 0


def test_memory_human_output_and_explicit_layout():
    out = run("memory", "--model", "deepseek-r1", "--gpus", "8xH200", "--tp", "8", "--ep", "8").stdout
    assert "TP8 EP8" in out and "fits                 yes" in out


@pytest.mark.parametrize("args,needle", [
    (("memory", "--model", "banana", "--gpus", "8xB200"), "unknown model 'banana'"),
    (("memory", "--model", "qqqq", "--gpus", "8xB200"), "more ('simfront models' lists them)"),  # no name withheld silently
    (("memory", "--model", "kimi-k3", "--gpus", "8xBanana"), "unknown GPU"),
    (("memory", "--model", "kimi-k3", "--gpus", "0xB200"), "at least 1"),
    (("memory", "--model", "kimi-k3", "--gpus", "banana"), "COUNTxGPU"),
    (("memory", "--model", "kimi-k3", "--gpus", "8xB200", "--isl", "-5"), "--isl -5"),
    (("memory", "--model", "deepseek-r1", "--gpus", "8xH200", "--tp", "3"), "impossible parallelism"),
    (("memory", "--model", "llama-3.1-8b", "--gpus", "8xH200", "--tp", "1", "--ep", "8"), "impossible parallelism"),
    (("memory", "--model", "kimi-k3", "--gpus", "8xB200", "--bogus"), "No such option"),
    (("memory", "--model", "deepseek-r1", "--gpus", "8xH200", "--precision", "fp3"), "precision"),
])
def test_bad_input_is_one_line(args, needle):
    p = run(*args, ok=False)
    assert p.returncode != 0
    assert needle in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_malformed_config_path(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"hidden_size": 8, "num_attention_heads": 2}')
    p = run("memory", "--model", str(cfg), "--gpus", "1xH100", ok=False)
    assert p.returncode != 0 and "missing required field" in p.stderr and "Traceback" not in p.stderr

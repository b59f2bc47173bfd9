"""Result files written by the real benchmark clients (tests/data/ingest/captured/, made by
scripts/make_client_fixtures.py against tests/stub_server.py) validate with the engine and layout they recorded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CAPTURED = ROOT / "tests" / "data" / "ingest" / "captured"
INDEX = json.loads((CAPTURED / "index.json").read_text())

# tests/stub_server.py's defaults, which the fixtures were recorded with
STUB_ITL_MS = 4.0  # time between output tokens
STUB_TTFT_BASE_MS = 20.0  # fixed part of the time to first token
STUB_TTFT_MS = STUB_TTFT_BASE_MS + 64 * 0.05  # + 64 prompt tokens x 0.05 ms
LAYOUT = ("engine", "gpu", "num_gpus", "mode", "tp", "pp", "ep", "attention_dp", "precision", "kv_dtype")

# (result file or artifact directory, client) - one or more per client, each listed in index.json
FIXTURES = {
    "vllm_bench_serve_llama8b_tp1.json": "vllm bench serve",
    "sglang_bench_serving_dsr1_attn_dp8.jsonl": "sglang bench_serving",
    "sglang_bench_serving_qwen3_32b_tp2.jsonl": "sglang bench_serving",
    "aiperf_llama70b_trtllm_tp4": "aiperf profile",
    "guidellm_qwen3_32b_tp2_benchmarks.json": "guidellm run",
    "guidellm_qwen3_32b_tp2_benchmarks.yaml": "guidellm run",
    "genai_bench_llama8b_tp1": "genai-bench benchmark",
}


def validate(path: Path) -> dict:
    """`simfront validate FILE --json` as a user runs it."""
    res = subprocess.run([sys.executable, "-m", "simfront", "validate", str(path), "--json"],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def recorded_layout(name: str) -> dict:
    """What the benchmark run recorded: the sidecar simfront printed, else vLLM's --metadata in the file."""
    side = CAPTURED / f"{name}.simfront.yaml"
    if side.exists():
        return yaml.safe_load(side.read_text())
    return json.loads((CAPTURED / name).read_text())


def test_every_client_has_a_captured_fixture_listed_with_its_command():
    listed = {r["tool"]: r for r in INDEX}
    assert set(FIXTURES.values()) <= set(listed)
    for row in INDEX:
        assert row["version"] not in ("", "unknown") and row["command"]
        assert "/tmp/" not in row["command"] and "/work/" not in row["command"]


@pytest.mark.parametrize("name", FIXTURES)
def test_captured_fixture_validates_with_the_recorded_engine_and_layout(name):
    out = validate(CAPTURED / name)
    assert out["problems"] == []
    rec = recorded_layout(name)
    [row] = out["rows"]
    for key in LAYOUT:
        if key in rec:
            assert str(row[key]) == str(rec[key]), (key, row[key], rec[key])
    # file and sidecar agree; a measured mean length may differ from the nominal one by a little
    conflicts = [w for w in row["warnings"] if "file has" in w and w.split(":")[0] not in ("isl", "osl")]
    assert not conflicts, conflicts
    assert row["isl"] == pytest.approx(64, rel=0.01) and row["osl"] == 16
    assert row["concurrency"] == float(rec["concurrency"])
    # the measured values are the stub's, read from the right fields in the right units
    assert STUB_ITL_MS * 0.9 < row["tpot_ms"] < STUB_ITL_MS * 1.5, row["tpot_ms"]
    assert STUB_TTFT_BASE_MS * 0.9 < row["ttft_ms"] < STUB_TTFT_MS * 4, row["ttft_ms"]
    assert row["predicted_tpot_ms"] is not None and row["predicted_ttft_ms"] is not None, row.get("reason")
    assert out["summary"]["predicted_rows"] == 1


def test_vllm_metadata_round_trips_without_a_sidecar(tmp_path):
    """`vllm bench serve --backend openai` (its default) still carries the engine simfront asked it to record."""
    name = "vllm_bench_serve_llama8b_tp1.json"
    raw = json.loads((CAPTURED / name).read_text())
    assert raw["backend"] == "openai" and raw["engine"] == "vllm"
    shutil.copy(CAPTURED / name, tmp_path / name)
    [row] = validate(tmp_path / name)["rows"]
    assert (row["engine"], row["gpu"], row["tp"]) == ("vllm", "h100_sxm", 1)
    # vLLM's random prompts are random token ids decoded and re-encoded: with a byte-level BPE a few gain a token
    assert row["isl"] == pytest.approx(64, rel=0.01) and row["predicted_tpot_ms"] is not None


def test_sglang_server_info_gives_the_attention_dp_layout_without_a_sidecar(tmp_path):
    """SGLang 0.5.23 reports tp_size 8 / attn_dp_size 8 / ep_size 8 for TP1 x attention-DP8 x EP8."""
    name = "sglang_bench_serving_dsr1_attn_dp8.jsonl"
    info = json.loads((CAPTURED / name).read_text().splitlines()[0])["server_info"]
    assert (info["tp_size"], info["attn_dp_size"], info["ep_size"]) == (8, 8, 8)
    shutil.copy(CAPTURED / name, tmp_path / name)
    [row] = validate(tmp_path / name)["rows"]
    assert (row["tp"], row["attention_dp"], row["ep"], row["engine"]) == (1, 8, 8, "sglang")
    assert row["kv_dtype"] == "fp8"  # server_info kv_cache_dtype fp8_e4m3


@pytest.mark.parametrize("name", ["guidellm_qwen3_32b_tp2_benchmarks.json", "guidellm_qwen3_32b_tp2_benchmarks.yaml"])
def test_guidellm_prompt_length_is_read_from_the_file_without_a_sidecar(tmp_path, name):
    """GuideLLM 0.8.1 cuts its synthetic prompts from English text with the stub's byte-level BPE tokenizer; the
    stub counts the prompt with the same tokenizer, so the file records 64 prompt tokens per request, and the
    reader takes the ISL from the file (no sidecar here), not from the nominal length."""
    shutil.copy(CAPTURED / name, tmp_path / name)
    [row] = validate(tmp_path / name)["rows"]
    assert row["isl"] == pytest.approx(64, rel=0.01) and row["osl"] == 16
    assert row["metric_definitions"]["isl"].startswith("GuideLLM prompt_token_count.successful.mean")
    assert not [w for w in row["warnings"] if "not read as a length" in w], row["warnings"]
    if name.endswith(".json"):  # every request, not just the mean, had a plausible prompt
        [bench] = json.loads((CAPTURED / name).read_text())["benchmarks"]
        prompt = bench["metrics"]["prompt_token_count"]["successful"]
        assert prompt["count"] == 40 and 60 <= prompt["min"] <= prompt["max"] <= 68, prompt


def test_the_token_budget_a_point_priced_is_launched_recorded_and_validated(tmp_path):
    """A frontier point's chunk_tokens (the search's token-budget knob) reaches the engine flag and the sidecar,
    and validate prices the recorded run with that budget (per attention-DP rank)."""
    from simfront.planning import launch_for

    name = "sglang_bench_serving_qwen3_32b_tp2.jsonl"
    rec = yaml.safe_load((CAPTURED / f"{name}.simfront.yaml").read_text())
    point = {"mode": "agg", "tp": 2, "pp": 1, "ep": 1, "attention_dp": 1, "batch": rec["batch_size"], "spec": "none",
             "precision": rec["precision"], "kv_dtype": rec["kv_dtype"], "concurrency": rec["concurrency"], "chunk_tokens": 2048}
    out = launch_for(point, "qwen3-32b", rec["gpu"], "sglang", isl=rec["isl"], osl=rec["osl"])
    assert "--chunked-prefill-size 2048" in out["commands"][0]
    assert yaml.safe_load(out["sidecar"])["token_budget"] == 2048
    shutil.copy(CAPTURED / name, tmp_path / name)
    (tmp_path / f"{name}.simfront.yaml").write_text(out["sidecar"])
    [row] = validate(tmp_path / name)["rows"]
    assert row["token_budget"] == 2048 and row["predicted_ttft_ms"] is not None, row.get("reason")


def test_sglang_server_info_gives_the_token_budget_and_memory_fraction(tmp_path):
    """server_info holds chunked_prefill_size after SGLang divided it over the attention-DP ranks (per rank, as
    simfront's token_budget) and mem_fraction_static (read by SGLang's rule when the KV pool is sized)."""
    name = "sglang_bench_serving_dsr1_attn_dp8.jsonl"
    info = json.loads((CAPTURED / name).read_text().splitlines()[0])["server_info"]
    shutil.copy(CAPTURED / name, tmp_path / name)  # without its sidecar: what the file alone says
    [row] = validate(tmp_path / name)["rows"]
    assert row["token_budget"] == info["chunked_prefill_size"] and row["gpu_memory_fraction"] == info["mem_fraction_static"]

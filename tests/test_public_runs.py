"""measurements/public_runs.csv: public serving runs outside the calibration files, read with what they record."""

from pathlib import Path

from simfront import api

FILE = Path(__file__).resolve().parent.parent / "measurements" / "public_runs.csv"


def test_every_public_run_is_read_with_its_layout_and_predicted():
    res = api.validate([str(FILE)])
    rows = res["serving"]["rows"]
    assert len(rows) == 14 and not res["problems"]
    assert all(r.get("predicted_tpot_ms") and r.get("predicted_ttft_ms") for r in rows)
    h200 = [r for r in rows if r["gpu"] == "H200"]
    assert [int(r["concurrency"]) for r in h200] == [8, 16, 32, 64]
    assert all(r["engine"] == "sglang" and r["tp"] == 8 and r["num_prompts"] == 10 * r["concurrency"]
               and r["random_range_ratio"] == 0.8 and r["output_tok_s_per_gpu"] for r in h200)
    two_node = [r for r in rows if r["gpu"] == "H100"]
    assert {r["engine"] for r in two_node} == {"sglang", "vllm"}
    assert all(r["tp"] == 16 and r["num_gpus"] == 16 and r["ep"] in (None, 1) for r in two_node)
    assert all(r["measured_on"] in ("2025-07-09", "2025-07-17") for r in two_node)

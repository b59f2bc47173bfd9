"""Physical floors a measurement cannot beat (simfront/bounds.py) and the rows validate flags with them."""

from __future__ import annotations

import numpy as np
import pytest

from simfront import api
from simfront.bounds import decode_step_floor_s
from simfront.hardware import get_hardware
from simfront.memory import weight_bytes_per_gpu
from simfront.models import get_model


@pytest.mark.parametrize("model", ["llama-3.1-70b", "deepseek-r1", "gpt-oss-120b"])
def test_floor_grows_with_batch_and_context_and_falls_with_bandwidth(model):
    m, hw = get_model(model), get_hardware("h100_sxm")
    b = np.array([1.0, 4.0, 16.0, 64.0, 256.0])
    f = decode_step_floor_s(m, m.precision, hw, 8, 1, 1, 8, b, 2048.0)
    assert np.all(np.isfinite(f)) and np.all(np.diff(f) > 0)
    assert np.all(decode_step_floor_s(m, m.precision, hw, 8, 1, 1, 8, b, 8192.0) > f)
    fast = hw.model_copy(update={"hbm_bandwidth_bytes_per_s": 2 * hw.hbm_bandwidth_bytes_per_s})
    assert np.allclose(decode_step_floor_s(m, m.precision, fast, 8, 1, 1, 8, b, 2048.0), f / 2)


def test_floor_never_exceeds_reading_every_weight_and_the_kv_and_a_dense_model_reads_them_all():
    hw = get_hardware("b200_sxm")
    dense, moe = get_model("llama-3.1-70b"), get_model("deepseek-r1")
    w_dense = weight_bytes_per_gpu(dense, dense.precision, 8, 1, 1, 1)
    # one request with no context: the weights alone
    assert float(decode_step_floor_s(dense, dense.precision, hw, 8, 1, 1, 1, 1.0, 0.0)) == pytest.approx(
        float(w_dense) / hw.hbm_bandwidth_bytes_per_s)
    w_moe = float(weight_bytes_per_gpu(moe, moe.precision, 8, 1, 1, 8))
    one, many = (float(decode_step_floor_s(moe, moe.precision, hw, 8, 1, 1, 8, b, 0.0)) for b in (1.0, 4096.0))
    assert one < 0.5 * many  # one token touches 8 of 256 experts
    assert many == pytest.approx(w_moe / hw.hbm_bandwidth_bytes_per_s, rel=1e-3)  # a big batch touches them all


def _row_csv(tmp_path, tpot_ms: float):
    header = ("source,model,gpu,num_gpus,tp,pp,ep,dp_attention,disagg,engine,precision_weights,precision_act,precision_kv,"
              "isl,osl,concurrency,batch_size,metric_tpot_ms,metric_ttft_ms,notes")
    path = tmp_path / "points.csv"
    path.write_text(header + f"\ntest,openai/gpt-oss-120b,h100_sxm,8,8,1,1,,,vllm,fp4,,,1024,8192,512,512,{tpot_ms},117788,\n")
    return str(path)


def test_a_row_faster_than_the_floor_is_predicted_flagged_and_left_out_of_the_statistics(tmp_path):
    """gpt-oss-120b on 8xH100 at 512 clients, 1024/8192: 3.57 ms per token (measured_serving.csv) cannot be 512
    requests decoding together; the row keeps its prediction, says why, and counts in no error statistic."""
    res = api.validate([_row_csv(tmp_path, 3.57)])["serving"]
    (row,) = res["rows"]
    assert row["predicted_tpot_ms"] > 0 and "reason" not in row
    assert "datasheet HBM bandwidth" in row["measurement_flag"]
    # Little's law on the row alone: 512 x (8191 x 3.57 ms) / (117.8 s + 29.2 s) = 102 requests decoding at once
    assert "put 102 requests in decode at once" in row["measurement_flag"]
    assert row["measured_in_decode"] == pytest.approx(512 * 8191 * 3.57 / (117788 + 8191 * 3.57), abs=0.1)
    assert res["summary"]["flagged_rows"] == 1 and "tpot_ms" not in res["summary"]["metrics"]
    ok = api.validate([_row_csv(tmp_path, 40.0)])["serving"]
    assert "measurement_flag" not in ok["rows"][0] and ok["summary"]["flagged_rows"] == 0
    assert "tpot_ms" in ok["summary"]["metrics"]


def test_validate_text_output_names_the_row_it_left_out(tmp_path):
    import subprocess
    import sys

    path = _row_csv(tmp_path, 3.57)
    out = subprocess.run([sys.executable, "-m", "simfront", "validate", path], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "left out of the statistics:" in out.stdout and "points.csv:2" in out.stdout and "HBM bandwidth" in out.stdout
    # and its latencies say most of its 512 clients were not decoding
    assert "1 row(s) whose own TTFT and TPOT put fewer than 50% of their clients in decode" in out.stdout
    assert "points.csv:2: 102 of 512" in out.stdout


def test_measured_in_decode_is_littles_law_and_absent_without_decode():
    from simfront.measured import measured_in_decode

    row = {"concurrency": 8, "ttft_ms": 100.0, "tpot_ms": 10.0}
    assert measured_in_decode(row, 101.0) == pytest.approx(8 * 1000.0 / 1100.0)  # 100 decode steps of 10 ms per cycle
    assert measured_in_decode(row, 1.0) is None  # one output token: nothing decodes
    assert measured_in_decode({"concurrency": 8, "tpot_ms": 10.0}, 101.0) is None  # no TTFT


def _cap_csv(tmp_path, num_gpus, batch, ttft_ms, tpot_ms, name="cap.csv"):
    header = ("source,model,gpu,num_gpus,tp,pp,ep,dp_attention,disagg,engine,precision_weights,precision_act,precision_kv,"
              "isl,osl,concurrency,batch_size,metric_tpot_ms,metric_ttft_ms,notes")
    path = tmp_path / name
    path.write_text(header + f"\ntest,meta-llama/Llama-3.1-70B,h100_sxm,{num_gpus},8,1,1,,,vllm,fp8,,,1024,1024,64,{batch},"
                    f"{tpot_ms},{ttft_ms},\n")
    return str(path)


def test_a_batch_cap_below_the_load_queues_clients_on_the_gpus_the_row_gives(tmp_path):
    """Llama-3.1-70B FP8 on 8xH100 (one TP8 worker) at 64 clients with a max batch of 16: the row gives its GPU count,
    so 16 requests run and 48 wait for a slot (the GPU count is the row's, not 4 workers the load would need); without
    a GPU count the batch is read the aiconfigurator way (concurrency = workers x batch) and the load spreads over 4."""
    # measured as such a run would be: 16 of 64 clients decoding (Little's law: 64 x 20.5 s / (61.4 s + 20.5 s) = 16)
    capped = api.validate([_cap_csv(tmp_path, 8, 16, 61400.0, 20.0)])["serving"]["rows"][0]
    free = api.validate([_cap_csv(tmp_path, 8, 64, 61400.0, 20.0)])["serving"]["rows"][0]
    spread = api.validate([_cap_csv(tmp_path, "", 16, 61400.0, 20.0)])["serving"]["rows"][0]
    assert capped["predicted_ttft_ms"] > 3 * free["predicted_ttft_ms"]  # three of four clients wait a whole request
    assert capped["predicted_tpot_ms"] < free["predicted_tpot_ms"]  # a batch of 16, not 64
    assert spread["predicted_tpot_ms"] == pytest.approx(capped["predicted_tpot_ms"], rel=1e-6)
    assert spread["predicted_ttft_ms"] < 0.5 * capped["predicted_ttft_ms"]
    assert "measurement_flag" not in capped and "measurement_flag" not in free


def test_a_row_whose_own_latencies_exceed_its_batch_cap_is_flagged(tmp_path):
    """The same row measuring a 300 ms TTFT and 30 ms TPOT: Little's law puts 64 x 30.7 s / 31 s = 63 requests in decode,
    which 16 slots cannot hold: its batch_size is not the cap its engine ran with; kept, flagged, left out."""
    res = api.validate([_cap_csv(tmp_path, 8, 16, 300.0, 30.0)])["serving"]
    (row,) = res["rows"]
    assert "batch_size is not the cap" in row["measurement_flag"] and "above the 16" in row["measurement_flag"]
    assert res["summary"]["flagged_rows"] == 1 and row["predicted_ttft_ms"] > 0

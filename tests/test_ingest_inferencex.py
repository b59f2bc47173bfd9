"""The InferenceX results API reader (simfront.ingest.inferencex) on objects copied from the public API snapshot."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from simfront.ingest import detect_format, load_measurements

DATA = Path(__file__).parent / "data" / "ingest"
API = DATA / "inferencex_api_benchmarks.json"  # two runs, verbatim from the InferenceX-app fixture (see README there)


def _points(path):
    result = load_measurements(path)
    return result.points, result.problems


def test_detected_by_its_keys():
    assert detect_format(API) == "inferencex_api"


def test_aggregated_runs_map_units_layout_engine_and_client():
    points, problems = _points(API)
    assert not problems and len(points) == 2
    sg, atom = points
    # seconds in the source, milliseconds in the record; tok/s per user is the median interactivity
    assert sg.ttft_ms == pytest.approx(172.62843293137847) and sg.tpot_ms == pytest.approx(9.618676175431115)
    assert sg.tok_s_per_user == pytest.approx(103.64816793368249)
    assert sg.output_tok_s_per_gpu == pytest.approx(98.9883650269406)
    assert sg.output_tok_s_total == pytest.approx(4 * 98.9883650269406)
    assert (sg.model, sg.gpu, sg.engine, sg.engine_version, sg.measured_on) == (
        "deepseek-r1", "mi355x", "sglang", "0.5.12", "2026-06-11")
    assert (sg.mode, sg.tp, sg.attention_dp, sg.ep, sg.num_gpus, sg.concurrency) == ("agg", 4, 1, 1, 4, 4)
    assert sg.spec_decoding is None and sg.precision == "fp4"
    # the InferenceX client: lengths in [0.8 L, L], ten prompts per client, each said in a note
    assert sg.random_range_ratio == 0.8 and sg.num_prompts == 40
    assert "random_range_ratio" in sg.notes and "num_prompts" in sg.notes
    # an ATOM image's tag carries the ROCm release, not an engine version
    assert atom.engine == "atom" and atom.engine_version is None and atom.spec_decoding == "mtp"


def _disagg_object() -> dict:
    obj = copy.deepcopy(json.loads(API.read_text())[0])
    obj.update(framework="dynamo-sglang", disagg=True, prefill_tp=8, prefill_ep=8, prefill_dp_attention=True,
               prefill_num_workers=1, decode_tp=8, decode_ep=8, decode_dp_attention=True, decode_num_workers=2,
               num_prefill_gpu=8, num_decode_gpu=16, image="lmsysorg/sglang:v0.5.8-cu130")
    return obj


def test_disaggregated_run_counts_output_over_every_gpu(tmp_path):
    path = tmp_path / "disagg.json"
    path.write_text(json.dumps([_disagg_object()]))
    (p,), problems = _points(path)
    assert not problems
    assert (p.mode, p.engine, p.engine_version, p.num_gpus) == ("disagg", "sglang", "0.5.8", 24)
    assert (p.prefill_workers, p.prefill_tp, p.prefill_attention_dp, p.prefill_ep, p.prefill_gpus) == (1, 1, 8, 8, 8)
    assert (p.decode_workers, p.decode_tp, p.decode_attention_dp, p.decode_ep, p.decode_gpus) == (2, 1, 8, 8, 16)
    # the API's output tok/s is per decode GPU in a disaggregated run
    assert p.output_tok_s_per_gpu == pytest.approx(98.9883650269406 * 16 / 24)


def test_disaggregated_run_without_worker_counts_is_reported(tmp_path):
    obj = _disagg_object()
    obj["decode_num_workers"] = 0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([obj]))
    points, problems = _points(path)
    assert not points and len(problems) == 1 and "decode_num_workers" in problems[0]


@pytest.mark.parametrize("framework, engine", [("trt", "trtllm"), ("dynamo-trt", "trtllm"), ("sglang-disagg", "sglang"),
                                               ("vllm", "vllm"), ("dynamo-sglang", "sglang")])
def test_framework_names(tmp_path, framework, engine):
    obj = json.loads(API.read_text())[0]
    obj["framework"] = framework
    path = tmp_path / "f.json"
    path.write_text(json.dumps([obj]))
    (p,), _ = _points(path)
    assert p.engine == engine


def test_run_without_metrics_is_skipped_with_a_reason(tmp_path):
    obj = json.loads(API.read_text())[0]
    obj["metrics"] = None
    path = tmp_path / "m.json"
    path.write_text(json.dumps([obj, json.loads(API.read_text())[1]]))
    points, problems = _points(path)
    assert len(points) == 1 and "metrics is not an object" in problems[0]


def test_aggregated_gpu_count_is_the_tp_flag_when_the_api_writes_tp_x_ep(tmp_path):
    """The API gives some aggregated runs num_decode_gpu = tp x ep (a B200 TP8 EP8 run: 64) while their per-GPU
    rates count the TP flag's GPUs; the replica is read as its TP flag, with a note."""
    obj = json.loads(API.read_text())[0]
    obj.update(decode_tp=8, decode_ep=8, num_decode_gpu=64, num_prefill_gpu=64, hardware="b200")
    path = tmp_path / "q.json"
    path.write_text(json.dumps([obj]))
    (p,), _ = _points(path)
    assert (p.num_gpus, p.tp, p.ep) == (8, 8, 8) and "num_gpus" in p.notes
    assert p.output_tok_s_total == pytest.approx(8 * 98.9883650269406)


def test_unknown_model_key_is_kept_as_written(tmp_path):
    obj = json.loads(API.read_text())[0]
    obj["model"] = "glm5"
    path = tmp_path / "k.json"
    path.write_text(json.dumps([obj]))
    (p,), _ = _points(path)
    assert p.model == "glm5" and "model" not in p.notes

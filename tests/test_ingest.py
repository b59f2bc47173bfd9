"""simfront.ingest: every format parsed to exact values, detection, sidecars/overrides, bad files."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from simfront.errors import SimfrontError
from simfront.ingest import FORMATS, MeasuredPoint, detect_format, load_measurements
from kernel_data import KERNEL_DIR

DATA = Path(__file__).parent / "data" / "ingest"
SHARED_E2E = KERNEL_DIR.parent / "e2e"

VLLM_JSON = DATA / "vllm_infqps-concurrency64-DeepSeek-R1-20250612-101530.json"
VLLM_JSONL = DATA / "vllm_llama70b_h100_appended.jsonl"
SGLANG = DATA / "sglang_0612_1280_1024_1024.jsonl"
AIPERF = DATA / "aiperf_llama70b_fp8_h100_c32.json"
GENAI_PERF = DATA / "genai_perf_llama8b_trtllm_c16.json"
GUIDELLM = DATA / "guidellm_benchmarks.json"
TRTLLM = DATA / "trtllm_bench_dsr1_fp4_b200.json"
SERVING = DATA / "serving_excerpt.csv"
OFFLINE = DATA / "offline_excerpt.csv"
POINTS = DATA / "measured_points.csv"


def load_one(path, **kw):
    result = load_measurements(path, **kw)
    return result.points, result.problems


def data_lines(path: Path) -> int:
    with path.open(newline="") as f:
        return sum(1 for _ in csv.reader(f)) - 1


# ---------------------------------------------------------------- detection

@pytest.mark.parametrize(
    "path, fmt",
    [
        (VLLM_JSON, "vllm_bench_serve"),
        (VLLM_JSONL, "vllm_bench_serve"),
        (SGLANG, "sglang_bench_serving"),
        (AIPERF, "aiperf"),
        (GENAI_PERF, "genai_perf"),
        (GUIDELLM, "guidellm"),
        (TRTLLM, "trtllm_bench"),
        (SERVING, "serving_csv"),
        (OFFLINE, "offline_csv"),
        (POINTS, "offline_csv"),
        (DATA / "bad_truncated_vllm.jsonl", "vllm_bench_serve"),
        (DATA / "bad_truncated_aiperf.json", "aiperf"),  # recognised from the keys before the cut
        (DATA / "bad_columns.csv", "serving_csv"),
    ],
)
def test_detect_format(path, fmt):
    assert detect_format(path) == fmt


def test_detect_format_is_by_content_not_name(tmp_path):
    renamed = tmp_path / "results.txt"
    shutil.copy(SGLANG, renamed)
    assert detect_format(renamed) == "sglang_bench_serving"


def test_detect_unknown_format_names_known_formats():
    with pytest.raises(SimfrontError) as err:
        detect_format(DATA / "unknown_format.json")
    assert "unknown_format.json" in str(err.value) and all(f in str(err.value) for f in FORMATS)


# ---------------------------------------------------------------- client formats

def test_vllm_json_maps_by_definition_and_reads_metadata():
    (p,), problems = load_one(VLLM_JSON)
    assert problems == []
    assert (p.format, p.line, p.model) == ("vllm_bench_serve", 1, "deepseek-ai/DeepSeek-R1")
    assert (p.ttft_ms, p.tpot_ms, p.itl_ms, p.e2el_ms) == (1850.2, 32.52, 58.43, 35118.2)
    assert (p.output_tok_s_total, p.total_tok_s, p.request_throughput) == (1866.157, 3732.314, 1.8224)
    assert (p.isl, p.osl, p.concurrency, p.request_rate) == (1024.0, 1024.0, 64.0, None)
    assert "all requests issued at once" in p.notes["request_rate"]  # never Infinity in --json
    # --metadata tp=8 gpu=H200 ... arrive as strings and are typed
    assert (p.tp, p.gpu, p.precision, p.spec_decoding, p.spec_k) == (8, "H200", "fp8_block", "mtp", 1)
    assert p.acceptance_length == 1.801
    assert p.num_gpus == 8 and p.output_tok_s_per_gpu == pytest.approx(1866.157 / 8)
    assert p.tok_s_per_user == pytest.approx(1000 / 32.52)
    assert "mean_tpot_ms" in p.metric_definitions["tpot_ms"]
    assert "not TPOT" in p.metric_definitions["itl_ms"]  # chunk gaps kept apart from TPOT
    assert p.missing == ["mode", "pp"]
    assert p.extra["p99_tpot_ms"] == 37.85 and p.extra["median_ttft_ms"] == 1702.9


def test_vllm_jsonl_two_appended_runs_in_line_order():
    points, problems = load_one(VLLM_JSONL)
    assert problems == []
    assert [(p.line, p.concurrency, p.tpot_ms, p.output_tok_s_total) for p in points] == [
        (1, 16.0, 22.41, 711.652),
        (2, 64.0, 31.84, 1996.945),
    ]
    assert points[0].missing == ["gpu", "num_gpus", "mode", "precision", "tp", "pp"]


def test_sglang_dp_attention_layout_and_achieved_concurrency():
    points, problems = load_one(SGLANG)
    assert problems == [] and len(points) == 2
    p = points[0]
    assert (p.engine, p.engine_version, p.model) == ("sglang", "0.4.9.post2", "deepseek-ai/DeepSeek-R1")
    # tp_size=8 with dp_size=8 DP attention -> attention TP 1 x attention DP 8 = 8 GPUs
    assert (p.tp, p.attention_dp, p.ep, p.num_gpus) == (1, 8, 8, 8)
    assert (p.spec_decoding, p.spec_k, p.acceptance_length) == ("mtp", 3, 2.41)
    assert (p.ttft_ms, p.tpot_ms, p.itl_ms, p.e2el_ms) == (620.4, 24.1, 58.08, 25274.7)
    assert (p.output_tok_s_total, p.total_tok_s) == (1296.474, 2592.949)
    assert p.concurrency == 32.0 and p.extra["achieved_concurrency"] == 31.62  # cap vs achieved
    assert p.missing == ["gpu", "mode", "precision"]
    assert p.random_range_ratio == 1.0  # the client's random dataset at range ratio 1: fixed lengths


def test_aiconfigurator_serving_rows_have_fixed_lengths():
    """aiconfigurator's serving set sends requests of exactly ISL / OSL tokens (calibration README): its rows say so,
    which the evaluator needs (prefill-first engines serve fixed-length closed-loop clients in waves)."""
    points = load_measurements(Path(__file__).resolve().parent.parent / "measurements" / "measured_serving.csv").points
    assert points and all(p.random_range_ratio == 1.0 for p in points)


def test_aiperf_inter_token_latency_is_tpot():
    (p,), problems = load_one(AIPERF)
    assert problems == []
    assert (p.model, p.concurrency, p.isl, p.osl) == ("meta-llama/Llama-3.1-70B-Instruct", 32.0, 1000.0, 498.7)
    assert (p.ttft_ms, p.tpot_ms, p.itl_ms, p.e2el_ms) == (180.4, 21.53, 21.47, 10895.88)
    assert (p.output_tok_s_total, p.request_throughput, p.tok_s_per_user) == (1464.63, 2.9369, 46.71)
    assert p.total_tok_s == pytest.approx((320000 + 159584) / 108.959)
    assert p.metric_definitions["tpot_ms"].startswith("AIPerf inter_token_latency.avg")
    assert p.extra["time_to_first_token.p99"] == pytest.approx(180.4 * 2.5, rel=1e-3)
    assert p.missing == ["gpu", "num_gpus", "engine", "mode", "precision", "tp", "pp"]


def test_genai_perf_flat_input_config():
    (p,), problems = load_one(GENAI_PERF)
    assert problems == []
    assert (p.model, p.engine, p.concurrency) == ("meta-llama/Llama-3.1-8B-Instruct", "trtllm", 16.0)
    assert (p.ttft_ms, p.tpot_ms, p.e2el_ms, p.output_tok_s_total) == (38.2, 8.91, 1807.73, 1766.64)
    assert (p.isl, p.osl) == (200.0, 199.6)
    assert p.itl_ms is None  # genai-perf has no chunk-gap metric; never filled from TPOT
    assert p.tok_s_per_user == pytest.approx(1000 / 8.91)


def test_guidellm_one_point_per_benchmark_with_sidecar():
    points, problems = load_one(GUIDELLM)
    assert problems == []
    loads = [(p.line, p.concurrency, p.request_rate) for p in points]
    assert loads == [(1, 1.0, None), (2, 16.0, None), (3, None, 4.0)]
    p = points[1]
    assert p.tpot_ms == 17.5  # inter_token_latency_ms, not time_per_output_token_ms (17.902, includes TTFT)
    assert p.extra["metrics.time_per_output_token_ms"]["successful"]["mean"] == 17.902
    assert (p.ttft_ms, p.e2el_ms, p.output_tok_s_total, p.total_tok_s) == (120.3, 4582.8, 893.78, 2681.33)
    assert (p.isl, p.osl, p.request_throughput) == (512.0, 256.0, 3.4913)
    # layout from guidellm_benchmarks.yaml
    layout = (p.model, p.gpu, p.tp, p.pp, p.engine, p.mode, p.precision)
    assert layout == ("Qwen/Qwen3-32B", "H100", 2, 1, "vllm", "agg", "bf16")
    assert p.num_gpus == 2 and p.missing == []
    assert "guidellm_benchmarks.yaml" in p.notes["sidecar"]


def test_trtllm_bench_report():
    (p,), problems = load_one(TRTLLM)
    assert problems == []
    assert (p.model, p.engine, p.engine_version, p.mode) == ("nvidia/DeepSeek-R1-0528-FP4", "trtllm", "1.0.0rc4", "agg")
    assert (p.tp, p.pp, p.ep, p.num_gpus, p.batch_size) == (8, 1, 8, 8, 1024)
    assert (p.precision, p.kv_dtype) == ("NVFP4", "FP8")
    assert (p.ttft_ms, p.tpot_ms, p.e2el_ms) == (3100.4, 43.913, 48023.7)
    assert (p.output_tok_s_total, p.total_tok_s, p.output_tok_s_per_gpu) == (21540.3, 43080.6, 2692.537)
    assert p.tok_s_per_user == 23.12  # token_output_speed, not output_throughput_per_user (21.323, has TTFT)
    assert (p.spec_decoding, p.acceptance_length) == ("mtp", 2.63)
    assert p.extra["request_info.avg_num_concurrent_requests"] == 1010.2
    assert p.missing == ["gpu", "concurrency", "spec_k"]  # an MTP run that does not say its draft count


# ---------------------------------------------------------------- CSV formats

def test_serving_csv_agg_and_disagg_layouts():
    points, problems = load_one(SERVING)
    # lines 3 and 12 carry identical metrics under different layouts: one run labelled twice, both
    # skipped; line 2 is another row of line 3's configuration (cfg666), whose labels are then in doubt
    assert len(points) + len(problems) == data_lines(SERVING) == 13
    skipped = {int(pr.split(":")[1]): pr for pr in problems}
    assert set(skipped) == {2, 3, 12}
    assert "recorded under another layout at" in skipped[3] and ":12" in skipped[3] and "decode_tp" in skipped[3]
    assert "recorded under another layout at" in skipped[12] and ":3" in skipped[12]
    assert "configuration 'dsr1_b200_trtllm_fp8_disagg_cfg666'" in skipped[2]
    by_line = {p.line: p for p in points}
    d = by_line[4]  # sglang disagg: 7 prefill workers x (1x1x4) + 2 decode workers x (1x1x8)
    assert (d.mode, d.prefill_workers, d.prefill_attention_dp, d.prefill_gpus, d.decode_gpus, d.num_gpus) == (
        "disagg", 7, 4, 28, 16, 44)
    assert (d.prefill_ep, d.decode_ep, d.decode_batch, d.concurrency) == (4, 8, 128, 2048.0)
    assert (d.ttft_ms, d.tpot_ms) == (9516.669094919265, 39.02457558442612)
    wide = by_line[5]  # agg tp 64 on b200_sxm, as the source writes it (no twin here, so kept)
    assert (wide.tp, wide.attention_dp, wide.moe_tp, wide.ep, wide.num_gpus, wide.batch_size) == (64, 1, 8, 8, 64, 64)
    assert (by_line[6].tp, by_line[6].attention_dp, by_line[6].num_gpus) == (1, 64, 64)
    dense = by_line[7]  # empty attention_dp_size -> 1, said in a note
    assert (dense.attention_dp, dense.num_gpus, dense.precision) == (1, 1, None)
    assert "attention_dp" in dense.notes and dense.missing == ["precision"]
    qwen = by_line[8]  # moe_ep_size 0 = not set, empty concurrency
    assert qwen.ep is None and "moe_ep_size" in qwen.notes and qwen.missing == ["concurrency"]
    no_workers = by_line[11]
    assert no_workers.num_gpus is None and no_workers.missing == ["num_gpus", "prefill_workers", "decode_workers"]
    assert all(p.tok_s_per_user == pytest.approx(1000 / p.tpot_ms) for p in points)


def test_offline_csv_excerpt_rows_and_shifted_columns():
    points, problems = load_one(OFFLINE)
    assert len(points) + len(problems) == data_lines(OFFLINE) == 7
    assert [p.line for p in points] == [2, 3, 4, 5, 6]
    assert [pr.split(": ")[0] for pr in problems] == [f"{OFFLINE}:7", f"{OFFLINE}:8"]
    assert all("below output_tok_s_total" in pr for pr in problems)
    p = points[0]
    assert (p.model, p.gpu, p.num_gpus, p.tp, p.pp, p.mode) == (
        "nvidia/Llama-4-Scout-17B-16E-Instruct-FP4", "B200 180GB (DGX B200)", 1, 1, 1, "agg")
    assert (p.engine, p.engine_version, p.precision, p.precision_act) == ("trtllm", "1.0", "FP4", "FP4 (NVFP4)")
    assert (p.isl, p.osl, p.output_tok_s_total, p.output_tok_s_per_gpu) == (128.0, 128.0, 25342.0, 25342.0)
    assert p.notes["num_requests"] == "30000" and "metric=Total Output Throughput" in p.metric_definitions[
        "output_tok_s_total"]
    online = points[4]  # the Triton online row keeps the source's own caveat in its definition
    assert (online.tpot_ms, online.ttft_ms, online.total_tok_s) == (21.0, 62.0, 1406.0)
    assert "holds Mean ITL" in online.metric_definitions["tpot_ms"]


def test_measured_points_dp_attention_disagg_layout_and_notes():
    points, problems = load_one(POINTS)
    assert problems == [] and len(points) == 4
    dpa, disagg, plain, dataset = points
    # dp_attention=true with tp=8: attention DP 8, attention TP 1
    assert (dpa.tp, dpa.attention_dp, dpa.ep, dpa.num_gpus) == (1, 8, 8, 8)
    assert "attention TP = 1" in dpa.notes["attention_dp"]
    assert (dpa.spec_decoding, dpa.spec_k, dpa.acceptance_length) == ("mtp", 3, 2.4)  # from notes
    assert dpa.notes["recipe"] == "dsr1_fp8_h200_sglang_mtp"
    assert (disagg.mode, disagg.tp, disagg.ep, disagg.num_gpus) == ("disagg", None, None, 52)
    assert (disagg.prefill_workers, disagg.prefill_tp, disagg.prefill_attention_dp, disagg.prefill_ep,
            disagg.prefill_gpus) == (1, 1, 4, 4, 4)
    assert (disagg.decode_workers, disagg.decode_tp, disagg.decode_attention_dp, disagg.decode_ep,
            disagg.decode_gpus) == (6, 8, 1, 8, 48)
    assert disagg.output_tok_s_per_gpu == 507.69 and disagg.warnings == []
    # the benchmark settings of the client note (InferenceMAX rows): lengths in [0.8 L, L], 10 prompts per client
    assert (disagg.random_range_ratio, disagg.num_prompts) == (0.8, 10 * 1024)
    assert (disagg.isl, disagg.osl) == (8192, 1024)  # the configured (longest) lengths, as the sidecar rules name them
    assert "range_ratio=0.8" in disagg.notes["random_range_ratio"] and dpa.random_range_ratio is None and dpa.num_prompts is None
    assert (plain.tp, plain.attention_dp, plain.notes["text"]) == (4, 1, "free-text note without pairs")
    assert dataset.dataset == "sharegpt" and dataset.isl is None and dataset.osl is None
    assert dataset.missing == ["isl", "osl"] and any("sharegpt" in w for w in dataset.warnings)


# ---------------------------------------------------------------- sidecars and overrides

def test_overrides_fill_layout_and_derive_per_gpu():
    overrides = {"gpu": "H100", "tp": "4", "pp": 1, "mode": "agg", "precision": "bf16"}
    points, problems = load_one(VLLM_JSONL, overrides=overrides)
    assert problems == []
    p = points[1]
    assert (p.gpu, p.tp, p.pp, p.num_gpus, p.missing) == ("H100", 4, 1, 4, [])
    assert p.output_tok_s_per_gpu == pytest.approx(1996.945 / 4)
    assert "overrides" in p.notes


def test_override_beats_file_value_with_warning():
    (p,), _ = load_one(VLLM_JSON, overrides={"tp": 4})
    assert p.tp == 4 and p.num_gpus == 4
    assert any(w.startswith("tp: file has 8, overrides sets 4") for w in p.warnings)


def test_unknown_override_key_is_an_error():
    with pytest.raises(SimfrontError, match="tpp"):
        load_measurements(VLLM_JSON, overrides={"tpp": 8})
    with pytest.raises(SimfrontError, match="ttft_ms"):
        load_measurements(VLLM_JSON, overrides={"ttft_ms": 3})  # metrics cannot be overridden


def test_simfront_yaml_sidecar_and_precedence(tmp_path):
    result = tmp_path / "bench.jsonl"
    shutil.copy(VLLM_JSONL, result)
    (tmp_path / "bench.jsonl.simfront.yaml").write_text("gpu: H100\ntp: 4\npp: 1\nmode: agg\nprecision: fp8\n")
    points, problems = load_one(result, overrides={"precision": "bf16"})
    assert problems == []
    assert [(p.gpu, p.tp, p.num_gpus, p.precision, p.missing) for p in points] == [("H100", 4, 4, "bf16", [])] * 2
    sidecar = tmp_path / "bench.jsonl.simfront.yaml"
    assert points[0].warnings == [f"precision: sidecar {sidecar} has 'fp8', overrides sets 'bf16'"]


def test_sidecar_unknown_key_is_reported_and_rest_applies(tmp_path):
    result = tmp_path / "bench.jsonl"
    shutil.copy(VLLM_JSONL, result)
    (tmp_path / "bench.yaml").write_text("gpu: H100\ntensor_parallel: 4\n")
    points, problems = load_one(result)
    assert len(points) == 2 and points[0].gpu == "H100" and points[0].tp is None
    assert len(problems) == 1 and "bench.yaml" in problems[0] and "tensor_parallel" in problems[0]


def test_sidecar_passed_with_its_file_is_not_a_result():
    result = load_measurements([GUIDELLM, DATA / "guidellm_benchmarks.yaml"])
    assert result.problems == [] and len(result.points) == 3


# ---------------------------------------------------------------- bad files

def test_truncated_jsonl_reports_line_and_keeps_good_runs():
    points, problems = load_one(DATA / "bad_truncated_vllm.jsonl")
    assert [p.line for p in points] == [1, 2]
    assert len(problems) == 1 and problems[0].startswith(f"{DATA / 'bad_truncated_vllm.jsonl'}:3: truncated JSON (")


def test_truncated_json_document_reports_line():
    points, problems = load_one(DATA / "bad_truncated_aiperf.json")
    assert points == []
    assert len(problems) == 1 and problems[0].startswith(f"{DATA / 'bad_truncated_aiperf.json'}:76: truncated JSON")


def test_duplicate_rows_reported_first_kept():
    points, problems = load_one(DATA / "bad_duplicates.csv")
    assert [p.line for p in points] == [2, 3]
    assert problems == [f"{DATA / 'bad_duplicates.csv'}:4: duplicate of {DATA / 'bad_duplicates.csv'}:2 "
                        "(same configuration and metrics); skipped"]


def test_wrong_column_set_names_missing_columns_and_row_count():
    points, problems = load_one(DATA / "bad_columns.csv")
    assert points == []
    assert len(problems) == 1
    assert problems[0].startswith(f"{DATA / 'bad_columns.csv'}:1: header lacks column(s) concurrency, silicon_tpot_ms")
    assert "3 data row(s) not read" in problems[0]


def test_seconds_in_ms_fields_caught_by_littles_law():
    points, problems = load_one(DATA / "bad_units_vllm.json")
    assert points == []
    assert len(problems) == 1 and problems[0].startswith(f"{DATA / 'bad_units_vllm.json'}:1: ")
    assert "1000x" in problems[0] and "seconds" in problems[0]


def test_bad_values_each_reported_good_rows_survive():
    path = DATA / "bad_values.csv"
    points, problems = load_one(path)
    assert [p.line for p in points] == [2, 6]
    assert [pr.split(": ")[0] for pr in problems] == [f"{path}:3", f"{path}:4", f"{path}:5"]
    assert "ttft_ms = -12.0" in problems[0] and "exceeds 10 s" in problems[1] and "'eight'" in problems[2]


def test_unknown_format_problem_names_file_and_known_formats():
    points, problems = load_one(DATA / "unknown_format.json")
    assert points == [] and len(problems) == 1
    assert problems[0].startswith(str(DATA / "unknown_format.json")) and all(f in problems[0] for f in FORMATS)


def test_csv_row_with_wrong_cell_count_is_reported(tmp_path):
    path = tmp_path / "points.csv"
    lines = POINTS.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[3], "a,b,c", lines[4]]) + "\n")
    points, problems = load_one(path)
    assert [p.line for p in points] == [2, 4]
    assert problems == [f"{path}:3: row has 3 cells, header has 24; row skipped"]


def test_same_file_twice_every_point_reported_as_duplicate():
    result = load_measurements([VLLM_JSONL, VLLM_JSONL])
    assert len(result.points) == 2
    assert [pr.split(": ")[0] for pr in result.problems] == [f"{VLLM_JSONL}:1", f"{VLLM_JSONL}:2"]


def test_inconsistent_e2e_and_total_throughput_rejected(tmp_path):
    run = json.loads(VLLM_JSONL.read_text().splitlines()[0])
    run["mean_e2el_ms"] = run["mean_ttft_ms"] / 2  # a request cannot end before its first token
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps(run))
    points, problems = load_one(bad)
    assert points == [] and "e2el_ms" in problems[0] and problems[0].startswith(f"{bad}:1: ")


def test_empty_file_is_reported(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    points, problems = load_one(empty)
    assert points == [] and problems == [f"{empty}: empty file; nothing to read"]


# ---------------------------------------------------------------- ordering and accounting

def test_points_in_file_then_line_order():
    result = load_measurements([SGLANG, VLLM_JSONL, GUIDELLM])
    assert [(Path(p.source_file).name, p.line) for p in result.points] == [
        (SGLANG.name, 1), (SGLANG.name, 2), (VLLM_JSONL.name, 1), (VLLM_JSONL.name, 2),
        (GUIDELLM.name, 1), (GUIDELLM.name, 2), (GUIDELLM.name, 3)]


def test_points_are_validated_records():
    for p in load_measurements([SERVING, POINTS, TRTLLM]).points:
        assert isinstance(p, MeasuredPoint)
        assert MeasuredPoint.model_validate(p.model_dump()) == p


def _accounted_lines(path: Path, result) -> tuple[list[int], list[int]]:
    prefix = f"{path}:"
    problem_lines = [int(pr[len(prefix):].split(":")[0]) for pr in result.problems if pr.startswith(prefix)]
    return [p.line for p in result.points], problem_lines


@pytest.mark.parametrize("path", [SERVING, OFFLINE, POINTS, DATA / "bad_values.csv", DATA / "bad_duplicates.csv"])
def test_excerpt_every_row_is_a_point_or_a_problem(path):
    point_lines, problem_lines = _accounted_lines(path, load_measurements(path))
    assert sorted(point_lines + problem_lines) == list(range(2, data_lines(path) + 2))


@pytest.mark.skipif(not SHARED_E2E.is_dir(), reason="shared calibration data not present")
@pytest.mark.parametrize("name, rows", [("measured_serving.csv", 2250), ("offline_throughput.csv", 243)])
def test_shared_csv_every_row_is_a_point_or_a_problem(name, rows):
    path = SHARED_E2E / name
    result = load_measurements(path)
    point_lines, problem_lines = _accounted_lines(path, result)
    assert len(point_lines) + len(problem_lines) == rows
    assert sorted(point_lines + problem_lines) == list(range(2, rows + 2))
    assert all(p.ttft_ms is not None or p.output_tok_s_total is not None for p in result.points)


# --- current client formats: each fixture validates with the layout and engine it recorded ----------

from simfront.validation import validate_files  # noqa: E402

CURRENT = {
    # file or directory: (format, engine, mode, (tp, attention_dp, ep) or decode layout, GPUs)
    "aiperf_0.13_artifacts": ("aiperf", "vllm", "agg", (1, 8, 8), 8),
    "genai_bench": ("genai_bench", "sglang", "agg", (1, 1, 1), 1),
    "guidellm_run.yaml": ("guidellm", "vllm", "agg", (2, None, None), 2),
    "sglang_0.5.23_dsr1_attn_dp8.jsonl": ("sglang_bench_serving", "sglang", "agg", (1, 8, 8), 8),
    "vllm_0.33_openai_dsr1_disagg.json": ("vllm_bench_serve", "vllm", "disagg", (1, 8, 8), 16),
}


@pytest.mark.parametrize("name", CURRENT)
def test_current_client_files_validate_with_their_recorded_layout(name):
    fmt, engine, mode, layout, gpus = CURRENT[name]
    res = validate_files([str(DATA / name)])
    assert res["problems"] == []
    rows = [r for r in res["serving"]["rows"] if r.get("format") == fmt]
    assert rows and all("reason" not in r for r in rows[:1]), rows[0].get("reason")
    r = rows[0]
    assert (r["engine"], r["mode"], r["num_gpus"]) == (engine, mode, gpus)
    got = (r["decode_tp"], r["decode_attention_dp"], r["decode_ep"]) if mode == "disagg" else (r["tp"], r["attention_dp"], r["ep"])
    assert got == layout
    for key, value in r.items():  # no metadata string where a number belongs, never a non-finite number
        if key in ("isl", "osl", "concurrency", "tp", "num_gpus") or key.startswith(("prefill_", "decode_")):
            assert value is None or isinstance(value, (int, float)), (key, value)
    json.dumps(res, allow_nan=False)


def test_sglang_0523_attn_dp_size_is_attention_dp():
    (p,), _ = load_one(DATA / "sglang_0.5.23_dsr1_attn_dp8.jsonl")
    assert (p.tp, p.attention_dp, p.ep, p.num_gpus, p.engine_version) == (1, 8, 8, 8, "0.5.23")
    assert p.tpot_ms == 10.14 and p.concurrency == 64.0 and "achieved_concurrency" in p.extra


def test_vllm_openai_backend_keeps_the_recorded_engine_and_disagg_layout():
    (p,), _ = load_one(DATA / "vllm_0.33_openai_dsr1_disagg.json")
    assert p.engine == "vllm" and p.extra["backend"] == "openai"  # the client backend names no engine
    assert (p.prefill_gpus, p.decode_gpus, p.decode_batch, p.mode) == (8, 8, 96, "disagg")
    assert "isl" not in p.extra and "engine" not in p.extra  # consumed, not echoed as strings


def test_aiperf_013_concurrency_run_is_not_rate_driven():
    (p,), problems = load_one(DATA / "aiperf_0.13_artifacts" / "profile_export_aiperf.json")
    assert problems == [] and p.model == "deepseek-ai/DeepSeek-R1"
    assert (p.concurrency, p.request_rate, p.isl, p.osl) == (96.0, None, 8192.0, 1024.0)


def test_empty_directory_is_a_problem(tmp_path):
    result = load_measurements([tmp_path])
    assert result.points == [] and "no known result file" in result.problems[0]


def test_simfront_sidecars_validate_agg_and_disagg(tmp_path):
    from simfront.launch import Deployment, WorkerLayout, sidecar_yaml

    src = json.loads((DATA / "vllm_0.33_openai_dsr1_disagg.json").read_text())
    bare = {k: v for k, v in src.items() if not k.startswith(("prefill_", "decode_")) and k not in
            ("mode", "num_gpus", "engine", "engine_version", "gpu", "precision", "kv_dtype", "model")}
    (tmp_path / "run.json").write_text(json.dumps(bare))
    dis = Deployment("deepseek-ai/DeepSeek-R1", mode="disagg", kv_dtype="fp8", weight_precision="fp8_block", gpu="h200_sxm",
                     prefill=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=16),
                     decode=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=768), isl=8192, osl=1024, concurrency=256)
    (tmp_path / "run.json.simfront.yaml").write_text(sidecar_yaml(dis, "vllm"))
    res = validate_files([str(tmp_path / "run.json")])
    assert res["problems"] == [] and "reason" not in res["serving"]["rows"][0]
    # an older simfront sidecar (nested prefill:/decode:) is read too
    old = yaml.safe_load(sidecar_yaml(dis, "vllm"))
    old = {k: v for k, v in old.items() if not k.startswith(("prefill_", "decode_"))}
    old.update(tp=1, attention_dp=8, ep=8, prefill={"tp": 1, "attention_dp": 8, "ep": 8, "workers": 1, "num_gpus": 8, "pp": 1},
               decode={"tp": 1, "attention_dp": 8, "ep": 8, "workers": 1, "num_gpus": 8, "max_batch": 96, "pp": 1})
    (tmp_path / "run.json.simfront.yaml").write_text(yaml.safe_dump(old))
    res = validate_files([str(tmp_path / "run.json")])
    assert res["problems"] == [] and "reason" not in res["serving"]["rows"][0]


def test_num_gpus_contradicting_the_layout_is_warned_not_trusted(tmp_path):
    (tmp_path / "r.json").write_text((DATA / "aiperf_0.13_artifacts" / "profile_export_aiperf.json").read_text())
    side = yaml.safe_load((DATA / "aiperf_0.13_artifacts.simfront.yaml").read_text())
    (tmp_path / "r.json.simfront.yaml").write_text(yaml.safe_dump({**side, "num_gpus": 12}))
    (p,), _ = load_one(tmp_path / "r.json")
    assert p.num_gpus == 8 and any("num_gpus=12 contradicts the layout" in w for w in p.warnings)


def test_measurement_dates_are_read_as_iso_dates(tmp_path):
    """The run's date (what picks the engine release family of a row without a version): aiconfigurator's
    measured_on column, an InferenceMAX row's date= note, vLLM bench serve's date field; a malformed one is named."""
    from simfront.ingest.common import RecordError, iso_date

    root = Path(__file__).resolve().parent.parent / "measurements"
    serving = load_measurements([root / "measured_serving.csv"]).points
    assert {p.measured_on for p in serving if p.row_id == "dsr1_b200_sglang_fp8_agg_8192x1024_c4_cfg271"} == {"2026-03-25"}
    imax = load_measurements([root / "inferencemax_b200_h100.csv"]).points
    assert all(p.measured_on and len(p.measured_on) == 10 for p in imax) and max(p.measured_on for p in imax) == "2026-06-11"
    vllm = load_measurements([DATA / "captured" / "vllm_bench_serve_llama8b_tp1.json"]).points
    assert [p.measured_on for p in vllm] == ["2026-12-07"]  # the capture's date field, 20261207-030011
    assert iso_date("20261202-004022") == "2026-12-02" and iso_date("2026-03-23T10:00:00Z") == "2026-03-23"
    assert iso_date("") is None
    with pytest.raises(RecordError, match="not a date"):
        iso_date("March 2026")


@pytest.mark.parametrize("key", ["max_num_batched_tokens", "max_num_tokens", "token_budget"])
def test_token_budget_keys_of_vllm_sweeps_and_trtllm_are_read_per_rank(tmp_path, key):
    """`vllm bench sweep` records the server overrides it swept (max_num_batched_tokens, per engine core);
    TensorRT-LLM's max_num_tokens is per attention-DP rank too; simfront's own metadata says token_budget."""
    raw = json.loads(VLLM_JSON.read_text())
    raw[key] = "2048"
    (tmp_path / "r.json").write_text(json.dumps(raw))
    (p,), problems = load_one(tmp_path / "r.json")
    assert problems == [] and p.token_budget == 2048 and key not in p.extra


def test_a_recorded_memory_fraction_sizes_the_kv_pool_by_the_engines_rule(tmp_path):
    """InferenceMAX SGLang DeepSeek-R1 FP8, TP8 on B200, 8k/1k at 512 users: the KV pool binds. Recorded as SGLang's
    --mem-fraction-static 0.82 (the recipe's value), the pool is 0.82 x HBM - weights, smaller than simfront's default
    pool, so fewer users run at once and the rest queue longer for their first token."""
    src = Path(__file__).resolve().parent.parent / "measurements" / "inferencemax_b200_h100.csv"
    lines = src.read_text().splitlines()
    row = lines[335]  # line 336: SGLang, B200, fp8, TP8, 8192/1024, concurrency 512
    assert ",512," in row and "SGLang" in row and "B200" in row
    (tmp_path / "run.csv").write_text(lines[0] + "\n" + row + "\n")
    base = validate_files([str(tmp_path / "run.csv")])["serving"]["rows"][0]
    (tmp_path / "run.csv.simfront.yaml").write_text("gpu_memory_fraction: 0.82\n")
    small = validate_files([str(tmp_path / "run.csv")])["serving"]["rows"][0]
    assert small["gpu_memory_fraction"] == 0.82 and base.get("gpu_memory_fraction") is None
    assert small["predicted_ttft_ms"] > 1.2 * base["predicted_ttft_ms"]


@pytest.mark.parametrize("key", ["gpu_memory_utilization", "mem_fraction_static", "free_gpu_memory_fraction", "gpu_memory_fraction"])
def test_each_engines_memory_fraction_key_is_read(tmp_path, key):
    raw = json.loads(VLLM_JSON.read_text())
    raw[key] = "0.85"
    (tmp_path / "r.json").write_text(json.dumps(raw))
    (p,), problems = load_one(tmp_path / "r.json")
    assert problems == [] and p.gpu_memory_fraction == 0.85 and key not in p.extra

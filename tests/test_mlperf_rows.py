"""MLPerf-style result rows: benchmark and dataset names instead of ISL/OSL, GPU spellings of
submissions (virtualised parts, parts the catalog lacks), generic precision names resolved per GPU,
and a num_gpus that contradicts the layout. Fixture: tests/data/ingest/mlperf_style.csv (invented
numbers of realistic magnitude in the measured-point CSV format; see tests/data/ingest/README.md)."""

from __future__ import annotations

import math

import pytest
import yaml

from simfront.hardware import get_hardware
from simfront.ingest import load_measurements
from simfront.ingest.datasets import BENCHMARKS_FILE, benchmark_named, benchmarks, dataset_lengths
from simfront.ingest.gpu_names import check_gpu, unresolved_reason
from simfront.measured import resolve
from simfront.precision import resolve_format
from simfront.validation import validate_files

from pathlib import Path

FIXTURE = Path(__file__).parent / "data" / "ingest" / "mlperf_style.csv"
# Lines of the fixture whose layout (tp) is given, whose model and GPU are in the catalogs, and whose
# load is a client concurrency or an offline run (the Server-scenario rows 9 and 10 give a Poisson rate,
# which is not predicted point by point)
PREDICTABLE = [2, 3, 4, 5, 6, 7, 11, 12, 13, 14, 15, 16, 17, 18, 19, 21]


@pytest.fixture(scope="module")
def ingested():
    return load_measurements(FIXTURE)


@pytest.fixture(scope="module")
def validated():
    return validate_files([str(FIXTURE)])["serving"]


def by_line(points):
    return {p.line: p for p in points}


def test_every_benchmark_entry_is_cited_or_marked_an_estimate():
    doc = yaml.safe_load(BENCHMARKS_FILE.read_text())["benchmarks"]
    assert set(doc) >= {"llama2-70b", "llama3.1-405b", "llama3.1-8b", "mixtral-8x7b", "deepseek-r1", "gpt-j"}
    for name, b in doc.items():
        for key in ("mean_input_tokens", "mean_output_tokens"):
            fig = b[key]
            assert fig["value"] > 0
            assert (fig["estimate"] and fig["basis"].strip()) or (not fig["estimate"] and "mlcommons/inference" in fig["source"]), (name, key)
    # the four output means the benchmark READMEs state
    assert {n: b.osl for n, b in benchmarks().items() if "osl" not in b.estimated} == {
        "llama2-70b": 294.45, "mixtral-8x7b": 144.84, "llama3.1-405b": 684.68, "deepseek-r1": 4043.45}


def test_benchmark_and_dataset_names():
    assert benchmark_named("llama2-70b-99.9").benchmark == "llama2-70b"
    assert benchmark_named("Llama2-70B-Interactive-99").benchmark == "llama2-70b"
    assert benchmark_named("llama-3.1-8b") is None  # a catalog model name, not an MLPerf benchmark name
    lengths, why = dataset_lengths("OpenOrca")
    assert why is None and lengths.osl == 294.45 and lengths.estimated == ("isl",)
    # CNN/DailyMail is used by GPT-J and Llama-3.1-8B, tokenised differently: the model decides
    assert dataset_lengths("cnn_dailymail", "meta-llama/Llama-3.1-8B-Instruct")[0].benchmark == "llama3.1-8b"
    assert dataset_lengths("cnn-dailymail", "EleutherAI/gpt-j-6b")[0].benchmark == "gpt-j"
    none, why = dataset_lengths("cnn_dailymail", "qwen3-8b")
    assert none is None and "llama3.1-8b" in why and "gpt-j" in why
    none, why = dataset_lengths("sharegpt")
    assert none is None and "no tabulated mean lengths" in why


def test_rows_take_model_and_lengths_from_the_benchmark_name(ingested):
    assert ingested.problems == []
    pts = by_line(ingested.points)
    assert len(pts) == 21
    p = pts[2]
    assert p.model == "meta-llama/Llama-2-70b-chat-hf" and "llama2-70b-99" in p.notes["model"]
    assert p.dataset == "openorca" and p.osl == 294.45 and p.isl == 870
    assert "294.45" in p.metric_definitions["osl"] and "ESTIMATED" in p.metric_definitions["isl"]
    assert any(w.startswith("isl = 870 is an ESTIMATE") for w in p.warnings)
    assert not any(w.startswith("osl") for w in p.warnings)  # the output mean is cited, not estimated
    assert pts[16].dataset == "cnn_dailymail" and pts[16].isl == 1000  # dataset column given
    assert pts[18].model == "deepseek-ai/DeepSeek-R1" and pts[18].osl == 4043.45  # scenario= marks it MLPerf


def test_a_catalog_model_name_without_mlperf_marks_is_left_alone(tmp_path):
    f = tmp_path / "plain.csv"
    f.write_text(FIXTURE.read_text().splitlines()[0] + "\n"
                 "x,deepseek-r1,B200,8,8,1,8,true,false,SGLang 0.5,fp8,fp8,fp8,,,,64,,,9000,a plain run\n")
    p = load_measurements(f).points[0]
    assert p.model == "deepseek-r1" and p.isl is None and p.dataset is None


def test_gpu_spellings():
    assert get_hardware("NVIDIA B200-SXM-180GB").id == "b200_sxm"
    assert get_hardware("NVIDIA H100-SXM-80GB").id == "h100_sxm"
    assert get_hardware("NVIDIA H200-SXM-141GB").id == "h200_sxm"
    for name, hw in (("MI300X-VF", "mi300x"), ("NVIDIA H100-SXM-80GB vGPU", "h100_sxm"), ("GRID H100", "h100_sxm")):
        got, warnings, note = check_gpu(name)
        assert got == hw and note and warnings[0].startswith(f"virtualised part {name!r}") and f"treated as {hw}" in warnings[0]
    for name in ("H200-NVL", "NVIDIA H200 NVL", "NVIDIA H100-NVL-94GB", "NVIDIA A100-PCIe-80GB"):
        got, warnings, note = check_gpu(name)
        assert got == name and note is None and "not in the catalog" in warnings[0]
        assert "not in the catalog" in unresolved_reason(name)
    assert check_gpu("NVIDIA H100-SXM-80GB") == ("NVIDIA H100-SXM-80GB", [], None)
    assert unresolved_reason("NVIDIA H100-SXM-80GB") is None


def test_no_part_listed_as_missing_is_in_the_catalog():
    """gpu_spellings.yaml's other_parts are parts the catalog lacks: once a hardware/*.yaml adds one, its entry
    would refuse the rows the catalog can now predict (H800 was refused after hardware/h800_sxm.yaml landed)."""
    from simfront.errors import SimfrontError
    from simfront.ingest.gpu_names import _spellings

    for part in _spellings()["other_parts"]:
        with pytest.raises(SimfrontError):
            get_hardware(part["part"])
    for name in ("H800", "NVIDIA H800 80GB HBM3"):
        assert check_gpu(name) == (name, [], None) and unresolved_reason(name) is None
        assert get_hardware(name).id == "h800_sxm"


def test_h200_nvl_is_not_predicted_as_the_sxm_part(ingested, validated):
    p = by_line(ingested.points)[8]
    assert p.gpu == "H200-NVL" and "H200 NVL, a different part" in p.warnings[0]
    row = next(r for r in validated["rows"] if r["line"] == 8)
    assert "reason" in row and "H200-NVL" in row["reason"] and row["predicted_output_tok_s_total"] is None
    assert any("not in the catalog" in w for w in row["warnings"])  # the row itself says why


def test_virtualised_part_is_predicted_as_the_physical_part(ingested, validated):
    p = by_line(ingested.points)[5]
    assert p.gpu == "mi300x" and "MI300X-VF" in p.notes["gpu"]
    row = next(r for r in validated["rows"] if r["line"] == 5)
    assert "reason" not in row and row["predicted_output_tok_s_total"] > 0


def test_fp4_means_mxfp4_on_cdna4_and_nvfp4_on_blackwell(ingested):
    pts = by_line(ingested.points)
    assert resolve_format("fp4", get_hardware("mi355x")).name == "mxfp4"
    assert resolve_format("fp4", get_hardware("b200")).name == "nvfp4"
    amd, nv = resolve(pts[7])[0], resolve(pts[4])[0]
    assert amd.precision.dense == "mxfp4" and nv.precision.dense == "nvfp4"  # the same "fp4" column


def test_num_gpus_that_contradicts_the_layout_is_reported(ingested):
    p = by_line(ingested.points)[21]  # num_gpus 6 with tp 4: not whole replicas
    assert p.num_gpus == 4 and p.notes["num_gpus"] == "source said 6; layout gives 4"
    assert any(w.startswith("num_gpus=6 contradicts the layout") for w in p.warnings)
    ok = by_line(ingested.points)[2]  # 8 GPUs of tp 2: four replicas, no warning
    assert ok.num_gpus == 8 and "4 replicas" in ok.notes["num_gpus"]
    assert not any("num_gpus" in w for w in ok.warnings)


def test_num_gpus_that_contradicts_throughput_per_gpu_is_reported(tmp_path):
    """Per-GPU x num_gpus must give the total; and a latency/throughput pair that breaks Little's law by
    the factor of a unit slip is dropped with the reason."""
    f = tmp_path / "pergpu.csv"
    f.write_text("model,gpu,num_gpus,tp,pp,disagg,engine,isl,osl,concurrency,metric_output_tok_s_total,"
                 "metric_output_tok_s_per_gpu,metric_ttft_ms,metric_tpot_ms,notes\n"
                 "llama-3.1-8b,H100,8,1,1,false,vLLM 0.10,1024,1024,64,8000,500,100,30,\n"
                 "llama-3.1-8b,H100,8,1,1,false,vLLM 0.10,1024,1024,64,8000,1000,0.1,0.03,\n")
    res = load_measurements(f)
    p = res.points[0]
    assert any("output_tok_s_per_gpu x num_gpus = 4000 differs from output_tok_s_total = 8000" in w for w in p.warnings)
    assert len(res.points) == 1 and "Little's law" in res.problems[0]


def test_rows_with_a_layout_are_predicted(validated):
    """The count the issue asks for: rows whose layout is given and whose model and GPU are in the catalogs."""
    rows = {r["line"]: r for r in validated["rows"]}
    with_layout = [ln for ln, r in rows.items() if r.get("tp")]
    assert len(rows) == 21 and len(with_layout) == 20
    predicted = [ln for ln in with_layout if "reason" not in rows[ln]]
    assert predicted == PREDICTABLE  # 16 of the 20 rows with a layout
    for ln in predicted:
        v = rows[ln]["predicted_output_tok_s_total"]
        assert v is not None and math.isfinite(v) and v > 0
    assert "gpt-j" in rows[20]["reason"]  # GPT-J is not in the model catalog


def test_a_row_without_a_layout_is_not_guessed(validated):
    """A row that gives no tensor-parallel size is reported, not predicted as TP1."""
    rows = {r["line"]: r for r in validated["rows"]}
    no_layout = [r for r in rows.values() if not r.get("tp") and "reason" in r]
    assert no_layout and all("tp" in r["reason"] for r in no_layout)

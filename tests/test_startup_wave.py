"""A benchmark's synchronised start-up wave is a property of the client (workload), not of the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from simfront import api
from simfront.errors import SimfrontError
from simfront.ingest import load_measurements
from simfront.measured import BENCHMARK_PROMPTS_PER_CLIENT, predict_points, resolve, wave_share

ROW = {"model": "llama-3.1-70b", "gpu": "H100", "isl": 2048, "osl": 256, "mode": "agg", "tp": 8, "concurrency": 64,
       "precision": "fp8", "engine": "vllm"}


def test_wave_share_comes_from_the_row():
    assert wave_share({**ROW, "num_prompts": 128}) == pytest.approx(0.5)
    assert wave_share({**ROW, "startup_wave_share": 0.0}) == 0.0
    assert wave_share(ROW) == pytest.approx(1.0 / BENCHMARK_PROMPTS_PER_CLIENT)


def test_a_bigger_first_wave_waits_longer_and_tpot_is_untouched():
    few, many, steady = predict_points([{**ROW, "num_prompts": 128}, {**ROW, "num_prompts": 6400}, {**ROW, "startup_wave_share": 0}])
    assert few["predicted_ttft_ms"] > many["predicted_ttft_ms"] > steady["predicted_ttft_ms"]
    assert few["predicted_tpot_ms"] == pytest.approx(steady["predicted_tpot_ms"])


def test_disaggregated_wave_queues_at_the_prefill_workers():
    row = {**ROW, "mode": "disagg", "prefill_tp": 8, "prefill_workers": 1, "decode_tp": 8, "decode_workers": 1, "concurrency": 128}
    wave, steady = predict_points([{**row, "num_prompts": 256}, {**row, "startup_wave_share": 0}])
    assert wave["predicted_ttft_ms"] > steady["predicted_ttft_ms"]


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_a_measured_run_with_a_length_range_is_costed_at_its_mean_lengths(mode):
    """Lengths uniform in [0.8 L, L]: a measured-point CSV row names the configured L (2048 / 256) and is costed at the
    mean, (1638 + 2048) / 2 and (204 + 256) / 2; a client result holds the mean its requests carried (1843 / 230) and is
    costed at that mean too, not discounted twice."""
    row = dict(ROW, mode=mode, **({"prefill_tp": 8, "prefill_workers": 1, "decode_tp": 8, "decode_workers": 1}
                                  if mode == "disagg" else {}))
    csv_row = {**row, "format": "offline_csv", "random_range_ratio": 0.8}
    served = {**row, "format": "sglang_bench_serving", "isl": 1843, "osl": 230, "random_range_ratio": 0.8}
    r, _ = resolve(served)
    assert (r.isl, r.osl) == (pytest.approx(2047.78, abs=0.01), pytest.approx(255.56, abs=0.01))  # the range's longest
    from_csv, from_client, at_means, at_longest = predict_points([csv_row, served, {**row, "isl": 1843, "osl": 230}, row])
    for m in ("predicted_ttft_ms", "predicted_tpot_ms"):
        assert from_csv[m] == pytest.approx(at_means[m], rel=1e-9)
        assert from_client[m] == pytest.approx(at_means[m], rel=2e-3)  # to the fraction of a token the inversion rounds
    assert from_csv["predicted_ttft_ms"] < at_longest["predicted_ttft_ms"]  # shorter prompts on average
    # the two ranged runs measure the same throughput; the spread of their output lengths makes their last client
    # finish later than fixed lengths at the same means would (simfront.benchmark_run), by a few per cent
    tput = "predicted_output_tok_s_total"
    assert from_client[tput] == pytest.approx(from_csv[tput], rel=2e-3)
    assert 0.9 * at_means[tput] < from_csv[tput] < at_means[tput]


def test_predict_is_steady_state_unless_asked_for_a_benchmark_run():
    """The same configurations, evaluated as a benchmark of 2 prompts per client, wait for their first wave."""
    steady = api.predict("llama-3.1-70b", "8xH100", modes=["agg"]).points
    bench = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], prompts_per_client=2).points
    assert steady["ttft_ms"].shape == bench["ttft_ms"].shape  # the same configurations, in the same order
    loaded = steady["batch"] >= 16
    assert (bench["ttft_ms"][loaded] > steady["ttft_ms"][loaded]).all()
    assert (bench["tpot_ms"] == steady["tpot_ms"]).all()
    with pytest.raises(SimfrontError, match="prompts-per-client"):
        api.predict("llama-3.1-8b", "1xH100", prompts_per_client=0.5)


def test_vllm_result_records_its_prompt_count():
    f = Path(__file__).parent / "data" / "ingest" / "vllm_infqps-concurrency64-DeepSeek-R1-20250612-101530.json"
    p = load_measurements([str(f)]).points[0]
    assert p.num_prompts == 640 and wave_share(p) == pytest.approx(64 / 640)


def test_fixed_length_benchmark_runs_in_waves_on_a_prefill_first_engine():
    """--random-range-ratio 1 (every request exactly ISL / OSL) on SGLang: each round the batch's prompts are
    prefilled in one burst, so loaded points wait longer for their first token and decode faster; lengths that vary
    (the default, or r < 1) and a mixed-step engine (vLLM) form none."""
    kw = dict(isl=2048, osl=256, modes=["agg"], engine="sglang")
    varied = api.predict("qwen3-32b", "8xH100", **kw).points
    fixed = api.predict("qwen3-32b", "8xH100", random_range_ratio=1.0, **kw)
    assert fixed.workload.random_range_ratio == 1.0
    pts = fixed.points
    loaded = (varied["batch"] >= 32) & (varied["batch"] <= 256)  # loaded, and not capped by the token budget
    assert (pts["ttft_ms"][loaded] > varied["ttft_ms"][loaded]).all()
    assert (pts["tpot_ms"][loaded] < varied["tpot_ms"][loaded]).all()
    # lengths in [0.8 L, L]: each wave's finish times spread, the spread compounds from round to round, no waves;
    # the requests are costed at their mean lengths, (1638 + 2048) / 2 and (204 + 256) / 2
    blurred = api.predict("qwen3-32b", "8xH100", random_range_ratio=0.8, **kw)
    assert (blurred.workload.mean_isl, blurred.workload.mean_osl) == (1843.0, 230.0)
    at_means = api.predict("qwen3-32b", "8xH100", **dict(kw, isl=1843, osl=230)).points
    assert (blurred.points["ttft_ms"] == at_means["ttft_ms"]).all() and (blurred.points["tpot_ms"] == at_means["tpot_ms"]).all()
    vkw = dict(kw, engine="vllm")
    assert (api.predict("qwen3-32b", "8xH100", random_range_ratio=1.0, **vkw).points["ttft_ms"]
            == api.predict("qwen3-32b", "8xH100", **vkw).points["ttft_ms"]).all()
    with pytest.raises(SimfrontError, match="random-range-ratio"):
        api.predict("llama-3.1-8b", "1xH100", random_range_ratio=0.0)


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_a_median_ttft_is_a_steady_state_requests_and_the_run_keeps_its_wave(mode):
    """A row whose TTFT is the median over its requests (``ttft_statistic``: InferenceMAX's time-series rows) is priced
    as a request after the start-up wave (the wave is a tenth of the run: its requests sit in the upper tail), while its
    throughput stays the run's, wave included; the mean of the same run keeps the wave's wait."""
    row = dict(ROW, mode=mode, num_prompts=640,
               **({"prefill_tp": 8, "prefill_workers": 1, "decode_tp": 8, "decode_workers": 1} if mode == "disagg" else {}))
    mean, median, steady = predict_points([row, {**row, "ttft_statistic": "median"}, {**row, "startup_wave_share": 0}])
    assert median["predicted_ttft_ms"] == pytest.approx(steady["predicted_ttft_ms"], rel=1e-12)
    assert mean["predicted_ttft_ms"] > median["predicted_ttft_ms"]
    for m in ("predicted_tpot_ms", "predicted_output_tok_s_total"):
        assert median[m] == pytest.approx(mean[m], rel=1e-12)
    # a run whose first wave is most of its requests (2 prompts per client): the median request is in it
    half = {**row, "num_prompts": 128}
    wave_mean, wave_median = predict_points([half, {**half, "ttft_statistic": "median"}])
    assert wave_median["predicted_ttft_ms"] == pytest.approx(wave_mean["predicted_ttft_ms"], rel=1e-12)


def test_readers_say_which_statistic_the_ttft_is(tmp_path):
    """The measured-point CSV reads InferenceMAX's note (tpot/ttft=mean or MEDIAN) and a ttft_statistic note; a client
    result that records a median TTFT and no mean is read as a median."""
    import json

    head = "model,gpu,num_gpus,tp,pp,ep,dp_attention,disagg,engine,precision_weights,isl,osl,concurrency,metric_ttft_ms,metric_tpot_ms,notes\n"
    rows = ['"tpot/ttft=MEDIAN (history endpoint has no means)"', '"tpot/ttft=mean (x1000 here)"', "ttft_statistic=Median",
            "date=2026-01-01", "ttft_statistic=p99"]
    path = tmp_path / "points.csv"  # one TTFT per row: equal metrics on one configuration would read as one run twice
    path.write_text(head + "".join(f"deepseek-r1,B200,8,8,1,8,false,false,SGLang,fp8,1024,1024,64,{250 + i},20,{note}\n"
                                   for i, note in enumerate(rows)))
    ing = load_measurements([str(path)])
    assert [p.ttft_statistic for p in ing.points] == ["median", "mean", "median", None]
    assert any("ttft_statistic" in msg and "expected mean or median" in msg for msg in ing.problems)
    vllm = tmp_path / "vllm.json"
    vllm.write_text(json.dumps({"backend": "vllm", "model_id": "deepseek-ai/DeepSeek-R1", "max_concurrency": 8, "completed": 80,
                                "total_input_tokens": 81920, "total_output_tokens": 81920, "median_ttft_ms": 210.0,
                                "mean_tpot_ms": 20.0, "output_throughput": 400.0, "total_token_throughput": 800.0}))
    (point,) = load_measurements([str(vllm)]).points
    assert point.ttft_statistic == "median" and point.ttft_ms == 210.0


def test_validate_says_how_many_rows_hold_a_median_ttft(tmp_path):
    """The text report counts the rows whose TTFT is a median (and so what it was compared with)."""
    import subprocess
    import sys

    head = "model,gpu,num_gpus,tp,pp,ep,dp_attention,disagg,engine,precision_weights,isl,osl,concurrency,metric_ttft_ms,metric_tpot_ms,notes\n"
    path = tmp_path / "points.csv"
    path.write_text(head + "deepseek-r1,B200,8,8,1,8,false,false,SGLang,fp8,1024,1024,64,250,20,ttft_statistic=median\n"
                    + "deepseek-r1,B200,8,8,1,8,false,false,SGLang,fp8,1024,1024,32,200,18,\n")
    p = subprocess.run([sys.executable, "-m", "simfront", "validate", str(path), "-q"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "1 row(s) record the median TTFT over their requests" in p.stdout

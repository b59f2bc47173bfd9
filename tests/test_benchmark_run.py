"""A finite benchmark run's throughput (simfront.benchmark_run) against exact values and a direct simulation."""

import numpy as np
import pytest

from simfront import api
from simfront.benchmark_run import expected_max_normal, length_cv, run_throughput_share
from simfront.measured import predict_points


@pytest.mark.parametrize("n, exact", [(1, 0.0), (2, 1.0 / np.sqrt(np.pi)), (8, 1.4236), (100, 2.5076), (1000, 3.2414)])
def test_expected_largest_normal_matches_tabulated_values(n, exact):
    """E[max of n standard normals]: 1/sqrt(pi) for two, the tabulated order-statistic means for the others
    (Harter 1961 / Royston 1982 tables), within Blom's approximation."""
    assert float(expected_max_normal(n)) == pytest.approx(exact, abs=0.03)


def test_length_spread_of_a_uniform_range():
    """Uniform on [0.8 L, L]: sd 0.2 L / sqrt(12), mean 0.9 L."""
    assert length_cv(0.8) == pytest.approx(0.2 / np.sqrt(12) / 0.9)
    assert length_cv(1.0) == 0.0 and length_cv(None) == 0.0


def test_run_share_limits():
    """No wave, no spread: the run is K lifetimes (share 1); fixed lengths: the last client started the whole wave
    late, W / 2 after the mean; an endless run samples the steady state."""
    assert float(run_throughput_share(64, 10, 20.0, 0.0, 0.0)) == pytest.approx(1.0)
    assert float(run_throughput_share(64, 10, 20.0, 0.0, 3.0)) == pytest.approx(200.0 / 203.0)
    assert float(run_throughput_share(64, np.inf, 20.0, 2.0, 3.0)) == 1.0
    more_clients = run_throughput_share(np.array([8, 64, 512]), 10, 20.0, 1.0, 0.0)
    assert np.all(np.diff(more_clients) < 0)  # the last of more clients finishes later
    assert np.all(np.diff(run_throughput_share(64, np.array([2, 10, 100]), 20.0, 1.0, 0.0)) > 0)  # longer runs dilute it


@pytest.mark.parametrize("wave_half_s, sd_s", [(0.0, 1.5), (4.0, 0.0), (2.0, 1.5)])
def test_run_share_against_a_direct_simulation(wave_half_s, sd_s):
    """C clients, each starting at its place in the wave (evenly over [0, W]) and then running K lifetimes drawn
    with sd sigma: the run's mean duration against the closed form, within 2 % of the tail where both terms matter
    (the interpolation between the two exact limits) and 0.5 % of the run."""
    C, K, L = 64, 10, 20.0
    rng = np.random.default_rng(1)
    starts = np.linspace(0.0, 2.0 * wave_half_s, C)  # the wave's prompts one after another
    sums = rng.normal(K * L, np.sqrt(K) * sd_s, size=(4000, C)) if sd_s else np.full((1, C), K * L)
    duration = (starts + sums).max(axis=1).mean()
    mean_lifetime = L + wave_half_s / K  # the wave's mean offset, once per client
    simulated = K * mean_lifetime / duration
    closed = float(run_throughput_share(C, K, mean_lifetime, sd_s, wave_half_s))
    assert closed == pytest.approx(simulated, rel=5e-3)


ROW = {"model": "llama-3.1-70b", "gpu": "h100_sxm", "num_gpus": 8, "tp": 8, "engine": "trtllm", "isl": 2048,
       "osl": 256, "concurrency": 64, "mode": "agg", "tpot_ms": 20.0, "ttft_ms": 300.0}


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_a_measured_benchmark_is_predicted_below_its_little_law_throughput(mode):
    """A row of a finite run (10 prompts per client, lengths in [0.8 L, L]) is predicted at the run's throughput:
    below C x OSL / (TTFT + (OSL - 1) TPOT) of its own predicted latencies by the run's tail, and equal to it
    in steady state."""
    row = dict(ROW, mode=mode, random_range_ratio=0.8, **({"prefill_tp": 8, "prefill_workers": 1, "decode_tp": 8,
                                                             "decode_workers": 1} if mode == "disagg" else {}))
    run, steady = predict_points([{**row, "num_prompts": 640}, {**row, "startup_wave_share": 0}])
    for p, want in ((run, (1.01, 1.2)), (steady, (0.999, 1.001))):
        osl = 0.9 * 256  # the mean output length of [0.8 L, L]
        lifetime_s = (p["predicted_ttft_ms"] + (osl - 1) * p["predicted_tpot_ms"]) / 1e3
        little = 64 * osl / lifetime_s
        assert want[0] < little / p["predicted_output_tok_s_total"] < want[1]


def test_predict_reports_steady_state_throughput_unless_asked_for_a_run():
    """Frontier points of a default predict obey Little's law at their concurrency; a benchmark run of 2 prompts
    per client completes fewer requests per second than that (its first wave and its last clients)."""
    steady = api.predict("llama-3.1-70b", "8xH100", modes=["agg"]).points
    bench = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], prompts_per_client=2).points
    osl = 1024.0  # predict's default output length

    def little(pts):  # requests/s of the point's clients at its own latencies (Little's law)
        return pts["concurrency"] / ((pts["ttft_ms"] + (osl - 1) * pts["tpot_ms"]) / 1e3)

    np.testing.assert_allclose(steady["requests_s"], little(steady), rtol=1e-6)
    loaded = bench["batch"] >= 16
    assert (bench["requests_s"][loaded] < little(bench)[loaded] * (1 - 1e-3)).all()

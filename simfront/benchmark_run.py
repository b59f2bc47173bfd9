"""A finite closed-loop benchmark run: its output throughput against the steady state it samples.

A serving benchmark (``vllm bench serve --max-concurrency C --num-prompts K*C``, SGLang ``bench_serving``,
InferenceX's runs with K = 10) reports output tokens over the run's wall time, from its first request to its last
response. In steady state C clients complete C / L requests per second (Little's law, L the mean request
lifetime), so K*C requests would take K*L. The run lasts longer, because it ends with its last client:

    duration = max over clients u of (a_u + S_u)

``a_u``: how late client u's first request got its prompt through in the start-up wave (the wave's prompts are
prefilled one after another, so the offsets spread over [0, W]); ``S_u``: the sum of its K lifetimes, which the
benchmark's random lengths spread (standard deviation sqrt(K) x sigma). The mean lifetime L already counts the
wave's mean offset W / 2 once per client, so

    duration - K*L ~= sqrt((W / 2)^2 + (z_C sqrt(K) sigma)^2)

exact at either limit: fixed lengths (the last client started W late, W / 2 after the mean) and no wave (the
expected largest of C Gaussian sums, z_C the expected largest of C standard normals). Clients that finish
early leave the last ones a smaller, faster batch, which the bound ignores: it errs towards a longer run.

On ``inferencemax_b200_h100.csv`` (K = 10, lengths uniform in [0.8 L, L]) the measured rows' own Little's-law
throughput, C x OSL / (TTFT + (OSL - 1) TPOT), is 1.025-1.033 x their reported throughput in the aggregated
(ISL, OSL) groups and 1.04-1.07 x in the disaggregated ones (medians), where the length term alone gives 1.03-1.04.
"""

from __future__ import annotations

import numpy as np

# Abramowitz & Stegun 26.2.23: upper-tail normal quantile z(q) = t - (c0 + c1 t + c2 t^2) / (1 + d1 t + d2 t^2 +
# d3 t^3), t = sqrt(-2 ln q), for 0 < q <= 0.5, absolute error below 4.5e-4
_AS_C = (2.515517, 0.802853, 0.010328)
_AS_D = (1.432788, 0.189269, 0.001308)
# Blom's plotting position: the expected i-th largest of n standard normals is close to the normal quantile at
# (n - i + 1 - 0.375) / (n + 0.25); i = 1 gives the expected largest (error below 0.02 for n <= 10^4)
_BLOM_A = 0.375
_BLOM_B = 0.25


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def expected_max_normal(n) -> np.ndarray:
    """Expected largest of ``n`` independent standard normal draws (0 for n <= 1; broadcasts)."""
    nn = np.maximum(_f(n), 1.0)
    q = (_BLOM_A + _BLOM_B) / (nn + _BLOM_B)  # upper-tail probability of Blom's position: 1 - (n - a) / (n + b)
    t = np.sqrt(-2.0 * np.log(np.minimum(q, 0.5)))
    z = t - (_AS_C[0] + _AS_C[1] * t + _AS_C[2] * t * t) / (1.0 + _AS_D[0] * t + _AS_D[1] * t * t + _AS_D[2] * t ** 3)
    return np.where(nn > 1.0, np.maximum(z, 0.0), 0.0)


def length_cv(range_ratio: float | None) -> float:
    """Coefficient of variation of a length drawn uniformly from [r L, L] (0 for fixed lengths or no ratio):
    sd (1 - r) L / sqrt(12) over mean (1 + r) L / 2."""
    if range_ratio is None or range_ratio >= 1.0:
        return 0.0
    r = max(float(range_ratio), 0.0)
    return (1.0 - r) / (np.sqrt(3.0) * (1.0 + r))


def run_throughput_share(concurrency, prompts_per_client, lifetime_s, lifetime_sd_s, wave_half_s) -> np.ndarray:
    """A K-prompts-per-client benchmark run's output throughput over the steady state's (C / L): K L / duration,
    duration = K L + sqrt((W / 2)^2 + (z_C sqrt(K) sigma)^2) (module docstring). 1 for an endless run (K = inf)."""
    k = _f(prompts_per_client)
    total_s = k * _f(lifetime_s)  # K lifetimes: the run's length in steady state
    spread_s = expected_max_normal(concurrency) * np.sqrt(k) * _f(lifetime_sd_s)  # last client's sum above the mean
    tail_s = np.sqrt(_f(wave_half_s) ** 2 + spread_s ** 2)  # the run's end after K mean lifetimes
    with np.errstate(divide="ignore", invalid="ignore"):
        share = total_s / (total_s + tail_s)
    return np.where(np.isfinite(k) & (total_s > 0), share, 1.0)


__all__ = ["expected_max_normal", "length_cv", "run_throughput_share"]

"""Deployments, and the one evaluator that turns arrays of them into serving metrics.

A deployment serves one model on one GPU type at one precision and speculative-decoding setting:

- aggregated: ``workers`` identical workers (layout tp x pp x attention-DP x EP), each prefilling and
  decoding with continuous batching at a token budget per step;
- disaggregated: ``x`` prefill workers and ``y`` decode workers, each role with its own layout; the
  prompt's KV moves to its decode worker over the link between them.

Every caller (the search, the capacity planner, validation and calibration of measured rows, and
``explain``) describes what it evaluates as such arrays and calls :func:`evaluate_agg` or
:func:`evaluate_disagg`: there is no other composition of workers into a deployment.

Accounting, the same in every mode: ``C`` clients in a closed loop (each sends its next request when
the last one finished) give ``requests/s X = C / (TTFT + (OSL - 1) x TPOT)`` (Little's law). The engine
runs at most its batch slots at once; clients beyond them wait, and the wait is part of their TTFT.
A disaggregated deployment's prefill workers are a queue (M/D/1, :func:`simfront.serving.md1_wait_s`)
whose wait grows as X approaches their capacity, so prefill capacity caps the deployment.
A workload that is a finite benchmark run (K prompts per client, ``Workload.startup_wave_share`` = 1 / K) gets
the throughput that run measures: requests over its wall time, which ends with its last client
(:mod:`simfront.benchmark_run`), so X falls below C / (TTFT + (OSL - 1) x TPOT) by its tail.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .benchmark_run import length_cv, run_throughput_share
from .serving import AggRaw, DecodeResult, PrefillResult, finish_aggregated, md1_wait_s, usd_per_mtok


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


@dataclass(frozen=True)
class Layouts:
    """Parallel layouts of one role, as broadcastable arrays (struct of arrays)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray  # attention data-parallel ranks
    ep: np.ndarray

    @classmethod
    def of(cls, tp, pp=1, dp=1, ep=1) -> "Layouts":
        return cls(_f(tp), _f(pp), _f(dp), _f(ep))

    @property
    def gpus(self) -> np.ndarray:
        """GPUs of one worker."""
        return self.tp * self.dp * self.pp

    @property
    def ranks(self) -> np.ndarray:
        """Micro-batches one worker runs at once: attention-DP ranks x pipeline stages."""
        return self.dp * self.pp

    def take(self, idx) -> "Layouts":
        """The layouts at ``idx`` of the first axis (columns of shape (n, 1) keep their shape)."""
        return Layouts(*(np.asarray(a)[idx] for a in (self.tp, self.pp, self.dp, self.ep)))


def running_batch(concurrency, ranks, max_batch, kv_batch=np.inf) -> np.ndarray:
    """Requests per micro-batch per rank in flight: clients spread evenly over ``ranks``, at most the
    engine's max batch and what the KV cache holds, at least one (a lone request runs a batch of 1)."""
    return np.maximum(np.minimum(np.minimum(_f(concurrency) / _f(ranks), _f(max_batch)), _f(kv_batch)), 1.0)


@dataclass
class Metrics:
    """Serving metrics of an array of deployments (every field broadcasts to one shape)."""

    ttft_s: np.ndarray  # mean time to first token, client wait for a batch slot included
    tpot_s: np.ndarray  # mean time per output token after the first
    requests_s: np.ndarray  # completed requests per second of the whole deployment
    concurrency: np.ndarray  # client requests in flight (C)
    gpus: np.ndarray  # GPUs the deployment uses
    osl: float
    queue_s: np.ndarray  # part of TTFT spent waiting for a batch slot or a prefill worker

    @property
    def tok_s_user(self) -> np.ndarray:
        """Decode speed one user sees: 1 / TPOT."""
        return 1.0 / self.tpot_s

    @property
    def e2e_s(self) -> np.ndarray:
        """One request's latency: TTFT + (OSL - 1) x TPOT."""
        return self.ttft_s + (self.osl - 1.0) * self.tpot_s

    @property
    def output_tok_s(self) -> np.ndarray:
        """Output tokens per second of the deployment: requests/s x OSL."""
        return self.requests_s * self.osl

    def tok_s_gpu(self, n_gpus=None) -> np.ndarray:
        """Output tokens per second per GPU (over ``n_gpus``, default the deployment's own GPUs)."""
        return self.output_tok_s / _f(self.gpus if n_gpus is None else n_gpus)

    def usd_per_mtok(self, usd_per_gpu_hour: float, n_gpus=None) -> np.ndarray:
        return usd_per_mtok(usd_per_gpu_hour, self.tok_s_gpu(n_gpus))


def _closed_loop(concurrency, in_flight, service_ttft_s, decode_s, gpus, tpot_s, osl) -> Metrics:
    """Metrics of ``concurrency`` clients of which ``in_flight`` are admitted, each admitted request
    taking ``service_ttft_s + decode_s``: X = in_flight / (service TTFT + decode), and the clients
    beyond the admitted ones wait, so that X = C / (TTFT + (OSL - 1) TPOT) holds for all C."""
    c = _f(concurrency)
    with np.errstate(divide="ignore", invalid="ignore"):  # empty deployments (masked out by callers) give NaN
        x = _f(in_flight) / (service_ttft_s + decode_s)  # Little's law over the admitted requests
        ttft = c / x - decode_s  # Little's law over all clients: their wait is TTFT
    return Metrics(ttft, tpot_s + 0 * ttft, x, c + 0 * x, _f(gpus) + 0 * x, osl, ttft - service_ttft_s)


def as_benchmark_run(m: Metrics, wave_share: float, range_ratio: float | None, wave_half_s, decode_s) -> Metrics:
    """``m`` as a benchmark run of 1 / ``wave_share`` prompts per client measures it (its requests/s over the run's
    wall time, :func:`simfront.benchmark_run.run_throughput_share`); ``m`` itself in steady state (share 0).
    ``wave_half_s``: a start-up wave request's mean wait for the half of its wave ahead; ``decode_s``: a request's
    decode time, which the benchmark's random output lengths (``range_ratio``) spread."""
    if not wave_share > 0:
        return m
    share = run_throughput_share(m.concurrency, 1.0 / wave_share, m.e2e_s, _f(decode_s) * length_cv(range_ratio),
                                 wave_half_s)
    return replace(m, requests_s=m.requests_s * share)


def evaluate_agg(raw: AggRaw, profile: dict, workers, worker_gpus, concurrency) -> Metrics:
    """Aggregated deployment: ``workers`` copies of a ``worker_gpus``-GPU worker whose raw step times
    ``raw`` holds (computed at the running batch per rank), under ``concurrency`` closed-loop clients; a benchmark
    run's throughput when the workload is one (``raw.wave_share`` > 0: :func:`as_benchmark_run`)."""
    w = finish_aggregated(raw, profile)
    admitted = np.minimum(_f(concurrency), raw.slots * _f(workers))  # requests the engines run at once
    decode_s = (raw.osl - 1.0) * w.tpot_s
    m = _closed_loop(concurrency, admitted, w.ttft_s, decode_s, _f(workers) * _f(worker_gpus), w.tpot_s, raw.osl)
    return as_benchmark_run(m, raw.wave_share, raw.range_ratio, w.wave_half_s, decode_s)


# passes of the fixed point between the prefill utilisation and the prompt's own prefill latency, which grows with it
# (evaluate_disagg): the latency moves by at most the shared-step extra times the change of u, and the utilisation
# responds to it with a factor below 1, so two passes leave it within a few per mille of the fixed point (a test)
SHARED_STEP_PASSES = 2


def prefill_utilisation(concurrency, ttft_base_s, wait_service_s, decode_s, capacity_requests_s) -> np.ndarray:
    """Utilisation ``u`` of the prefill workers of a closed loop with an M/D/1 prefill queue.

    Requests/s X = u x capacity must satisfy X (A + w u / (2 (1 - u))) = C, with A = idle-worker TTFT
    + decode time and w the (TTFT-scaled) prefill step. Multiplying out gives the quadratic
    cap (w - 2A) u^2 + 2 (A cap + C) u - 2C = 0, negative at u = 0 and positive at u = 1, so its
    root in (0, 1) is unique; written in the form that is stable for either sign of the u^2 term.
    """
    c = _f(concurrency)
    cap = _f(capacity_requests_s)
    a_s = _f(ttft_base_s) + _f(decode_s)
    qa = cap * (_f(wait_service_s) - 2.0 * a_s)
    qb = 2.0 * (a_s * cap + c)
    with np.errstate(divide="ignore", invalid="ignore"):  # no clients or no prefill worker: NaN, masked by callers
        return 4.0 * c / (qb + np.sqrt(np.maximum(qb * qb + 8.0 * qa * c, 0.0)))


def evaluate_disagg(prefill: PrefillResult, prefill_workers, decode: DecodeResult, decode_slots, concurrency,
                    osl: float, gpus, wave_share: float = 0.0, slot_at_transfer: bool = False,
                    range_ratio: float | None = None) -> Metrics:
    """Disaggregated deployment: ``prefill_workers`` prefill workers (``prefill`` at the KV link the
    deployment has) and decode workers with ``decode_slots`` requests in flight in all (decode
    running batch x ranks x workers), under ``concurrency`` closed-loop clients.

    Admitted requests (at most the decode slots) queue for the prefill workers (M/D/1 at their
    utilisation), are prefilled, move their KV and decode; the closed loop sets the utilisation.
    ``wave_share``: the workload's share of requests in a synchronised start-up wave (0 in steady state); with one,
    the throughput is the benchmark run's (:func:`as_benchmark_run`, output lengths spread by ``range_ratio``).
    ``slot_at_transfer``: the engine gives a request its decode slot only when its KV arrives (the prefill runs
    first: TensorRT-LLM, vLLM); else the decode server holds the slot from before the prefill (SGLang pre-allocates
    the request's KV on the decode server). Then every client may be in the prefill queue, and clients beyond the
    decode slots wait after their prefill: the deployment serves the lesser of the prefill side's rate and the
    decode slots over the decode time.
    """
    decode_s = (osl - 1.0) * decode.tpot_s  # time a request decodes after its first token
    c = _f(concurrency)
    # clients in the prefill queue: the admitted ones when the slot is held through the prefill, every client when
    # the slot is taken at transfer (prefill first)
    queued = c if slot_at_transfer else np.minimum(c, _f(decode_slots))
    cap = _f(prefill_workers) * prefill.requests_s_worker  # prompts/s the prefill workers finish when always busy
    wait_service = prefill.prefill_s  # the queue's service time: a busy worker's batch
    # the workload's share of requests in a synchronised start-up wave (all clients at once) waits on average
    # for half of that wave to be prefilled ahead of it, as an aggregated worker's wave does
    with np.errstate(divide="ignore", invalid="ignore"):  # empty deployments (masked out by callers) give NaN
        idle = prefill.ttft_base_s + wave_share * queued / (2.0 * cap)
        base, u = idle, prefill_utilisation(queued, idle, wait_service, decode_s, cap)
        for _ in range(SHARED_STEP_PASSES):
            # a prompt that finds the worker busy (a share u of them) is prefilled in a batch step, which takes longer
            # than its step alone on an attention-DP worker: the latency before any queueing at this utilisation
            base = idle + u * prefill.shared_extra_s
            u = prefill_utilisation(queued, base, wait_service, decode_s, cap)
        service_ttft = base + md1_wait_s(wait_service, u)  # prompt's own prefill + start-up wave + M/D/1 wait
        # requests in flight: the queued ones, or at transfer as many as keep the decode slots' rate, slots / decode
        # time (X = min(C / (service TTFT + decode), slots / decode)); the clients beyond wait after their prefill
        in_flight = np.minimum(c, _f(decode_slots) * (service_ttft + decode_s) / decode_s) if slot_at_transfer else queued
    m = _closed_loop(concurrency, in_flight, service_ttft, decode_s, gpus, decode.tpot_s, osl)
    if not wave_share > 0:  # steady state: as_benchmark_run gives m back, so its wave wait is not computed
        return m
    return as_benchmark_run(m, wave_share, range_ratio, queued / (2.0 * cap), decode_s)


__all__ = ["Layouts", "Metrics", "running_batch", "as_benchmark_run", "evaluate_agg", "evaluate_disagg", "prefill_utilisation"]

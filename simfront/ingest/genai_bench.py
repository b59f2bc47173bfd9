"""genai-bench run files: ``{aggregated_metrics, individual_request_metrics, _time_unit}`` per run.

Written by ``AggregatedMetricsCollector.save`` (genai_bench/metrics/aggregated_metrics_collector.py,
genai-bench 0.0.5): ``aggregated_metrics.stats.<metric>.{mean, p50, ...}`` in ``_time_unit`` ("s" by
default, "ms" with ``--metrics-time-unit ms``). Definitions (genai_bench/metrics/request_metrics_collector.py):
``tpot`` = (e2e_latency - ttft)/(num_output_tokens - 1) per request = vLLM TPOT; ``e2e_latency`` =
request latency. ``mean_output_throughput_tokens_per_s`` = output tokens / run duration. The load
point is ``num_concurrency`` (``iteration_type`` num_concurrency). Model, engine and GPUs come from
the experiment's ``experiment_metadata.json`` beside the run file (model, server_engine,
server_version, server_gpu_type, server_gpu_count).
"""

from __future__ import annotations

from ..units import MS
from .common import Record, RecordError, coerce, normalize_engine, note_ttft_statistic, pick_stat, to_float, to_int

# time unit of the file -> factor to milliseconds
UNIT_TO_MS = {"s": 1.0 / MS, "ms": 1.0}
STATS = {
    "ttft": ("ttft_ms", "time", "time to first token"),
    "tpot": ("tpot_ms", "time", "per-request (e2e_latency - ttft)/(num_output_tokens - 1) = vLLM TPOT"),
    "e2e_latency": ("e2el_ms", "time", "request latency"),
    "num_input_tokens": ("isl", "count", "input tokens per request"),
    "num_output_tokens": ("osl", "count", "output tokens per request"),
}
RATES = {
    "mean_output_throughput_tokens_per_s": ("output_tok_s_total", "output tokens / run duration"),
    "mean_total_tokens_throughput_tokens_per_s": ("total_tok_s", "(input + output tokens) / run duration"),
    "requests_per_second": ("request_throughput", "completed requests / run duration"),
}


def parse_record(obj: dict, line: int, meta: dict) -> Record:
    rec = Record(line)
    agg = obj.get("aggregated_metrics")
    if not isinstance(agg, dict):
        raise RecordError("aggregated_metrics is not an object")
    unit = str(obj.get("_time_unit", "s")).strip().lower()
    if unit not in UNIT_TO_MS:
        raise RecordError(f"_time_unit = {unit!r}; known: {', '.join(UNIT_TO_MS)}")
    stats = agg.get("stats") or {}
    for key, (canon, kind, meaning) in STATS.items():
        value, stat = pick_stat(stats.get(key), ("mean",), ("p50",))
        if stat is None:
            continue
        number = to_float(value, f"stats.{key}.{stat}")
        definition = f"genai-bench stats.{key}.{stat} ({unit} in source): {meaning}"
        if kind == "count":
            rec.fields[canon], rec.metric_definitions[canon] = number, definition
        else:
            rec.set_metric(canon, number * UNIT_TO_MS[unit], definition)
            note_ttft_statistic(rec, canon, stat)
    for key, (canon, meaning) in RATES.items():
        if agg.get(key) is not None:
            rec.set_metric(canon, agg[key], f"genai-bench {key}: {meaning}")
    if agg.get("iteration_type", "num_concurrency") == "num_concurrency":
        rec.fields["concurrency"] = to_float(agg.get("num_concurrency"), "num_concurrency")
    else:
        rec.warnings.append(f"iteration_type {agg.get('iteration_type')!r}: not a concurrency sweep")
    failed = to_int(agg.get("num_error_requests"), "num_error_requests") or 0
    if failed:
        rec.warnings.append(f"{failed} requests failed; metrics cover completed requests only")
    rec.extra.update({k: v for k, v in agg.items() if k not in RATES and k != "stats"})
    rec.extra["individual_request_metrics"] = f"<{len(obj.get('individual_request_metrics') or [])} per-request entries not kept>"
    # experiment_metadata.json
    rec.fields["model"] = coerce("model", meta.get("model") or meta.get("api_model_name"))
    engine, version = normalize_engine(meta.get("server_engine"))
    rec.fields["engine"] = engine
    rec.fields["engine_version"] = coerce("engine_version", meta.get("server_version") or version)
    if engine:
        rec.notes["engine"] = f"experiment_metadata.json server_engine {meta.get('server_engine')!r}"
    rec.fields["gpu"] = coerce("gpu", meta.get("server_gpu_type"))
    rec.fields["num_gpus"] = to_int(meta.get("server_gpu_count"), "server_gpu_count")
    return rec

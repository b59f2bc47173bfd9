"""AIPerf ``profile_export_aiperf.json``: ``{metric_tag: {unit, avg, p50, p99, ...}, input_config, ...}``.

Definitions (ecosystem.md §3.1): ``inter_token_latency`` = (request_latency - ttft)/(osl - 1)
per request = vLLM TPOT; ``inter_chunk_latency`` = chunk gaps = vLLM ITL;
``output_token_throughput_per_user`` = 1/ITL. System metrics carry only ``avg``.
Each block's ``unit`` is honoured (latencies are normally ms).
"""

from __future__ import annotations

from typing import Any

from ..units import MS, US
from .common import Record, RecordError, find_key, keep_extra, note_ttft_statistic, pick_stat, to_float

NS = 1e-9  # seconds per nanosecond
# time unit names as exported -> factor to milliseconds
TIME_UNIT_TO_MS = {"ms": 1.0, "s": 1.0 / MS, "sec": 1.0 / MS, "seconds": 1.0 / MS, "us": US / MS, "µs": US / MS,
                   "ns": NS / MS}

# metric tag -> (canonical field, kind, definition); shared with genai-perf (same schema).
STAT_METRICS = {
    "time_to_first_token": ("ttft_ms", "time", "time to first token"),
    "inter_token_latency": ("tpot_ms", "time", "(request_latency - ttft)/(osl - 1) per request, = vLLM TPOT"),
    "inter_chunk_latency": ("itl_ms", "time", "gaps between streamed chunks, = vLLM ITL (not TPOT)"),
    "request_latency": ("e2el_ms", "time", "request latency"),
    "output_token_throughput": ("output_tok_s_total", "rate", "output tokens/s over the benchmark"),
    "output_token_throughput_per_user": ("tok_s_per_user", "rate", "per-request 1/inter_token_latency"),
    "request_throughput": ("request_throughput", "rate", "requests/s over the benchmark"),
    "input_sequence_length": ("isl", "count", "input tokens per request"),
    "output_sequence_length": ("osl", "count", "output tokens per request"),
}


def _scaled(value: Any, unit: Any, kind: str, tag: str) -> float | None:
    """The value in canonical units: ms for times, per second for rates, tokens for counts."""
    number = to_float(value, tag)
    if number is None or kind != "time":
        if kind == "rate" and unit and "/ms" in str(unit):
            raise RecordError(f"{tag}: unit {unit!r} is not per second")
        return number
    factor = TIME_UNIT_TO_MS.get(str(unit).strip().lower()) if unit is not None else 1.0
    if factor is None:
        raise RecordError(f"{tag}: unknown time unit {unit!r}")
    return number * factor  # value converted to milliseconds


def take_stat_metrics(rec: Record, obj: dict, used: set[str], tool: str) -> None:
    """Mean (``avg``, else ``p50``) of each known stats block; other statistics go to extra."""
    for tag, (canon, kind, meaning) in STAT_METRICS.items():
        block = obj.get(tag)
        value, stat = pick_stat(block, ("avg", "mean"), ("p50",))
        if stat is None:
            continue
        number = _scaled(value, block.get("unit"), kind, tag)
        if canon in ("isl", "osl"):
            rec.fields[canon] = number
            rec.metric_definitions[canon] = f"{tool} {tag}.{stat}: {meaning}"
        else:
            rec.set_metric(canon, number, f"{tool} {tag}.{stat}: {meaning}")
            note_ttft_statistic(rec, canon, stat)
        used.add(tag)
        for other, v in block.items():
            if other != stat:
                rec.extra[f"{tag}.{other}"] = v
    # total tok/s is not exported; tokens over the benchmark duration give it directly.
    isl_total, _ = pick_stat(obj.get("total_isl"), ("avg",))
    osl_total, _ = pick_stat(obj.get("total_osl"), ("avg",))
    duration, _ = pick_stat(obj.get("benchmark_duration"), ("avg",))
    if None not in (isl_total, osl_total, duration):
        unit = obj["benchmark_duration"].get("unit", "sec")
        seconds = _scaled(duration, unit, "time", "benchmark_duration") * MS
        rec.set_metric(
            "total_tok_s",
            (to_float(isl_total) + to_float(osl_total)) / seconds,  # all tokens / wall time
            f"{tool} (total_isl + total_osl)/benchmark_duration",
        )


def _take_config_0_13(rec: Record, cfg: dict) -> bool:
    """AIPerf >= 0.13 ``input_config`` (a BenchmarkConfig dump, aiperf/config/config.py): ``models.items[].name``,
    ``phases[]`` (the ``kind: profiling`` phase: ``type: concurrency`` with ``concurrency``, or a rate
    type with ``rate``), ``datasets[].prompts.{isl,osl}.mean``. False when ``cfg`` is not of that shape."""
    phases = cfg.get("phases")
    if not isinstance(phases, list):
        return False
    items = (cfg.get("models") or {}).get("items") if isinstance(cfg.get("models"), dict) else None
    if isinstance(items, list) and items and isinstance(items[0], dict):
        rec.fields["model"] = items[0].get("name")
    profiling = [p for p in phases if isinstance(p, dict) and p.get("kind", "profiling") == "profiling"]
    if profiling:
        phase = profiling[-1]
        if phase.get("concurrency") is not None:
            rec.fields["concurrency"] = to_float(phase["concurrency"], "phases.concurrency")
        if phase.get("rate") is not None:
            rec.fields["request_rate"] = to_float(phase["rate"], "phases.rate")
        rec.notes["load"] = f"AIPerf input_config.phases[{phase.get('name')}] type {phase.get('type')!r}"
    datasets = cfg.get("datasets")
    prompts = (datasets[0].get("prompts") or {}) if isinstance(datasets, list) and datasets and isinstance(datasets[0], dict) else {}
    for canon in ("isl", "osl"):
        mean = to_float((prompts.get(canon) or {}).get("mean"), f"prompts.{canon}.mean")
        if mean is not None and canon not in rec.fields:
            rec.fields[canon] = mean
            rec.metric_definitions[canon] = f"AIPerf input_config.datasets[0].prompts.{canon}.mean (requested)"
    return True


def parse_record(obj: dict, line: int) -> Record:
    rec, used = Record(line), set()
    take_stat_metrics(rec, obj, used, "AIPerf")
    cfg = obj.get("input_config") or {}
    if not _take_config_0_13(rec, cfg):  # before 0.13: endpoint.model_names, loadgen.concurrency
        endpoint, loadgen = cfg.get("endpoint") or {}, cfg.get("loadgen") or {}
        names = endpoint.get("model_names") or find_key(cfg, ("model_names", "model"))
        rec.fields["model"] = names[0] if isinstance(names, list) and names else names
        rec.fields["concurrency"] = to_float(loadgen.get("concurrency", find_key(cfg, ("concurrency",))), "concurrency")
        rec.fields["request_rate"] = to_float(loadgen.get("request_rate"), "request_rate")
        if "isl" not in rec.fields:  # fall back to the requested synthetic lengths
            prompt = (cfg.get("input") or {}).get("prompt") or {}
            for canon, key in (("isl", "input_tokens"), ("osl", "output_tokens")):
                mean = to_float((prompt.get(key) or {}).get("mean"), f"{key}.mean")
                if mean is not None and canon not in rec.fields:
                    rec.fields[canon] = mean
                    rec.metric_definitions[canon] = f"AIPerf input_config.input.prompt.{key}.mean (requested)"
    if obj.get("aiperf_version"):
        rec.notes["aiperf_version"] = str(obj["aiperf_version"])
    if obj.get("was_cancelled"):
        rec.warnings.append("AIPerf run was cancelled (was_cancelled=true)")
    if obj.get("is_complete") is False:
        rec.warnings.append(f"AIPerf run incomplete: {obj.get('incomplete_reason') or 'is_complete=false'}")
    keep_extra(rec, obj, used)
    return rec

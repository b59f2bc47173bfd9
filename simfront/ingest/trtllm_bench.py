"""``trtllm-bench ... throughput --report_json R.json`` (ecosystem.md §3.3).

Sections ``engine``, ``world_info``, ``request_info``, ``performance``, ``streaming_metrics``
(only with --streaming), ``decoding_stats`` (spec decode). TPOT = (end - first token)/(osl - 1)
= ``avg_tpot_ms``. ``output_throughput_per_user_tok_s`` includes TTFT, so tok/s/user is taken
from ``token_output_speed_tok_s`` (streaming) instead. The client concurrency is a CLI flag
that the report does not keep; ``avg_num_concurrent_requests`` (achieved) stays in ``extra``.
"""

from __future__ import annotations

from .common import Record, coerce, pick_stat, set_spec, to_float, to_int

PERFORMANCE = {
    "avg_request_latency_ms": ("e2el_ms", "mean request latency"),
    "request_throughput_req_s": ("request_throughput", "requests/s"),
    "system_output_throughput_tok_s": ("output_tok_s_total", "output tokens/s, first token counted"),
    "system_total_throughput_tok_s": ("total_tok_s", "(input + output) tokens/s"),
    "output_throughput_per_gpu_tok_s": ("output_tok_s_per_gpu", "system output tokens/s / world_size"),
}
STREAMING = {
    "avg_ttft_ms": ("ttft_ms", "mean time to first token"),
    "avg_tpot_ms": ("tpot_ms", "mean per-request (end - first token)/(osl - 1) = TPOT"),
    "token_output_speed_tok_s": ("tok_s_per_user", "per-request generation speed after the first token"),
}


def _flatten_into(rec: Record, section: str, block: dict, used: set[str]) -> None:
    for key, value in block.items():
        if key not in used:
            rec.extra[f"{section}.{key}"] = value


def parse_record(obj: dict, line: int) -> Record:
    rec = Record(line)
    engine, world = obj.get("engine") or {}, obj.get("world_info") or {}
    rec.fields.update(model=engine.get("model"), engine="trtllm", mode="agg")
    rec.fields["engine_version"] = coerce("engine_version", engine.get("version"))
    quant = engine.get("quantization")
    rec.fields["precision"] = coerce("precision", quant if quant not in (None, "None") else engine.get("dtype"))
    rec.fields["kv_dtype"] = coerce("kv_dtype", engine.get("kv_cache_dtype"))
    _flatten_into(rec, "engine", engine, {"model", "version", "kv_cache_dtype"})

    rec.fields["tp"] = to_int(world.get("tp_size"), "tp_size")
    rec.fields["pp"] = to_int(world.get("pp_size"), "pp_size")
    rec.fields["ep"] = to_int(world.get("ep_size"), "ep_size")
    rec.fields["num_gpus"] = to_int(world.get("world_size"), "world_size")
    rec.fields["batch_size"] = to_int(world.get("max_batch_size"), "max_batch_size")
    _flatten_into(rec, "world_info", world, {"tp_size", "pp_size", "ep_size", "world_size", "max_batch_size"})

    req = obj.get("request_info") or {}
    for canon, key in (("isl", "avg_input_length"), ("osl", "avg_output_length")):
        rec.fields[canon] = to_float(req.get(key), key)
        rec.metric_definitions[canon] = f"trtllm-bench request_info.{key}"
    _flatten_into(rec, "request_info", req, {"avg_input_length", "avg_output_length"})

    for section, table in (("performance", PERFORMANCE), ("streaming_metrics", STREAMING)):
        block = obj.get(section) or {}
        for key, (canon, meaning) in table.items():
            if block.get(key) is not None:
                rec.set_metric(canon, block[key], f"trtllm-bench {section}.{key}: {meaning}")
        _flatten_into(rec, section, block, set(table))

    spec = obj.get("decoding_stats")
    if isinstance(spec, dict):
        set_spec(rec, spec.get("mode"), "decoding_stats.mode")
        value, stat = pick_stat(spec.get("acceptance_length_percentiles"), ("average",), ("p50",))
        rec.fields["acceptance_length"] = to_float(value, "acceptance_length")
        if stat:
            rec.notes["acceptance_length"] = f"decoding_stats.acceptance_length_percentiles.{stat}"
        _flatten_into(rec, "decoding_stats", spec, {"mode"})
    for key, value in obj.items():
        if key not in {"engine", "world_info", "request_info", "performance", "streaming_metrics", "decoding_stats"}:
            rec.extra[key] = value
    return rec

"""vLLM ``bench serve --save-result`` JSON (or JSONL with ``--append-result``).

Flat keys, latencies in ms (ecosystem.md §1.1). TPOT = per-request (latency - ttft)/(out - 1);
ITL = chunk gaps pooled over requests, so it goes to ``itl_ms`` and never to ``tpot_ms``.
Mean statistics are preferred; median is used only when a mean is absent.
"""

from __future__ import annotations

from .client_keys import take_config_keys
from .common import Record, RecordError, keep_extra, normalize_engine, note_ttft_statistic, set_measured_on, to_float, to_int

LATENCIES = {
    "ttft_ms": ("ttft", "time to first non-empty chunk"),
    "tpot_ms": ("tpot", "per-request (latency - ttft)/(output_len - 1) = TPOT"),
    "itl_ms": ("itl", "gaps between streamed chunks pooled over requests (chunk ITL, not TPOT)"),
    "e2el_ms": ("e2el", "request latency"),
}
RATES = {
    "output_tok_s_total": ("output_throughput", "output tokens / benchmark duration"),
    "total_tok_s": ("total_token_throughput", "(input + output tokens) / benchmark duration"),
    "request_throughput": ("request_throughput", "completed requests / benchmark duration"),
}


def take_flat_latencies(rec: Record, obj: dict, used: set[str], tool: str, table: dict) -> None:
    """``mean_<m>_ms`` (else ``median_<m>_ms``) for each canonical latency in ``table``."""
    for canon, (short, meaning) in table.items():
        for stat in ("mean", "median"):
            key = f"{stat}_{short}_ms"
            if obj.get(key) is not None:
                rec.set_metric(canon, obj[key], f"{tool} {key} ({stat}): {meaning}")
                note_ttft_statistic(rec, canon, stat)
                used.add(key)
                break


def take_mean_lengths(rec: Record, obj: dict, used: set[str], tool: str) -> None:
    """isl/osl = total tokens / completed requests (the lengths actually served)."""
    completed = to_float(obj.get("completed"), "completed")
    if completed is None:
        return
    if completed == 0:
        raise RecordError("no completed requests")
    for canon, key in (("isl", "total_input_tokens"), ("osl", "total_output_tokens")):
        total = to_float(obj.get(key), key)
        if total is not None:
            rec.fields[canon] = total / completed  # mean tokens per completed request
            rec.metric_definitions[canon] = f"{tool} {key}/completed (mean)"
            used.add(key)
    used.add("completed")


def parse_record(obj: dict, line: int) -> Record:
    rec, used = Record(line), set()
    rec.fields["model"] = obj.get("model_id")
    engine, _ = normalize_engine(obj.get("backend"))
    rec.fields["engine"] = engine
    if engine:
        rec.notes["engine"] = f"from client backend {obj.get('backend')!r}"
    rec.fields["concurrency"] = to_float(obj.get("max_concurrency"), "max_concurrency")
    if obj.get("num_prompts") is not None:  # the client's request count: with --max-concurrency C its first C start at once
        rec.fields["num_prompts"] = to_int(obj.get("num_prompts"), "num_prompts")
        used.add("num_prompts")
    rec.fields["request_rate"] = to_float(obj.get("request_rate"), "request_rate")
    used |= {"model_id", "max_concurrency", "request_rate"}
    if obj.get("date") and set_measured_on(rec, obj["date"], "date"):  # the run's start ("20261202-004022"): the
        used.add("date")  # engine release out then, when no version is given
    take_flat_latencies(rec, obj, used, "vLLM", LATENCIES)
    for canon, (key, meaning) in RATES.items():
        if obj.get(key) is not None:
            rec.set_metric(canon, obj[key], f"vLLM {key}: {meaning}")
            used.add(key)
    take_mean_lengths(rec, obj, used, "vLLM")
    if obj.get("spec_decode_acceptance_length") is not None:
        key = "spec_decode_acceptance_length"
        rec.fields["acceptance_length"] = to_float(obj[key], key)
        used.add("spec_decode_acceptance_length")
    if (to_float(obj.get("failed"), "failed") or 0) > 0:
        rec.warnings.append(f"{obj['failed']} requests failed; metrics cover completed requests only")
    take_config_keys(rec, obj, used)
    keep_extra(rec, obj, used)
    return rec

"""GuideLLM ``benchmarks.json``: one point per entry of ``benchmarks`` (ecosystem.md §4).

Metrics are ``metrics.<name>.successful.{mean, median, ...}``. ``inter_token_latency_ms``
= (last - first token)/(osl - 1) = vLLM TPOT. ``time_per_output_token_ms`` INCLUDES TTFT
at HEAD (v0.3: divides by osl), so it is never used as TPOT; it stays in ``extra``.
``request_latency`` is in seconds. The load point is the benchmark's strategy
(``config.strategy`` at HEAD, ``args.strategy`` in v0.3). Where the model name lives is not
pinned down in the reference (unverified): a ``model`` key is searched in the run config.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..units import MS
from .common import Record, RecordError, find_key, keep_extra, note_ttft_statistic, pick_stat, to_float
from .detect import Loaded


# metric name -> (canonical field, factor to canonical unit, definition)
METRICS = {
    "time_to_first_token_ms": ("ttft_ms", 1.0, "time to first token"),
    "inter_token_latency_ms": ("tpot_ms", 1.0, "(last - first token)/(osl - 1) = vLLM TPOT"),
    "request_latency": ("e2el_ms", 1.0 / MS, "request latency (seconds in source)"),
    "output_tokens_per_second": ("output_tok_s_total", 1.0, "time-series output rate (not tokens/duration)"),
    "tokens_per_second": ("total_tok_s", 1.0, "time-series prompt + output token rate"),
    "requests_per_second": ("request_throughput", 1.0, "requests per second"),
    "prompt_token_count": ("isl", 1.0, "prompt tokens per request"),
    "output_token_count": ("osl", 1.0, "output tokens per request"),
}


def records(loaded: Loaded) -> Iterator[tuple[int, Any, dict]]:
    """(benchmark number, benchmark, report) for each benchmark of each report."""
    for _, report in loaded.json:
        benchmarks = report.get("benchmarks") if isinstance(report, dict) else None
        if not isinstance(benchmarks, list):
            raise RecordError("no 'benchmarks' list")
        for number, bench in enumerate(benchmarks, start=1):
            yield number, bench, report


def _load_point(rec: Record, bench: dict, report: dict) -> None:
    strategy = (
        (bench.get("config") or {}).get("strategy")
        or (bench.get("args") or {}).get("strategy")
        or (report.get("config") or {}).get("strategy")
    )
    if not isinstance(strategy, dict):
        return
    kind = strategy.get("type_")
    rec.notes["strategy"] = str(kind)
    if kind == "synchronous":
        rec.fields["concurrency"] = 1.0  # one request in flight at a time
    elif kind == "concurrent":
        rec.fields["concurrency"] = to_float(strategy.get("streams"), "strategy.streams")
    elif kind in ("constant", "poisson"):
        rec.fields["request_rate"] = to_float(strategy.get("rate"), "strategy.rate")
    elif kind == "throughput":
        rec.fields["request_rate"] = float("inf")  # all requests issued as fast as possible


def parse_record(bench: Any, line: int, report: dict) -> Record:
    if not isinstance(bench, dict):
        raise RecordError("benchmark entry is not an object")
    rec, used = Record(line), {"metrics"}
    metrics = bench.get("metrics") or {}
    if not metrics:
        raise RecordError("benchmark has no metrics")
    for name, block in metrics.items():
        mapped = METRICS.get(name)
        successful = block.get("successful") if isinstance(block, dict) else None
        value, stat = pick_stat(successful, ("mean",), ("median",))
        if mapped is None or stat is None:
            rec.extra[f"metrics.{name}"] = block
            continue
        canon, factor, meaning = mapped
        number = to_float(value, name) * factor  # value in canonical units
        definition = f"GuideLLM {name}.successful.{stat}: {meaning}"
        if canon in ("isl", "osl") and number <= 0:  # e.g. prompts that decoded to nothing: no length measured
            rec.warnings.append(f"{name}.successful.{stat} is {number:g}: not read as a length")
        elif canon in ("isl", "osl"):
            rec.fields[canon], rec.metric_definitions[canon] = number, definition
        else:
            rec.set_metric(canon, number, definition)
            note_ttft_statistic(rec, canon, stat)
        rec.extra.update({f"metrics.{name}.successful.{k}": v for k, v in successful.items() if k != stat})
    if "tpot_ms" in rec.metric_definitions:
        rec.metric_definitions["tpot_ms"] += "; time_per_output_token_ms not used (includes TTFT)"
    _load_point(rec, bench, report)
    model = find_key({k: bench.get(k) for k in ("config", "args", "worker")}, ("model", "backend_model"))
    model = model or find_key(report.get("config") or {}, ("model",))
    rec.fields["model"] = model if isinstance(model, str) else None
    keep_extra(rec, bench, used)
    if isinstance(report.get("metadata"), dict):
        rec.extra["report.metadata"] = report["metadata"]
    return rec

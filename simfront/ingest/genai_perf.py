"""genai-perf ``profile_export_genai_perf.json``: AIPerf's metric schema with a flat ``input_config``.

``input_config`` is ``vars(args)`` (``model``, ``concurrency``, ``request_rate``,
``synthetic_input_tokens_mean``, ``output_tokens_mean``, ``service_kind``, ``backend``);
newer config-file versions may nest it (unverified), so keys are searched at any depth.
``inter_token_latency`` = TPOT, as in AIPerf (ecosystem.md §3.2).
"""

from __future__ import annotations

from .aiperf import take_stat_metrics
from .common import Record, find_key, keep_extra, normalize_engine, to_float


def parse_record(obj: dict, line: int) -> Record:
    rec, used = Record(line), set()
    take_stat_metrics(rec, obj, used, "genai-perf")
    cfg = obj.get("input_config") or {}
    model = find_key(cfg, ("model", "model_names"))
    rec.fields["model"] = model[0] if isinstance(model, list) and model else model
    rec.fields["concurrency"] = to_float(find_key(cfg, ("concurrency",)), "concurrency")
    rec.fields["request_rate"] = to_float(find_key(cfg, ("request_rate",)), "request_rate")
    for canon, key in (("isl", "synthetic_input_tokens_mean"), ("osl", "output_tokens_mean")):
        mean = to_float(find_key(cfg, (key,)), key)
        if canon not in rec.fields and mean is not None and mean > 0:
            rec.fields[canon] = mean
            rec.metric_definitions[canon] = f"genai-perf input_config.{key} (requested)"
    # --backend only names the engine for the Triton service kind (its default is tensorrtllm).
    if find_key(cfg, ("service_kind",)) in ("triton", "triton_c_api"):
        rec.fields["engine"], _ = normalize_engine(find_key(cfg, ("backend",)))
    keep_extra(rec, obj, used)
    return rec

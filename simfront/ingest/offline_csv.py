"""The flat measured-point CSV (calibration/e2e/offline_throughput.csv; InferenceMAX-style rows).

Columns ``model, gpu, num_gpus, tp, pp, ep, dp_attention, disagg, engine, precision_*, isl,
osl, concurrency, batch_size, metric_*, notes`` (ecosystem.md §5). Here ``tp`` is the engine's
TP flag, so the GPUs of a replica; ``dp_attention=true`` means attention DP over those GPUs,
i.e. canonical attention_dp = tp and attention TP = 1. ``disagg`` is ``false`` or a layout
``prefill_workers=1;prefill_tp=4;prefill_ep=4;prefill_dpa=true;prefill_gpus=4|decode_...``
(``*_gpus`` = all GPUs of the role; then num_gpus is the total and tp/ep are empty).
``notes`` holds ``key=value`` pairs and free text separated by ``; ``.
``metric_output_tok_s_per_gpu`` = output tok/s over ALL GPUs. Any ``metric_<field>`` column
naming a canonical metric is read; other columns go to ``extra``.
"""

from __future__ import annotations

from .common import (STATISTIC_NAMES, Record, RecordError, coerce, normalize_engine, parse_notes, set_attention_dp, set_measured_on,
                     set_spec, to_bool, to_float, to_int)
from .schema import CONFIG_FIELDS, METRIC_FIELDS

REQUIRED = ("model", "gpu", "num_gpus", "tp", "pp", "disagg", "engine", "isl", "osl")
CONFIG_COLUMNS = {
    "model": "model", "gpu": "gpu", "num_gpus": "num_gpus", "pp": "pp", "ep": "ep",
    "precision_weights": "precision", "precision_act": "precision_act", "precision_kv": "kv_dtype",
    "isl": "isl", "osl": "osl", "dataset": "dataset", "concurrency": "concurrency",
    "request_rate": "request_rate", "batch_size": "batch_size",
}
HANDLED = set(CONFIG_COLUMNS) | {"tp", "dp_attention", "disagg", "engine", "notes"}
# layout-string key suffix -> canonical role-field suffix
ROLE_KEYS = {"workers": "workers", "tp": "tp", "pp": "pp", "ep": "ep", "moe_tp": "moe_tp",
             "attention_dp": "attention_dp", "gpus": "gpus", "batch": "batch"}


def _client_settings(rec: Record, text: str) -> None:
    """The benchmark settings a ``client=`` note records (InferenceMAX rows: ``client=benchmark_serving random
    dataset range_ratio=0.8 ignore_eos num_prompts=10*conc``): the length range ratio and the prompt count
    (``K*conc``: K prompts per client), where the row's own fields do not give them."""
    for token in text.split():
        key, sep, value = token.partition("=")
        if not sep:
            continue
        if key in ("range_ratio", "random_range_ratio") and rec.fields.get("random_range_ratio") is None:
            rec.fields["random_range_ratio"] = to_float(value, "notes client range_ratio")
            rec.notes["random_range_ratio"] = f"from the client note ({token})"
        elif key == "num_prompts" and rec.fields.get("num_prompts") is None:
            per_client, star, unit = value.partition("*")
            conc = rec.fields.get("concurrency")
            if star and unit in ("conc", "concurrency") and conc:
                rec.fields["num_prompts"] = to_float(per_client, "notes client num_prompts") * float(conc)
            elif not star:
                rec.fields["num_prompts"] = to_float(value, "notes client num_prompts")
            else:
                continue
            rec.notes["num_prompts"] = f"from the client note ({token})"


def missing_columns(header: list[str]) -> list[str]:
    """Required columns the header lacks (and a metric column, if none)."""
    lacks = [c for c in REQUIRED if c not in header]
    if not any(h[len("metric_"):] in METRIC_FIELDS for h in header if h.startswith("metric_")):
        lacks.append("metric_<metric> (none of " + ", ".join(f"metric_{m}" for m in METRIC_FIELDS) + ")")
    return lacks


def _disagg_layout(rec: Record, text: str) -> None:
    """Parse ``prefill_k=v;...|decode_k=v;...`` into prefill_*/decode_* fields."""
    for part in text.split("|"):
        segments = [s.strip() for s in part.split(";") if s.strip()]
        pairs = dict(s.split("=", 1) for s in segments if "=" in s)
        role = next((r for r in ("prefill_", "decode_") if all(k.strip().startswith(r) for k in pairs)), None)
        if not pairs or role is None or len(pairs) != len(segments):
            raise RecordError(f"disagg layout part {part!r} is not prefill_k=v;... or decode_k=v;...")
        values = {k.strip()[len(role):]: v.strip() for k, v in pairs.items()}
        tp_flag = to_int(values.pop("tp", None), f"{role}tp")
        set_attention_dp(rec, role, tp_flag, to_bool(values.pop("dpa", None), f"{role}dpa"), f"{role}dpa")
        for key, value in values.items():
            if key not in ROLE_KEYS:
                rec.warnings.append(f"disagg layout key {role}{key} not understood; kept in extra")
                rec.extra[f"{role}{key}"] = value
                continue
            rec.fields[f"{role}{ROLE_KEYS[key]}"] = to_int(value, f"{role}{key}")
        workers, gpus = rec.fields.get(f"{role}workers"), rec.fields.get(f"{role}gpus")
        if workers and tp_flag and gpus and workers * tp_flag * (rec.fields.get(f"{role}pp") or 1) != gpus:
            rec.warnings.append(f"{role}gpus={gpus} is not {role}workers x tp x pp = {workers}x{tp_flag}")


def _metric_definition(column: str, pairs: dict[str, str], free: list[str]) -> str:
    """The column name plus every note that talks about it (e.g. 'metric_tpot_ms column holds Mean ITL')."""
    said = [f"{k}={v}" for k, v in pairs.items() if column in v or column in k] + [s for s in free if column in s]
    if column == "metric_output_tok_s_total" and "metric" in pairs:
        said.insert(0, f"metric={pairs['metric']}")
    return f"measured-point CSV column {column}" + (f" (source notes: {'; '.join(said)})" if said else "")


def parse_row(row: dict[str, str], line: int) -> Record:
    rec = Record(line)
    for column, name in CONFIG_COLUMNS.items():
        if column in row:
            rec.fields[name] = coerce(name, row[column])
    engine, version = normalize_engine(row["engine"])
    rec.fields.update(engine=engine, engine_version=version)
    rec.notes["engine"] = f"from {row['engine']!r}"

    layout = row["disagg"].strip()
    is_disagg = to_bool(layout, "disagg") if "=" not in layout else True
    rec.fields["mode"] = "disagg" if is_disagg else "agg"
    if "=" in layout:
        _disagg_layout(rec, layout)
        if row["tp"].strip() or row.get("ep", "").strip():
            rec.warnings.append("disagg row also fills tp/ep; the layout string is used")
            rec.extra.update(tp=row["tp"], ep=row.get("ep", ""))
        rec.fields.pop("ep", None)
        pp = rec.fields.pop("pp", None)  # the pp column, when given, holds for both roles
        for role in ("prefill_", "decode_"):
            if pp and rec.fields.get(f"{role}pp") is None:
                rec.fields[f"{role}pp"] = pp
                rec.notes[f"{role}pp"] = f"pp column ({pp}) applied to the {role[:-1]} role"
    elif is_disagg:
        rec.warnings.append("disagg=true without a layout string: prefill/decode sizes unknown")
    else:
        dpa = to_bool(row.get("dp_attention"), "dp_attention")
        set_attention_dp(rec, "", to_int(row["tp"], "tp"), dpa, "dp_attention")

    pairs, free = parse_notes(row.get("notes"))
    rec.notes.update(pairs)
    if free:
        rec.notes["text"] = "; ".join(free)
    if pairs.get("date"):  # the run's date (InferenceMAX notes: date=2026-06-11): the engine release out then
        set_measured_on(rec, pairs["date"], "notes date")
    for key, value in pairs.items():  # notes may carry fields the columns lack (spec_decoding=mtp)
        if key in CONFIG_FIELDS and rec.fields.get(key) is None:
            if key == "spec_decoding":
                set_spec(rec, value, "notes spec_decoding")
            elif key == "ttft_statistic":
                if value.strip().lower() not in STATISTIC_NAMES:
                    raise RecordError(f"notes ttft_statistic={value!r}: expected mean or median")
                rec.fields[key] = STATISTIC_NAMES[value.strip().lower()]
            else:
                rec.fields[key] = coerce(key, value)
    if pairs.get("client"):
        _client_settings(rec, pairs["client"])
    # which statistic the latency columns hold (InferenceMAX notes: "tpot/ttft=mean (...)", or "tpot/ttft=MEDIAN (history
    # endpoint has no means ...)" on its time-series rows)
    stat = (pairs.get("tpot/ttft") or "").split(" ", 1)[0].strip().lower()
    if stat in STATISTIC_NAMES and rec.fields.get("ttft_statistic") is None:
        rec.fields["ttft_statistic"] = STATISTIC_NAMES[stat]
        rec.notes["ttft_statistic"] = f"from the note tpot/ttft={pairs['tpot/ttft'].split(' ', 1)[0]}"

    for column, value in row.items():
        name = column[len("metric_"):] if column.startswith("metric_") else None
        if name in METRIC_FIELDS:
            rec.set_metric(name, to_float(value, column), _metric_definition(column, pairs, free))
        elif column not in HANDLED:
            rec.extra[column] = value
    return rec

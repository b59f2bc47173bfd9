"""The serving CSV of aiconfigurator's measured reference set (calibration/e2e/measured_serving.csv).

One row = one configuration at one client concurrency (calibration/README.md). agg rows fill
``batch_size, tp_size, pp_size, attention_dp_size, moe_tp_size, moe_ep_size``; disagg rows
the same prefixed ``prefill_``/``decode_`` plus ``*_num_workers``. GPUs per worker =
tp * pp * attention_dp. ``silicon_ttft_ms``/``silicon_tpot_ms`` are measured means (TPOT
excludes the first token). Source quirks handled here: sizes written as floats ("8.0"),
moe sizes of 0 meaning "not set", an empty attention_dp_size meaning no attention DP.
"""

from __future__ import annotations

import re

from .common import LayoutDoubtError, Record, RecordError, coerce, iso_date, normalize_engine, positive_int_or_none, to_float, to_int

LAYOUT = ("batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
ROLE_LAYOUT = ("batch_size", "num_workers", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
REQUIRED = (
    ("backend", "model_path", "system", "mode", "isl", "osl", "concurrency", "silicon_ttft_ms", "silicon_tpot_ms")
    + LAYOUT
    + tuple(f"{role}_{c}" for role in ("prefill", "decode") for c in ROLE_LAYOUT)
)
OPTIONAL = ("id", "backend_version", "measured_on", "precision", "gemm_quant_mode", "moe_quant_mode")
# source column suffix -> canonical suffix
_CANON = {"batch_size": "batch", "num_workers": "workers", "tp_size": "tp", "pp_size": "pp",
          "attention_dp_size": "attention_dp", "moe_tp_size": "moe_tp", "moe_ep_size": "ep"}
_AGG_CANON = {"batch_size": "batch_size"}
MEANINGS = {
    "ttft_ms": "serving CSV silicon_ttft_ms: measured mean time to first token",
    "tpot_ms": "serving CSV silicon_tpot_ms: measured mean time per output token, first token excluded (= vLLM TPOT)",
}


# The id of an aggregated row names the attention TP it ran with ("..._c16_tp8_ep8_921"); the source
# has rows whose tp_size column is the product moe_tp x moe_ep instead (tp_size 64 under an id naming
# tp8, with identical timings recorded under tp8 elsewhere: calibration/README.md "quirks").
_ID_TP = re.compile(r"_tp(\d+)_ep(?:\d+|none)_\d+$")

# random range ratio of a client that sends every request at exactly its ISL / OSL
FIXED_LENGTHS = 1.0


def _id_layout_conflict(rec: Record) -> str | None:
    """Why an agg row's GPUs per worker disagree with the TP its id names (None when they agree or the id names none)."""
    m = _ID_TP.search(rec.fields.get("row_id") or "")
    tp, dp = rec.fields.get("tp"), rec.fields.get("attention_dp") or 1
    if m is None or not tp:
        return None
    named = int(m.group(1))
    if tp * dp > named:
        return (f"tp_size x attention_dp_size = {tp}x{dp} GPUs, but the row id {rec.fields['row_id']!r} names tp{named}: "
                "which layout ran cannot be told")
    return None


def metric_key(row: dict[str, str]) -> tuple[str, str] | None:
    """The measured TTFT and TPOT of a row as written (None unless both are given): two rows that agree in both to every
    digit are one measurement (one number alone can coincide by chance)."""
    key = ((row.get("silicon_ttft_ms") or "").strip(), (row.get("silicon_tpot_ms") or "").strip())  # short rows hold None
    return key if all(key) else None


def missing_columns(header: list[str]) -> list[str]:
    """Required columns the header lacks."""
    return [c for c in REQUIRED if c not in header]


def _layout(rec: Record, row: dict, prefix: str, columns: tuple[str, ...]) -> None:
    """Sizes of one role (prefix "" for agg, "prefill_"/"decode_" for disagg)."""
    for col in columns:
        src, value = f"{prefix}{col}", row[f"{prefix}{col}"]
        name = f"{prefix}{_CANON[col]}" if prefix else _AGG_CANON.get(col, _CANON[col])
        if col in ("moe_tp_size", "moe_ep_size"):
            rec.fields[name] = positive_int_or_none(value, src, rec)
        elif col == "attention_dp_size" and not value.strip():
            rec.fields[name] = 1  # empty = no attention DP (GPUs per worker = tp*pp)
            rec.notes[name] = f"{src} empty; taken as 1 (no attention DP)"
        else:
            rec.fields[name] = to_int(value, src)


def parse_row(row: dict[str, str], line: int) -> Record:
    rec = Record(line)
    mode = row["mode"].strip()
    if mode not in ("agg", "disagg"):
        raise RecordError(f"mode = {mode!r} is not agg or disagg")
    engine, _ = normalize_engine(row["backend"])
    rec.fields.update(
        row_id=coerce("row_id", row.get("id")),
        model=coerce("model", row["model_path"]),
        gpu=coerce("gpu", row["system"]),
        engine=engine or coerce("engine", row["backend"]),
        engine_version=coerce("engine_version", row.get("backend_version")),
        measured_on=iso_date(row.get("measured_on"), "measured_on"),
        mode=mode,
        precision=coerce("precision", row.get("precision")),
        gemm_quant_mode=coerce("gemm_quant_mode", row.get("gemm_quant_mode")),
        moe_quant_mode=coerce("moe_quant_mode", row.get("moe_quant_mode")),
        isl=to_float(row["isl"], "isl"),
        osl=to_float(row["osl"], "osl"),
        concurrency=to_float(row["concurrency"], "concurrency"),
        # the set's runs send synthetic requests of exactly `isl` input and `osl` output tokens (calibration README,
        # e2e/measured_serving.csv: "synthetic requests of isl input and osl output tokens"): fixed lengths
        random_range_ratio=FIXED_LENGTHS,
    )
    if mode == "agg":
        _layout(rec, row, "", LAYOUT)
        conflict = _id_layout_conflict(rec)
        if conflict:
            raise LayoutDoubtError(conflict)
        stray = [f"{r}_{c}" for r in ("prefill", "decode") for c in ROLE_LAYOUT if row[f"{r}_{c}"].strip()]
    else:
        for role in ("prefill_", "decode_"):
            _layout(rec, row, role, ROLE_LAYOUT)
        stray = [c for c in LAYOUT if row[c].strip()]
    if stray:
        rec.warnings.append(f"{mode} row also fills {', '.join(stray)}; ignored")
        rec.extra.update({c: row[c] for c in stray})
    rec.set_metric("ttft_ms", row["silicon_ttft_ms"], MEANINGS["ttft_ms"])
    rec.set_metric("tpot_ms", row["silicon_tpot_ms"], MEANINGS["tpot_ms"])
    rec.extra.update({k: v for k, v in row.items() if k not in REQUIRED and k not in OPTIONAL})
    return rec

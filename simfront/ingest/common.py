"""Pieces every source parser shares: the intermediate record, problems, value coercion.

A parser turns one file into :class:`Record` objects (canonical field values plus what it
could not map) or :class:`Problem` lines; :mod:`.finalize` then turns records into points.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .schema import BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, NUMBER_WORDS


@dataclass
class Problem:
    """Something the user must know about: a skipped row, an unreadable file."""

    file: str
    line: int | None
    message: str
    duplicate_of: tuple[str, int] | None = None  # (file, line) of the row this one repeats

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.message}"


@dataclass
class Record:
    """One source record mapped onto canonical field names, before validation."""

    line: int
    fields: dict[str, Any] = field(default_factory=dict)
    metric_definitions: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def set_metric(self, name: str, value: Any, definition: str) -> None:
        """Store a metric with the text saying which source field/definition it came from."""
        number = to_float(value, name)
        if number is not None:
            self.fields[name] = number
            self.metric_definitions[name] = definition


class RecordError(ValueError):
    """A record that cannot be used (unreadable value, nothing served); it is skipped and reported."""


class LayoutDoubtError(RecordError):
    """A row whose parallel layout cannot be told (its columns and its id disagree). Any other row of the file that
    records the same measured metrics to every digit is that measurement under another id: its layout is in doubt too
    (the reader skips it as well, ``load._csv_records``)."""


_NULLS = {"", "none", "null", "nan", "n/a", "na", "-"}
_INFS = {"inf", "+inf", "infinity"}


def to_float(value: Any, name: str = "value") -> float | None:
    """A number from a JSON/CSV cell; None for empty/null, inf for "inf"."""
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    text = str(value).strip()
    if text.lower() in _NULLS:
        return None
    if text.lower() in _INFS:
        return math.inf
    try:
        return float(text)
    except ValueError:
        raise RecordError(f"{name} = {text!r} is not a number") from None


def to_int(value: Any, name: str = "value") -> int | None:
    """An integer from "8", 8, 8.0 or "8.0"; a fractional value is an error."""
    number = to_float(value, name)
    if number is None:
        return None
    if not math.isfinite(number) or number != int(number):
        raise RecordError(f"{name} = {value!r} is not a whole number")
    return int(number)


def to_bool(value: Any, name: str = "value") -> bool | None:
    """true/false, yes/no, 1/0 (any case); None for empty."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _NULLS:
        return None
    if text in {"true", "yes", "y", "1", "on"}:
        return True
    if text in {"false", "no", "n", "0", "off"}:
        return False
    raise RecordError(f"{name} = {value!r} is not true/false")


_DATE = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})(?:$|[T _-])")


def iso_date(value: Any, name: str = "date") -> str | None:
    """An ISO date ``YYYY-MM-DD`` from "2026-03-23", "20260323", "2026-03-23T10:00:00" or vLLM's
    "20260323-101500"; None for empty."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() in _NULLS:
        return None
    m = _DATE.match(text)
    if not m or not (1 <= int(m.group(2)) <= 12 and 1 <= int(m.group(3)) <= 31):
        raise RecordError(f"{name} = {text!r} is not a date (YYYY-MM-DD)")
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)}"


def set_measured_on(rec: "Record", value: Any, name: str) -> bool:
    """Record the run's date (``measured_on``) from ``value``; a value that is no date becomes a warning, not a
    rejected row (the date only picks an engine release). True when a date was set."""
    try:
        rec.fields["measured_on"] = iso_date(value, name)
    except RecordError as e:
        rec.warnings.append(str(e))
        return False
    return rec.fields["measured_on"] is not None


def coerce(name: str, value: Any) -> Any:
    """Coerce a raw value to the type of canonical field ``name`` (ints, floats, else str)."""
    if name in INT_FIELDS:
        return to_int(value, name)
    if name in FLOAT_FIELDS:
        if isinstance(value, str) and value.strip().lower() in NUMBER_WORDS.get(name, ()):
            return value.strip().lower()  # a word the field's type allows (the engine's own "default", "balanced")
        return to_float(value, name)
    if name in BOOL_FIELDS:
        return to_bool(value, name)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def positive_int_or_none(value: Any, name: str, rec: Record, meaning: str = "not set") -> int | None:
    """An int where 0 means "not set" in the source (aiconfigurator writes moe sizes of 0)."""
    number = to_int(value, name)
    if number == 0:
        rec.notes[name] = f"0 in source read as {meaning}"
        return None
    return number


# Engine names as the tools spell them -> canonical engine id.
_ENGINE_PATTERNS = (
    # "trt" as a word of its own too: InferenceX names its frameworks trt and dynamo-trt
    (re.compile(r"tensorrt[-_ ]?llm|trt[-_ ]?llm|(?:^|[-_ +])trt(?:$|[-_ ])|tensorrtllm", re.I), "trtllm"),
    (re.compile(r"sglang", re.I), "sglang"),
    (re.compile(r"vllm", re.I), "vllm"),
    (re.compile(r"lmdeploy", re.I), "lmdeploy"),
    (re.compile(r"^tgi$|text[-_ ]generation[-_ ]inference", re.I), "tgi"),
)
_VERSION = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)?(?:[.\-+]?(?:post|rc|dev|a|b)\d*)*)\b")


def normalize_engine(raw: Any) -> tuple[str | None, str | None]:
    """(engine id, version) from text like "TensorRT-LLM v1.0 (PyTorch backend)" or "sglang-oai"."""
    if raw is None:
        return None, None
    text = str(raw).strip()
    engine = next((eng for pat, eng in _ENGINE_PATTERNS if pat.search(text)), None)
    version = _VERSION.search(text)
    return engine, version.group(1) if version else None


_SPEC = {
    "mtp": "mtp",
    "nextn": "mtp",
    "deepseek_mtp": "mtp",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "ngram": "ngram",
}


def normalize_spec(raw: Any) -> str | None:
    """Speculative-decoding method id (mtp/eagle/eagle3/ngram) from any tool's spelling."""
    if raw is None:
        return None
    text = str(raw).strip().lower().replace("-", "_")
    if text in _NULLS or text in {"false", "off", "no"}:
        return None
    if text in _SPEC:
        return _SPEC[text]
    raise RecordError(f"spec_decoding = {raw!r} is not one of mtp, eagle, eagle3, ngram")


def set_spec(rec: Record, raw: Any, source: str) -> None:
    """Set spec_decoding from a tool's method name; an unknown method is kept as a note."""
    try:
        rec.fields["spec_decoding"] = normalize_spec(raw)
    except RecordError as err:
        rec.notes["spec_decoding"] = f"{source} = {raw!r}"
        rec.warnings.append(f"{err}; left unset")


def parse_notes(text: Any) -> tuple[dict[str, str], list[str]]:
    """Split ``a=1; b=x; free text`` into ({a: 1, b: x}, [free text])."""
    pairs: dict[str, str] = {}
    free: list[str] = []
    if text is None:
        return pairs, free
    for segment in (s.strip() for s in str(text).split("; ")):
        if not segment:
            continue
        key, sep, value = segment.partition("=")
        if sep and key.strip() and " " not in key.strip():
            pairs[key.strip()] = value.strip()
        else:
            free.append(segment)
    return pairs, free


def pick_stat(block: Any, preferred: Iterable[str], fallback: Iterable[str] = ()) -> tuple[Any, str | None]:
    """The first present statistic of a stats dict, preferring means; (value, stat name)."""
    if not isinstance(block, dict):
        return None, None
    for stat in (*preferred, *fallback):
        if block.get(stat) is not None:
            return block[stat], stat
    return None, None


# statistic names the tools write -> the statistic MeasuredPoint.ttft_statistic records
STATISTIC_NAMES = {"mean": "mean", "avg": "mean", "average": "mean", "median": "median", "p50": "median"}


def note_ttft_statistic(rec: Record, canon: str, stat: str | None) -> None:
    """Record which statistic over requests a reader took for TTFT (``ttft_statistic``); other metrics: nothing."""
    if canon == "ttft_ms" and stat is not None and str(stat).lower() in STATISTIC_NAMES:
        rec.fields["ttft_statistic"] = STATISTIC_NAMES[str(stat).lower()]


# Per-request arrays some tools write (vLLM --save-detailed, SGLang --output-details, GuideLLM
# requests): kept in ``extra`` only as a length, so points stay small.
PER_REQUEST_KEYS = frozenset(
    {"input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors", "latencies",
     "queue_times", "requests"}
)


def keep_extra(rec: Record, source: dict, used: set[str]) -> None:
    """Copy every key of ``source`` not in ``used`` into ``rec.extra`` verbatim (long arrays summarised)."""
    for key, value in source.items():
        if key in used:
            continue
        if key in PER_REQUEST_KEYS and isinstance(value, (list, dict)):
            rec.extra[key] = f"<{len(value)} per-request entries not kept>"
        else:
            rec.extra[key] = value


def find_key(obj: Any, names: Iterable[str]) -> Any:
    """Depth-first search of nested dicts for the first of ``names`` with a non-None value."""
    names = tuple(names)
    if not isinstance(obj, dict):
        return None
    for name in names:
        if obj.get(name) is not None:
            return obj[name]
    for value in obj.values():
        found = find_key(value, names)
        if found is not None:
            return found
    return None


def set_attention_dp(rec: Record, role: str, tp_flag: int | None, dpa: bool | None, source: str) -> None:
    """Canonical tp/attention_dp of a role from the engine TP flag and the DP-attention boolean."""
    if dpa and tp_flag:
        rec.fields[f"{role}attention_dp"], rec.fields[f"{role}tp"] = tp_flag, 1
        rec.notes[f"{role}attention_dp"] = (
            f"{source}=true with tp={tp_flag}: attention_dp = {tp_flag}, attention TP = 1"
        )
    else:
        rec.fields[f"{role}tp"] = tp_flag
        if dpa is False:
            rec.fields[f"{role}attention_dp"] = 1

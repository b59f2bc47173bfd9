"""Read a result file into records (JSON, JSONL or CSV) and tell which tool wrote it.

Detection looks at content, never at the file name: the signature keys of each tool
(ecosystem.md §7) for JSON, the header for CSV. A truncated JSON file is still recognised
from the keys that survive, so its problem can name the format.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SimfrontError
from .common import Problem
from .schema import FORMATS


@dataclass
class Loaded:
    """A file's records: ``json`` = [(line, obj)], ``csv`` = header + [(line, row dict)]."""

    label: str
    kind: str  # "json" | "csv" | "empty"
    json: list[tuple[int, Any]] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    raw_keys: set[str] = field(default_factory=set)  # quoted keys seen in unparseable JSON text


def _json_problem(label: str, text: str, err: json.JSONDecodeError, line_offset: int = 0) -> Problem:
    """'truncated JSON' when the parser ran off the end of the text, else 'invalid JSON'."""
    kind = "truncated JSON" if err.pos >= len(text.rstrip()) else "invalid JSON"
    return Problem(label, err.lineno + line_offset, f"{kind} ({err.msg} at column {err.colno})")


_KEY = re.compile(r'"([A-Za-z_][\w.]*)"\s*:')


def _load_json(label: str, text: str) -> Loaded:
    """One JSON document, a JSON array, or JSON lines (vLLM --append-result, SGLang)."""
    loaded = Loaded(label, "json")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as whole_err:
        lines = text.splitlines()
        first = next((ln for ln in lines if ln.strip()), "")
        if first.strip() in ("{", "["):  # a pretty-printed document that is itself broken
            loaded.problems.append(_json_problem(label, text, whole_err))
            loaded.raw_keys = set(_KEY.findall(text))
            return loaded
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                loaded.json.append((number, json.loads(line)))
            except json.JSONDecodeError as err:
                loaded.problems.append(_json_problem(label, line, err, line_offset=number - 1))
        return loaded
    if isinstance(doc, list):
        loaded.json = [(i, obj) for i, obj in enumerate(doc, start=1)]
    else:
        loaded.json = [(1, doc)]
    return loaded


def _load_csv(label: str, text: str) -> Loaded:
    """Header plus rows keyed by column; a row with the wrong cell count is a problem."""
    loaded = Loaded(label, "csv")
    reader = csv.reader(io.StringIO(text))
    try:
        loaded.header = [h.strip() for h in next(reader)]
    except StopIteration:
        return Loaded(label, "empty")
    start = reader.line_num + 1
    for cells in reader:
        line, start = start, reader.line_num + 1
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(loaded.header):
            loaded.problems.append(
                Problem(label, line, f"row has {len(cells)} cells, header has {len(loaded.header)}; row skipped")
            )
            continue
        loaded.rows.append((line, dict(zip(loaded.header, cells))))
    return loaded


# Result files a client writes into its output directory, in the order they are looked for:
# AIPerf's and genai-perf's profile exports (aiperf/config/artifacts.py PROFILE_EXPORT_AIPERF_JSON_FILE).
ARTIFACT_FILES = ("profile_export_aiperf.json", "profile_export_genai_perf.json")
GENAI_BENCH_METADATA = "experiment_metadata.json"  # genai-bench: one per experiment folder, beside the run files


def result_files_in(directory: Path) -> list[Path]:
    """The result files of a client's artifact/experiment directory (searched recursively).

    AIPerf / genai-perf: the profile export JSON; genai-bench: every run JSON beside an
    ``experiment_metadata.json``. Empty when the directory holds none of them.
    """
    for name in ARTIFACT_FILES:
        found = sorted(directory.rglob(name))
        if found:
            return found
    runs = []
    for meta in sorted(directory.rglob(GENAI_BENCH_METADATA)):
        runs += sorted(p for p in meta.parent.glob("*.json") if p.name != GENAI_BENCH_METADATA)
    return runs


def _load_yaml(label: str, text: str) -> Loaded | None:
    """A YAML document holding a mapping (GuideLLM ``--output-path x.yaml``), as one JSON record; else None."""
    import yaml

    from .. import yamlio

    try:  # a user's result file: parsed, not kept in simfront's cache of its own data files
        doc = yamlio.parse(text)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict):
        return None
    return Loaded(label, "json", json=[(1, doc)])


def load_file(path: Path, label: str) -> Loaded:
    """Read ``path`` as JSON/JSONL when it starts with '{' or '[', as YAML when named .yaml/.yml
    and holding a mapping, else as CSV."""
    text = path.read_text(encoding="utf-8-sig")
    if not text.strip():
        return Loaded(label, "empty")
    if text.lstrip()[0] in "{[":
        return _load_json(label, text)
    if path.suffix.lower() in (".yaml", ".yml"):
        loaded = _load_yaml(label, text)
        if loaded is not None:
            return loaded
    return _load_csv(label, text)


def _keys(loaded: Loaded) -> set[str]:
    """Top-level keys of the parsed records, or every quoted key of unparseable text."""
    keys = set(loaded.raw_keys)
    for _, obj in loaded.json:
        if isinstance(obj, dict):
            keys |= set(obj)
    return keys


# Keys only AIPerf writes: its own metric tags and run status (ecosystem.md §3.1 vs §3.2).
AIPERF_ONLY_KEYS = frozenset(
    {"was_cancelled", "error_summary", "inter_chunk_latency", "request_count", "benchmark_duration", "total_isl"}
)


def _aiperf_or_genai_perf(loaded: Loaded, keys: set[str]) -> str:
    """AIPerf, when it wrote a key genai-perf never does or nests input_config into sections."""
    if keys & AIPERF_ONLY_KEYS:
        return "aiperf"
    for _, obj in loaded.json:
        cfg = obj.get("input_config") if isinstance(obj, dict) else None
        if isinstance(cfg, dict) and (isinstance(cfg.get("loadgen"), dict) or isinstance(cfg.get("endpoint"), dict)):
            return "aiperf"
    return "genai_perf"


def _json_format(loaded: Loaded) -> str | None:
    keys = _keys(loaded)
    if {"hardware", "framework", "metrics"} <= keys:
        return "inferencex_api"
    if {"engine", "world_info", "performance"} <= keys:
        return "trtllm_bench"
    if "benchmarks" in keys:
        return "guidellm"
    if "aggregated_metrics" in keys:
        return "genai_bench"
    if "time_to_first_token" in keys and keys & {"input_config", "inter_token_latency"}:
        return _aiperf_or_genai_perf(loaded, keys)
    if "total_token_throughput" in keys and keys & {"mean_ttft_ms", "model_id", "request_throughput"}:
        return "vllm_bench_serve"
    if "total_throughput" in keys and keys & {"mean_e2e_latency_ms", "dataset_name", "accept_length"}:
        return "sglang_bench_serving"
    return None


SERVING_CSV_SIGNATURE = frozenset({"silicon_ttft_ms", "silicon_tpot_ms", "model_path", "system", "mode"})
OFFLINE_CSV_SIGNATURE = frozenset({"model", "gpu", "num_gpus", "disagg", "engine", "notes"})


def _csv_format(loaded: Loaded) -> str | None:
    header = set(loaded.header)
    serving = len(header & SERVING_CSV_SIGNATURE)
    offline = len(header & OFFLINE_CSV_SIGNATURE) + any(h.startswith("metric_") for h in header)
    # Need at least two signature columns so a CSV with a wrong column set is still named.
    best = max((serving, "serving_csv"), (offline, "offline_csv"))
    return best[1] if best[0] >= 2 else None


def format_of(loaded: Loaded) -> str | None:
    """The format name for loaded records, or None when no signature matches."""
    if loaded.kind == "json":
        return _json_format(loaded)
    if loaded.kind == "csv":
        return _csv_format(loaded)
    return None


def unknown_format_message() -> str:
    return f"unknown format; known formats: {', '.join(FORMATS)}"


def detect_format(path: str | Path) -> str:
    """The format of a result file (one of FORMATS); SimfrontError when none matches."""
    path = Path(path)
    try:
        loaded = load_file(path, str(path))
    except OSError as err:
        raise SimfrontError(f"{path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise SimfrontError(f"{path}: not a text file; {unknown_format_message()}") from None
    fmt = format_of(loaded)
    if fmt is None:
        raise SimfrontError(f"{path}: {unknown_format_message()}")
    return fmt

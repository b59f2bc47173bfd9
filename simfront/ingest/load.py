"""``load_measurements``: files -> detected format -> parser -> validated points + problem lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import json

from . import aiperf, genai_bench, genai_perf, guidellm, inferencex, offline_csv, serving_csv, sglang_serving, trtllm_bench, vllm_serve
from .checks import configuration_id, run_checks
from .common import LayoutDoubtError, Problem, Record, RecordError
from .detect import GENAI_BENCH_METADATA, Loaded, format_of, load_file, result_files_in, unknown_format_message
from .finalize import check_overrides, finalize, load_sidecar, sidecar_paths
from .schema import IngestResult, MeasuredPoint

JSON_PARSERS: dict[str, Callable[..., Record]] = {
    "vllm_bench_serve": vllm_serve.parse_record,
    "sglang_bench_serving": sglang_serving.parse_record,
    "aiperf": aiperf.parse_record,
    "genai_perf": genai_perf.parse_record,
    "trtllm_bench": trtllm_bench.parse_record,
    "guidellm": guidellm.parse_record,
    "genai_bench": genai_bench.parse_record,
    "inferencex_api": inferencex.parse_record,
}
CSV_PARSERS = {"serving_csv": serving_csv, "offline_csv": offline_csv}


def _json_items(loaded: Loaded, fmt: str) -> list[tuple[int, tuple]]:
    """(line or record number, parser arguments) per record; GuideLLM has one per benchmark."""
    if fmt == "guidellm":
        return [(n, (bench, n, report)) for n, bench, report in guidellm.records(loaded)]
    if fmt == "genai_bench":  # the experiment's metadata (model, engine, GPUs) sits beside each run file
        meta_path = Path(loaded.label).with_name(GENAI_BENCH_METADATA)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        except (OSError, ValueError) as err:
            raise RecordError(f"{meta_path}: unreadable ({err})") from None
        return [(line, (obj, line, meta if isinstance(meta, dict) else {})) for line, obj in loaded.json]
    return [(line, (obj, line)) for line, obj in loaded.json]


def _json_records(loaded: Loaded, fmt: str) -> Iterator[Record | Problem]:
    try:
        items = _json_items(loaded, fmt)
    except RecordError as err:
        yield Problem(loaded.label, 1, f"{err}; file skipped")
        return
    for line, args in items:
        try:
            if not isinstance(args[0], dict):
                raise RecordError("expected a JSON object")
            yield JSON_PARSERS[fmt](*args)
        except RecordError as err:
            yield Problem(loaded.label, line, f"{err}; record skipped")


def _csv_records(loaded: Loaded, fmt: str) -> Iterator[Record | Problem]:
    module = CSV_PARSERS[fmt]
    lacks = module.missing_columns(loaded.header)
    if lacks:
        yield Problem(loaded.label, 1, f"header lacks column(s) {', '.join(lacks)} for {fmt}; "
                                       f"{len(loaded.rows)} data row(s) not read")
        return
    key_of = getattr(module, "metric_key", None)
    items: list[tuple[Record | Problem, tuple | None]] = []
    doubtful: dict[tuple, tuple[int, str]] = {}  # metrics -> (line, why) of rows whose layout cannot be told
    for line, row in loaded.rows:
        key = key_of(row) if key_of else None
        try:
            items.append((module.parse_row(row, line), key))
        except RecordError as err:
            if isinstance(err, LayoutDoubtError) and key is not None:
                doubtful.setdefault(key, (line, str(err)))
            items.append((Problem(loaded.label, line, f"{err}; row skipped"), None))
    # a copy's configuration (its id without the load part) labels every run of it with the copy's layout: in doubt too
    configs = [configuration_id(item.fields.get("row_id")) if isinstance(item, Record) else None for item, _ in items]
    copied = {c: item.line for (item, key), c in zip(items, configs) if c is not None and key in doubtful}
    for (item, key), config in zip(items, configs):
        if isinstance(item, Record) and key in doubtful:
            at, why = doubtful[key]
            item = Problem(loaded.label, item.line, f"the same measured TTFT and TPOT, to every digit, as line {at}, whose layout "
                                                    f"cannot be told ({why}): one measurement under two ids, so this row's "
                                                    "layout is in doubt too; row skipped")
        elif config in copied:
            item = Problem(loaded.label, item.line, f"configuration {config!r} has a run (line {copied[config]}) that is a copy of a "
                                                    "run whose layout cannot be told: its layout labels are in doubt; row skipped")
        yield item


def _one_file(path: Path, overrides: dict, sidecar_base: Path | None = None) -> tuple[list[MeasuredPoint], list[Problem]]:
    """Points of one result file; ``sidecar_base``: the artifact directory it was found in (its sidecar
    ``<dir>.simfront.yaml`` applies when the file has none of its own)."""
    label = str(path)
    try:
        loaded = load_file(path, label)
    except OSError as err:
        return [], [Problem(label, None, f"cannot read ({err.strerror or err})")]
    except UnicodeDecodeError:
        return [], [Problem(label, None, f"not a text file; {unknown_format_message()}")]
    if loaded.kind == "empty":
        return [], [Problem(label, None, "empty file; nothing to read")]
    fmt = format_of(loaded)
    problems = list(loaded.problems)  # unreadable lines, with their line numbers
    if fmt is None:  # no rows to skip in a file whose format is unknown: one file-level problem
        if not problems or loaded.json or loaded.rows:
            return [], [Problem(label, None, unknown_format_message())]
        more = f" and {len(problems) - 1} more unreadable line(s)" if len(problems) > 1 else ""
        return [], [Problem(label, None, f"no record could be read (line {problems[0].line}: {problems[0].message}{more})")]
    sidecar, sidecar_label, sidecar_problems = load_sidecar(path)
    if sidecar_label is None and sidecar_base is not None:
        sidecar, sidecar_label, sidecar_problems = load_sidecar(sidecar_base)
    problems += sidecar_problems
    records = _csv_records(loaded, fmt) if loaded.kind == "csv" else _json_records(loaded, fmt)
    points = []
    for item in records:
        if isinstance(item, Record):
            item = finalize(item, fmt, label, sidecar, sidecar_label, overrides)
        (problems if isinstance(item, Problem) else points).append(item)
    return points, problems


def load_measurements(
    paths: str | Path | Iterable[str | Path], overrides: dict[str, Any] | None = None
) -> IngestResult:
    """Measured points from result files of any known format, in file then line order.

    ``overrides`` (e.g. from CLI options ``{"gpu": "H200", "tp": 8}``) set configuration
    fields on every point, over the file and its sidecar YAML. Every row that does not become
    a point is reported in ``problems`` as ``file:line: message``.
    """
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    overrides = check_overrides(overrides)
    sidecars = {c.resolve() for p in paths for c in sidecar_paths(p)}
    points: list[MeasuredPoint] = []
    order: dict[str, int] = {}
    problems: list[tuple[int, Problem]] = []  # (file index, problem): reported in file then line order
    for index, path in enumerate(paths):
        if path.resolve() in sidecars and path.suffix in (".yaml", ".yml"):
            continue  # a sidecar given alongside its result file is configuration, not a result
        if path.is_dir():  # an AIPerf artifact directory, a genai-bench experiment folder
            inner = result_files_in(path)
            if not inner:
                order[str(path)] = index
                problems.append((index, Problem(str(path), None, "directory holds no known result file (looked for "
                                                "profile_export_aiperf.json, profile_export_genai_perf.json, genai-bench "
                                                "experiment_metadata.json + run JSON)")))
            for file in inner:
                order[str(file)] = index
                file_points, file_problems = _one_file(file, overrides, sidecar_base=path)
                points += file_points
                problems += [(index, p) for p in file_problems]
            continue
        order[str(path)] = index
        file_points, file_problems = _one_file(path, overrides)
        points += file_points
        problems += [(index, p) for p in file_problems]
    points, check_problems = run_checks(points)
    problems += [(order[p.file], p) for p in check_problems]
    problems.sort(key=lambda item: (item[0], item[1].line or 0))
    skipped = [{"source_file": p.file, "line": p.line, "message": p.message,
                "duplicate_of": None if p.duplicate_of is None else {"source_file": p.duplicate_of[0], "line": p.duplicate_of[1]}}
               for _, p in problems if p.line is not None]
    return IngestResult(points=points, problems=[str(p) for _, p in problems], skipped=skipped)

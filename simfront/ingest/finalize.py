"""Turn a parsed record into a validated MeasuredPoint: sidecar and overrides, derived values, ``missing``.

Precedence: file < sidecar YAML < overrides (the CLI), with a warning wherever a later layer
changes a value the file carried. Derived values say how they were derived (``notes`` for
layout, ``metric_definitions`` for metrics). ``missing`` lists what is still unknown.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import SimfrontError, unknown
from ..units import MS
from .common import Problem, Record, RecordError, coerce, normalize_spec
from .datasets import benchmark_named, dataset_lengths
from .gpu_names import check_gpu
from .schema import CONFIG_FIELDS, DERIVED_NOTE, METRIC_FIELDS, MeasuredPoint

ALWAYS_NEEDED = ("model", "gpu", "num_gpus", "engine", "mode", "precision", "isl", "osl")
AGG_NEEDED = ("tp", "pp")
DISAGG_NEEDED = tuple(f"{role}_{k}" for role in ("prefill", "decode") for k in ("workers", "tp", "pp"))


def _coerce_layer(values: dict[str, Any]) -> dict[str, Any]:
    """Canonical types for sidecar/override values (RecordError when one cannot be read)."""
    return {k: normalize_spec(v) if k == "spec_decoding" else coerce(k, v) for k, v in values.items()}


def check_overrides(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Validate override keys (configuration fields only) and types; SimfrontError otherwise."""
    overrides = dict(overrides or {})
    for key in overrides:
        if key not in CONFIG_FIELDS:
            raise unknown("override field", key, CONFIG_FIELDS)
    try:
        return _coerce_layer(overrides)
    except RecordError as err:
        raise SimfrontError(f"override {err}") from None


def sidecar_paths(path: Path) -> list[Path]:
    """Candidate sidecars: ``<name>.simfront.yaml``, ``<stem>.simfront.yaml``, ``<stem>.yaml``."""
    cands = [path.with_name(path.name + ".simfront.yaml"), path.with_name(path.stem + ".simfront.yaml"),
             path.with_name(path.stem + ".yaml")]
    return [c for c in dict.fromkeys(cands) if c != path]


def load_sidecar(path: Path) -> tuple[dict[str, Any], str | None, list[Problem]]:
    """(values, sidecar label, problems) from the first sidecar that exists next to ``path``."""
    found = next((c for c in sidecar_paths(path) if c.is_file()), None)
    if found is None:
        return {}, None, []
    label = str(found)
    try:
        doc = yaml.safe_load(found.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        return {}, label, [Problem(label, mark.line + 1 if mark else None, f"invalid YAML ({err}); sidecar ignored")]
    if not isinstance(doc, dict):
        return {}, label, [Problem(label, None, "sidecar must be a mapping of field: value; ignored")]
    problems, values = [], {}
    doc = dict(doc)
    for role in ("prefill", "decode"):  # older simfront sidecars nest the roles: prefill: {tp: 4, ...}
        nested = doc.pop(role, None)
        if isinstance(nested, dict):
            for k, v in nested.items():
                k = {"max_batch": "batch", "num_gpus": "gpus"}.get(k, k)
                doc.setdefault(f"{role}_{k}", v)
    if doc.get("mode") == "disagg":  # a top-level layout beside the roles is the decode one: not a field of disagg
        for k in ("tp", "pp", "ep", "attention_dp"):
            if doc.get(f"decode_{k}") is not None:
                doc.pop(k, None)
    included = _included_rules(doc.pop(INCLUDE_KEY, None), found, label, problems)
    rules = doc.pop(RULES_KEY, None)
    parsed = []
    if rules is not None:
        parsed, rule_problems = _sidecar_rules(rules, label)
        problems += rule_problems
    if included or parsed:
        values[RULES_KEY] = included + parsed  # the file's own rules after the included ones: they win
    for key, value in doc.items():
        if key not in CONFIG_FIELDS:
            problems.append(Problem(label, None, f"{unknown('sidecar field', str(key), CONFIG_FIELDS)}; key ignored"))
            continue
        try:
            values.update(_coerce_layer({key: value}))
        except RecordError as err:
            problems.append(Problem(label, None, f"{err}; key ignored"))
    return values, label, problems


# A sidecar's conditional fields: ``rules: [{where: {field: value or [values]}, set: {field: value}}, ...]``, applied
# in order to the rows whose fields match every ``where`` entry (a benchmark recipe that ran one setting for some
# rows and another for others: InferenceX's MTP draft length follows the engine and attention DP).
RULES_KEY = "rules"


def _sidecar_rules(rules, label: str) -> tuple[list[tuple[dict, dict]], list[Problem]]:
    """(where, set) pairs of a sidecar's ``rules`` list, with a problem for each entry that cannot be read."""
    if not isinstance(rules, list):
        return [], [Problem(label, None, "rules must be a list of {where: {...}, set: {...}}; ignored")]
    out, problems = [], []
    for n, rule in enumerate(rules, 1):
        if not isinstance(rule, dict) or set(rule) != {"where", "set"} or not all(isinstance(rule[k], dict) for k in rule):
            problems.append(Problem(label, None, f"rule {n} must be {{where: {{field: value}}, set: {{field: value}}}}; ignored"))
            continue
        bad = [k for k in (*rule["where"], *rule["set"]) if k not in CONFIG_FIELDS]
        if bad:
            problems.append(Problem(label, None, f"rule {n}: {unknown('field', str(bad[0]), CONFIG_FIELDS)}; rule ignored"))
            continue
        try:
            where = {k: [_coerce_layer({k: x})[k] for x in (v if isinstance(v, list) else [v])] for k, v in rule["where"].items()}
            out.append((where, _coerce_layer(rule["set"])))
        except RecordError as err:
            problems.append(Problem(label, None, f"rule {n}: {err}; rule ignored"))
    return out, problems


# Another sidecar's rules for the rows both files share: ``include: [{file: other.simfront.yaml, where: {field: value}},
# ...]`` (path relative to this sidecar). Its rules, and its unconditional fields as one more rule, apply to the rows the
# ``where`` selects (a file of the same benchmark runs as another, read with that file's recipe facts), before this
# file's own rules. An included sidecar's own ``include`` is not followed.
INCLUDE_KEY = "include"


def _included_rules(includes, path: Path, label: str, problems: list) -> list[tuple[dict, dict]]:
    """(where, set) rules of the sidecars ``includes`` names, each narrowed to its include's ``where``."""
    if includes is None:
        return []
    if not isinstance(includes, list) or not all(isinstance(i, dict) and set(i) <= {"file", "where"} and "file" in i
                                                 for i in includes):
        problems.append(Problem(label, None, "include must be a list of {file: other.simfront.yaml, where: {field: value}}; "
                                             "ignored"))
        return []
    out = []
    for inc in includes:
        other = path.parent / str(inc["file"])
        if not other.is_file():
            problems.append(Problem(label, None, f"include: no sidecar {other}; ignored"))
            continue
        narrow, narrow_problems = _sidecar_rules([{"where": dict(inc.get("where") or {}), "set": {}}], label)
        problems += narrow_problems
        if narrow_problems:
            continue
        scope = narrow[0][0]
        try:
            doc = yaml.safe_load(other.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            problems.append(Problem(label, None, f"include {other}: invalid YAML ({err}); ignored"))
            continue
        doc = {k: v for k, v in (doc if isinstance(doc, dict) else {}).items() if k != INCLUDE_KEY}
        base = {k: v for k, v in doc.items() if k != RULES_KEY}
        raw = ([{"where": {}, "set": base}] if base else []) + list(doc.get(RULES_KEY) or [])
        rules, rule_problems = _sidecar_rules(raw, str(other))
        problems += rule_problems
        for where, values in rules:
            merged = _narrowed(where, scope)
            if merged is not None:
                out.append((merged, values))
    return out


def _narrowed(where: dict, scope: dict) -> dict | None:
    """``where`` also requiring ``scope`` (a key both name keeps the values both allow); None where none is left."""
    out = dict(where)
    for k, allowed in scope.items():
        if k in out:
            out[k] = [v for v in out[k] if any(_same_value(k, v, a) for a in allowed)]
            if not out[k]:
                return None
        else:
            out[k] = list(allowed)
    return out


def _rule_matches(fields: dict, where: dict) -> bool:
    """Whether a row's fields hold one of the listed values for every field a rule's ``where`` names."""
    return all(fields.get(k) is not None and any(_same_value(k, fields[k], x) for x in values) for k, values in where.items())


def _same_value(key: str, old, new) -> bool:
    """Equal, or two spellings of one catalog GPU (a client's 'H100' and a sidecar's 'h100_sxm')."""
    if old == new:
        return True
    if key != "gpu":
        return False
    from ..hardware import get_hardware

    try:
        return get_hardware(str(old)).id == get_hardware(str(new)).id
    except SimfrontError:
        return False


def _apply(fields: dict, origins: dict, notes: dict, warnings: list, layer: dict, origin: str) -> None:
    """Set ``layer`` over ``fields``; warn where it changes a value (naming where that value came from)."""
    for key, value in layer.items():
        if value is None:
            continue
        if fields.get(key) is not None and not _same_value(key, fields[key], value):
            warnings.append(f"{key}: {origins.get(key, 'file')} has {fields[key]!r}, {origin} sets {value!r}")
        fields[key], origins[key] = value, origin
    if layer:
        notes[origin.split()[0]] = f"{', '.join(sorted(layer))} from {origin}"


def _check_gpu(f: dict, notes: dict, warnings: list) -> None:
    """A virtualised GPU is read as its physical part; a part the catalog lacks is said to be one."""
    name, said, note = check_gpu(str(f["gpu"]))
    warnings.extend(said)
    if note:
        notes["gpu"], f["gpu"] = note, name


def _is_mlperf(notes: dict, extra: dict) -> bool:
    """Whether a row says it is an MLPerf result: it names a scenario, or mentions MLPerf."""
    keys = {str(k).lower() for k in (*notes, *extra)}
    return "scenario" in keys or any("mlperf" in str(v).lower() for v in (*notes.values(), *extra.values()))


def _mlperf_benchmark(f: dict, notes: dict, extra: dict) -> None:
    """A model column holding an MLPerf benchmark name (``llama2-70b-99.9``) names the benchmark's model and,
    where the row gives neither lengths nor a dataset, its dataset. Names that are also catalog model names
    (``deepseek-r1``) count as benchmark names only on rows that say they are MLPerf results."""
    bench = benchmark_named(f.get("model"))
    if bench is None:
        return
    if not _is_mlperf(notes, extra):
        from ..models import resolve_name

        try:
            resolve_name(str(f["model"]))
            return  # a catalog model name on a row that is not an MLPerf result: not a benchmark name
        except SimfrontError:
            pass
    notes["model"] = f"MLPerf benchmark {f['model']!r}: model {bench.model}"
    f["model"] = bench.model
    if f.get("dataset") is None and f.get("isl") is None and f.get("osl") is None:
        f["dataset"] = bench.dataset
        notes["dataset"] = f"the {bench.benchmark} benchmark's dataset"


def _dataset_lengths(f: dict, defs: dict, warnings: list) -> None:
    """isl/osl the row lacks, from the named dataset's tabulated means (estimates said so on the row)."""
    lengths, why = dataset_lengths(f["dataset"], f.get("model"))
    if lengths is None:
        warnings.append(why)
        return
    for key, value, source in (("isl", lengths.isl, lengths.isl_source), ("osl", lengths.osl, lengths.osl_source)):
        if f.get(key) is not None:
            continue
        f[key] = value
        defs[key] = f"{lengths.citation()}: {source}"
        if key in lengths.estimated:
            warnings.append(f"{key} = {value:g} is an ESTIMATE of the mean {'input' if key == 'isl' else 'output'} "
                            f"tokens of MLPerf {lengths.benchmark} ({lengths.dataset}): {source.removeprefix('estimate: ')}")
    if not _same_tokenizer(f.get("model"), lengths.model):
        warnings.append(f"dataset lengths of {f['dataset']!r} are counted in {lengths.model} tokens; the row's model "
                        f"{f.get('model')!r} tokenises differently")


def _same_tokenizer(model, bench_model: str) -> bool:
    from .datasets import _same_model

    return model is None or _same_model(model, bench_model)


def _derive_gpus(f: dict, notes: dict, warnings: list) -> None:
    """Role and total GPU counts from the layout: GPUs per worker = tp * pp * attention_dp."""
    def per_worker(prefix: str) -> int | None:
        tp = f.get(f"{prefix}tp")
        return tp * (f.get(f"{prefix}pp") or 1) * (f.get(f"{prefix}attention_dp") or 1) if tp else None

    if f.get("mode") == "disagg":
        for role in ("prefill_", "decode_"):
            gpus, workers = per_worker(role), f.get(f"{role}workers")
            if f.get(f"{role}gpus") is None and gpus and workers:
                f[f"{role}gpus"] = workers * gpus  # all GPUs of this role
                notes[f"{role}gpus"] = f"derived {role}workers x tp x pp x attention_dp"
        derived = f["prefill_gpus"] + f["decode_gpus"] if f.get("prefill_gpus") and f.get("decode_gpus") else None
        how = "prefill_gpus + decode_gpus"
    else:
        derived, how = per_worker(""), "tp x pp x attention_dp (pp, attention_dp taken as 1 where unknown)"
    if derived is None:
        return
    if f.get("num_gpus") is None:
        f["num_gpus"], notes["num_gpus"] = derived, f"{DERIVED_NOTE} {how}"
    elif f.get("mode") != "disagg" and f["num_gpus"] % derived == 0:
        notes.setdefault("num_gpus", f"num_gpus={f['num_gpus']}: {f['num_gpus'] // derived} replicas of {how} = {derived}")
    elif f["num_gpus"] != derived:
        # A count the layout cannot make (not whole replicas; disagg: not prefill + decode): the layout is trusted.
        warnings.append(f"num_gpus={f['num_gpus']} contradicts the layout ({how} = {derived}"
                        f"{'' if f.get('mode') == 'disagg' else ' per replica'}); {derived} used")
        notes["num_gpus"] = f"source said {f['num_gpus']}; layout gives {derived}"
        f["num_gpus"] = derived


def _derive_metrics(f: dict, defs: dict) -> None:
    """tok/s/user from TPOT and per-GPU from total output throughput (or the reverse)."""
    if f.get("tok_s_per_user") is None and f.get("tpot_ms"):
        f["tok_s_per_user"] = 1.0 / (f["tpot_ms"] * MS)  # tokens per second seen by one request
        defs["tok_s_per_user"] = "derived 1000/tpot_ms (mean TPOT)"
    gpus = f.get("num_gpus")
    if gpus and f.get("output_tok_s_per_gpu") is None and f.get("output_tok_s_total") is not None:
        f["output_tok_s_per_gpu"] = f["output_tok_s_total"] / gpus  # over all GPUs, prefill + decode
        defs["output_tok_s_per_gpu"] = "derived output_tok_s_total / num_gpus (all GPUs)"
    if gpus and f.get("output_tok_s_total") is None and f.get("output_tok_s_per_gpu") is not None:
        f["output_tok_s_total"] = f["output_tok_s_per_gpu"] * gpus  # whole deployment
        defs["output_tok_s_total"] = "derived output_tok_s_per_gpu x num_gpus"


def _missing(f: dict) -> list[str]:
    needed = ALWAYS_NEEDED + (DISAGG_NEEDED if f.get("mode") == "disagg" else AGG_NEEDED)
    missing = [k for k in needed if f.get(k) is None]
    if f.get("concurrency") is None and f.get("request_rate") is None:
        missing.append("concurrency")
    if f.get("acceptance_length") is not None and f.get("spec_decoding") is None:
        missing.append("spec_decoding")
    if f.get("spec_decoding") and f.get("spec_k") is None:
        missing.append("spec_k")  # the run's draft count: priced with simfront's default (search.DEFAULT_SPEC_K)
    return missing


def _validation_message(err: ValidationError) -> str:
    parts = [f"{'.'.join(map(str, e['loc']))} = {e.get('input')!r}: {e['msg']}" for e in err.errors()]
    return "; ".join(parts)


def finalize(
    rec: Record, fmt: str, label: str, sidecar: dict, sidecar_label: str | None, overrides: dict
) -> MeasuredPoint | Problem:
    """The validated point for ``rec``, or a Problem naming why it was skipped."""
    fields = {k: v for k, v in rec.fields.items() if v is not None}
    notes, warnings, defs = dict(rec.notes), list(rec.warnings), dict(rec.metric_definitions)
    origins: dict[str, str] = {}
    _apply(fields, origins, notes, warnings, {k: v for k, v in sidecar.items() if k != RULES_KEY}, f"sidecar {sidecar_label}")
    for n, (where, values) in enumerate(sidecar.get(RULES_KEY, ()), 1):
        if _rule_matches(fields, where):
            _apply(fields, origins, notes, warnings, values, f"sidecar-rule-{n} {sidecar_label}")
    _apply(fields, origins, notes, warnings, overrides, "overrides")
    if fields.get("gpu"):
        _check_gpu(fields, notes, warnings)
    _mlperf_benchmark(fields, notes, rec.extra)
    if fields.get("dataset") and (fields.get("isl") is None or fields.get("osl") is None):
        _dataset_lengths(fields, defs, warnings)
    if fields.get("request_rate") == math.inf:  # every request issued at once: closed loop at the cap
        del fields["request_rate"]
        notes["request_rate"] = "inf in source: all requests issued at once (load set by the concurrency cap)"
    if not any(fields.get(m) is not None for m in METRIC_FIELDS):
        return Problem(label, rec.line, "no metric values; record skipped")
    _derive_gpus(fields, notes, warnings)
    _derive_metrics(fields, defs)
    try:
        return MeasuredPoint(
            source_file=label, line=rec.line, format=fmt, **fields, metric_definitions=defs,
            missing=_missing(fields), notes=notes, extra=rec.extra, warnings=warnings,
        )
    except ValidationError as err:
        return Problem(label, rec.line, f"{_validation_message(err)}; record skipped")

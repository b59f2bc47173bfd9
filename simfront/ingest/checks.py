"""Plausibility checks over all ingested points, and duplicate detection.

Each check is one vectorised test over the points' metric arrays (NaN where absent). A point
failing a check is dropped and reported as one problem line; softer inconsistencies become
warnings on the point. Duplicates (same configuration and metrics) keep the first occurrence.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

import numpy as np

from ..units import MS
from .common import Problem
from .schema import BOOKKEEPING_FIELDS, CONFIG_FIELDS, METRIC_FIELDS, PROVENANCE_FIELDS, MeasuredPoint

# Upper bound on a mean per-output-token time: above 10 s a value cannot be a serving
# measurement in ms (ingest task spec); the slowest mean TPOT in the calibration set is
# 560 ms (calibration/e2e/measured_serving.csv), so real data sits far below it.
MAX_TPOT_MS = 10_000.0
# A ms field holding seconds is off by 1000x. Flag a latency/throughput disagreement beyond
# the geometric midpoint of 1x and 1000x: sqrt(1000) ~ 31.6x. Real runs stay well inside it
# (achieved concurrency below the cap only lowers measured/implied, and not by 30x).
UNIT_SLIP_FACTOR = math.sqrt(1000.0)
# Relative slack for values that should be equal or ordered: perf tables round to integer
# tok/s (offline_throughput.csv), which is < 1 % at the throughputs they report.
ROUNDING_REL_TOL = 0.01
# Metrics that are computed from others and so do not count as independent evidence.
DERIVABLE_METRICS = ("tok_s_per_user", "output_tok_s_per_gpu")


def _array(points: list[MeasuredPoint], name: str) -> np.ndarray:
    return np.array([getattr(p, name) if getattr(p, name) is not None else np.nan for p in points], dtype=float)


def plausibility(points: list[MeasuredPoint]) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """({index: reasons to drop}, {index: warnings}) for the points."""
    a = {n: _array(points, n) for n in (*METRIC_FIELDS, "concurrency", "request_rate", "osl", "num_gpus")}
    drop: dict[int, list[str]] = {}
    soft: dict[int, list[str]] = {}

    def flag(mask: np.ndarray, sink: dict, message) -> None:
        for i in np.flatnonzero(mask):
            sink.setdefault(int(i), []).append(message(int(i)))

    with np.errstate(invalid="ignore", divide="ignore"):
        for name in ("tpot_ms", "itl_ms"):
            flag(a[name] > MAX_TPOT_MS, drop, lambda i, n=name: f"{n} = {a[n][i]:g} exceeds {MAX_TPOT_MS * MS:g} s")

        # Little's law: C requests in flight at X output tok/s -> each request lasts C*OSL/X s.
        # Only for closed-loop runs: with a finite request rate the cap C is not the load.
        closed_loop = ~np.isfinite(a["request_rate"])
        implied_ms = a["concurrency"] * a["osl"] / a["output_tok_s_total"] / MS
        from_parts = a["ttft_ms"] + (a["osl"] - 1.0) * a["tpot_ms"]  # E2E = TTFT + (OSL-1)*TPOT
        measured_ms = np.where(np.isfinite(a["e2el_ms"]), a["e2el_ms"], from_parts)
        ratio = measured_ms / implied_ms
        bad_units = closed_loop & ((ratio < 1.0 / UNIT_SLIP_FACTOR) | (ratio > UNIT_SLIP_FACTOR))
        flag(bad_units, drop, lambda i: (
            f"latencies disagree with throughput by {max(ratio[i], 1 / ratio[i]):.0f}x: the file's TTFT/TPOT/E2E give "
            f"{measured_ms[i]:.4g} ms per request, while concurrency {a['concurrency'][i]:g} at "
            f"{a['output_tok_s_total'][i]:g} output tok/s implies {implied_ms[i]:.4g} ms (Little's law); "
            f"are the *_ms fields in {'seconds' if ratio[i] < 1 else 'microseconds'}?"))

        flag(a["total_tok_s"] < a["output_tok_s_total"] * (1 - ROUNDING_REL_TOL), drop, lambda i: (
            f"total_tok_s = {a['total_tok_s'][i]:g} is below output_tok_s_total = {a['output_tok_s_total'][i]:g} "
            "(total counts input + output; columns shifted?)"))
        flag(a["e2el_ms"] < a["ttft_ms"] * (1 - ROUNDING_REL_TOL), drop, lambda i: (
            f"e2el_ms = {a['e2el_ms'][i]:g} is below ttft_ms = {a['ttft_ms'][i]:g}"))

        per_gpu_gap = np.abs(a["output_tok_s_per_gpu"] * a["num_gpus"] / a["output_tok_s_total"] - 1.0)
        flag(per_gpu_gap > ROUNDING_REL_TOL, soft, lambda i: (
            f"output_tok_s_per_gpu x num_gpus = {a['output_tok_s_per_gpu'][i] * a['num_gpus'][i]:g} differs from "
            f"output_tok_s_total = {a['output_tok_s_total'][i]:g} (per-GPU over decode GPUs only?)"))
    return drop, soft


_IGNORED_IN_KEY = set(PROVENANCE_FIELDS) | set(BOOKKEEPING_FIELDS)
# Fields that say which parallel layout ran (the ones a relabelled copy disagrees on).
LAYOUT_FIELDS = tuple(f"{role}{n}" for role in ("", "prefill_", "decode_") for n in ("tp", "pp", "ep", "moe_tp", "attention_dp"))
# A row id's load/length part ("_1024x8192_c64"): the rest names the configuration the row belongs to.
_ID_LOAD = re.compile(r"_\d+x\d+_c\d*")


def configuration_id(row_id: str | None) -> str | None:
    """A row id without its ISL x OSL and concurrency part (``dsr1_..._agg_1024x1024_c8_cfg177`` -> ``dsr1_..._agg_cfg177``):
    what the rows of one measured configuration share; None for an id without a load part."""
    return _ID_LOAD.sub("", row_id) if row_id and _ID_LOAD.search(row_id) else None


def configuration_of(p: MeasuredPoint) -> tuple | None:
    """(file, configuration id): the rows of one measured configuration."""
    c = configuration_id(p.row_id)
    return None if c is None else (p.source_file, c)


def relabelled(points: list[MeasuredPoint]) -> dict[int, str]:
    """{index: reason} for measurements recorded under more than one parallel layout.

    The same TTFT and TPOT (to every digit) under two layouts is one run labelled twice, and which
    label is right cannot be told, so every copy goes; so do the other rows of each configuration
    (row id without its load part) that holds such a copy, since its layout labels are then in doubt.
    """
    evidence = [m for m in METRIC_FIELDS if m not in DERIVABLE_METRICS]
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        metrics = _key(p, evidence)
        if sum(v is not None for _, v in metrics) >= 2:  # one number alone can coincide by chance
            groups[metrics].append(i)
    out: dict[int, str] = {}
    for members in groups.values():
        layouts = {_key(points[i], LAYOUT_FIELDS) for i in members}
        if len(layouts) < 2:
            continue
        for i in members:
            others = [j for j in members if _key(points[j], LAYOUT_FIELDS) != _key(points[i], LAYOUT_FIELDS)]
            o = points[others[0]]
            differ = ", ".join(f"{n}={getattr(points[i], n)} vs {getattr(o, n)}" for n in LAYOUT_FIELDS
                               if getattr(points[i], n) != getattr(o, n))
            out[i] = (f"the same measured metrics are recorded under another layout at {o.source_file}:{o.line} ({differ}): "
                      "which layout ran cannot be told")
    doubtful = {configuration_of(points[i]): i for i in out if configuration_of(points[i])}
    for i, p in enumerate(points):
        c = configuration_of(p)
        if i not in out and c in doubtful:
            j = points[doubtful[c]]
            out[i] = f"configuration {c[1]!r} has a row recorded under another layout ({j.source_file}:{j.line}): its layout labels are in doubt"
    return out


def _key(p: MeasuredPoint, names) -> tuple:
    return tuple((n, getattr(p, n)) for n in names)


# Repeated runs of one configuration agree to a few percent: InferenceMAX's repeats of its configurations
# (inferencemax_b200_h100.csv, the same recorded configuration run on several dates and engine releases) spread in
# TPOT by 1.06x at the median and 1.29x at the 95th percentile. Two records of one configuration on one recorded
# engine build further apart than this ran something the file does not record: measured_serving.csv holds 41 such
# configurations, 1.3-2.9x apart, the faster runs at the TPOT of InferenceMAX's speculative-decoding runs of the same
# configuration (docs/model_changes.md, round 16).
REPEAT_SPREAD_LIMIT = 1.3
# The fields that name a configuration (the date a run was made does not)
_REPEAT_KEY = tuple(n for n in CONFIG_FIELDS if n != "measured_on")


def unrecorded_difference(points: list[MeasuredPoint]) -> dict[int, str]:
    """{index: reason} for the runs of one recorded configuration and engine build whose TPOTs lie further apart than
    repeats of one configuration do (``REPEAT_SPREAD_LIMIT``): the runs differed in something the file does not
    record (speculative decoding, a flag), and which run is which cannot be told, so every run of it goes."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        if p.engine_version is not None and p.tpot_ms:  # an unnamed build may be several releases: they differ
            groups[_key(p, _REPEAT_KEY)].append(i)
    out: dict[int, str] = {}
    for members in groups.values():
        tpot = [points[i].tpot_ms for i in members]
        lo, hi = min(tpot), max(tpot)
        if len(members) < 2 or hi <= REPEAT_SPREAD_LIMIT * lo:
            continue
        for i in members:
            out[i] = (f"its configuration ({points[i].engine} {points[i].engine_version}) was measured {len(members)} times with "
                      f"TPOT {lo:.3g}-{hi:.3g} ms, {hi / lo:.2f}x apart where repeats of one configuration stay within "
                      f"{REPEAT_SPREAD_LIMIT:g}x: the runs differed in something the file does not record (speculative "
                      "decoding?) and which is which cannot be told")
    return out


def duplicates(points: list[MeasuredPoint]) -> tuple[dict[int, tuple[int, str]], dict[int, str]]:
    """({index: (index of the first occurrence, duplicate-of message)}, {index: same-metrics-other-config warning})."""
    all_fields = [n for n in MeasuredPoint.model_fields if n not in _IGNORED_IN_KEY]
    evidence = [m for m in METRIC_FIELDS if m not in DERIVABLE_METRICS]
    seen: dict[tuple, int] = {}
    seen_metrics: dict[tuple, int] = {}
    dups: dict[int, str] = {}
    twins: dict[int, str] = {}
    for i, p in enumerate(points):
        key = _key(p, all_fields)
        if key in seen:
            first = points[seen[key]]
            dups[i] = (seen[key], f"duplicate of {first.source_file}:{first.line} (same configuration and metrics); skipped")
            continue
        seen[key] = i
        metrics = _key(p, evidence)
        if sum(v is not None for _, v in metrics) < 2:  # one number alone can coincide by chance
            continue
        if metrics in seen_metrics:
            first = points[seen_metrics[metrics]]
            differ = [n for n in all_fields if n not in METRIC_FIELDS and getattr(first, n) != getattr(p, n)]
            if differ == ["model"] and _canonical("model", first.model) == _canonical("model", p.model):
                # one architecture under two names (an R1 run filed again as V3), nothing else different: one run, as
                # cross_source_twins counts such a pair across files; counted twice it would weigh double and, in a
                # leave-one-model-out fit, sit on both sides of the split
                dups[i] = (seen_metrics[metrics], f"the same run as {first.source_file}:{first.line} (every measured metric, "
                                                  f"configuration and architecture the same; this row names the model {p.model}, "
                                                  f"that row {first.model}); counted once, as that row")
                continue
            twins[i] = (f"same metrics as {first.source_file}:{first.line} but different "
                        f"{', '.join(differ[:6])}{'...' if len(differ) > 6 else ''}: the same run recorded twice?")
        else:
            seen_metrics[metrics] = i
    return dups, twins


# Two files' records of one run: TTFT and TPOT agree to this relative tolerance (two independent means of
# thousands of requests; separate runs of one configuration differ by far more: calibration/e2e repeats
# of InferenceMAX configurations spread 1-10 %), at the same model, GPU, lengths and concurrency.
TWIN_REL_TOL = 1e-3
# The workload and load a record names (its run is one of these).
_RUN_FIELDS = ("model", "gpu", "precision", "isl", "osl", "concurrency", "mode")
# Fields one benchmark campaign's records share: one engine build serving one checkpoint on one GPU, its layouts,
# loads and lengths varied (an InferenceMAX sweep runs every layout with MTP on and off).
_CAMPAIGN_FIELDS = ("source_file", "model", "gpu", "engine", "engine_version", "precision", "gemm_quant_mode",
                 "moe_quant_mode", "kv_dtype", "mode")


def _records_spec(p: MeasuredPoint) -> bool:
    """Whether a record says if its run used speculative decoding (a method, or an explicit none)."""
    return p.spec_decoding is not None or "spec_decoding" in (p.notes or {})


def campaign_of(p: MeasuredPoint) -> tuple:
    """The campaign a record belongs to: its row id's configuration where the id names one (``..._cfg87``), else the
    fields a campaign's records share."""
    c = configuration_of(p)
    if c is not None and not re.search(r"_\d+$", c[1]):  # a trailing row number names the row, not the configuration
        return c
    return tuple(getattr(p, n) for n in _CAMPAIGN_FIELDS)


def _canonical(field: str, value):
    """A model or GPU as the catalog names it (two files spell one checkpoint or board differently)."""
    if value is None or field not in ("model", "gpu"):
        return value
    hit = _CANONICAL.get((field, value))
    if hit is None:
        try:
            if field == "model":  # one architecture under two names (a copy of an R1 run filed as V3) is one model
                from dataclasses import replace

                from ..models import get_model
                hit = repr(replace(get_model(str(value)).arch, name="", model_type=""))
            else:
                from ..hardware import get_hardware
                hit = get_hardware(str(value)).id
        except Exception:  # a name the catalog lacks is compared as written
            hit = str(value)
        _CANONICAL[(field, value)] = hit
    return hit


_CANONICAL: dict[tuple, str] = {}


def cross_source_twins(points: list[MeasuredPoint]) -> tuple[dict[int, tuple[int, str]], dict[int, str]]:
    """({index: (index kept, message)}, {index: message}): one run recorded in two files, and the rows it puts in doubt.

    Two records in different files with the same architecture, GPU, precision, lengths and concurrency whose TTFT
    and TPOT agree to ``TWIN_REL_TOL`` are one run: the record that says more (it records whether speculative
    decoding ran) is kept, the other counts as its duplicate, with any model name or layout it records otherwise. Where the kept twin ran speculative decoding and the other record
    is silent on it, the silent record's campaign mixes runs that cannot be told apart: its other silent rows go too.
    """
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        if p.ttft_ms and p.tpot_ms:
            groups[tuple(_canonical(n, getattr(p, n)) for n in _RUN_FIELDS)].append(i)
    dups: dict[int, tuple[int, str]] = {}
    for members in groups.values():
        for a_pos, a in enumerate(members):
            for b in members[a_pos + 1:]:
                pa, pb = points[a], points[b]
                if a in dups or b in dups or pa.source_file == pb.source_file:
                    continue
                if not all(abs(getattr(pa, m) / getattr(pb, m) - 1.0) <= TWIN_REL_TOL for m in ("ttft_ms", "tpot_ms")):
                    continue
                keep, drop = (b, a) if _records_spec(pb) and not _records_spec(pa) else (a, b)
                k, d = points[keep], points[drop]
                says = f"; that row records speculative decoding = {k.spec_decoding or 'none'}" if _records_spec(k) and not _records_spec(d) else ""
                differ = [f"{n}={getattr(d, n)} vs {getattr(k, n)}" for n in ("model",) + LAYOUT_FIELDS
                          if getattr(d, n) is not None and getattr(k, n) is not None and getattr(d, n) != getattr(k, n)]
                also = f"; this row's {', '.join(differ)} there" if differ else ""
                dups[drop] = (keep, f"the same run as {k.source_file}:{k.line} (TTFT and TPOT agree to {TWIN_REL_TOL:.1%}){says}{also}; "
                                    "counted once, as that row")
    doubt: dict[tuple, int] = {}
    for drop, (keep, _) in dups.items():
        if points[keep].spec_decoding is not None and not _records_spec(points[drop]):
            doubt.setdefault(campaign_of(points[drop]), keep)
    out: dict[int, str] = {}
    for i, p in enumerate(points):
        k = doubt.get(campaign_of(p))
        if k is not None and i not in dups and not _records_spec(p):
            t = points[k]
            out[i] = (f"its campaign (engine build, model, GPU, precision) has a run that {t.source_file}:{t.line} records with speculative decoding ({t.spec_decoding}) "
                      "while this file does not say which of its runs used it")
    return dups, out


def run_checks(points: list[MeasuredPoint]) -> tuple[list[MeasuredPoint], list[Problem]]:
    """The points that pass, and one problem per dropped point (input order kept)."""
    drop, soft = plausibility(points)
    problems = [Problem(points[i].source_file, points[i].line, "; ".join(r) + "; skipped") for i, r in drop.items()]
    for i, messages in soft.items():
        points[i].warnings.extend(messages)
    kept = [p for i, p in enumerate(points) if i not in drop]
    dups, twins = duplicates(kept)
    problems += [Problem(kept[i].source_file, kept[i].line, m, (kept[j].source_file, kept[j].line)) for i, (j, m) in dups.items()]
    keep = [i for i in range(len(kept)) if i not in dups]
    unique = [kept[i] for i in keep]
    position = {i: n for n, i in enumerate(keep)}
    twins = {position[i]: m for i, m in twins.items()}
    copies = relabelled(unique)
    problems += [Problem(unique[i].source_file, unique[i].line, m + "; skipped") for i, m in copies.items()]
    for i, message in twins.items():
        if i not in copies:
            unique[i].warnings.append(message)
    rest = [p for i, p in enumerate(unique) if i not in copies]
    mixed = unrecorded_difference(rest)
    problems += [Problem(rest[i].source_file, rest[i].line, m + "; skipped") for i, m in mixed.items()]
    rest = [p for i, p in enumerate(rest) if i not in mixed]
    same_run, unsure = cross_source_twins(rest)
    problems += [Problem(rest[i].source_file, rest[i].line, m, (rest[j].source_file, rest[j].line)) for i, (j, m) in same_run.items()]
    problems += [Problem(rest[i].source_file, rest[i].line, m + "; skipped") for i, m in unsure.items()]
    return [p for i, p in enumerate(rest) if i not in same_run and i not in unsure], problems

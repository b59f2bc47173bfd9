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
from .schema import BOOKKEEPING_FIELDS, METRIC_FIELDS, PROVENANCE_FIELDS, MeasuredPoint

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


def configuration_of(p: MeasuredPoint) -> tuple | None:
    """(file, row id without its ISL x OSL and concurrency part): the rows of one measured configuration."""
    return (p.source_file, _ID_LOAD.sub("", p.row_id)) if p.row_id and _ID_LOAD.search(p.row_id) else None


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
            twins[i] = (f"same metrics as {first.source_file}:{first.line} but different "
                        f"{', '.join(differ[:6])}{'...' if len(differ) > 6 else ''}: the same run recorded twice?")
        else:
            seen_metrics[metrics] = i
    return dups, twins


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
    return [p for i, p in enumerate(unique) if i not in copies], problems

"""Layouts the serving calibration measured, and the knobs of a frontier point that lie outside them.

The serving profiles are fitted on measured runs (``scripts/calibrate_serving.py``). Their workers span a range
of each layout knob (TP, PP, EP, attention-DP, GPUs per worker, draft tokens); the calibration writes those
ranges to ``hardware/efficiency/serving.yaml`` (``calibrated_layouts``, and per GPU family
``calibrated_layouts_by_family``). A frontier point whose worker lies outside its GPU family's ranges is priced
from the physics alone, with no measured run of that kind to check it: ``predict`` names those knobs per point (``outside_calibration``) and widens the point's band like an uncalibrated model's
(:data:`simfront.uncertainty.EXTRAPOLATION_WIDENING`).
"""

from __future__ import annotations

from typing import Iterable, Mapping

# worker knob -> how a note names it
LAYOUT_KNOBS = {"tp": "TP", "pp": "PP", "ep": "EP", "attention_dp": "attention-DP",
                "gpus_per_worker": "GPUs per worker", "spec_k": "draft tokens per step"}


def worker(tp: int, pp: int, ep: int, attention_dp: int, spec_k: int = 0) -> dict[str, int]:
    """One worker's layout knobs; GPUs per worker = TP x PP x attention-DP (the MoE layers reuse those GPUs)."""
    tp, pp, ep, dp = (max(int(v), 1) for v in (tp, pp, ep, attention_dp))
    return {"tp": tp, "pp": pp, "ep": ep, "attention_dp": dp, "gpus_per_worker": tp * pp * dp, "spec_k": max(int(spec_k), 0)}


def point_workers(point: Mapping) -> list[dict[str, int]]:
    """The workers of a frontier point (``simfront.results.FrontierPoint`` fields): an aggregated worker, or a
    disaggregated deployment's decode worker (which runs the drafts) and prefill worker (one pipeline stage)."""
    from .search import parse_spec_label  # noqa: lazily: the search's own label format

    _, k, _ = parse_spec_label(point.get("spec"))
    out = [worker(point["tp"], point["pp"], point["ep"], point["attention_dp"], k)]
    if point.get("mode") == "disagg":
        out.append(worker(point["prefill_tp"], 1, point["prefill_ep"], point["prefill_attention_dp"]))
    return out


def layout_ranges(workers: Iterable[Mapping]) -> dict[str, list[int]]:
    """[smallest, largest] value of every knob of ``LAYOUT_KNOBS`` over the workers (empty when there are none)."""
    lo: dict[str, int] = {}
    hi: dict[str, int] = {}
    for w in workers:
        for k in LAYOUT_KNOBS:
            v = int(w[k])
            lo[k] = min(lo.get(k, v), v)
            hi[k] = max(hi.get(k, v), v)
    return {k: [lo[k], hi[k]] for k in LAYOUT_KNOBS if k in lo}


def calibrated_layouts(family: str | None = None) -> dict[str, list[int]]:
    """The knob ranges of the runs the shipped serving profiles were fitted on (hardware/efficiency/serving.yaml): those
    of ``family``'s own runs where that GPU family has measured runs (``calibrated_layouts_by_family``: a layout
    measured on one family's interconnect and kernels is not a measurement of another's), else those of every
    fitted run (a family without measured runs borrows its parameters, and its predictions say so)."""
    from .efficiency import _load

    data = _load("serving")
    raw = (data.get("calibrated_layouts_by_family") or {}).get(family) if family else None
    raw = raw or data.get("calibrated_layouts") or {}
    return {k: [int(v[0]), int(v[1])] for k, v in raw.items() if k in LAYOUT_KNOBS}


def outside_calibration(point: Mapping, ranges: Mapping[str, list[int]]) -> list[str]:
    """The knobs of a frontier point outside the measured ``ranges`` (:func:`calibrated_layouts` of the point's GPU
    family), as ``"PP 2 (measured 1-1)"`` (each knob once, in ``LAYOUT_KNOBS`` order, with the value farthest out);
    empty when every worker lies inside."""
    worst: dict[str, tuple[int, int]] = {}  # knob -> (distance outside its range, value)
    for w in point_workers(point):
        for k, (lo, hi) in ranges.items():
            out = max(lo - w[k], w[k] - hi, 0)
            if out > worst.get(k, (0, 0))[0]:
                worst[k] = (out, w[k])
    return [f"{LAYOUT_KNOBS[k]} {worst[k][1]} (measured {ranges[k][0]}-{ranges[k][1]})" for k in LAYOUT_KNOBS if k in worst]


def outside_note(subject: str, outside: Iterable[list[str]], widening: float | None = None) -> str | None:
    """The note for ``subject`` (e.g. "3 of the 20 frontier points") whose ``outside`` lists
    (:func:`outside_calibration`) are not empty: which knobs, and what that means; None when all are empty."""
    knobs = [lab for lab in LAYOUT_KNOBS.values() if any(k.startswith(lab + " ") for o in outside for k in o)]
    if not knobs:
        return None
    wide = f", their bands widened x{widening:g}" if widening else ""
    return (f"{subject} use a layout outside the measured runs the serving profiles were fitted on ({', '.join(knobs)}; "
            f"~ in the table, outside_calibration in the JSON): priced from physics alone{wide}")


# The outside check the wide-EP note quotes: DeepSeek's published H800 EP144 decode (Inference System Overview,
# 2025-03-01: 45-50 ms TPOT, two-batch overlap and EPLB on) priced at EP128 (README "Accuracy"): TPOT 104 ms with the
# default routing skew, 65 ms balanced, 78 ms skewed with --two-batch-overlap, 48 ms balanced with it; predicted over
# measured (47.5 ms)
H800_EP_CHECK_SLOWDOWN = {("skewed", False): "2.2x too slow", ("balanced", False): "1.4x too slow",
                          ("skewed", True): "1.6x too slow", ("balanced", True): "1.01x (within its 45-50 ms)"}


def wide_ep_note(points: list[Mapping], ranges: Mapping[str, list[int]], routing_alpha: float | None,
                 subject: str = "frontier points", two_batch_overlap: bool = False) -> str | None:
    """A note for the points (frontier-point dicts) whose experts are spread over more ranks than any calibration run
    (``ranges["ep"]``): how their all-to-all is priced (added to the step, or overlapped where ``two_batch_overlap``)
    and how the routing skew extrapolates; None when no point is that wide. README "Accuracy" holds the outside check
    behind it."""
    top = int(ranges["ep"][1])
    wide = [p for p in points if max(int(p.get("ep") or 1), int(p.get("prefill_ep") or 1)) > top]
    if not wide:
        return None
    skew = ("" if routing_alpha is None else
            f"; the routing skew (power law {routing_alpha:g}) loads their busiest rank as the calibration benchmark's "
            f"sampler would at that width, where experts balanced by replication (EPLB) are priced with --routing-skew balanced")
    slow = H800_EP_CHECK_SLOWDOWN[("skewed" if routing_alpha is not None else "balanced", bool(two_batch_overlap))]
    comm = ("their all-to-all is overlapped with the other micro-batch's compute (--two-batch-overlap)" if two_batch_overlap
            else "their all-to-all is added to each step, not overlapped with the other micro-batch's compute as an "
                 "engine's two-batch overlap does (--two-batch-overlap prices it)")
    return (f"{len(wide)} of the {len(points)} {subject} spread experts over more than {top} ranks (the widest "
            f"measured): {comm}{skew}. Priced this way, DeepSeek's published EP144 decode on H800 comes out "
            f"{slow} (README, Accuracy)")


def overlap_unused_note(model, points: list[Mapping], what: str = "frontier point") -> str | None:
    """With --two-batch-overlap: a note when none of ``points`` (frontier-point dicts) has a worker the engines split
    (attention-DP and EP), so the flag changed none of them; None when one has."""
    if any(w["attention_dp"] > 1 for p in points for w in point_workers(p)):
        return None
    why = (f"{model.id} is dense (no experts to move all-to-all)" if model.arch.moe is None else
           f"no {what} has an attention-DP + EP worker")
    return (f"--two-batch-overlap changed no {what}: {why}, and the engines split only attention-DP + EP steps "
            "(--layout dpa+ep shows those)")

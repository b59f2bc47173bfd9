#!/usr/bin/env python
"""`frontier --compare` verdicts against the measured arms of a file of whole measured frontiers.

For each knob the file measured both ways (precision fp8 vs nvfp4, mode agg vs disagg, speculative
decoding off vs MTP, and the layout class of aggregated runs: TP vs TP+EP vs attention-DP+EP, one engine's runs
both ways, predicted with that engine's profile) within one GPU and ISL/OSL (and, for mode, spec and layout, one
precision), the measured
frontier of each arm is the Pareto set of (tok/s/user, output tok/s/GPU) over every measured deployment of
that arm, and the measured gain is the tok/s/GPU change at equal tok/s/user over the arms' shared
tok/s/user range (``simfront.pareto.frontier_shift``, the rule `frontier --compare` uses). The predicted
verdict is `simfront frontier --compare` on ``--gpus`` with every other knob searched. Nothing is fitted.

A second table pairs the runs of one deployment at one load measured with and without MTP (same engine, mode,
precision, ISL/OSL, layout, worker counts and concurrency): the measured TPOT speedup of MTP against the one the
evaluator predicts for the same two rows (``simfront.measured.predict_points``, what `validate` scores), with the
median of predicted over measured speedup per concurrency bin, so a speculative-decoding gain that the model gets
right on average but wrong across load is visible. A third pairs aggregated runs that differ only in spreading the
experts over the ranks (EP) or slicing them (TP): measured and predicted TPOT(EP) / TPOT(TP), by engine and precision.

    python scripts/compare_arms.py [FILE] [--gpu B200] [--gpus 16xB200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import api  # noqa: E402
from simfront.hardware import get_hardware  # noqa: E402
from simfront.ingest import load_measurements  # noqa: E402
from simfront.measured import predict_points  # noqa: E402
from simfront.pareto import frontier_shift, pareto_mask  # noqa: E402

DEFAULT_FILE = ROOT / "measurements" / "inferencemax_b200_h100.csv"  # the calibration file, with its sidecar of recipe facts
# measured precision spelling -> the search precision of the same checkpoint format
PRECISIONS = {"fp8": "fp8_block", "fp4": "nvfp4"}


def _arm_of(p, knob: str) -> str | None:
    if knob == "precision":
        return (p.precision or "").lower() or None
    if knob == "mode":
        return p.mode or "agg"
    if knob == "layout":  # the layout class of an aggregated run (simfront.layout.LAYOUT_CLASSES); disaggregated: none
        if (p.mode or "agg") != "agg":
            return None
        return "dpa+ep" if (p.attention_dp or 1) > 1 else "tp+ep" if (p.ep or 1) > 1 else "tp"
    return "mtp" if str(p.spec_decoding or "none").lower() not in ("none", "") else "none"


# the knobs measured both ways and the arms compared (the first the baseline); a layout pair compares aggregated runs
ARM_KNOBS = (("precision", ("fp8", "fp4")), ("mode", ("agg", "disagg")), ("spec", ("none", "mtp")),
             ("layout", ("tp", "tp+ep")), ("layout", ("tp", "dpa+ep")))


def measured_arms(points, gpu_id: str) -> list[dict]:
    """Every (knob, ISL/OSL[, precision]) measured both ways: the two arms' measured frontiers and shift."""
    out = []
    for knob, values in ARM_KNOBS:
        groups: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for p in points:
            try:
                if get_hardware(str(p.gpu)).id != gpu_id:
                    continue
            except Exception:  # noqa: BLE001 - a GPU the catalog does not know is simply not this GPU
                continue
            if not (p.tok_s_per_user and p.output_tok_s_per_gpu):
                continue
            fixed = (int(p.isl), int(p.osl)) + (() if knob == "precision" else ((p.precision or "").lower(),))
            if knob == "layout":  # one engine measured both ways: engines differ more than layouts do
                fixed += (str(p.engine or ""),)
            groups[fixed][_arm_of(p, knob)].append((p.tok_s_per_user, p.output_tok_s_per_gpu))
        for fixed, arms in sorted(groups.items()):
            if not all(arms.get(v) for v in values):
                continue
            fr = []
            for v in values:
                xy = np.array(arms[v])
                m = pareto_mask(xy[:, 0], xy[:, 1])
                fr.append((xy[m, 0], xy[m, 1]))
            shift = frontier_shift(fr[0][0], fr[0][1], fr[1][0], fr[1][1])
            out.append({"knob": knob, "values": values, "isl": fixed[0], "osl": fixed[1],
                        "precision": fixed[2] if len(fixed) > 2 else None, "engine": fixed[3] if len(fixed) > 3 else None,
                        "measured": shift,
                        "measured_points": [len(arms[v]) for v in values]})
    return out


def predicted(arm: dict, gpus: str) -> dict:
    kw = {"kv_dtype": ["fp8"]}
    if arm["precision"]:
        kw["precision"] = [PRECISIONS[arm["precision"]]]
    values = [PRECISIONS[v] for v in arm["values"]] if arm["knob"] == "precision" else list(arm["values"])
    if arm["knob"] == "layout":  # the measured layout arms are one engine's aggregated runs: so are the predicted frontiers
        kw["modes"] = ["agg"]
        kw["engine"] = arm["engine"] or None
    res = api.frontier_compare("deepseek-r1", gpus, arm["knob"], values, isl=arm["isl"], osl=arm["osl"], **kw)
    return res["verdicts"][0]


# fields that name one deployment at one load, besides its speculative decoding
DEPLOYMENT_FIELDS = ("engine", "mode", "gpu", "precision", "isl", "osl", "tp", "ep", "attention_dp", "prefill_workers", "prefill_tp",
                     "prefill_ep", "prefill_attention_dp", "decode_workers", "decode_tp", "decode_ep", "decode_attention_dp",
                     "concurrency")
# concurrency bins of the paired table (upper bounds, clients)
CONCURRENCY_BINS = ((8, "1-8"), (32, "9-32"), (128, "33-128"), (float("inf"), ">128"))


# fields that name one aggregated deployment at one load, besides whether it spreads its experts (EP) or slices them (TP)
EP_PAIR_FIELDS = tuple(f for f in DEPLOYMENT_FIELDS if f != "ep") + ("spec_decoding", "spec_k")


def _ep_arm(p) -> str | None:
    """'ep' or 'tp' for an aggregated run (experts spread over the ranks or sliced across them); None otherwise."""
    return None if (p.mode or "agg") != "agg" else ("ep" if (p.ep or 1) > 1 else "tp")


def _paired(points, arm_of, fields, arms) -> list[tuple[dict, dict]]:
    """(fields, {arm: [(measured TPOT, predicted TPOT, spec_k, date, engine release), ...]}) of every deployment key
    (``fields``) measured in both ``arms`` (``arm_of(point)``); predictions are the evaluator's (what validate scores)."""
    preds = predict_points(points)
    groups: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for p, pr in zip(points, preds):
        arm = arm_of(p)
        if arm is None or not (p.tpot_ms and pr.get("predicted_tpot_ms")):
            continue
        groups[tuple(getattr(p, f) for f in fields)][arm].append(
            (p.tpot_ms, pr["predicted_tpot_ms"], p.spec_k, p.measured_on, p.engine_version))
    return [(dict(zip(fields, key)), g) for key, g in groups.items() if all(g.get(a) for a in arms)]


def _pair_row(f: dict, g: dict, num: str, den: str) -> dict:
    """Measured and predicted TPOT(num) / TPOT(den) of one pair (repeated runs: their medians), and its campaigns."""
    med = lambda rows, i: float(np.median([r[i] for r in rows]))  # noqa: E731
    measured = med(g[num], 0) / med(g[den], 0)
    pred = med(g[num], 1) / med(g[den], 1)
    # (date, engine release) of each arm's runs: arms measured apart carry the engine's drift between them
    runs = {arm: sorted({(r[3] or "?", r[4] or "?") for r in g[arm]}) for arm in (num, den)}
    return {**f, "measured": round(measured, 3), "predicted": round(pred, 3), "predicted_over_measured": round(pred / measured, 3),
            "runs": runs, "same_campaign": bool(set(runs[num]) & set(runs[den]))}


def paired_spec(points) -> list[dict]:
    """Deployments measured at one load with and without MTP: measured and predicted TPOT speedup of MTP."""
    out = []
    for f, g in _paired(points, lambda p: _arm_of(p, "spec"), DEPLOYMENT_FIELDS, ("none", "mtp")):
        r = _pair_row(f, g, "none", "mtp")  # TPOT without / with MTP
        out.append({**f, "spec_k": g["mtp"][0][2], "measured_speedup": r["measured"], "predicted_speedup": r["predicted"],
                    "predicted_over_measured": r["predicted_over_measured"], "runs_without": r["runs"]["none"],
                    "runs_with": r["runs"]["mtp"], "same_campaign": r["same_campaign"]})
    return sorted(out, key=lambda r: (r["concurrency"] or 0, str(r["engine"])))


def paired_ep(points) -> list[dict]:
    """Aggregated deployments measured at one load (engine, precision, TP, drafts, clients) with the experts spread over
    the ranks (EP) and sliced across them (TP): measured and predicted TPOT(EP) / TPOT(TP). The search chooses between
    the two, so a predicted ratio below the measured one is a knob bias it exploits."""
    out = [_pair_row(f, g, "ep", "tp") for f, g in _paired(points, _ep_arm, EP_PAIR_FIELDS, ("ep", "tp"))]
    return sorted(out, key=lambda r: (str(r["engine"]), str(r["precision"]), r["concurrency"] or 0))


def pair_summary(pairs: list[dict], keys=("engine", "precision")) -> list[dict]:
    """Median predicted / measured ratio of paired runs per group (``keys``)."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in pairs:
        groups[tuple(str(r[k]) for k in keys)].append(r["predicted_over_measured"])
    return [{**dict(zip(keys, k)), "pairs": len(v), "median predicted/measured": round(float(np.median(v)), 2),
             "min": round(min(v), 2), "max": round(max(v), 2)} for k, v in sorted(groups.items())]


def paired_trend(pairs: list[dict]) -> list[dict]:
    """Median predicted / measured MTP speedup per concurrency bin."""
    rows, lo = [], 0.0
    for hi, label in CONCURRENCY_BINS:
        sel = [r for r in pairs if lo < (r["concurrency"] or 0) <= hi]
        v = [r["predicted_over_measured"] for r in sel]
        if v:
            same = [r["predicted_over_measured"] for r in sel if r["same_campaign"]]
            rows.append({"concurrency": label, "pairs": len(v), "median predicted/measured speedup": round(float(np.median(v)), 2),
                         "min": round(min(v), 2), "max": round(max(v), 2), "pairs measured the same day": len(same),
                         "their median": round(float(np.median(same)), 2) if same else None})
        lo = hi
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    ap.add_argument("--gpu", default="B200", help="the GPU whose measured arms are compared")
    ap.add_argument("--gpus", default="16xB200", help="the GPU set `frontier --compare` searches")
    ap.add_argument("--json", dest="json_out", default=None)
    a = ap.parse_args(argv)
    ing = load_measurements([a.file])
    arms = measured_arms(ing.points, get_hardware(a.gpu).id)
    rows = []
    for arm in arms:
        pred = predicted(arm, a.gpus)
        m = arm["measured"]
        agree = None if m["verdict"] == "disjoint" or pred.get("verdict") in (None, "disjoint", "unknown") else (
            pred["verdict"].split(":")[0] == m["verdict"].split(":")[0])
        rows.append({"knob": arm["knob"], "arms": " -> ".join(arm["values"]), "isl/osl": f"{arm['isl']}/{arm['osl']}",
                     "precision": arm["precision"] or "both", "engine": arm["engine"] or "any", "measured points": "/".join(map(str, arm["measured_points"])),
                     "measured verdict": m["verdict"], "measured median gain %": round(100 * m["median_gain"], 1) if "median_gain" in m else None,
                     "predicted verdict": pred.get("verdict"), "predicted median gain %": pred.get("median_gain_pct"), "agree": agree})
    cols = list(rows[0]) if rows else []
    print(f"{a.file}: {len(rows)} measured arm pairs on {a.gpu}; predictions by `frontier --compare` on {a.gpus}\n")
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join("" if r[c] is None else str(r[c]) for c in cols))
    judged = [r["agree"] for r in rows if r["agree"] is not None]
    print(f"\nverdicts agree: {sum(judged)} of {len(judged)} judged pairs")
    pairs = paired_spec(ing.points)
    trend = paired_trend(pairs)
    print(f"\nMTP at one deployment and load ({len(pairs)} pairs, every GPU): TPOT speedup, predicted over measured, by concurrency")
    if trend:
        tcols = list(trend[0])
        print(" | ".join(tcols))
        for r in trend:
            print(" | ".join("" if r[c] is None else str(r[c]) for c in tcols))
    ep_pairs = paired_ep(ing.points)
    ep_summary = pair_summary(ep_pairs)
    print(f"\nExperts spread (EP) against sliced (TP) at one aggregated deployment and load ({len(ep_pairs)} pairs, every GPU): "
          "TPOT(EP) / TPOT(TP), predicted over measured, by engine and precision (below 1: EP priced too cheap)")
    if ep_summary:
        scols = list(ep_summary[0])
        print(" | ".join(scols))
        for r in ep_summary:
            print(" | ".join(str(r[c]) for c in scols))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"arms": rows, "mtp_pairs": pairs, "mtp_pair_trend": trend,
                                                "ep_pairs": ep_pairs, "ep_pair_summary": ep_summary}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

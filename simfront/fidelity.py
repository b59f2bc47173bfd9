"""Knob-neutral fidelity: does the model's error move with a knob the search chooses between?

Two checks on measured serving points (what ``simfront validate --frontier`` prints):

- **Residual trends by knob**: the median of log(predicted / measured) of TPOT, TTFT and output tok/s/GPU
  per bin of each knob (requests per attention rank, layout class, EP size, attention-DP size,
  precision, mode, speculative decoding, engine, GPU). A search takes the best of a million
  configurations, so a bias that grows with a knob is where it goes wrong; the average error hides it.
- **Frontiers against frontiers**: measured points grouped into sweeps (model, GPU, precision, ISL/OSL,
  mode); the measured Pareto set of (tok/s/user, output tok/s/GPU) against simfront's whole frontier on
  the same GPU count (same precision and mode; every other knob searched): predicted over measured
  best tok/s/GPU at each measured tok/s/user, the layout class of the predicted point there against
  the measured one (TP / TP+EP / DPA+EP), and the knees. Nothing here is fitted.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable

import numpy as np

from .hardware import GpuSet
from .measured import resolve
from .pareto import interp_frontier, knee_index, pareto_mask
from .search import SearchSpace, search
from .serving import Workload

# bins of requests in flight per attention rank (per micro-batch): where batch-dependent physics shows
RANK_LOAD_EDGES = (1, 8, 32, 128, 512)
TREND_METRICS = {"tpot_ms": "predicted_tpot_ms", "ttft_ms": "predicted_ttft_ms", "output_tok_s_per_gpu": "predicted_tok_s_per_gpu"}
MIN_BIN_ROWS = 10  # bins with fewer rows are listed but not judged
# a predicted point counts as reaching a measured tok/s/user within this relative tolerance (results are
# reported to 3-5 significant digits)
REACH_TOLERANCE = 1e-3


def layout_class(tp: int, ep: int, attention_dp: int) -> str:
    """TP (dense or expert TP), TP+EP (experts split over GPUs), DPA+EP (attention data parallel)."""
    if attention_dp > 1:
        return "DPA+EP"
    return "TP+EP" if ep > 1 else "TP"


def _num(v, default=1):
    try:
        f = float(v)
        return f if math.isfinite(f) else default
    except (TypeError, ValueError):
        return default


def _rank_load_bin(x: float) -> str:
    lo = 0
    for edge in RANK_LOAD_EDGES:
        if x <= edge:
            return f"{lo + 1}-{edge}" if edge > lo + 1 else str(edge)
        lo = edge
    return f">{RANK_LOAD_EDGES[-1]}"


def knob_bins(row: dict) -> dict[str, str]:
    """The knob bins of one validated row (decode role for disaggregated rows)."""
    mode = row.get("mode") or "agg"
    pre = "decode_" if mode == "disagg" else ""
    tp, pp = int(_num(row.get(pre + "tp"))), int(_num(row.get(pre + "pp")))
    dp, ep = int(_num(row.get(pre + "attention_dp"))), int(_num(row.get(pre + "ep")))
    if mode == "disagg":
        workers = _num(row.get("decode_workers"))
    else:
        workers = max(1.0, _num(row.get("num_gpus"), tp * dp * pp) // (tp * dp * pp))
    per_rank = _num(row.get("concurrency"), 0) / max(1.0, workers * dp * pp)
    return {"requests per rank": _rank_load_bin(per_rank), "layout class": layout_class(tp, ep, dp), "EP size": str(ep),
            "attention-DP size": str(dp), "precision": str(row.get("precision") or "native"), "mode": mode,
            "speculative": str(row.get("spec_decoding") or "none"), "engine": str(row.get("engine") or "unknown"),
            "GPU": _gpu_name(row.get("gpu"))}


def _gpu_name(name) -> str:
    """The catalog id of a GPU spelling (the spelling itself when it does not resolve)."""
    from .hardware import get_hardware
    from .errors import SimfrontError

    try:
        return get_hardware(str(name)).id
    except SimfrontError:
        return str(name or "unknown")


def residual_trends(rows: Iterable[dict]) -> list[dict]:
    """Median log(predicted / measured) per knob bin: ``{knob, bin, count, <metric>_log_ratio, <metric>_ratio, judged}``."""
    acc: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if "reason" in r or r.get("duplicate_of"):
            continue
        bins = knob_bins(r)
        for metric, pred in TREND_METRICS.items():
            m, p = r.get(metric), r.get(pred)
            if m and p and m > 0 and p > 0:
                for knob, b in bins.items():
                    acc[(knob, b)][metric].append(math.log(p / m))
    out = []
    for (knob, b), d in sorted(acc.items()):
        n = max(len(v) for v in d.values())
        row: dict[str, Any] = {"knob": knob, "bin": b, "count": n, "judged": n >= MIN_BIN_ROWS}
        for metric in TREND_METRICS:
            v = d.get(metric) or []
            med = float(np.median(v)) if v else None
            row[f"{metric}_log_ratio"] = None if med is None else round(med, 4)
            row[f"{metric}_ratio"] = None if med is None else round(math.exp(med), 4)
            row[f"{metric}_count"] = len(v)
        out.append(row)
    return out


def _precision_name(model, prec) -> str:
    """A search precision name for a resolved precision (``native`` for the checkpoint as shipped)."""
    same = (prec.attention, prec.dense, prec.experts) == (model.native.attention, model.native.dense, model.native.experts)
    return "native" if same else prec.experts


def frontier_comparison(points: list, profile: dict | None = None) -> dict:
    """Measured Pareto sets against simfront's frontiers on the same GPU counts (see the module doc).

    ``points`` are ingested measured points (:class:`simfront.ingest.schema.MeasuredPoint`). Returns
    ``{sweeps[...], points[...], summary{group: {points, reached, geomean_ratio, class_agreement}}}``.
    """
    sweeps: dict[tuple, list] = defaultdict(list)
    for p in points:
        if not (p.tok_s_per_user and p.output_tok_s_per_gpu and p.num_gpus):
            continue
        r, _ = resolve(p)
        if r is None:
            continue
        sweeps[(r.model.id, r.hw.id, _precision_name(r.model, r.precision), r.precision.kv, int(r.isl), int(r.osl),
                p.mode or "agg")].append((p, r))
    frontiers: dict[tuple, dict] = {}

    def frontier(key, r, n, mode, prec, kv):
        k = key + (n,)
        if k not in frontiers:
            space = SearchSpace(precisions=[prec], kv_dtypes=[kv], modes=(mode,))
            # the measured runs' own client: the same start-up wave as the benchmark that produced them
            wl = Workload(isl=r.isl, osl=r.osl, startup_wave_share=r.wave_share)
            res = search(r.model, GpuSet(count=n, hardware=r.hw), wl, space, profile=profile)
            pts = res.points
            if not pts:
                frontiers[k] = {}
            else:
                f = np.nonzero(pareto_mask(pts["tok_s_user"], pts["tok_s_gpu"]))[0]
                f = f[np.argsort(pts["tok_s_user"][f])]
                frontiers[k] = {c: np.asarray(pts[c])[f] for c in ("tok_s_user", "tok_s_gpu", "tp", "ep", "attention_dp", "spec",
                                                                  "concurrency")}
        return frontiers[k]

    rows, sweep_rows = [], []
    for key, members in sorted(sweeps.items()):
        model, gpu, prec, kv, isl, osl, mode = key
        x = np.array([p.tok_s_per_user for p, _ in members])
        y = np.array([p.output_tok_s_per_gpu for p, _ in members])
        front = np.nonzero(pareto_mask(x, y))[0]
        front = front[np.argsort(x[front])]
        for i in front:
            p, r = members[i]
            n = int(p.num_gpus)
            f = frontier(key, r, n, mode, prec, kv)
            meas_cls = layout_class(int(_num(p.decode_tp if mode == "disagg" else p.tp)), int(_num(p.decode_ep if mode == "disagg" else p.ep)),
                                    int(_num(p.decode_attention_dp if mode == "disagg" else p.attention_dp)))
            x_q = p.tok_s_per_user * (1.0 - REACH_TOLERANCE)
            pred = float(interp_frontier(f["tok_s_user"], f["tok_s_gpu"], x_q)[0]) if f else math.nan
            pred_cls = None
            if f and math.isfinite(pred):
                ok = f["tok_s_user"] >= x_q
                j = int(np.nonzero(ok)[0][np.argmax(f["tok_s_gpu"][ok])])
                pred_cls = layout_class(int(f["tp"][j]), int(f["ep"][j]), int(f["attention_dp"][j]))
            rows.append({"model": model, "gpu": gpu, "precision": prec, "isl": isl, "osl": osl, "mode": mode, "num_gpus": n,
                         "measured_tok_s_user": p.tok_s_per_user, "measured_tok_s_gpu": p.output_tok_s_per_gpu,
                         "predicted_tok_s_gpu": pred if math.isfinite(pred) else None,
                         "ratio": pred / p.output_tok_s_per_gpu if math.isfinite(pred) else None,
                         "measured_class": meas_cls, "predicted_class": pred_cls,
                         "measured_spec": str(p.spec_decoding or "none"), "source": f"{p.source_file}:{p.line}"})
        # knees: the measured knee against the predicted knee on the knee's GPU count
        k = knee_index(x[front], y[front])
        if k >= 0:
            p, r = members[front[k]]
            f = frontier(key, r, int(p.num_gpus), mode, prec, kv)
            if f:
                kp = knee_index(f["tok_s_user"], f["tok_s_gpu"])
                sweep_rows.append({"model": model, "gpu": gpu, "precision": prec, "isl": isl, "osl": osl, "mode": mode,
                                   "num_gpus": int(p.num_gpus), "measured_knee_tok_s_user": float(x[front][k]),
                                   "measured_knee_tok_s_gpu": float(y[front][k]),
                                   "predicted_knee_tok_s_user": float(f["tok_s_user"][kp]),
                                   "predicted_knee_tok_s_gpu": float(f["tok_s_gpu"][kp]),
                                   "knee_class_agrees": rows[-len(front) + k]["measured_class"]
                                   == layout_class(int(f["tp"][kp]), int(f["ep"][kp]), int(f["attention_dp"][kp]))})
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        groups[f"{r['gpu']}/{r['precision']}/{r['mode']}"].append(r)
    summary = {}
    for g, rs in sorted(groups.items()):
        ratios = np.array([r["ratio"] for r in rs if r["ratio"]])
        agree = [r["measured_class"] == r["predicted_class"] for r in rs if r["predicted_class"]]
        summary[g] = {"points": len(rs), "reached": int(ratios.size),
                      "geomean_ratio": round(float(np.exp(np.mean(np.log(ratios)))), 4) if ratios.size else None,
                      "class_agreement": round(float(np.mean(agree)), 4) if agree else None}
    allr = np.array([r["ratio"] for r in rows if r["ratio"]])
    agree = [r["measured_class"] == r["predicted_class"] for r in rows if r["predicted_class"]]
    summary["all"] = {"points": len(rows), "reached": int(allr.size),
                      "geomean_ratio": round(float(np.exp(np.mean(np.log(allr)))), 4) if allr.size else None,
                      "class_agreement": round(float(np.mean(agree)), 4) if agree else None,
                      "knee_class_agreement": round(float(np.mean([s["knee_class_agrees"] for s in sweep_rows])), 4) if sweep_rows else None}
    return {"summary": summary, "points": rows, "knees": sweep_rows}

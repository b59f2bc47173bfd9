"""Knob-neutral fidelity: does the model's error move with a knob the search chooses between?

Two checks on measured serving points (what ``simfront validate --frontier`` prints):

- **Residual trends by knob**: the median of log(predicted / measured) of TPOT, TTFT and output tok/s/GPU
  per bin of each knob (requests per attention rank, layout class, TP size, EP size, attention-DP size,
  precision, mode, speculative decoding, engine, GPU). A search takes the best of a million
  configurations, so a bias that grows with a knob is where it goes wrong; the average error hides it.
- **Frontiers against frontiers**: measured points grouped into sweeps (model, GPU, precision, ISL/OSL);
  the measured Pareto set of (tok/s/user, output tok/s/GPU) over every measured deployment, agg and disagg,
  against simfront's whole frontier on the same GPU count (same precision; both modes and every other knob
  searched): predicted over measured best tok/s/GPU at each measured tok/s/user, the layout class of the
  predicted point there against the measured one (agg/disagg x TP / TP+EP / DPA+EP), and the knees. The same
  per mode (a mode's measured Pareto set against simfront's frontier of that mode). Nothing here is fitted.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any, Iterable

import numpy as np

from .coverage import calibrated_layouts, outside_calibration
from .errors import SimfrontError
from .hardware import GpuSet
from .layout import layout_class_of
from .measured import resolve
from .pareto import interp_frontier, knee_index, pareto_mask
from .scheduler import engine_key, release_family, release_key
from .search import SearchSpace, search
from .serving import Workload

# bins of requests in flight per attention rank (per micro-batch): where batch-dependent physics shows
RANK_LOAD_EDGES = (1, 8, 32, 128, 512)
TREND_METRICS = {"tpot_ms": "predicted_tpot_ms", "ttft_ms": "predicted_ttft_ms", "output_tok_s_per_gpu": "predicted_tok_s_per_gpu"}
MIN_BIN_ROWS = 10  # bins with fewer rows are listed but not judged
# a predicted point counts as reaching a measured tok/s/user within this relative tolerance (results are
# reported to 3-5 significant digits)
REACH_TOLERANCE = 1e-3
# a predicted point is "at the measured load" when its client concurrency is within this relative distance
# (the search's concurrency grid is batch x ranks x workers, so the measured value itself may be absent)
LOAD_TOLERANCE = 0.1
# a measured layout class counts as "near" simfront's choice when its own best predicted tok/s/GPU at the measured
# tok/s/user is within this share of the frontier's: inside the serving model's p10-p90 TPOT band (about +-20 %,
# hardware/efficiency/serving.yaml), so the search cannot tell the two classes apart there
CLASS_NEAR_SHARE = 0.10
# search columns a point's layout class and its coverage by the measured calibration layouts are read from
COVERAGE_COLUMNS = ("mode", "tp", "pp", "ep", "attention_dp", "spec", "prefill_tp", "prefill_ep", "prefill_attention_dp")


def layout_class(tp: int, ep: int, attention_dp: int) -> str:
    """TP (dense or expert TP), TP+EP (experts split over GPUs), DPA+EP (attention data parallel): the classes of
    :data:`simfront.layout.LAYOUT_CLASSES` (``--layout``), as this report spells them."""
    return str(layout_class_of(attention_dp, ep)).upper()


def layout_classes(ep: np.ndarray, attention_dp: np.ndarray) -> np.ndarray:
    """:func:`layout_class` of arrays of configurations."""
    return np.char.upper(layout_class_of(attention_dp, ep))


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
    return {"requests per rank": _rank_load_bin(per_rank), "layout class": layout_class(tp, ep, dp), "TP size": str(tp), "EP size": str(ep),
            "attention-DP size": str(dp), "precision": str(row.get("precision") or "native"), "mode": mode,
            "speculative": str(row.get("spec_decoding") or "none"), "engine": str(row.get("engine") or "unknown"),
            "engine release": engine_release(row.get("engine"), row.get("engine_version")), "GPU": _gpu_name(row.get("gpu"))}


def engine_release(engine, version) -> str:
    """An engine and the release series a row ran (``trtllm 1.2``, ``sglang 0.5.8``; ``trtllm ?`` when unrecorded).

    One profile prices every release of an engine, so a bias that moves with the release shows here. The series is
    major.minor, and major.minor.patch before 1.0 (where a project's minor and patch numbers carry its feature
    releases: SGLang 0.5.8 and 0.5.12 are months apart)."""
    parts = re.findall(r"\d+", re.split(r"[^\d.]", str(version or "").strip().lstrip("v"), maxsplit=1)[0])
    if len(parts) < 2:
        return f"{engine or 'unknown'} ?"
    return f"{engine or 'unknown'} {'.'.join(parts[:3] if parts[0] == '0' else parts[:2])}"


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
        if "reason" in r or r.get("duplicate_of") or r.get("measurement_flag"):
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


# fields of a measured point that name one deployment: its concurrency sweep is one line in (tok/s/user, tok/s/GPU)
DEPLOYMENT_FIELDS = ("mode", "engine", "engine_version", "spec_decoding", "spec_k", "num_gpus", "tp", "ep", "attention_dp", "pp",
                     "prefill_workers", "prefill_tp", "prefill_ep", "prefill_attention_dp", "decode_workers", "decode_tp",
                     "decode_ep", "decode_attention_dp", "batch_size", "source_file")


def sweep_interpolated_best(points: list, x: float) -> float:
    """Most tok/s/GPU measured at tok/s/user >= ``x``, counting each deployment's concurrency sweep as the line
    through its measured points (NaN where no point reaches ``x``).

    The measured Pareto set is a step function over the concurrencies a benchmark ran (4, 8, 16, ...): between
    two of them a deployment runs at the loads in between too, with metrics in between, while the step function
    drops to the next measured point. A predicted frontier is continuous, so against the step function it gains
    wherever the measured grid has a gap. This is a diagnostic beside the headline ratio, which stays against the
    measured points alone: it separates the model's error from the benchmark's sampling."""
    groups: dict[tuple, list] = defaultdict(list)
    for p in points:
        groups[tuple(getattr(p, f, None) for f in DEPLOYMENT_FIELDS)].append(p)
    # the measured points that reach x (the step function), then each sweep's line where it spans x
    reach = [p.output_tok_s_per_gpu for p in points if p.tok_s_per_user >= x]
    for pts in groups.values():
        gx = np.array([q.tok_s_per_user for q in pts])
        gy = np.array([q.output_tok_s_per_gpu for q in pts])
        if len(pts) >= 2 and gx.min() <= x <= gx.max():
            o = np.argsort(gx)
            reach.append(float(np.interp(x, gx[o], gy[o])))  # the deployment at a load between two measured ones
    return max(reach) if reach else math.nan


def _compare(members: list, f, with_mode: bool, at_load=None, class_best=None,
             drafting_best=None) -> tuple[list[dict], dict | None]:
    """Rows (one per measured Pareto point of ``members``) against the predicted frontier ``f`` of one GPU
    count per point (``f(n)``), and the knee row. ``with_mode``: layout classes carry agg/disagg.
    ``at_load(n, concurrency)``: simfront's best (tok/s/GPU, tok/s/user, mode, tp, ep, attention_dp) at that load.
    ``class_best(n, tok_s_user, mode, layout class)``: simfront's best tok/s/GPU of that class at that tok/s/user.
    ``drafting_best(n, tok_s_user, drafts)``: simfront's best tok/s/GPU at that tok/s/user among its points that draft
    (speculative decoding) or do not, as the measured point did."""

    def cls(mode, tp, ep, dp) -> str:
        c = layout_class(int(tp), int(ep), int(dp))
        return f"{mode} {c}" if with_mode else c

    x = np.array([p.tok_s_per_user for p, _ in members])
    y = np.array([p.output_tok_s_per_gpu for p, _ in members])
    front = np.nonzero(pareto_mask(x, y))[0]
    front = front[np.argsort(x[front])]
    rows = []
    for i in front:
        p, r = members[i]
        mode = p.mode or "agg"
        fr = f(int(p.num_gpus))
        dis = mode == "disagg"
        meas_cls = cls(mode, _num(p.decode_tp if dis else p.tp), _num(p.decode_ep if dis else p.ep),
                       _num(p.decode_attention_dp if dis else p.attention_dp))
        x_q = p.tok_s_per_user * (1.0 - REACH_TOLERANCE)
        pred = float(interp_frontier(fr["tok_s_user"], fr["tok_s_gpu"], x_q)[0]) if fr else math.nan
        pred_cls, pred_out, pred_spec = None, None, None
        if fr and math.isfinite(pred):
            ok = fr["tok_s_user"] >= x_q
            j = int(np.nonzero(ok)[0][np.argmax(fr["tok_s_gpu"][ok])])
            pred_cls = cls(fr["mode"][j], fr["tp"][j], fr["ep"][j], fr["attention_dp"][j])
            pred_spec = str(fr["spec"][j])
            # that point's knobs outside the layouts of the measured calibration runs (simfront.coverage)
            pred_out = outside_calibration({c: fr[c][j] for c in COVERAGE_COLUMNS if c in fr}, calibrated_layouts(r.hw.family))
        # the measured class's own best predicted point there, over the frontier's: how close the search came to
        # choosing it (1 when it did; near 1 when the classes tie within the model's error)
        own = class_best(int(p.num_gpus), x_q, mode if with_mode else None, meas_cls.split(" ")[-1]) if class_best and math.isfinite(pred) else None
        # (b) simfront's best configuration at the measured load: the most tok/s/GPU among its points within
        # LOAD_TOLERANCE of the measured concurrency (any tok/s/user), on the same GPU count
        at = at_load(int(p.num_gpus), p.concurrency) if at_load and p.concurrency else None
        # simfront's best there drafting as the measured point did (or not): how much of the ratio is a drafting
        # choice the measured sweep did not make at this tok/s/user
        drafts = str(p.spec_decoding or "none").lower() != "none"
        same = drafting_best(int(p.num_gpus), x_q, drafts) if drafting_best and math.isfinite(pred) else None
        # diagnostic: the measured best at this tok/s/user with every deployment's sweep read as a line, same GPU count
        interp = sweep_interpolated_best([q for q, _ in members if q.num_gpus == p.num_gpus], p.tok_s_per_user * (1.0 - REACH_TOLERANCE))
        rows.append({"model": r.model.id, "gpu": r.hw.id, "precision": None, "isl": round(r.isl), "osl": round(r.osl), "mode": mode,
                     "at_load_tok_s_gpu": at[0] if at else None, "at_load_tok_s_user": at[1] if at else None,
                     "at_load_ratio": at[0] / p.output_tok_s_per_gpu if at else None,
                     "at_load_class": cls(*at[2:]) if at else None,
                     "num_gpus": int(p.num_gpus), "measured_tok_s_user": p.tok_s_per_user, "measured_tok_s_gpu": p.output_tok_s_per_gpu,
                     "predicted_tok_s_gpu": pred if math.isfinite(pred) else None,
                     "ratio": pred / p.output_tok_s_per_gpu if math.isfinite(pred) else None,
                     "measured_sweep_interpolated_tok_s_gpu": interp,
                     "ratio_to_sweep_interpolated": pred / interp if math.isfinite(pred) and interp > 0 else None,
                     "measured_class": meas_cls, "predicted_class": pred_cls, "predicted_outside_calibration": pred_out,
                     "measured_class_share": own / pred if own is not None and pred > 0 else None,
                     "same_drafting_tok_s_gpu": same,
                     "ratio_same_drafting": same / p.output_tok_s_per_gpu if same else None,
                     "measured_spec": str(p.spec_decoding or "none"), "predicted_spec": pred_spec,
                     # the class and the drafting choice both agree (drafting or not; not the draft count)
                     "class_and_drafting_agree": (pred_cls == meas_cls and (pred_spec != "none") == drafts)
                     if pred_cls is not None else None,
                     "source": f"{p.source_file}:{p.line}"})
    knee = None
    k = knee_index(x[front], y[front])
    if k >= 0:
        p, r = members[front[k]]
        fr = f(int(p.num_gpus))
        if fr:
            kp = knee_index(fr["tok_s_user"], fr["tok_s_gpu"])
            knee = {"num_gpus": int(p.num_gpus), "measured_knee_tok_s_user": float(x[front][k]),
                    "measured_knee_tok_s_gpu": float(y[front][k]), "predicted_knee_tok_s_user": float(fr["tok_s_user"][kp]),
                    "predicted_knee_tok_s_gpu": float(fr["tok_s_gpu"][kp]),
                    "knee_class_agrees": rows[k]["measured_class"] == cls(fr["mode"][kp], fr["tp"][kp], fr["ep"][kp], fr["attention_dp"][kp])}
    return rows, knee


def _geomean(ratios: np.ndarray) -> float | None:
    """Geometric mean of positive ratios, to 4 decimals; None for none."""
    return round(float(np.exp(np.mean(np.log(ratios)))), 4) if ratios.size else None


def _summarise(rows: list[dict], knees: list[dict], key) -> dict:
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    out = {}
    for g, rs in sorted(groups.items()) + [("all", rows)]:
        ratios = np.array([r["ratio"] for r in rs if r["ratio"]])
        agree = [r["measured_class"] == r["predicted_class"] for r in rs if r["predicted_class"]]
        agree_drafting = [bool(r["class_and_drafting_agree"]) for r in rs if r.get("class_and_drafting_agree") is not None]
        share = np.array([r["measured_class_share"] if r.get("measured_class_share") is not None else 0.0
                          for r in rs if r["predicted_class"]])
        at = np.array([r["at_load_ratio"] for r in rs if r.get("at_load_ratio")])
        drafting = np.array([r["ratio_same_drafting"] for r in rs if r.get("ratio_same_drafting")])
        interp = np.array([r["ratio_to_sweep_interpolated"] for r in rs if r.get("ratio_to_sweep_interpolated")])
        # the reached points whose simfront best lies inside the measured calibration layouts, and the share outside
        outside = [bool(r.get("predicted_outside_calibration")) for r in rs if r["ratio"]]
        inside = np.array([r["ratio"] for r in rs if r["ratio"] and not r.get("predicted_outside_calibration")])
        out[g] = {"points": len(rs), "reached": int(ratios.size),
                  "geomean_ratio": _geomean(ratios),
                  "geomean_ratio_to_sweep_interpolated": _geomean(interp),
                  "class_agreement": round(float(np.mean(agree)), 4) if agree else None,
                  "class_and_drafting_agreement": round(float(np.mean(agree_drafting)), 4) if agree_drafting else None,
                  # the measured class agrees, or its own best predicted point is within CLASS_NEAR_SHARE of the frontier
                  "class_near": round(float(np.mean(share >= 1.0 - CLASS_NEAR_SHARE)), 4) if share.size else None,
                  "median_measured_class_share": round(float(np.median(share)), 4) if share.size else None,
                  "at_load_points": int(at.size),
                  "at_load_geomean_ratio": _geomean(at),
                  "geomean_ratio_same_drafting": _geomean(drafting),
                  "outside_share": round(float(np.mean(outside)), 4) if outside else None,
                  "geomean_ratio_inside": _geomean(inside)}
    out["all"]["knee_class_agreement"] = round(float(np.mean([k["knee_class_agrees"] for k in knees])), 4) if knees else None
    return out


def _sweep_engines(members: list) -> tuple[str, ...] | None:
    """The engines a sweep's runs used, each at the newest release its runs name (``engine@release``; the release of
    a run without one is the newest release family out on its date, simfront/engines/scheduler.yaml): the layouts
    those releases start are the sweep's to reach. None (the all-engine average) when a run names no engine
    simfront knows."""
    newest: dict[str, str | None] = {}
    for p, _ in members:
        try:
            key = engine_key(p.engine)
        except SimfrontError:
            return None
        if key == "default":
            return None
        release = p.engine_version or (release_family(key, None, p.measured_on)["since"] if p.measured_on else None)
        if key in newest and (newest[key] is None or release is None):
            newest[key] = None  # a run of unknown release: the newest release's rules
        elif key not in newest or release_key(release) > release_key(newest[key]):
            newest[key] = release
    return tuple(sorted(k if v is None else f"{k}@{v}" for k, v in newest.items())) or None


def frontier_comparison(points: list, profile: dict | None = None) -> dict:
    """Measured Pareto sets against simfront's frontiers on the same GPU counts (see the module doc).

    ``points`` are ingested measured points (:class:`simfront.ingest.schema.MeasuredPoint`). A sweep is
    (model, GPU, precision, ISL/OSL): its measured Pareto set over every measured deployment, agg and disagg, of
    any engine and KV-cache format, against simfront's frontier over both modes and the sweep's KV-cache formats
    on each Pareto point's GPU count (``summary``;
    layout classes carry the mode). ``summary_by_mode`` keeps the modes apart on both sides (the measured
    Pareto set of one mode against simfront's frontier of that mode). Returns ``{summary, summary_by_mode,
    points[...], points_by_mode[...], knees[...]}``; nothing here is fitted.
    """
    sweeps: dict[tuple, list] = defaultdict(list)
    for p in points:
        if not (p.tok_s_per_user and p.output_tok_s_per_gpu and p.num_gpus):
            continue
        r, _ = resolve(p)
        if r is None:
            continue
        sweeps[(r.model.id, r.hw.id, _precision_name(r.model, r.precision), round(r.isl), round(r.osl))].append((p, r))
    # the KV-cache formats the sweep's runs used: a knob of the sweep, as the engine and the mode are
    kv_dtypes = {key: sorted({r.precision.kv for _, r in members}) for key, members in sweeps.items()}
    # the engines the sweep measured: simfront's frontier keeps what at least one of them can start (a layout none of
    # them starts, such as SGLang's and TensorRT-LLM's pipelined workers with drafts, is not the sweep's to reach)
    engines = {key: _sweep_engines(members) for key, members in sweeps.items()}
    searched: dict[tuple, dict] = {}

    def frontier(key, r, n, mode):
        """simfront's frontier (columns over its points, by tok/s/user) of one mode or of both (mode None)."""
        k = key + (n,)
        if k not in searched:
            space = SearchSpace(precisions=[key[2]], kv_dtypes=kv_dtypes[key], modes=("agg", "disagg"),
                                start_engines=engines[key])
            # the measured runs' own client: the same start-up wave and length spread as the benchmark that produced them
            wl = Workload(isl=r.isl, osl=r.osl, startup_wave_share=r.wave_share, length_range_ratio=r.range_ratio)
            res = search(r.model, GpuSet(count=n, hardware=r.hw), wl, space, profile=profile)
            searched[k] = {c: np.asarray(res.points[c]) for c in ("tok_s_user", "tok_s_gpu", "concurrency") + COVERAGE_COLUMNS
                           } if res.points else {}
            if searched[k]:
                searched[k]["class"] = layout_classes(searched[k]["ep"], searched[k]["attention_dp"])
        pts = searched[k]
        if not pts:
            return {}
        sel = np.ones(pts["mode"].size, bool) if mode is None else pts["mode"] == mode
        idx = np.nonzero(sel)[0]
        if not idx.size:
            return {}
        f = idx[pareto_mask(pts["tok_s_user"][idx], pts["tok_s_gpu"][idx])]
        f = f[np.argsort(pts["tok_s_user"][f])]
        return {c: v[f] for c, v in pts.items()}

    def at_load(key, r, n, concurrency, mode=None):
        """simfront's best point (tok/s/GPU, tok/s/user, mode, tp, ep, attention_dp) at about this concurrency (one mode or both)."""
        frontier(key, r, n, None)  # runs the search once per GPU count
        pts = searched[key + (n,)]
        if not pts:
            return None
        same = np.abs(pts["concurrency"] / concurrency - 1.0) <= LOAD_TOLERANCE
        near = np.nonzero(same if mode is None else same & (pts["mode"] == mode))[0]
        if not near.size:
            return None
        j = int(near[np.argmax(pts["tok_s_gpu"][near])])
        return (float(pts["tok_s_gpu"][j]), float(pts["tok_s_user"][j]), pts["mode"][j], pts["tp"][j], pts["ep"][j], pts["attention_dp"][j])

    def best_where(key, r, n, x_q, select, modes=(), none=None):
        """simfront's most tok/s/GPU at tok/s/user >= ``x_q`` among its searched points that ``select(points)`` keeps and
        whose mode is each of ``modes`` given (None entries skipped); ``none`` where no point qualifies, None where the
        search found nothing."""
        frontier(key, r, n, None)  # runs the search once per GPU count
        pts = searched[key + (n,)]
        if not pts:
            return None
        ok = select(pts) & (pts["tok_s_user"] >= x_q)
        for m in modes:
            if m is not None:
                ok &= pts["mode"] == m
        return float(pts["tok_s_gpu"][ok].max()) if ok.any() else none

    def class_best(key, r, n, x_q, mode, cls, within=None):
        """Best of layout class ``cls`` (and of ``mode``, given; ``within``: the frontier's own mode when it is
        restricted to one); 0 where the class has no point there."""
        return best_where(key, r, n, x_q, lambda pts: pts["class"] == cls, (mode, within), none=0.0)

    def drafting_best(key, r, n, x_q, drafts, within=None):
        """Best among the points that draft (``drafts``) or do not (and of mode ``within``, given); None where none."""
        return best_where(key, r, n, x_q, lambda pts: (pts["spec"] != "none") == drafts, (within,))

    pooled, by_mode, knees, knees_mode = [], [], [], []
    for key, members in sorted(sweeps.items()):
        # reported by format name: the checkpoint as shipped is searched as "native" and named by its format
        prec = key[2] if key[2] != "native" else members[0][1].model.native.experts
        rows, knee = _compare(members, lambda n, key=key, r=members[0][1]: frontier(key, r, n, None), with_mode=True,
                              at_load=lambda n, c, key=key, r=members[0][1]: at_load(key, r, n, c),
                              class_best=lambda n, x, md, cl, key=key, r=members[0][1]: class_best(key, r, n, x, md, cl),
                              drafting_best=lambda n, x, d, key=key, r=members[0][1]: drafting_best(key, r, n, x, d))
        for x in rows:
            x["precision"] = prec
        pooled += rows
        if knee:
            knees.append(dict(knee, model=key[0], gpu=key[1], precision=prec, isl=key[3], osl=key[4]))
        for mode in ("agg", "disagg"):
            sub = [(p, r) for p, r in members if (p.mode or "agg") == mode]
            if not sub:
                continue
            rows, knee = _compare(sub, lambda n, key=key, r=sub[0][1], mode=mode: frontier(key, r, n, mode), with_mode=False,
                                  at_load=lambda n, c, key=key, r=sub[0][1], mode=mode: at_load(key, r, n, c, mode),
                                  class_best=lambda n, x, md, cl, key=key, r=sub[0][1], mode=mode: class_best(key, r, n, x, md, cl, mode),
                                  drafting_best=lambda n, x, d, key=key, r=sub[0][1], mode=mode: drafting_best(key, r, n, x, d, mode))
            for x in rows:
                x["precision"] = prec
            by_mode += rows
            if knee:
                knees_mode.append(knee)
    return {"summary": _summarise(pooled, knees, lambda r: f"{r['gpu']}/{r['precision']}"),
            "summary_by_mode": _summarise(by_mode, knees_mode, lambda r: f"{r['gpu']}/{r['precision']}/{r['mode']}"),
            "points": pooled, "points_by_mode": by_mode, "knees": knees}

"""Simulated TTFT / TPOT against measured serving rows, next to the analytical evaluator's.

For every row of a measured-point or serving CSV, build the row's deployment the way
``simfront/measured.py`` does (layout, workers, max batch, precision, speculation, KV link) and run
the step-level simulation (:mod:`simfront.simulate`) with the benchmark's client: closed loop with the
row's concurrency, ``num_prompts = 10 x concurrency``, the first wave at once, lengths uniform in
[r L, L] (r = 0.8 for the InferenceX file, whose client records it; 1.0 = fixed lengths for
``measured_serving.csv``, whose client is not recorded), and the admission rules the row's engine runs (SGLang's
``scheduler_recv_interval`` from each row). Nothing is fitted here: step times use the shipped per-engine serving
profiles (the step terms, the per-request TTFT overhead, a disaggregated hand-off's time and a busy prefill worker's
pace). A row whose TTFT is the median over its requests (``ttft_statistic``) is compared with the simulated median, the
others with the mean.

    python scripts/validate_simulation.py [--file F --range-ratio R] [--limit N] [--mode agg|disagg] [--fixed-mean]
                                          [--attention-dp-only]

Prints median predicted/measured TTFT, TTFT MAPE and TPOT MAPE for disaggregated rows, all rows and each
engine's rows, for the simulation and for the analytical evaluator on the same rows, and the p99 TTFT against the
rows' recorded p99 where their notes give one (InferenceMAX). The InferenceX file takes about two minutes per mode on
two cores, ``measured_serving.csv`` under one.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import clients as cl  # noqa: E402
from simfront.deployment import Layouts  # noqa: E402
from simfront.errors import SimfrontError  # noqa: E402
from simfront.ingest import load_measurements  # noqa: E402
from simfront.layout import layout_errors  # noqa: E402
from simfront.measured import _get, _given_gpus, _layout, agg_workers, disagg_rows, predict_points, resolve  # noqa: E402
from simfront.scheduler import scheduler_settings  # noqa: E402
from simfront.serving import engine_profile  # noqa: E402
from simfront.simulate import kv_tokens_of, simulate_agg, simulate_disagg  # noqa: E402

INFERENCEMAX = ROOT / "measurements" / "inferencemax_b200_h100.csv"  # the calibration file, with its sidecar of recipe facts
SERVING = ROOT / "measurements" / "measured_serving.csv"


def simulate_points(pts, range_ratio: float, prompts_per_user: float = cl.BENCHMARK_PROMPTS_PER_USER,
                    fixed_mean: bool = False) -> list[dict]:
    """{ttft_ms, tpot_ms, p90_ttft_ms, p99_ttft_ms} (or {reason}) per point, in order. ``fixed_mean``:
    every request at the random client's mean lengths (the fast loop of :mod:`simfront.engine_fast`
    takes identical requests; random lengths run on the request-slot loop, minutes for this file)."""
    out: list[dict] = [dict() for _ in pts]
    groups: dict[tuple, list[int]] = defaultdict(list)
    res = {}
    for i, p in enumerate(pts):
        r, why = resolve(p)
        if r is None:
            out[i]["reason"] = why
            continue
        mode = _get(p, "mode", "agg")
        if _get(p, "concurrency") is None:
            out[i]["reason"] = "no client concurrency"
            continue
        if mode == "disagg" and (_get(p, "prefill_workers") is None or _get(p, "decode_workers") is None):
            out[i]["reason"] = "disaggregated run without worker counts"
            continue
        res[i] = r
        groups[(r.model.id, r.hw.id, r.precision, r.engine, r.isl, r.osl, r.spec, mode,
                str(_get(p, "engine_version", "")), float(_get(p, "token_budget") or 0))].append(i)
    for key, idx in groups.items():
        r = res[idx[0]]
        mode, version, budget = key[7], key[8], key[9]
        try:
            sched = scheduler_settings(r.engine, version or None, r.hw.hbm_bytes / 2**30)
        except SimfrontError:
            sched = scheduler_settings(None)
        if budget > 0:
            sched = sched.with_overrides(token_budget=budget)
        prof = engine_profile(r.engine)
        conc = np.array([float(_get(pts[i], "concurrency")) for i in idx])
        lengths = cl.Lengths(r.isl, r.osl, range_ratio)
        if fixed_mean:
            lengths = cl.Lengths(round(lengths.mean_isl), round(lengths.mean_osl))
        client = cl.ClosedLoop(1.0, lengths, num_prompts=prompts_per_user, first_wave=True)

        def plan_fn(users, D, client=client):
            return cl.plan_closed(client, users, D, prompts=np.ceil(prompts_per_user * users))

        try:
            if mode == "disagg":
                m = _disagg(pts, idx, r, sched, prof, conc, plan_fn)
            else:
                m = _agg(pts, idx, r, sched, prof, conc, plan_fn, [res[i].recv_interval for i in idx])
        except SimfrontError as e:
            for i in idx:
                out[i]["reason"] = str(e)
            continue
        ok, metrics = m
        for j, i in enumerate(idx):
            if not ok[j]:
                out[i]["reason"] = "layout invalid or does not fit"
                continue
            # the statistic the row's TTFT holds (ttft_statistic: InferenceMAX's time-series rows record medians)
            stat = "p50" if _get(pts[i], "ttft_statistic") == "median" else "mean"
            out[i].update(ttft_ms=metrics.ttft_s[stat][j] * 1e3, tpot_ms=metrics.tpot_s["mean"][j] * 1e3,
                          mean_ttft_ms=metrics.ttft_s["mean"][j] * 1e3,
                          p90_ttft_ms=metrics.ttft_s["p90"][j] * 1e3, p99_ttft_ms=metrics.ttft_s["p99"][j] * 1e3)
    return out


def _agg(pts, idx, r, sched, prof, conc, plan_fn, recv_interval):
    tp, pp, dp, ep = _layout(pts, idx, dense=not r.model.arch.is_moe)
    bad = layout_errors(r.model.arch, tp, pp, dp, ep)
    lay = Layouts.of(tp, pp, dp, ep)
    max_b = np.array([float(_get(pts[i], "batch_size", 0) or 0) for i in idx])
    given = np.array([_given_gpus(pts[i]) for i in idx])
    workers = agg_workers(conc, max_b, given, lay.gpus, lay.ranks)
    mem = r.plan_memory(tp, pp, dp, ep, r.isl + r.osl)  # the KV pool the row's engine had (its recorded fraction)
    ok = ~bad & mem.fits
    maxb = np.where(max_b > 0, max_b, sched.max_running)
    m = simulate_agg(r.model, r.precision, r.hw, lay, workers, conc, plan_fn, sched=sched, profile=prof, spec=r.spec,
                     max_batch=maxb, isl=r.isl, osl=r.osl, kv_tokens=kv_tokens_of(mem, dp, pp, r.isl + r.osl),
                     recv_interval=np.array(recv_interval))  # each row's own (its group spans concurrencies)
    return ok, m


def _disagg(pts, idx, r, sched, prof, conc, plan_fn):
    d = disagg_rows(pts, idx, r)
    m = simulate_disagg(r.model, r.precision, r.hw, d.prefill, d.prefill_workers, d.decode, d.decode_workers, conc, plan_fn,
                        sched=sched, profile=prof, spec=r.spec, link_bytes_per_s=d.link_bytes_per_s,
                        decode_max_batch=np.where(d.decode_batch > 0, d.decode_batch, sched.max_running), isl=r.isl, osl=r.osl,
                        decode_kv_tokens=kv_tokens_of(r.plan_memory(d.decode.tp, d.decode.pp, d.decode.dp, d.decode.ep,
                                                                  r.isl + r.osl), d.decode.dp, d.decode.pp, r.isl + r.osl))
    return ~d.bad & d.decode_memory.fits, m


def _stats(meas, pred) -> dict:
    meas, pred = np.asarray(meas, float), np.asarray(pred, float)
    k = np.isfinite(meas) & np.isfinite(pred) & (meas > 0) & (pred > 0)
    if not k.any():
        return {"n": 0}
    ratio = pred[k] / meas[k]
    return {"n": int(k.sum()), "median_ratio": float(np.median(ratio)), "mape": float(np.mean(np.abs(ratio - 1)) * 100)}


def note_number(p, key: str) -> float | None:
    """A number a row's notes record as ``key=value`` (InferenceMAX: ``p99_ttft_ms=6549.1``), else None."""
    text = "; ".join(f"{k}={v}" for k, v in (p.notes or {}).items())
    m = re.search(rf"(?:^|[;\s]){re.escape(key)}=([0-9.]+)", text)
    return float(m.group(1)) if m else None


def report(path, range_ratio, limit=None, mode=None, fixed_mean=False, attention_dp_only=False) -> dict:
    t0 = time.perf_counter()
    pts = [p for p in load_measurements([str(path)]).points if p.ttft_ms is not None or p.tpot_ms is not None]
    if mode:
        pts = [p for p in pts if (p.mode or "agg") == mode]
    if attention_dp_only:  # rows whose (decode) workers run attention-DP ranks
        pts = [p for p in pts if max(p.attention_dp or 1, p.decode_attention_dp or 1) > 1]
    if limit:
        pts = pts[:limit]
    ana = predict_points(pts)
    t1 = time.perf_counter()
    sim = simulate_points(pts, range_ratio, fixed_mean=fixed_mean)
    t2 = time.perf_counter()
    rows = []
    for p, a, s in zip(pts, ana, sim):
        rows.append((p.mode or "agg", p.ttft_ms, p.tpot_ms, a.get("predicted_ttft_ms"), a.get("predicted_tpot_ms"), s.get("ttft_ms"), s.get("tpot_ms"),
                     str(p.engine or "?")))
    out = {}
    print(f"{path}: {len(pts)} rows; analytical {t1 - t0:.1f} s, simulation {t2 - t1:.1f} s "
          f"({sum('ttft_ms' in s for s in sim)} simulated)")
    print(f"{'rows':14} {'metric':5} {'model':11} {'n':>5} {'median pred/meas':>17} {'MAPE %':>8}")
    engines = sorted({x[7] for x in rows})
    for sel in ("disagg", "all", *(f"engine={e}" for e in engines)):
        rs = [x for x in rows if sel == "all" or x[0] == sel or sel == f"engine={x[7]}"]
        both = [x for x in rs if x[3] is not None and x[5] is not None]  # rows both models predict
        for metric, mi, ai, si in (("ttft", 1, 3, 5), ("tpot", 2, 4, 6)):
            for name, col in (("analytical", ai), ("simulation", si)):
                st = _stats([x[mi] if x[mi] is not None else math.nan for x in both],
                            [x[col] if x[col] is not None else math.nan for x in both])
                out[(sel, metric, name)] = st
                if st["n"]:
                    print(f"{sel:14} {metric:5} {name:11} {st['n']:5d} {st['median_ratio']:17.2f} {st['mape']:8.1f}")
    # p99 TTFT where the row's notes record one (InferenceMAX): the simulation's own p99, and the p99 `predict --tails`
    # reports, the evaluator's mean (start-up wave included) times the simulated p99 over the simulated mean
    mean_rows = predict_points([p.model_copy(update={"ttft_statistic": None}) for p in pts])
    tails = [(p.mode or "agg", note_number(p, "p99_ttft_ms"), s.get("p99_ttft_ms"), a.get("predicted_ttft_ms"), s.get("mean_ttft_ms"),
              p.ttft_ms) for p, s, a in zip(pts, sim, mean_rows)]
    tails = [t for t in tails if None not in t[:5] and t[4] > 0]  # the row's own TTFT (t[5]) may be missing: stalled() takes None
    if tails:
        print(f"p99 TTFT against the rows' recorded p99 ({len(tails)} rows):")
        for sel in ("agg", "disagg", "all", "no stall"):
            # "no stall": the rows without a start-up stall (stalled(): a p99 of tens of seconds beside a TTFT of a
            # second or so, a first wave that waited on the engine's own warm-up), which no serving model prices
            ts = [t for t in tails if sel == "all" or t[0] == sel or (sel == "no stall" and not stalled(t[1], t[5]))]
            for name, pred in (("simulation", [t[2] for t in ts]), ("evaluator x spread", [t[3] * t[2] / t[4] for t in ts])):
                st = _stats([t[1] for t in ts], pred)
                out[(sel, "p99_ttft", name)] = st
                if st["n"]:
                    print(f"{sel:14} {'p99':5} {name:18} {st['n']:5d} {st['median_ratio']:10.2f} {st['mape']:8.1f}")
    return out


# A recorded p99 TTFT of at least STALL_S and STALL_RATIO times the row's own TTFT is a start-up stall: InferenceMAX's
# SGLang runs record 68-79 s beside sub-second medians at every load (docs/model_changes.md round 33), where a saturated
# server's queue moves its median with its p99 (1.6x at 512 users of 8k prompts)
STALL_S = 30.0
STALL_RATIO = 20.0


def stalled(p99_ms: float, ttft_ms: float | None) -> bool:
    """Whether a row's recorded p99 TTFT is a start-up stall (STALL_S, STALL_RATIO)."""
    return p99_ms >= STALL_S * 1e3 and (ttft_ms is None or p99_ms >= STALL_RATIO * ttft_ms)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default=None)
    ap.add_argument("--range-ratio", type=float, default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--mode", choices=("agg", "disagg"), default=None, help="only the rows of this serving mode")
    ap.add_argument("--fixed-mean", action="store_true", help="every request at the random client's mean lengths (fast loop)")
    ap.add_argument("--attention-dp-only", action="store_true", help="only the rows whose (decode) workers run attention-DP ranks")
    a = ap.parse_args()
    kw = dict(limit=a.limit, mode=a.mode, fixed_mean=a.fixed_mean, attention_dp_only=a.attention_dp_only)
    if a.file:
        report(a.file, a.range_ratio if a.range_ratio is not None else 1.0, **kw)
        return
    report(INFERENCEMAX, cl.BENCHMARK_RANGE_RATIO if a.range_ratio is None else a.range_ratio, **kw)
    report(SERVING, 1.0 if a.range_ratio is None else a.range_ratio, **kw)


if __name__ == "__main__":
    main()

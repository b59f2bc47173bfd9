"""Time of refining the best candidates of a search with the step-level simulation.

Takes the default DeepSeek-R1 16xH200 8192/1024 search (``simfront.api.predict``), its frontier plus
the highest-tok/s/GPU other points up to ``--n`` (200), and simulates them (closed loop at each
point's concurrency, fixed lengths, steady state: users start spread, ``--prompts`` requests per user
of which the first per user is warm-up). Prints the in-process time the simulation adds.

    python scripts/bench_simulate.py [--n 200] [--prompts 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import api  # noqa: E402
from simfront import clients as cl  # noqa: E402
from simfront.deployment import Layouts  # noqa: E402
from simfront.hardware import parse_gpus  # noqa: E402
from simfront.models import get_model  # noqa: E402
from simfront.scheduler import scheduler_settings  # noqa: E402
from simfront.search import SearchSpace, kv_link_bytes_per_s, precision_options, spec_from_label  # noqa: E402
from simfront.serving import engine_profile  # noqa: E402
from simfront.simulate import simulate_agg, simulate_disagg  # noqa: E402


def candidates(res, n: int) -> dict:
    """Indices into ``res.points``: the frontier's points first, then the best tok/s/GPU."""
    pts = res.points
    key = np.round(pts["tok_s_user"], 4) * 1e6 + np.round(pts["tok_s_gpu"], 4)
    front = {round(p["tok_s_user"], 4) * 1e6 + round(p["tok_s_gpu"], 4) for p in res.frontier}
    on = np.isin(key, np.array(sorted(front)))
    order = np.concatenate([np.nonzero(on)[0], np.argsort(-np.where(on, -np.inf, pts["tok_s_gpu"]))])
    _, first = np.unique(order, return_index=True)
    return order[np.sort(first)][:n]


def refine(model_id: str, gpus: str, isl: int, osl: int, pts: dict, idx: np.ndarray, prompts: float, engine=None) -> tuple[dict, float]:
    """Simulate the points ``idx`` of a search; returns ({column: array over idx}, seconds)."""
    m = get_model(model_id)
    g = parse_gpus(gpus)
    hw = g.hardware
    prof = engine_profile(engine)
    sched = scheduler_settings(engine, None, hw.hbm_bytes / 2**30)
    precs = {(q.label, q.kv): q for q in precision_options(m, g, SearchSpace())}
    groups = defaultdict(list)
    for j, i in enumerate(idx):
        groups[(pts["mode"][i], pts["precision"][i], pts["kv_dtype"][i], pts["spec"][i], float(pts["chunk_tokens"][i]))].append(j)
    out = {k: np.full(len(idx), np.nan) for k in ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p90_ms", "tpot_p99_ms", "ttft_mean_ms", "tpot_mean_ms", "requests_s")}
    client = cl.ClosedLoop(1.0, cl.Lengths(isl, osl), num_prompts=prompts, first_wave=False, warmup=1)
    t0 = time.perf_counter()
    for (mode, plabel, kv, slabel, chunk), js in groups.items():
        ii = idx[js]
        prec = precs[(plabel, kv)]
        spec = spec_from_label(slabel, m)
        conc = pts["concurrency"][ii]

        def plan_fn(users, D):
            return cl.plan_closed(client, users, D, prompts=np.ceil(prompts * users))

        col = lambda k: pts[k][ii]  # noqa: E731
        if mode == "agg":
            lay = Layouts.of(col("tp"), col("pp"), col("attention_dp"), col("ep"))
            r = simulate_agg(m, prec, hw, lay, col("replicas"), conc, plan_fn, sched=sched, profile=prof, spec=spec,
                             max_batch=col("batch"), token_budget=chunk, isl=isl, osl=osl)
        else:
            lay = Layouts.of(col("tp"), col("pp"), col("attention_dp"), col("ep"))
            play = Layouts.of(col("prefill_tp"), 1, col("prefill_attention_dp"), col("prefill_ep"))
            link = kv_link_bytes_per_s(hw, g.count, play.gpus)
            r = simulate_disagg(m, prec, hw, play, col("prefill_workers"), lay, col("decode_workers"), conc, plan_fn, sched=sched,
                                profile=prof, spec=spec, link_bytes_per_s=link, decode_max_batch=col("batch"), isl=isl, osl=osl)
        for q in ("p50", "p90", "p99", "mean"):
            out[f"ttft_{q}_ms"][js] = r.ttft_s[q] * 1e3
        for q in ("p90", "p99", "mean"):
            out[f"tpot_{q}_ms"][js] = r.tpot_s[q] * 1e3
        out["requests_s"][js] = r.requests_s
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--prompts", type=float, default=2.0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    res = api.predict("deepseek-r1", "16xH200", isl=8192, osl=1024)
    t1 = time.perf_counter()
    idx = candidates(res, a.n)
    out, dt = refine("deepseek-r1", "16xH200", 8192, 1024, res.points, idx, a.prompts)
    ok = np.isfinite(out["tpot_mean_ms"])
    ana_tpot = res.points["tpot_ms"][idx]
    ana_x = res.points["requests_s"][idx]
    print(f"search {t1 - t0:.2f} s; simulated {len(idx)} candidates ({int(ok.sum())} finite) in {dt:.2f} s")
    print(f"median simulated/analytical: TPOT {np.nanmedian(out['tpot_mean_ms'] / ana_tpot):.3f}, requests/s "
          f"{np.nanmedian(out['requests_s'] / ana_x):.3f}; median p99/p50 TTFT {np.nanmedian(out['ttft_p99_ms'] / out['ttft_p50_ms']):.2f}")


if __name__ == "__main__":
    main()

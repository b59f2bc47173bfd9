"""Capacity planning and GPU comparison: the fewest GPUs of each type that serve a request rate.

A deployment is ``k`` identical aggregated workers of one configuration, or ``x`` prefill plus
``y`` decode workers (disaggregated). Per GPU type and workload the worker tables are evaluated
once and cached, with the search's own serving functions, memory check and worker efficiencies
(:mod:`simfront.search`): every layout x batch x precision x speculation as an aggregated worker, a
decode worker and a prefill worker. A rate and an SLA then only select rows:
``k = ceil(rate / worker requests/s)``; TTFT depends only on the prefill side and TPOT only on the
decode side, so the two sides of a disaggregated deployment are sized separately.

Latency is the configuration's at full batch (as the search reports it): an upper
bound when the deployment runs below capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from . import efficiency
from .coverage import calibrated_layouts, outside_calibration, outside_note, overlap_unused_note, wide_ep_note
from .errors import check_decodes
from .errors import SimfrontError
from .hardware import GpuSet, Hardware, get_hardware, parse_gpus
from .layout import check_classes_for, parse_layout_classes
from .launch import Deployment, LaunchPlan, WorkerLayout, benchmark_command, launch_commands, sidecar_yaml, startable_note
from .memory import weight_bytes, window_note
from .precision import weights_of
from .priced import priced_of
from .models import Model, apply_precision, get_model
from .pareto import sla_text
from .deployment import evaluate_agg, evaluate_disagg
from .search import (SearchSpace, held_knobs, kv_link_bytes_per_s, parse_spec_label, precision_options, prefill_dominated, spec_choices,
                     spec_label, spec_options, worker_tables)
from .serving import DEFAULT_CHUNK_TOKENS, DecodeResult, PrefillResult, Workload, engine_profile, engine_workload, finish_prefill, slot_at_transfer, usd_per_mtok
from .results import layout_label
from .scheduler import release_note
from .inputs import check_lengths as check_request_lengths, check_spec, check_two_batch_overlap, count, engine_gpu_refusal
from .speculative import borrowed_note
from .step import DEFAULT_ROUTING_ALPHA
from .sizing import min_gpus as fewest_gpus

# GPU types planned when none are named: the current NVIDIA HGX / NVL72 parts and AMD's newest.
DEFAULT_HARDWARE = ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "mi355x")
HOURS_PER_MONTH = 730.0  # 8760 h per year / 12: the billing month of cloud price sheets
DEFAULT_MAX_GPUS = 512  # largest deployment considered (the top of sizing.CANDIDATE_COUNTS)
# Largest worker on GPUs whose scale-up domain is smaller: 8 nodes of 8, room for the wide expert
# parallelism (EP 32-64 across nodes) DeepSeek-style MoE serving uses (modeling-notes §5). NVL72
# parts also get their whole 72-GPU rack; a model that needs more GPUs to fit gets its minimum.
WORKER_SEARCH_GPUS = 64
_CACHE_MAX = 64  # worker tables kept in memory (GPU type x workload x search options)
_ROUND = 4  # decimals of float fields in point dicts (as api._point)


# ---------------------------------------------------------------------------------------------
# Worker tables (rate- and SLA-independent, cached)

AGG_COLS = ("tp", "pp", "ep", "dp", "batch", "prec", "spec", "ttft_s", "tpot_s", "rate", "chunk")
DEC_COLS = ("tp", "pp", "ep", "dp", "batch", "prec", "spec", "tpot_s", "step_s", "rate")
PRE_COLS = ("tp", "ep", "dp", "batch", "prec", "ttft_up_s", "ttft_out_s", "prefill_s", "transfer_up_s", "transfer_out_s", "rate",
            "shared_s")
# Sizing a disaggregated deployment: prefill utilisation above which the planner adds a prefill
# worker rather than a decode worker (the M/D/1 wait is already 2x the service time at 0.8)
PREFILL_UTILISATION_TARGET = 0.8
MAX_SIZING_STEPS = 64  # worker additions tried per candidate before giving up on it
# decode rows of each precision paired with every prefill row of it when sizing a disaggregated deployment: the
# cheapest by the GPUs their capacity needs for the rate (a decode row's slots also set the prefill queue, so the
# cheapest alone is not always the pair's best). 128 gave every plan the same GPU counts as pairing all decode rows
# did (deepseek-r1 20 req/s 8k/1k on the six default GPUs, qwen3-235b-a22b 10 req/s on H200) at a tenth of the time;
# 8 missed two of them (MI355X 32 against 24, B300 22 against 20)
DECODE_CANDIDATES = 128


@dataclass
class _Tables:
    """Workers one GPU type offers for one workload; arrays per configuration."""

    hw: Hardware
    set_gpus: int  # largest worker evaluated (GPUs)
    precisions: list  # Precision objects, indexed by the "prec" columns
    specs: list  # Speculation objects, indexed by the "spec" columns
    min_gpus: int | None  # fewest GPUs that hold the model (in its smallest precision option)
    profile: dict  # the serving profile the tables are costed with
    parts: dict[str, dict[str, np.ndarray]] | None = None  # {"agg"|"dec"|"pre": columns}, filled on first use


_TABLE_CACHE: dict[tuple, _Tables] = {}


def clear_cache() -> None:
    """Forget cached worker tables (e.g. after editing hardware or model files)."""
    _TABLE_CACHE.clear()


def as_list(v) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [s.strip() for s in v.split(",") if s.strip()]
    return list(v)


def _tables(m: Model, hw: Hardware, wl: Workload, space: SearchSpace, max_gpus: int) -> _Tables:
    key = (m.id, m.name_precision, hw.id, wl, tuple(space.precisions or ()), tuple(space.kv_dtypes or ()),
           None if space.specs is None else tuple(space.specs), space.modes,
           space.engine, space.engine_version, max_gpus, efficiency.override_key())  # calibration overrides change results
    if key not in _TABLE_CACHE:
        if len(_TABLE_CACHE) >= _CACHE_MAX:
            _TABLE_CACHE.pop(next(iter(_TABLE_CACHE)))
        precs = precision_options(m, GpuSet(count=1, hardware=hw), space)
        need = fewest_gpus(m, _smallest(m, precs), hw, int(wl.mean_isl + wl.mean_osl))
        top = min(max_gpus, max(hw.scaleup.domain_gpus, WORKER_SEARCH_GPUS, need or 0))
        _TABLE_CACHE[key] = _Tables(hw, top, precs, spec_options(m, space), need, engine_profile(space.engine, space.engine_version))
    return _TABLE_CACHE[key]


def _smallest(m: Model, precs: list):
    """The precision option with the fewest weight bytes (the one that fits on the fewest GPUs)."""
    return min(precs, key=lambda p: weight_bytes(m, p))


def _evaluate(m: Model, t: _Tables, wl: Workload, space: SearchSpace) -> dict:
    """Aggregated, decode and prefill workers of up to ``t.set_gpus`` GPUs: the search's own worker tables."""
    hw = t.hw
    cols = {part: {c: [] for c in names} for part, names in (("agg", AGG_COLS), ("dec", DEC_COLS), ("pre", PRE_COLS))}
    prof = engine_profile(space.engine, space.engine_version)
    for tab in worker_tables(m, hw, t.set_gpus, wl, space, prof):
        pi, si = t.precisions.index(tab.precision), t.specs.index(tab.spec)
        L, B, ok = tab.L, tab.B, tab.ok
        worker_gpus = L["tp"] * L["dp"] * L["pp"]
        for chunk, raw in tab.agg.items():
            r = evaluate_agg(raw, prof, 1, worker_gpus, B * L["dp"] * L["pp"])  # one worker, every slot busy
            _add(cols["agg"], ok & np.isfinite(r.tpot_s) & (r.tpot_s > 0), tp=L["tp"], pp=L["pp"], ep=L["ep"], dp=L["dp"],
                 batch=B, prec=pi, spec=si, ttft_s=r.ttft_s, tpot_s=r.tpot_s, rate=r.requests_s, chunk=chunk)
        d = tab.decode
        if d is not None:
            _add(cols["dec"], tab.ok_decode & np.isfinite(d.tpot_s) & (d.tpot_s > 0), tp=L["tp"], pp=L["pp"], ep=L["ep"], dp=L["dp"],
                 batch=B, prec=pi, spec=si, tpot_s=d.tpot_s, step_s=d.step_s, rate=d.capacity_requests_s)
        if tab.prefill is not None and si == 0:  # prefill does not depend on speculation: once per precision
            P, pb, step, kv_bytes, slots, lone = tab.prefill
            gp = P["tp"] * P["dp"]
            # the search's KV-link rule for a deployment inside / beyond one scale-up domain
            up = finish_prefill(step, kv_bytes / kv_link_bytes_per_s(hw, 1, gp), slots, lone, prof)
            out = finish_prefill(step, kv_bytes / kv_link_bytes_per_s(hw, hw.scaleup.domain_gpus + 1, gp), slots, lone, prof)
            _add(cols["pre"], np.isfinite(up.ttft_base_s) & np.isfinite(out.ttft_base_s), tp=P["tp"], ep=P["ep"], dp=P["dp"],
                 batch=pb, prec=pi, ttft_up_s=up.ttft_base_s, ttft_out_s=out.ttft_base_s, prefill_s=up.prefill_s,
                 transfer_up_s=up.transfer_s, transfer_out_s=out.transfer_s, rate=up.requests_s_worker, shared_s=up.shared_extra_s)
    return {part: {c: (np.concatenate(v) if v else np.zeros(0)) for c, v in cc.items()} for part, cc in cols.items()}


def _add(cols: dict, mask: np.ndarray, **values) -> None:
    """Append the masked elements of broadcast arrays (or scalars) to the columns.

    Each array is read at the mask's element indices along its own axes (a (layouts, 1) array at the
    layout index only), in the mask's row-major order: the values of ``broadcast_to(v, mask.shape)[mask]``
    without a boolean pass over a broadcast view per column."""
    idx = np.nonzero(mask)
    k = int(idx[0].size)
    for key, v in values.items():
        a = np.asarray(v, dtype=float)
        if a.shape == mask.shape:
            cols[key].append(a[mask])
        elif a.ndim == 0:
            cols[key].append(np.full(k, float(a)))
        else:
            a = a.reshape((1,) * (mask.ndim - a.ndim) + a.shape)
            got = a[tuple(ix if n > 1 else 0 for ix, n in zip(idx, a.shape))]
            cols[key].append(got if got.ndim else np.full(k, float(got)))  # one element: repeated


# ---------------------------------------------------------------------------------------------
# Selection


def _launchable(hw: Hardware, tp, dp, pp) -> np.ndarray:
    """Layouts simfront.launch can write: a multi-node worker fills whole nodes (the engine's own start-up rules are
    already applied where the worker tables are built, :func:`simfront.search.worker_tables`)."""
    g = tp * dp * pp
    node = hw.gpus_per_node
    return (g <= node) | (g % node == 0)  # a multi-node worker fills whole nodes


def _engine_name(engine: str | None) -> str | None:
    if engine is None:
        return None
    from .launch import normalize_engine

    return normalize_engine(engine)


def _sla_side(sla: dict, ttft_s=None, tpot_s=None) -> np.ndarray:
    """Rows meeting the SLA bounds that concern the given latencies."""
    ok = True
    if ttft_s is not None and sla.get("ttft_ms") is not None:
        ok = ok & (ttft_s * 1e3 <= sla["ttft_ms"])
    if tpot_s is not None and sla.get("tpot_ms") is not None:
        ok = ok & (tpot_s * 1e3 <= sla["tpot_ms"])
    if tpot_s is not None and sla.get("min_tok_s_user") is not None:
        ok = ok & (1.0 / tpot_s >= sla["min_tok_s_user"])
    return ok


def _base_point(t: _Tables, mode: str, tp, pp, ep, dp, batch, prec, spec, ttft_s, tpot_s) -> dict:
    p = t.precisions[int(prec)]
    return {"mode": mode, "tp": int(tp), "pp": int(pp), "ep": int(ep), "attention_dp": int(dp), "replicas": 1, "batch": int(batch),
            "concurrency": 0, "precision": p.label, "kv_dtype": p.kv, "spec": spec_label(t.specs[int(spec)]),
            "ttft_ms": round(float(ttft_s) * 1e3, _ROUND), "tpot_ms": round(float(tpot_s) * 1e3, _ROUND),
            "tok_s_user": round(1.0 / float(tpot_s), _ROUND), "tok_s_gpu": None, "usd_per_mtok": None, "requests_s": None,
            "gpus_used": 0, "chunk_tokens": 0, "prefill_tp": 0, "prefill_ep": 0, "prefill_attention_dp": 0, "prefill_workers": 0, "prefill_batch": 0,
            "decode_workers": 0, "kv_headroom": None, "queue_ms": 0.0, "quality": None}


def _best_agg(t: _Tables, A: dict, rate: float, sla: dict, max_gpus: int) -> tuple[dict | None, dict]:
    """(fewest-GPU aggregated choice or None, latencies reachable without the SLA)."""
    if A["rate"].size == 0:
        return None, {}
    ok = _launchable(t.hw, A["tp"], A["dp"], A["pp"])
    w = A["tp"] * A["dp"] * A["pp"]  # GPUs per worker
    # requests/s of the most whole workers of a row that fit in max_gpus, at the best row (any latency)
    most = A["rate"][ok] * np.floor(max_gpus / w[ok])
    reach = {"ttft_ms": A["ttft_s"][ok] * 1e3, "tpot_ms": A["tpot_s"][ok] * 1e3,
             "requests_s_max": float(most.max()) if most.size else 0.0}
    ok &= _sla_side(sla, A["ttft_s"], A["tpot_s"])
    k = np.ceil(rate / A["rate"])  # workers the rate needs
    n = k * w
    ok &= n <= max_gpus
    if not ok.any():
        return None, reach
    idx = np.nonzero(ok)[0]
    i = int(idx[np.lexsort((-k[idx] * A["rate"][idx], n[idx]))[0]])  # fewest GPUs, then most capacity
    pt = _base_point(t, "agg", *(A[c][i] for c in ("tp", "pp", "ep", "dp", "batch", "prec", "spec", "ttft_s", "tpot_s")))
    pt["chunk_tokens"] = int(A["chunk"][i])
    pt.update(replicas=int(k[i]), concurrency=int(A["batch"][i] * A["dp"][i] * A["pp"][i] * k[i]))
    return {"point": pt, "num_gpus": int(n[i]), "capacity": float(k[i] * A["rate"][i]), "search_n": int(w[i]),
            "worker_rate": float(A["rate"][i]), "prefill_rate": None}, reach


def _pair_metrics(t: _Tables, D: dict, R: dict, a, b, link: str, x, y, osl: float):
    """The deployment evaluator's metrics of ``x`` prefill workers of row ``b`` and ``y`` decode workers of row ``a``
    on KV link ``link``, decode slots full (rows and counts: numbers or arrays of pairs), and its GPUs."""
    pre = PrefillResult(R[f"ttft_{link}_s"][b], R["prefill_s"][b], R[f"transfer_{link}_s"][b], R["rate"][b],
                        t.profile["ttft_scale"], R["shared_s"][b])
    dec = DecodeResult(D["tpot_s"][a], D["step_s"][a], D["rate"][a])
    gpus = _pair_gpus(D, R, a, b, x, y)
    slots = y * D["batch"][a] * D["dp"][a] * D["pp"][a]
    return evaluate_disagg(pre, x, dec, slots, slots, osl, gpus, 0.0, slot_at_transfer=slot_at_transfer(t.profile)), gpus


def _pair_gpus(D: dict, R: dict, a, b, x, y):
    """GPUs of ``x`` prefill workers of row ``b`` and ``y`` decode workers of row ``a``."""
    return x * R["tp"][b] * R["dp"][b] + y * D["tp"][a] * D["dp"][a] * D["pp"][a]


def _size_pairs(t: _Tables, D: dict, R: dict, a: np.ndarray, b: np.ndarray, link: str, rate: float, sla: dict,
                max_gpus: int, osl: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Many (decode row ``a``, prefill row ``b``) pairs at once: each pair's (x prefill, y decode) workers grown from
    each side's capacity until the deployment evaluator says it serves ``rate`` within the TTFT bound (one more
    prefill worker where the prefill queue binds, else one more decode worker), on a set whose KV link is ``link``
    (``up``: within one scale-up domain; ``out``: beyond it, a pair that serves the rate inside one domain being the
    ``up`` sizing's). Returns (sized mask, x, y, GPUs)."""
    domain = t.hw.scaleup.domain_gpus
    x = np.ceil(rate / R["rate"][b])  # prefill workers at the prefill side's capacity
    y = np.ceil(rate / D["rate"][a])  # decode workers at the decode side's capacity
    sized = np.zeros(a.size, dtype=bool)
    live = np.ones(a.size, dtype=bool)
    fewest = float(max_gpus)  # GPUs of the smallest deployment sized so far: a pair already above it cannot win
    for _ in range(MAX_SIZING_STEPS):  # worker additions, all pairs still growing at once
        # only the live pairs are evaluated (a few per cent of the pair-steps of a plan): a pair that is sized or out
        # of bounds keeps its counts, and the evaluator's arithmetic is per pair, so a live pair's numbers are the same
        i = np.flatnonzero(live)
        ai, bi, xi, yi = a[i], b[i], x[i], y[i]
        r, gpus = _pair_metrics(t, D, R, ai, bi, link, xi, yi, osl)
        on = (gpus <= fewest) & ((gpus <= domain) if link == "up" else True)  # an up-link set stays in its domain
        live[i] = on
        if not on.any():
            break
        slow = (r.ttft_s * 1e3 > sla["ttft_ms"]) if sla.get("ttft_ms") is not None else np.zeros(i.size, dtype=bool)
        serves = on & (r.requests_s >= rate) & ~slow
        done = serves & ((gpus > domain) if link == "out" else True)  # within one domain the KV link is the scale-up one
        sized[i[done]] = True
        on &= ~serves
        live[i] = on
        if done.any():
            fewest = min(fewest, float(gpus[done].min()))
        grow_x = slow | (r.requests_s >= PREFILL_UTILISATION_TARGET * xi * R["rate"][bi])  # the prefill queue binds
        x[i] = np.where(on & grow_x, xi + 1.0, xi)
        y[i] = np.where(on & ~grow_x, yi + 1.0, yi)
    return sized, x, y, _pair_gpus(D, R, a, b, x, y)


def _best_disagg(t: _Tables, D: dict, R: dict, rate: float, sla: dict, max_gpus: int, osl: float) -> tuple[dict | None, dict]:
    """Fewest-GPU disaggregated choice: the cheapest decode rows of each precision (``DECODE_CANDIDATES``, by the GPUs
    their capacity needs for the rate) paired with every prefill row of that precision, each pair grown until the
    deployment evaluator serves the rate within the SLA (:func:`_size_pairs`). A prefill row's own capacity is not
    what decides it: a busy worker's step sets the queue, so the prefill row of most requests/s per GPU can need
    many more workers to keep the TTFT bound than one that steps fewer prompts at a time."""
    if D["rate"].size == 0 or R["rate"].size == 0:
        return None, {}
    d_ok = _launchable(t.hw, D["tp"], D["dp"], D["pp"])
    p_ok = _launchable(t.hw, R["tp"], R["dp"], 1)
    # an upper bound on requests/s within max_gpus: the best prefill and decode rates per GPU, the GPUs split between
    # the two sides so neither starves (x p = y d with x + y = max_gpus), whole workers and queues not counted
    p_gpu = (R["rate"] / (R["tp"] * R["dp"]))[p_ok]
    d_gpu = (D["rate"] / (D["tp"] * D["dp"] * D["pp"]))[d_ok]
    bound = max_gpus / (1.0 / p_gpu.max() + 1.0 / d_gpu.max()) if p_gpu.size and d_gpu.size else 0.0
    reach = {"tpot_ms": D["tpot_s"][d_ok] * 1e3, "ttft_ms": R["ttft_up_s"][p_ok] * 1e3, "requests_s_max": float(bound)}
    d_ok &= _sla_side(sla, tpot_s=D["tpot_s"])
    y = np.ceil(rate / D["rate"])  # decode workers at the decode side's capacity
    d_gpus = y * D["tp"] * D["dp"] * D["pp"]
    domain = t.hw.scaleup.domain_gpus
    d_cands = _cheapest_rows_per_precision(d_ok, d_gpus, y * D["rate"], D["prec"], DECODE_CANDIDATES)
    best = None
    for link in ("up", "out"):  # the two KV-transfer paths
        pl = p_ok & _sla_side(sla, ttft_s=R[f"ttft_{link}_s"])
        for prec, da in sorted(d_cands.items()):  # a few precisions
            pb = np.flatnonzero(pl & (R["prec"] == prec))
            if pb.size == 0:
                continue
            # prefill rows another of the same worker size beats in every quantity the sizing reads are left out, as
            # the search's pairing leaves them out (search.prefill_dominated)
            pb = pb[~prefill_dominated(R[f"ttft_{link}_s"][pb], R["prefill_s"][pb], R["shared_s"][pb], R["rate"][pb],
                                       (R["tp"] * R["dp"])[pb])]
            a, b = np.repeat(da, pb.size), np.tile(pb, da.size)
            # a pair above the fewest GPUs found so far cannot win (equal counts still compete on capacity)
            bound = max_gpus if best is None else min(max_gpus, best["num_gpus"])
            sized, xs, ys, n = _size_pairs(t, D, R, a, b, link, rate, sla, bound, osl)
            if not sized.any():
                continue
            i = np.flatnonzero(sized)
            i = i[np.argmin(n[i])]  # fewest GPUs (the first of equals: cheapest decode row, then prefill row order)
            ai, bi, xi, yi = int(a[i]), int(b[i]), int(xs[i]), int(ys[i])
            r, _ = _pair_metrics(t, D, R, ai, bi, link, xi, yi, osl)  # the chosen pair's metrics, as numbers
            ng = int(r.gpus)
            cap = float(r.requests_s)
            if best is None or (ng, -cap) < (best["num_gpus"], -best["capacity"]):
                best = {"a": ai, "b": bi, "x": xi, "y": yi, "m": r, "link": link, "num_gpus": ng, "capacity": cap,
                        "worker_rate": float(D["rate"][ai]), "prefill_rate": float(R["rate"][bi])}
    if best is None:
        return None, reach
    a, b, r = best["a"], best["b"], best["m"]
    pt = _base_point(t, "disagg", *(D[c][a] for c in ("tp", "pp", "ep", "dp", "batch", "prec", "spec")), r.ttft_s, r.tpot_s)
    pt.update(replicas=best["y"], concurrency=int(round(float(r.concurrency))), prefill_tp=int(R["tp"][b]),
              prefill_ep=int(R["ep"][b]), prefill_attention_dp=int(R["dp"][b]), prefill_workers=best["x"],
              prefill_batch=int(R["batch"][b]), decode_workers=best["y"], queue_ms=round(float(r.queue_s) * 1e3, _ROUND))
    dg, pg = int(D["tp"][a] * D["dp"][a] * D["pp"][a]), int(R["tp"][b] * R["dp"][b])
    # smallest GPU set whose search holds this prefill/decode pair with the same KV link
    best["search_n"] = dg + pg if best["link"] == "up" else max(dg + pg, domain + 1)
    best["point"] = pt
    return best, reach


def _cheapest_rows_per_precision(ok: np.ndarray, gpus: np.ndarray, cap: np.ndarray, prec: np.ndarray, k: int) -> dict[int, np.ndarray]:
    """Indices of the ``k`` fewest-GPU (then highest-capacity) allowed rows of each precision, cheapest first."""
    idx = np.nonzero(ok)[0]
    if idx.size == 0:
        return {}
    p = prec[idx]
    out = {}
    for v in np.unique(p):
        rows = idx[p == v]  # this precision's allowed rows, in row order
        g = gpus[rows]
        if rows.size > k:
            # only rows needing at most the k-th fewest GPUs can be among the k first, so only those are sorted (tens
            # of rows where the precision holds ~10^4): the same rows in the same order as sorting them all
            kth = np.partition(g, k - 1)[k - 1]
            if not np.isnan(kth):
                rows = rows[g <= kth]
        # fewest GPUs, then capacity descending, then row order (a stable sort)
        out[int(v)] = rows[np.lexsort((-cap[rows], gpus[rows]))][:k]
    return out


def _choose(m: Model, t: _Tables, wl: Workload, space: SearchSpace, rate: float, sla: dict,
            max_gpus: int) -> tuple[dict | None, list[dict]]:
    """Fewest-GPU choice (aggregated or disaggregated) and the latencies reachable regardless of SLA (among the layouts
    ``space.engine`` starts: the worker tables hold only those)."""
    if t.parts is None:
        t.parts = _evaluate(m, t, wl, space)
    T = t.parts
    a, ra = _best_agg(t, T["agg"], rate, sla, max_gpus)
    # a disaggregated deployment above the aggregated choice's GPUs cannot win (equal counts compete on capacity)
    d, rd = _best_disagg(t, T["dec"], T["pre"], rate, sla, max_gpus if a is None else min(max_gpus, a["num_gpus"]), wl.mean_osl)
    cands = [c for c in (a, d) if c is not None]
    best = min(cands, key=lambda c: (c["num_gpus"], -c["capacity"])) if cands else None
    return best, [ra, rd]


def _finish_row(m: Model, hw: Hardware, choice: dict, rate: float, osl: float, price: float) -> dict:
    pt = dict(choice["point"])
    n = choice["num_gpus"]
    cap = choice["capacity"]
    tok_gpu = cap * osl / n  # output tokens/s per GPU at full capacity
    pt.update(tok_s_gpu=round(tok_gpu, _ROUND), usd_per_mtok=round(float(usd_per_mtok(price, tok_gpu)), _ROUND),
              requests_s=round(cap, _ROUND), gpus_used=n)
    pt["layout"] = layout_label(pt)
    pt["outside_calibration"] = outside_calibration(pt, calibrated_layouts(hw.family))  # knobs outside its family's measured layouts
    usd_h = n * price  # rent of every GPU of the deployment
    return {
        "gpu": hw.id, "feasible": True, "num_gpus": n, "layout": pt["layout"], "mode": pt["mode"], "precision": pt["precision"],
        "kv_dtype": pt["kv_dtype"], "spec": pt["spec"], "replicas": pt["replicas"], "batch": pt["batch"],
        "prefill_workers": pt["prefill_workers"], "decode_workers": pt["decode_workers"],
        "usd_per_gpu_hour": price, "usd_per_hour": usd_h, "monthly_usd": usd_h * HOURS_PER_MONTH,
        # cost of the asked traffic (what the deployment bills per output token served) and at full capacity
        "usd_per_mtok": float(usd_per_mtok(usd_h, rate * osl)), "usd_per_mtok_at_capacity": pt["usd_per_mtok"],
        "ttft_ms": pt["ttft_ms"], "tpot_ms": pt["tpot_ms"], "tok_s_user": pt["tok_s_user"], "tok_s_gpu": pt["tok_s_gpu"],
        "outside_calibration": pt["outside_calibration"],
        "capacity_requests_s": cap, "headroom": cap / rate, "search_gpus": f"{choice['search_n']}x{hw.id}",
        # requests/s one worker carries (agg worker or decode worker) and one prefill worker (disagg)
        "worker_requests_s": choice["worker_rate"], "prefill_worker_requests_s": choice["prefill_rate"],
        # what this deployment prices (its format, KV dtype, worker size), not every configuration searched
        "provenance": efficiency.provenance(hw, priced=priced_of(m, [pt], hw)).model_dump(),
        "point": pt,
    }


def _infeasible(m: Model, t: _Tables, reach: list[dict], sla: dict, rate: float, max_gpus: int, isl: int, osl: int) -> dict:
    hw = t.hw
    ttft = np.concatenate([r["ttft_ms"] for r in reach if r] or [np.zeros(0)])
    tpot = np.concatenate([r["tpot_ms"] for r in reach if r] or [np.zeros(0)])
    if ttft.size == 0 or tpot.size == 0:
        from .sizing import memory_verdict

        v = memory_verdict(m, _smallest(m, t.precisions), GpuSet(count=t.set_gpus, hardware=hw), isl, osl, alternatives=False)
        if v.fits:
            why = f"no configuration of {m.id} on up to {t.set_gpus}x{hw.id} can be launched (workers must fill whole nodes)"
        elif t.min_gpus is None:
            why = f"does not fit: {v.reason}; nothing up to {DEFAULT_MAX_GPUS}x{hw.id} holds it"
        else:
            why = f"does not fit within max_gpus {max_gpus}: {v.reason}"
        return {"gpu": hw.id, "feasible": False, "reason": why, "min_gpus": t.min_gpus}
    best = f"best reachable TTFT {ttft.min():,.0f} ms, TPOT {tpot.min():,.2f} ms ({1e3 / tpot.min():,.0f} tok/s/user)"
    sla_ok = ((sla.get("ttft_ms") is None or ttft.min() <= sla["ttft_ms"])
              and (sla.get("tpot_ms") is None or tpot.min() <= sla["tpot_ms"])
              and (sla.get("min_tok_s_user") is None or 1e3 / tpot.min() >= sla["min_tok_s_user"]))
    if not sla_text(sla):  # no SLA: the rate alone is out of reach within max_gpus
        most = max((r.get("requests_s_max", 0.0) for r in reach if r), default=0.0)
        why = f"no configuration serves {rate:g} req/s within {max_gpus} GPUs (at most about {most:,.3g} req/s there, at any latency)"
    elif sla_ok:  # each bound is reachable on its own: not together, or not within max_gpus
        why = f"no configuration meets {sla_text(sla)} at {rate:g} req/s within {max_gpus} GPUs ({best}, each on its own)"
    else:
        why = f"SLA {sla_text(sla)} out of reach: {best}"
    return {"gpu": hw.id, "feasible": False, "reason": why, "min_gpus": t.min_gpus}


def prices_by_gpu(prices: Mapping[str, float] | None) -> dict[str, float]:
    out = {}
    for k, v in (prices or {}).items():
        if v is None or not float(v) >= 0:
            raise SimfrontError(f"price for {k!r} must be a non-negative USD per GPU-hour, got {v!r}")
        out[get_hardware(k).id] = float(v)
    return out


def plan(model: str, rate: float, isl: int = 1024, osl: int = 1024, ttft_ms: float | None = None, tpot_ms: float | None = None,
         min_tok_s_user: float | None = None, hardware: Sequence[str] | str | None = None, prices: Mapping[str, float] | None = None,
         engine: str | None = None, precision: Sequence[str] | str | None = None, max_gpus: int | None = None,
         progress: Callable[[str], Any] | None = None, kv_dtype: Sequence[str] | str | None = None, prefix_hit: float = 0.0,
         modes: Iterable[str] = ("agg", "disagg"), engine_version: str | None = None, spec: str | None = None,
         spec_k: int | None = None, acceptance: float | None = None, routing_alpha: float | None = DEFAULT_ROUTING_ALPHA,
         layout: Sequence[str] | str | None = None, max_pp: int | None = None, two_batch_overlap: bool = False) -> dict:
    """Fewest GPUs of each type serving ``rate`` requests/s of ISL/OSL within the SLA, cheapest first.

    Returns ``{model, workload, sla, max_gpus, engine, rows, search_time_s}``. Feasible rows carry
    the configuration (``point``: api.predict's frontier-point fields for the whole deployment),
    ``num_gpus``, ``usd_per_hour``, ``monthly_usd``, ``headroom`` and ``search_gpus`` (the
    smallest GPU set whose search holds the configuration); infeasible rows ``reason``.
    ``engine`` selects its serving profile and keeps only layouts that engine can launch; ``engine_version`` the
    engine release whose scheduler family is priced (default the newest, simfront/engines/scheduler.yaml). ``spec``:
    the speculative decoding to consider, as predict's ``--spec`` (comma list of none, mtp, eagle, ngram, each at
    ``spec_k`` drafts or at 1-4; default none + the model's own MTP). ``layout``: the layout classes to consider, as
    predict's ``--layout`` (tp, tp+ep, dpa+ep; default every class), and ``max_pp`` the most pipeline stages per worker.
    """
    import time

    t0 = time.perf_counter()
    check_decodes(osl)
    if rate is None or not rate > 0:
        raise SimfrontError(f"--rate {rate} must be a positive request rate (requests/s)")
    for name, v in (("ttft", ttft_ms), ("tpot", tpot_ms), ("min-tok-s-user", min_tok_s_user)):
        if v is not None and not v > 0:
            raise SimfrontError(f"--{name} {v} must be positive")
    if not 0.0 <= prefix_hit < 1.0:
        raise SimfrontError(f"--prefix-hit {prefix_hit} must be in [0, 1)")
    max_gpus = DEFAULT_MAX_GPUS if max_gpus is None else int(max_gpus)
    if max_gpus < 1:
        raise SimfrontError(f"--max-gpus {max_gpus} must be at least 1")
    modes = tuple(modes)
    if not modes or set(modes) - {"agg", "disagg"}:
        raise SimfrontError(f"modes {modes!r}: valid values are agg, disagg")
    m = get_model(model)
    check_request_lengths(isl, osl, m)  # whole tokens within the model's context window (as predict checks them)
    hws = list({h.id: h for h in (get_hardware(x) for x in (as_list(hardware) or DEFAULT_HARDWARE))}.values())
    price_of = prices_by_gpu(prices)
    unpriced = sorted(set(price_of) - {h.id for h in hws})  # prices given for GPU types the plan does not cover
    eng = _engine_name(engine)
    # one token budget (the engines' default) keeps the sweep over every GPU type within seconds;
    # `predict` explores the budget as a knob
    check_spec(spec, spec_k, acceptance)
    specs = spec_choices(spec, spec_k, acceptance, m) if spec is not None else None
    classes = parse_layout_classes(layout)
    check_classes_for(m.arch, m.id, classes)
    count("--max-pp", max_pp, lo=1)  # as predict checks it
    space = SearchSpace(precisions=as_list(precision) or None, kv_dtypes=as_list(kv_dtype) or None, specs=specs, modes=modes,
                        engine=eng, engine_version=engine_version if eng else None, chunk_tokens=(int(DEFAULT_CHUNK_TOKENS),),
                        layouts=classes, max_pp=max_pp)
    for p in space.precisions or ():
        apply_precision(m, p)  # unknown formats fail here with a one-line error
    for k in space.kv_dtypes or ():
        apply_precision(m, None, k)
    check_two_batch_overlap(eng, two_batch_overlap)
    wl = Workload(isl=isl, osl=osl, prefix_hit=prefix_hit, chunk_tokens=DEFAULT_CHUNK_TOKENS, routing_alpha=routing_alpha,
                  two_batch_overlap=bool(two_batch_overlap),
                  **engine_workload(eng, space.engine_version))  # the release priced
    sla = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "min_tok_s_user": min_tok_s_user}
    rows = []
    for hw in hws:  # one set of worker tables per GPU type
        price = price_of.get(hw.id, hw.price_usd_per_hour)
        if (why := engine_gpu_refusal(eng, hw)) is not None:  # the engine is not built for this GPU's vendor
            rows.append({"gpu": hw.id, "feasible": False, "reason": why, "min_gpus": None, "usd_per_gpu_hour": price})
            if progress is not None:
                progress(f"{hw.id}: not feasible: {why}")
            continue
        t = _tables(m, hw, wl, space, max_gpus)
        c, reach = _choose(m, t, wl, space, rate, sla, max_gpus)
        if c is not None:
            row = _finish_row(m, hw, c, rate, osl, price)
            msg = (f"{hw.id}: {row['num_gpus']} GPUs, {row['layout']} ({row['mode']}, {row['precision']}), "
                   f"${row['usd_per_hour']:,.2f}/h, headroom {row['headroom']:.2f}")
        else:
            row = _infeasible(m, t, reach, sla, rate, max_gpus, isl, osl)
            row["usd_per_gpu_hour"] = price
            msg = f"{hw.id}: not feasible: {row['reason']}"
        rows.append(row)
        if progress is not None:
            progress(msg)
    ok = sorted((r for r in rows if r["feasible"]), key=lambda r: (r["usd_per_hour"], r["gpu"]))
    off = [r for r in ok if r["outside_calibration"]]
    note = outside_note(f"the deployments chosen on {', '.join(r['gpu'] for r in off)}", [r["outside_calibration"] for r in off])
    notes = [note] if note else []
    if eng is None and (note := startable_note([r["point"] for r in ok], "chosen deployment")):
        notes.append(note)
    if note := release_note(eng, space.engine_version):
        notes.append(note)
    if note := borrowed_note({r["spec"] for r in ok}, m.id):  # acceptance lengths of another model's drafter
        notes.append(note)
    if note := window_note(m, m.native.kv, isl + osl):  # the KV of sliding-window layers, kept to the window
        notes.append(note)
    for fam in sorted({h.family for h in hws}):  # chosen deployments wider than any calibration run of their family
        fam_rows = [r["point"] for r in ok if get_hardware(r["gpu"]).family == fam]
        if note := wide_ep_note(fam_rows, calibrated_layouts(fam), routing_alpha, f"chosen deployments on {fam} GPUs",
                                two_batch_overlap=two_batch_overlap):
            notes.append(note)
    if two_batch_overlap and ok and (note := overlap_unused_note(m, [r["point"] for r in ok], "chosen deployment")):
        notes.append(note)
    if unpriced:
        notes.append(f"--price {', '.join(unpriced)}: not among the GPU types planned ({', '.join(h.id for h in hws)}), "
                     f"so not used")
    searched = held_knobs(routing_alpha, precision=space.precisions, kv_dtype=space.kv_dtypes, spec=spec, spec_k=spec_k,
                          acceptance=acceptance, modes=list(modes),
                          layout=None if classes is None else list(classes), max_pp=max_pp,
                          two_batch_overlap=two_batch_overlap)  # the knobs the plan was restricted to
    return {"model": m.id, "workload": {"isl": isl, "osl": osl, "rate": rate, "prefix_hit": prefix_hit}, "sla": sla,
            "search": searched, "max_gpus": max_gpus, "engine": eng, "engine_version": space.engine_version, "rows": ok + [r for r in rows if not r["feasible"]],
            "search_time_s": time.perf_counter() - t0, "notes": notes}


# ---------------------------------------------------------------------------------------------
# Launch commands for a frontier point or plan row


def _spec_of(label: str | None) -> tuple[str | None, int]:
    """('mtp'|'eagle3'|'ngram'|None, k) from a search spec label such as ``mtp-k1@0.8`` (launch spellings)."""
    method, k, _ = parse_spec_label(label)
    return ({"eagle": "eagle3"}.get(method, method) if method else None), k


def _weights(label: str) -> str:
    """Weight format of a precision label (``fp8_block+kvfp8`` -> ``fp8_block``)."""
    w = weights_of(label)
    return "bf16" if w == "fp16" else w  # engines serve FP16 checkpoints as they are (dtype auto)


def deployment_for(point: Mapping[str, Any], model: str, gpu: str, isl: int, osl: int,
                   random_range_ratio: float | None = None, prompts_per_client: float | None = None,
                   two_batch_overlap: bool = False) -> Deployment:
    """The :class:`simfront.launch.Deployment` that runs exactly ``point``'s configuration (measured by a benchmark
    of lengths uniform in [r ISL, ISL] when ``random_range_ratio`` r is given, else of fixed lengths, sending
    ``prompts_per_client`` requests per client when given)."""
    need = ("mode", "tp", "pp", "ep", "attention_dp", "batch", "precision", "kv_dtype")
    miss = [k for k in need if point.get(k) is None]
    if miss:
        raise SimfrontError(f"point lacks {', '.join(miss)}: pass a frontier point or a plan row's 'point'")
    m = get_model(model)
    try:
        hw = get_hardware(gpu)
    except SimfrontError:
        hw = parse_gpus(gpu).hardware  # "8xH200" names the GPU too
    method, k = _spec_of(point.get("spec"))
    q = 1 + k  # tokens per request per decode step
    tp, pp, ep, dp, b = (int(point[x]) for x in ("tp", "pp", "ep", "attention_dp", "batch"))
    kv = "bf16" if point["kv_dtype"] in ("bf16", "fp16") else point["kv_dtype"]
    # per-rank token budget: the point's prefill chunk (the search's chunk_tokens knob), at least a full decode batch
    tokens = max(int(point.get("chunk_tokens") or 0) or int(DEFAULT_CHUNK_TOKENS), b * q)
    common = dict(model_id=m.hf_id or m.id, mode=point["mode"], kv_dtype=kv, weight_precision=_weights(point["precision"]),
                  spec_method=method, spec_k=k, gpus_per_node=hw.gpus_per_node, isl=int(isl), osl=int(osl), gpu=hw.id,
                  random_range_ratio=random_range_ratio, prompts_per_client=prompts_per_client,
                  concurrency=max(1, int(point.get("concurrency") or b * dp * pp)), two_batch_overlap=bool(two_batch_overlap))
    if point["mode"] == "disagg":
        pdp, pb = int(point["prefill_attention_dp"]), int(point["prefill_batch"])
        prefill = WorkerLayout(tp=int(point["prefill_tp"]), pp=1, ep=int(point["prefill_ep"]), attention_dp=pdp,
                               max_batch=pb * pdp, workers=int(point["prefill_workers"]),
                               max_num_tokens=max(pb * int(isl), DEFAULT_CHUNK_TOKENS) * pdp)  # whole prompts per rank
        decode = WorkerLayout(tp=tp, pp=pp, ep=ep, attention_dp=dp, max_batch=b * dp * pp,
                              workers=int(point["decode_workers"]), max_num_tokens=b * q * dp)
        return Deployment(prefill=prefill, decode=decode, **common)
    return Deployment(tp=tp, pp=pp, ep=ep, attention_dp=dp, max_batch=b * dp * pp, max_num_tokens=tokens * dp,
                      replicas=int(point.get("replicas") or 1), **common)


def launch_for(point: Mapping[str, Any], model: str, gpu: str, engine: str = "vllm", isl: int = 1024, osl: int = 1024,
               engine_version: str | None = None, random_range_ratio: float | None = None,
               prompts_per_client: float | None = None, prefix_hit: float = 0.0, priced_engine: str | None = None,
               two_batch_overlap: bool = False) -> dict:
    """Launch lines, files, notes, client benchmark and sidecar for a frontier point or plan row point
    (flags as spelled by ``engine_version``; the newest release in the flag tables when None; the benchmark's
    lengths uniform in [r ISL, ISL] with ``random_range_ratio`` r, and ``prompts_per_client`` requests per client, as
    the point was predicted)."""
    check_two_batch_overlap(engine, two_batch_overlap)
    dep = deployment_for(point, model, gpu, isl, osl, random_range_ratio, prompts_per_client, two_batch_overlap)
    lp: LaunchPlan = launch_commands(dep, engine, engine_version)
    notes = list(lp.notes)
    if priced_engine is not None and priced_engine != lp.engine:  # priced with one engine's profile, launched on another
        priced = "the all-engine average profile (no --engine)" if priced_engine == "default" else \
            f"the {priced_engine} profile (--engine {priced_engine})"
        notes.append(f"this point was priced with {priced} and is launched on {lp.engine}: predict with --engine "
                     f"{lp.engine} for what {lp.engine} is expected to measure")
    if prefix_hit > 0:  # the client's random prompts share no prefix: the measured run has no prefix-cache hits
        notes.append(f"the benchmark's random prompts share no prefix, so its run has no prefix-cache hits while this point "
                     f"was priced with {prefix_hit:.0%} of each prompt cached; validate prices the run as it ran (no hits)")
    tool = lp.engine if lp.engine in ("vllm", "sglang") else "vllm"  # TRT-LLM serves an OpenAI API vLLM's client measures
    return {"engine": lp.engine, "engine_version": engine_version, "commands": lp.commands, "roles": lp.roles, "files": lp.files,
            "notes": notes, "benchmark": benchmark_command(dep, tool, engine=lp.engine, engine_version=engine_version),
            "sidecar": sidecar_yaml(dep, lp.engine, engine_version), "num_gpus": dep.total_gpus}


__all__ = ["plan", "launch_for", "deployment_for", "clear_cache", "DEFAULT_HARDWARE", "HOURS_PER_MONTH"]

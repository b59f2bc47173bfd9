"""The Python API behind the CLI, for notebooks and scripts.

Functions take plain names (``"kimi-k3"``, ``"8xB300"``) or objects and return plain dicts /
lists ready for JSON, so the CLI stays a thin formatting layer.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from . import hardware as hwmod
from . import models as modmod
from .errors import SimfrontError
from .format import gib
from .hardware import GpuSet, parse_gpus
from .layout import Layout
from .models import apply_precision, get_model
from .sizing import memory_verdict


def json_default(o: Any):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        v = float(o)
        return v if math.isfinite(v) else None
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "to_json"):
        return o.to_json()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _check_lengths(**lengths: int | None) -> None:
    for name, v in lengths.items():
        if v is not None and v < (1 if name == "osl" else 0):
            raise SimfrontError(f"--{name} {v} is invalid; lengths must be positive token counts")


def list_models() -> list[dict]:
    out = []
    for m in modmod.all_models():
        pc = m.params
        out.append({
            "name": m.id,
            "hf_id": m.hf_id,
            "total_params": pc.total,
            "active_params": pc.active,
            "published_total_params": m.published_total,
            "published_active_params": m.published_active,
            "architecture": m.arch.describe(),
            "native_precision": m.native.label,
            "layers": m.arch.n_layers,
            "kv_bytes_per_token_bf16": __import__("simfront.memory", fromlist=["kv_bytes_per_token"]).kv_bytes_per_token(m, "bf16"),
        })
    return out


def list_hardware() -> list[dict]:
    out = []
    for h in hwmod.catalog().values():
        pf = h.peak_flops_per_s
        out.append({
            "id": h.id, "name": h.name, "vendor": h.vendor, "family": h.family, "sm_count": h.sm_count,
            "bf16_tflops": pf.get("bf16", 0) / 1e12, "fp8_tflops": (pf.get("fp8") or 0) / 1e12 or None,
            "fp4_tflops": (pf.get("fp4") or 0) / 1e12 or None, "fp4_formats": h.fp4_formats,
            "hbm_gib": h.hbm_bytes / 2**30, "hbm_bytes": h.hbm_bytes, "hbm_tb_s": h.hbm_bandwidth_bytes_per_s / 1e12,
            "scaleup_gb_s": h.scaleup.bandwidth_bytes_per_s / 1e9, "scaleup_domain": h.scaleup.domain_gpus,
            "scaleup_link": h.scaleup.link, "scaleout_gb_s": h.scaleout_bandwidth_bytes_per_s / 1e9,
            "power_w": h.power_w, "price_usd_per_hour": h.price_usd_per_hour,
        })
    return out


def memory(model: str, gpus: str | GpuSet, precision: str = "native", kv_dtype: str = "native", isl: int = 1024, osl: int = 1024,
           tp: int | None = None, pp: int = 1, ep: int = 1, attention_dp: int = 1) -> dict:
    """The memory verdict as a JSON-ready dict (``fits``, ``weights_bytes_per_gpu``, ``min_gpus`` ...)."""
    _check_lengths(isl=isl, osl=osl)
    m = get_model(model)
    g = parse_gpus(gpus) if isinstance(gpus, str) else gpus
    prec = apply_precision(m, precision if precision != "native" else (m.name_precision or "native"), kv_dtype)
    layout = None
    if tp is not None:
        worker = tp * pp * attention_dp
        if worker < 1 or g.count % worker:
            raise SimfrontError(f"impossible parallelism: tp x pp x attention-dp = {worker} does not divide {g.count} GPUs")
        layout = Layout(tp=tp, pp=pp, dp=attention_dp, ep=ep, replicas=g.count // worker)
    v = memory_verdict(m, prec, g, isl, osl, layout=layout)
    return v.to_json()


def print_memory(v: dict) -> None:
    lay = v["layout"]
    print(f"{v['model']} on {v['gpus']}  precision {v['precision']}, KV {v['kv_dtype']}, context {v['context_tokens']} tokens")
    if lay:
        print(f"  layout               {lay['label']}" + (f" ({lay['idle_gpus']} GPUs idle)" if lay.get("idle_gpus") else ""))
    print(f"  weights (one copy)   {v['weights_bytes'] / 1e9:,.1f} GB")
    print(f"  weights per GPU      {gib(v['weights_bytes_per_gpu'])}")
    print(f"  runtime reserve/GPU  {gib(v['reserve_bytes_per_gpu'])}  (CUDA context and graphs 3.5 GiB, comm buffers, activations, logits)")
    print(f"  KV budget per GPU    {gib(v['kv_budget_bytes_per_gpu'])}")
    print(f"  KV bytes per token   {v['kv_bytes_per_token']:,.0f} B (model-wide, one copy); {v['kv_bytes_per_token_per_gpu']:,.0f} B per GPU")
    if v["kv_state_bytes_per_seq"]:
        print(f"  recurrent state/seq  {v['kv_state_bytes_per_seq'] / 1e6:,.0f} MB (linear-attention layers, one copy)")
    cap = v["kv_capacity_tokens"]
    print(f"  KV capacity          {cap:,} tokens per attention rank" if cap is not None else "  KV capacity          unbounded")
    print(f"  max concurrency      {v['max_concurrency']:,} sequences of {v['context_tokens']} tokens")
    print(f"  fits                 {'yes' if v['fits'] else 'NO'}")
    if v.get("reason"):
        print(f"  reason               {v['reason']}")
    print(f"  fewest GPUs          {v['min_gpus'] if v['min_gpus'] else 'none up to 512'}" + (f" x {v['gpus'].split('x', 1)[1]}" if v["min_gpus"] else ""))
    if v.get("alternatives"):
        print(f"  also fits on         {', '.join(v['alternatives'])}")


def use_calibration(path: str) -> None:
    """Install a calibration profile (``simfront calibrate`` output) for this process."""
    import yaml

    from . import efficiency

    p = Path(path)
    if not p.exists():
        raise SimfrontError(f"calibration profile not found: {path}")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise SimfrontError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict) or "efficiency" not in data:
        raise SimfrontError(f"{path}: not a simfront calibration profile (missing 'efficiency' section)")
    efficiency.set_override(data["efficiency"])


# ---------------------------------------------------------------------------------------------
# Frontier prediction

FRONTIER_FIELDS = ["mode", "tp", "pp", "ep", "attention_dp", "replicas", "batch", "concurrency", "precision", "kv_dtype", "spec",
                   "ttft_ms", "tpot_ms", "tok_s_user", "tok_s_gpu", "usd_per_mtok", "requests_s", "gpus_used",
                   "prefill_tp", "prefill_ep", "prefill_attention_dp", "prefill_workers", "prefill_batch", "decode_workers"]
INT_FIELDS = {"tp", "pp", "ep", "attention_dp", "replicas", "batch", "concurrency", "gpus_used", "prefill_tp", "prefill_ep",
              "prefill_attention_dp", "prefill_workers", "prefill_batch", "decode_workers"}


def _point(points: dict, i: int) -> dict:
    d = {}
    for k in FRONTIER_FIELDS:
        v = points[k][i]
        if k in INT_FIELDS:
            d[k] = int(round(float(v)))
        elif isinstance(v, (str, np.str_)) or (hasattr(v, "dtype") and v.dtype == object):
            d[k] = str(v)
        elif isinstance(v, str):
            d[k] = v
        else:
            fv = float(v)
            d[k] = round(fv, 4) if math.isfinite(fv) else None
    d["layout"] = layout_label(d)
    return d


def layout_label(p: dict) -> str:
    def one(tp, ep, dp, pp=1):
        s = f"TP{tp}"
        if dp > 1:
            s += f" DPA{dp}"
        if ep > 1:
            s += f" EP{ep}"
        if pp > 1:
            s += f" PP{pp}"
        return s
    if p["mode"] == "disagg":
        return f"{p['prefill_workers']}P[{one(p['prefill_tp'], p['prefill_ep'], p['prefill_attention_dp'])}] + {p['decode_workers']}D[{one(p['tp'], p['ep'], p['attention_dp'], p['pp'])}]"
    s = one(p["tp"], p["ep"], p["attention_dp"], p["pp"])
    return s + (f" x{p['replicas']}" if p["replicas"] > 1 else "")


def predict(model: str, gpus: str | GpuSet, isl: int = 1024, osl: int = 1024, concurrency: int | None = None, rate: float | None = None,
            ttft_ms: float | None = None, tpot_ms: float | None = None, min_tok_s_user: float | None = None,
            precision: list[str] | str | None = None, kv_dtype: list[str] | str | None = None, spec: str | None = None,
            spec_k: int | None = None, acceptance: float | None = None, modes: list[str] | None = None,
            price: float | None = None, prefix_hit: float = 0.0, engine: str | None = None, chunk_tokens: int | None = None) -> dict:
    """The predicted frontier of every configuration of ``model`` on ``gpus`` (JSON-ready dict)."""
    import time

    from .pareto import knee_index, pareto_mask, sla_mask
    from .search import SearchSpace, make_spec, search, spec_options
    from .serving import DEFAULT_CHUNK_TOKENS, Workload

    _check_lengths(isl=isl, osl=osl)
    if not 0.0 <= prefix_hit < 1.0:
        raise SimfrontError(f"--prefix-hit {prefix_hit} must be in [0, 1)")
    if concurrency is not None and concurrency < 1:
        raise SimfrontError(f"--concurrency {concurrency} must be at least 1")
    if rate is not None and rate <= 0:
        raise SimfrontError(f"--rate {rate} must be positive")
    if price is not None and price < 0:
        raise SimfrontError(f"--price {price} must be non-negative")
    t0 = time.perf_counter()
    m = get_model(model)
    g = parse_gpus(gpus) if isinstance(gpus, str) else gpus
    precs = [precision] if isinstance(precision, str) else precision
    kvs = [kv_dtype] if isinstance(kv_dtype, str) else kv_dtype
    mem_prec = apply_precision(m, (precs[0] if precs else None) if precs and precs[0] != "native" else (m.name_precision or "native"),
                               kvs[0] if kvs else "native")
    verdict = memory_verdict(m, mem_prec, g, isl, osl).to_json()
    out: dict[str, Any] = {
        "model": m.id, "gpus": g.label, "workload": {"isl": isl, "osl": osl, "concurrency": concurrency, "rate": rate, "prefix_hit": prefix_hit},
        "price_usd_per_gpu_hour": g.hardware.price_usd_per_hour if price is None else price,
        "fits": False, "memory": verdict, "n_configs_evaluated": 0, "n_feasible": 0, "frontier": [], "knee": None,
        "best_under_sla": None, "sla": {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "min_tok_s_user": min_tok_s_user}, "notes": [],
    }
    specs = None
    if spec is not None:
        specs = [make_spec(s.strip(), spec_k, acceptance, m) for s in spec.split(",")]
    space = SearchSpace(precisions=precs if precs and precs != ["native"] else None, kv_dtypes=kvs, specs=specs,
                        modes=tuple(modes) if modes else ("agg", "disagg"), engine=engine)
    if precs == ["native"]:
        space.precisions = ["native"]
    wl = Workload(isl=isl, osl=osl, prefix_hit=prefix_hit, chunk_tokens=chunk_tokens or DEFAULT_CHUNK_TOKENS)
    res = search(m, g, wl, space, price)
    out["n_configs_evaluated"] = res.n_evaluated
    out["n_feasible"] = res.n_feasible
    if res.n_feasible == 0:
        out["notes"].append("no configuration fits in memory; see 'memory' for the verdict and alternatives")
        out["search_time_s"] = time.perf_counter() - t0
        return out
    out["fits"] = True
    pts = res.points
    keep = np.ones(pts["tok_s_gpu"].size, dtype=bool)
    if concurrency is not None:
        # client concurrency: configurations whose in-flight requests match it (within a batch step)
        keep &= (pts["concurrency"] >= concurrency / 1.25) & (pts["concurrency"] <= concurrency * 1.25)
        out["notes"].append(f"--concurrency {concurrency}: configurations with {concurrency / 1.25:.0f}-{concurrency * 1.25:.0f} requests in flight")
    if rate is not None:
        keep &= pts["requests_s"] >= rate
        out["notes"].append(f"--rate {rate}: configurations whose capacity is at least {rate} req/s; latency is reported at the configuration's full batch (an upper bound at lower load)")
    if not keep.any():
        out["notes"].append("no configuration meets the load constraint")
        out["search_time_s"] = time.perf_counter() - t0
        return out
    sel = np.nonzero(keep)[0]
    front = sel[pareto_mask(pts["tok_s_user"][sel], pts["tok_s_gpu"][sel])]
    front = front[np.argsort(pts["tok_s_user"][front])]
    out["frontier"] = [_point(pts, int(i)) for i in front]
    k = knee_index(pts["tok_s_user"][front], pts["tok_s_gpu"][front])
    out["knee"] = out["frontier"][k] if k >= 0 else None
    ok = sla_mask(pts, ttft_ms, tpot_ms, min_tok_s_user) & keep
    if ttft_ms is not None or tpot_ms is not None or min_tok_s_user is not None:
        if ok.any():
            j = int(np.nonzero(ok)[0][np.argmax(pts["tok_s_gpu"][ok])])
            out["best_under_sla"] = _point(pts, j)
        else:
            out["notes"].append("no configuration meets the SLA")
    out["search_time_s"] = time.perf_counter() - t0
    out["_points"] = pts  # all feasible configurations (not serialised; used by --html/--csv)
    return out


def print_predict(res: dict, show_all: bool = False) -> None:
    from .format import print_table
    from .pareto import thin_frontier

    wl = res["workload"]
    print(f"{res['model']} on {res['gpus']}  ISL {wl['isl']} / OSL {wl['osl']}" + (f", prefix hit {wl['prefix_hit']:.0%}" if wl["prefix_hit"] else "")
          + f"  (${res['price_usd_per_gpu_hour']:.2f}/GPU-h)")
    if not res["fits"]:
        print_memory(res["memory"])
        for n in res["notes"]:
            print(f"note: {n}")
        return
    front = res["frontier"]
    print(f"{res['n_configs_evaluated']:,} configurations evaluated, {res['n_feasible']:,} feasible, {len(front)} on the frontier "
          f"({res['search_time_s']:.2f} s)")
    idx = range(len(front)) if show_all else thin_frontier([p["tok_s_user"] for p in front], 12)
    rows = []
    knee = res.get("knee")
    for i in idx:
        p = dict(front[i])
        p["layout"] = ("* " if knee and p == knee else "  ") + p["layout"]
        rows.append(p)
    from .cli import FRONTIER_COLUMNS
    print_table(rows, FRONTIER_COLUMNS)
    print("lowest latency first; * = knee of the frontier; tok/s/GPU counts output tokens over all GPUs of the set")
    if knee:
        print(f"knee: {knee['layout']} {knee['precision']} batch {knee['batch']}: {knee['tok_s_user']:.1f} tok/s/user, {knee['tok_s_gpu']:,.0f} tok/s/GPU, ${knee['usd_per_mtok']:.3f}/Mtok")
    b = res.get("best_under_sla")
    sla = {k: v for k, v in res["sla"].items() if v is not None}
    if sla:
        if b:
            print(f"best under SLA {sla}: {b['layout']} {b['mode']} {b['precision']} batch {b['batch']}: TTFT {b['ttft_ms']:.0f} ms, TPOT {b['tpot_ms']:.1f} ms, "
                  f"{b['tok_s_gpu']:,.0f} tok/s/GPU, ${b['usd_per_mtok']:.3f}/Mtok")
        else:
            print(f"no configuration meets the SLA {sla}")
    for n in res["notes"]:
        print(f"note: {n}")


def write_csv(rows: list[dict], path: str) -> None:
    import csv

    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_frontier_html(res: dict, points: dict | None, path: str) -> None:
    from .plot import frontier_html

    allp = []
    if points:
        n = points["tok_s_gpu"].size
        # the plot module samples dominated points itself; hand it plain dicts
        step = max(1, n // 20000)
        for i in range(0, n, step):
            allp.append(_point(points, i))
    title = f"{res['model']} on {res['gpus']} - ISL {res['workload']['isl']} / OSL {res['workload']['osl']}"
    frontier_html(allp, res["frontier"], path=path, title=title)


# ---------------------------------------------------------------------------------------------
# Per-op roofline of one step


def explain(model: str, gpus: str | GpuSet, tp: int = 1, pp: int = 1, ep: int = 1, attention_dp: int = 1, batch: int = 1,
            ctx: int = 1024, phase: str = "decode", precision: str = "native", kv_dtype: str = "native", spec_k: int = 0) -> dict:
    """Per-op table of one forward step on one GPU (time, bound, FLOPs, bytes, intensity) and the total."""
    from .layout import check_layout
    from .step import StepBatch, forward_step

    if phase not in ("decode", "prefill"):
        raise SimfrontError(f"--phase {phase!r}: valid values are decode, prefill")
    if batch < 1:
        raise SimfrontError(f"--batch {batch} must be at least 1")
    _check_lengths(ctx=ctx)
    m = get_model(model)
    g = parse_gpus(gpus) if isinstance(gpus, str) else gpus
    worker = tp * pp * attention_dp
    if worker < 1 or g.count % worker:
        raise SimfrontError(f"impossible parallelism: tp x pp x attention-dp = {worker} does not divide {g.count} GPUs")
    lay = Layout(tp, pp, attention_dp, ep, g.count // worker)
    check_layout(m.arch, lay, g.count)
    prec = apply_precision(m, precision if precision != "native" else (m.name_precision or "native"), kv_dtype)
    if phase == "decode":
        sb = StepBatch(decode_reqs=batch, decode_ctx=ctx, q_tokens=1 + spec_k)
        tokens = batch * (1 + spec_k)
    else:
        sb = StepBatch(prefill_tokens=batch * ctx, prefill_seqs=batch)
        tokens = batch * ctx
    st = forward_step(m, prec, g.hardware, tp, pp, attention_dp, ep, sb)
    rows = []
    for r in st.ops:
        cnt = float(np.asarray(r.count))
        if cnt == 0:
            continue
        c = r.cost
        rows.append({
            "op": r.name, "layers": r.group, "count": cnt, "time_s": float(c.time_s) * cnt, "time_per_call_s": float(c.time_s),
            "bound": str(c.bound), "flops": float(c.flops) * cnt, "mem_bytes": float(c.mem_bytes) * cnt,
            "net_bytes": float(c.net_bytes) * cnt, "arithmetic_intensity": (float(c.arithmetic_intensity) if float(c.mem_bytes) > 0 else None),
        })
    total_s = float(st.time_s)
    flops = float(st.flops)
    attn_names = ("attn.decode", "attn.prefill", "mla.attn_decode", "mla.attn_prefill", "dsa.indexer_decode", "dsa.indexer_prefill",
                  "linear_attn.decode", "linear_attn.prefill")
    model_flops = float(st.model_flops(tp, attention_dp))
    attn_flops = float(sum(float(np.asarray(r.count)) * float(r.cost.flops) * (1 if r.replicated else tp) for r in st.ops
                           if r.name in attn_names)) * attention_dp
    elementwise = ("norms+residual", "rope+kv_write", "mlp.act", "embedding", "final_norm", "sampling")
    elem_flops = float(sum(float(np.asarray(r.count)) * float(r.cost.flops) * (1 if r.replicated else tp) for r in st.ops
                           if r.name in elementwise)) * attention_dp
    pc = m.params
    sampled = tokens if phase == "decode" else batch
    n_tok = tokens * attention_dp
    # reference: 2 FLOPs per active weight per token (embedding lookup excluded; LM head only for
    # the tokens that are sampled), over every attention-DP rank
    ref = 2.0 * (pc.active - pc.embedding - pc.lm_head) * n_tok + 2.0 * pc.lm_head * sampled * attention_dp
    weight_flops = model_flops - attn_flops - elem_flops
    return {
        "model": m.id, "gpus": g.label, "layout": lay.label(), "phase": phase, "batch": batch, "ctx": ctx,
        "precision": prec.label, "kv_dtype": prec.kv, "tokens": tokens, "ops": rows, "step_time_s": total_s,
        "step_flops_per_gpu": flops, "model_flops": model_flops, "attention_flops": attn_flops, "weight_flops": weight_flops,
        "weight_flops_reference": ref, "weight_flops_ratio": weight_flops / ref if ref else None,
        "note": "times and FLOPs are per GPU of one attention-DP rank, all layers (a PP worker spreads them over its stages); "
                f"model_flops counts the useful work of the whole worker (replicated ops once); reference = 2 x active params x tokens",
    }


def print_explain(res: dict) -> None:
    from .format import print_table

    print(f"{res['model']} on {res['gpus']}  {res['layout']}  {res['phase']}  batch {res['batch']}  ctx {res['ctx']}  "
          f"{res['precision']} (KV {res['kv_dtype']})")
    rows = sorted(res["ops"], key=lambda r: -r["time_s"])
    tot = res["step_time_s"]
    for r in rows:
        r["share"] = 100 * r["time_s"] / tot if tot else 0
    print_table(rows, [("op", "op"), ("layers", "layers"), ("count", "n", "{:.0f}"), ("time_s", "time us", "{:,.1f}", 1e6),
                       ("share", "%", "{:.1f}"), ("bound", "bound"), ("flops", "GFLOP", "{:,.2f}", 1e-9),
                       ("mem_bytes", "HBM MB", "{:,.1f}", 1e-6), ("net_bytes", "net MB", "{:,.2f}", 1e-6),
                       ("arithmetic_intensity", "FLOP/B", "{:,.1f}")])
    print(f"step time {tot * 1e3:,.3f} ms; {res['step_flops_per_gpu'] / 1e9:,.1f} GFLOP per GPU; {res['tokens']} tokens per rank")
    print(f"worker FLOPs {res['model_flops'] / 1e12:,.2f} TFLOP = weights {res['weight_flops'] / 1e12:,.2f} (2 x active params x tokens: "
          f"{res['weight_flops_reference'] / 1e12:,.2f}, ratio {res['weight_flops_ratio']:.3f}) + attention {res['attention_flops'] / 1e12:,.2f} + elementwise")
    print(f"note: {res['note']}")

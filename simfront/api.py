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
from . import inputs
from . import models as modmod
from .errors import SimfrontError, check_lengths
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
    inputs.check_memory(model, gpus, isl=isl, osl=osl, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp)
    check_lengths(isl=isl, osl=osl)
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
    inputs.check_calibration_profile(path)
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
                   "chunk_tokens", "prefill_tp", "prefill_ep", "prefill_attention_dp", "prefill_workers", "prefill_batch", "decode_workers"]
INT_FIELDS = {"tp", "pp", "ep", "attention_dp", "replicas", "batch", "concurrency", "gpus_used", "chunk_tokens", "prefill_tp", "prefill_ep",
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
    inputs.check_predict(model, gpus, isl=isl, osl=osl, concurrency=concurrency, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, min_tok_s_user=min_tok_s_user, spec=spec, spec_k=spec_k, acceptance=acceptance, modes=modes, price=price, prefix_hit=prefix_hit, engine=engine, chunk_tokens=chunk_tokens)
    import time

    from .pareto import knee_index, pareto_mask, sla_mask
    from .search import SearchSpace, make_spec, search
    from .serving import DEFAULT_CHUNK_TOKENS, Workload

    check_lengths(isl=isl, osl=osl)
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
    from .uncertainty import add_bands, prediction_bands

    q, widen = prediction_bands(g.hardware.id, m.id)
    out["frontier"] = [add_bands(_point(pts, int(i)), q, widen) for i in front]
    out["uncertainty"] = {"band": "p10-p90 of measured/predicted from leave-one-model-out validation", "widening": widen,
                          "note": "wider (x%.1f on log scale) for GPUs or models outside the calibration data" % widen if widen > 1 else
                          "GPU and model are inside the calibration data"}
    k = knee_index(pts["tok_s_user"][front], pts["tok_s_gpu"][front])
    out["knee"] = out["frontier"][k] if k >= 0 else None
    ok = sla_mask(pts, ttft_ms, tpot_ms, min_tok_s_user) & keep
    if ttft_ms is not None or tpot_ms is not None or min_tok_s_user is not None:
        if ok.any():
            j = int(np.nonzero(ok)[0][np.argmax(pts["tok_s_gpu"][ok])])
            out["best_under_sla"] = add_bands(_point(pts, j), q, widen)
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
    knee = res.get("knee")
    idx = set(range(len(front)) if show_all else thin_frontier([p["tok_s_user"] for p in front], 12))
    idx |= {i for i, p in enumerate(front) if knee and p == knee}  # the knee row is always shown
    idx = sorted(idx, reverse=True)  # lowest latency (most tok/s/user) first, highest throughput last
    rows = []
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
    f = res["frontier"]
    bands = None
    if f and "tok_s_gpu_low" in f[0]:
        bands = {"x": [p["tok_s_user"] for p in f], "y_low": [p["tok_s_gpu_low"] for p in f], "y_high": [p["tok_s_gpu_high"] for p in f]}
    frontier_html(allp, f, path=path, title=title, bands=bands)


# ---------------------------------------------------------------------------------------------
# Per-op roofline of one step


def explain(model: str, gpus: str | GpuSet, tp: int = 1, pp: int = 1, ep: int = 1, attention_dp: int = 1, batch: int = 1,
            ctx: int = 1024, phase: str = "decode", precision: str = "native", kv_dtype: str = "native", spec_k: int = 0) -> dict:
    """Per-op table of one forward step on one GPU (time, bound, FLOPs, bytes, intensity) and the total."""
    inputs.check_explain(model, gpus, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, batch=batch, ctx=ctx, phase=phase, precision=precision, kv_dtype=kv_dtype)
    from .layout import check_layout
    from .step import StepBatch, forward_step

    if phase not in ("decode", "prefill"):
        raise SimfrontError(f"--phase {phase!r}: valid values are decode, prefill")
    if batch < 1:
        raise SimfrontError(f"--batch {batch} must be at least 1")
    check_lengths(ctx=ctx)
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
            "kernel": c.kernel or None,
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
                "model_flops counts the useful work of the whole worker (replicated ops once); reference = 2 x active params x tokens",
    }


def print_explain(res: dict) -> None:
    from .format import print_table

    print(f"{res['model']} on {res['gpus']}  {res['layout']}  {res['phase']}  batch {res['batch']}  ctx {res['ctx']}  "
          f"{res['precision']} (KV {res['kv_dtype']})")
    rows = sorted(res["ops"], key=lambda r: -r["time_s"])
    tot = res["step_time_s"]
    for r in rows:
        r["share"] = 100 * r["time_s"] / tot if tot else 0
        r["op_label"] = r["op"] + (f" [{r['kernel']}]" if r.get("kernel") else "")  # the kernel, where the op has a choice
    print_table(rows, [("op_label", "op"), ("layers", "layers"), ("count", "n", "{:.0f}"), ("time_s", "time us", "{:,.1f}", 1e6),
                       ("share", "%", "{:.1f}"), ("bound", "bound"), ("flops", "GFLOP", "{:,.2f}", 1e-9),
                       ("mem_bytes", "HBM MB", "{:,.1f}", 1e-6), ("net_bytes", "net MB", "{:,.2f}", 1e-6),
                       ("arithmetic_intensity", "FLOP/B", "{:,.1f}")])
    print(f"step time {tot * 1e3:,.3f} ms; {res['step_flops_per_gpu'] / 1e9:,.1f} GFLOP per GPU; {res['tokens']} tokens per rank")
    print(f"worker FLOPs {res['model_flops'] / 1e12:,.2f} TFLOP = weights {res['weight_flops'] / 1e12:,.2f} (2 x active params x tokens: "
          f"{res['weight_flops_reference'] / 1e12:,.2f}, ratio {res['weight_flops_ratio']:.3f}) + attention {res['attention_flops'] / 1e12:,.2f} + elementwise")
    print(f"note: {res['note']}")


# ---------------------------------------------------------------------------------------------
# Validation


def builtin_measurements() -> list[str]:
    from .validation import builtin_files

    return builtin_files()


def validate(paths: list[str], overrides: dict | None = None) -> dict:
    """Measured vs predicted for kernel and serving files (see simfront.validation)."""
    from .validation import validate_files

    return validate_files(paths, overrides)


def validation_flat(res: dict) -> dict:
    from .validation import flat

    return flat(res)


def print_validation(res: dict, rows: bool = False) -> None:
    from .format import print_table

    if "kernels" in res:
        k = res["kernels"]
        print("kernels: measured vs predicted latency")
        print_table([{"op": op, **st} for op, st in k["summary"].items()],
                    ["op", "count", ("mape_pct", "MAPE %", "{:.1f}"), ("median_ape_pct", "median APE %", "{:.1f}")])
        unsupported = [r for r in k["rows"] if r.get("predicted_latency_us") is None]
        if unsupported:
            print(f"{len(unsupported)} rows not predicted, e.g.: {unsupported[0].get('reason')}")
        print()
    if "serving" in res:
        s = res["serving"]["summary"]
        print(f"serving: {s['predicted_rows']:,} of {s['rows']:,} rows predicted ({s['coverage_pct']}%)")
        print_table([{"metric": m, **st} for m, st in s["metrics"].items()],
                    ["metric", "count", ("mape_pct", "MAPE %", "{:.1f}"), ("median_ape_pct", "median APE %", "{:.1f}"),
                     ("p90_ape_pct", "p90 APE %", "{:.1f}"), ("bias_pct", "median bias %", "{:+.1f}")])
        for dim in ("engine", "mode", "gpu", "model"):
            groups = s["by"].get(dim, {})
            if not groups:
                continue
            print(f"\nby {dim}:")
            out = []
            for g, ms in groups.items():
                row = {dim: g}
                for m in ("ttft_ms", "tpot_ms", "output_tok_s_total"):
                    if m in ms:
                        row[f"{m}_n"] = ms[m]["count"]
                        row[m] = ms[m]["mape_pct"]
                out.append(row)
            print_table(out, [dim, ("ttft_ms_n", "n"), ("ttft_ms", "TTFT MAPE %", "{:.1f}"), ("tpot_ms", "TPOT MAPE %", "{:.1f}"),
                              ("output_tok_s_total", "tok/s MAPE %", "{:.1f}")])
        reasons: dict[str, int] = {}
        for r in res["serving"]["rows"]:
            if "reason" in r:
                reasons[r["reason"][:100]] = reasons.get(r["reason"][:100], 0) + 1
        for why, n in sorted(reasons.items(), key=lambda x: -x[1]):
            print(f"not predicted: {n} x {why}")
        missing: dict[str, int] = {}
        for r in res["serving"]["rows"]:
            for f in r.get("missing") or []:
                missing[f] = missing.get(f, 0) + 1
        if missing:
            print("configuration the files did not carry (give it with --gpu/--tp/--ep/... or a <file>.simfront.yaml sidecar): "
                  + ", ".join(f"{k} ({v} rows)" for k, v in sorted(missing.items())))
        if rows:
            print()
            print_table(res["serving"]["rows"], ["source_file", "line", "model", "gpu", "engine", "mode", "concurrency",
                                                 ("ttft_ms", "TTFT", "{:.0f}"), ("predicted_ttft_ms", "pred", "{:.0f}"),
                                                 ("tpot_ms", "TPOT", "{:.2f}"), ("predicted_tpot_ms", "pred", "{:.2f}"), "reason"])
    if res.get("problems"):
        print(f"\n{len(res['problems'])} problems in the input (rows skipped, each named):")
        for p in res["problems"][:20]:
            print(f"  {p}")
        if len(res["problems"]) > 20:
            print(f"  ... and {len(res['problems']) - 20} more (see --json)")


def write_validation_html(res: dict, path: str) -> None:
    from .plot import validation_html

    rows = []
    for r in (res.get("serving") or {}).get("rows", []):
        d = {"model": r.get("model"), "gpu": r.get("gpu"), "engine": r.get("engine"), "mode": r.get("mode")}
        for m, key in (("ttft_ms", "predicted_ttft_ms"), ("tpot_ms", "predicted_tpot_ms"), ("tok_s_per_user", "predicted_tok_s_per_user"),
                       ("output_tok_s_per_gpu", "predicted_tok_s_per_gpu"), ("output_tok_s_total", "predicted_output_tok_s_total")):
            d[f"measured_{m if m != 'output_tok_s_per_gpu' else 'tok_s_per_gpu'}"] = r.get(m)
            d[f"predicted_{m if m != 'output_tok_s_per_gpu' else 'tok_s_per_gpu'}"] = r.get(key)
        rows.append(d)
    validation_html(rows, path=path, title="simfront validation: measured vs predicted")


# ---------------------------------------------------------------------------------------------
# Frontier comparison: does a knob move configurations along the frontier or push it out?

COMPARE_KNOBS = ("precision", "kv_dtype", "spec", "mode", "gpus")
# relative throughput change below which two frontiers count as the same (model noise)
SAME_FRONTIER_TOLERANCE = 0.05


def frontier_compare(model: str, gpus: str, knob: str, values: list[str], isl: int = 1024, osl: int = 1024, **kw) -> dict:
    """Frontiers for each value of one knob, and how each moves relative to the first value."""
    inputs.check_frontier_compare(model, gpus, knob, values)
    from .pareto import interp_frontier

    knob = knob.replace("-", "_")
    if knob == "kv":
        knob = "kv_dtype"
    if knob not in COMPARE_KNOBS:
        raise SimfrontError(f"--compare {knob!r}: valid knobs are {', '.join(COMPARE_KNOBS)} (e.g. precision=fp8,nvfp4)")
    if len(values) < 2:
        raise SimfrontError(f"--compare {knob}=... needs at least two comma-separated values")
    sets = []
    for v in values:
        args = dict(kw)
        g = gpus
        if knob == "gpus":
            g = v
        elif knob == "mode":
            args["modes"] = [v]
        elif knob == "spec":
            args["spec"] = v
        elif knob == "precision":
            args["precision"] = [v]
        elif knob == "kv_dtype":
            args["kv_dtype"] = [v]
        res = predict(model, g, isl=isl, osl=osl, **args)
        res.pop("_points", None)
        sets.append({"value": v, "gpus": res["gpus"], "fits": res["fits"], "frontier": res["frontier"], "memory": res["memory"],
                     "n_configs_evaluated": res["n_configs_evaluated"]})
    base = sets[0]
    verdicts = []
    for s in sets[1:]:
        if not (base["frontier"] and s["frontier"]):
            verdicts.append({"value": s["value"], "verdict": "unknown", "reason": "one of the two does not fit"})
            continue
        bx = np.array([p["tok_s_user"] for p in base["frontier"]])
        by = np.array([p["tok_s_gpu"] for p in base["frontier"]])
        sx = np.array([p["tok_s_user"] for p in s["frontier"]])
        sy = np.array([p["tok_s_gpu"] for p in s["frontier"]])
        lo, hi = max(bx.min(), sx.min()), min(bx.max(), sx.max())
        if hi <= lo:
            verdicts.append({"value": s["value"], "verdict": "disjoint", "reason": "the frontiers cover different tok/s/user ranges"})
            continue
        xq = np.geomspace(lo, hi, 12)
        gain = interp_frontier(sx, sy, xq) / interp_frontier(bx, by, xq) - 1.0  # throughput change at equal tok/s/user
        best, worst, med = float(np.nanmax(gain)), float(np.nanmin(gain)), float(np.nanmedian(gain))
        reach = float(sx.max() / bx.max() - 1.0)  # change of the fastest tok/s/user reachable
        ok = np.isfinite(gain)
        better = float(np.mean(gain[ok] > SAME_FRONTIER_TOLERANCE)) if ok.any() else 0.0
        worse = float(np.mean(gain[ok] < -SAME_FRONTIER_TOLERANCE)) if ok.any() else 0.0
        # judged over the whole shared tok/s/user range, so a single tail point does not flip it
        if better >= 0.5 and worse <= 0.25:
            verdict = "pushes the frontier out"
        elif worse >= 0.5 and better <= 0.25:
            verdict = "pulls the frontier in"
        elif better <= 0.25 and worse <= 0.25:
            verdict = "moves configurations along the same frontier"
        else:
            verdict = "trades: better in part of the range, worse elsewhere"
        verdicts.append({"value": s["value"], "verdict": verdict, "median_gain_pct": round(100 * med, 1),
                         "max_gain_pct": round(100 * best, 1), "min_gain_pct": round(100 * worst, 1),
                         "max_tok_s_user_change_pct": round(100 * reach, 1),
                         "gain_at": [{"tok_s_user": round(float(x), 2), "gain_pct": (round(100 * float(gv), 1) if np.isfinite(gv) else None)}
                                     for x, gv in zip(xq, gain)]})
    return {"model": model, "knob": knob, "baseline": values[0], "sets": sets, "verdicts": verdicts,
            "workload": {"isl": isl, "osl": osl}}


def print_compare(res: dict) -> None:
    print(f"{res['model']}: --compare {res['knob']}={','.join(s['value'] for s in res['sets'])}  (baseline {res['baseline']})")
    for s in res["sets"]:
        f = s["frontier"]
        if f:
            print(f"  {s['value']:>12}: {len(f)} frontier points, best {max(p['tok_s_gpu'] for p in f):,.0f} tok/s/GPU, "
                  f"fastest {max(p['tok_s_user'] for p in f):,.1f} tok/s/user")
        else:
            print(f"  {s['value']:>12}: does not fit ({s['memory'].get('reason')})")
    for v in res["verdicts"]:
        if "median_gain_pct" in v:
            print(f"  {v['value']} vs {res['baseline']}: {v['verdict']}: throughput at equal tok/s/user {v['median_gain_pct']:+.1f}% median "
                  f"({v['min_gain_pct']:+.1f}% to {v['max_gain_pct']:+.1f}%); fastest tok/s/user {v['max_tok_s_user_change_pct']:+.1f}%")
        else:
            print(f"  {v['value']} vs {res['baseline']}: {v['verdict']} ({v['reason']})")


def calibrate(paths: list[str], output: str, folds: int = 5, overrides: dict | None = None) -> dict:
    """Fit the serving profile to measured files, write a profile YAML for ``--calibration``."""
    inputs.check_calibrate(paths, output, folds=folds, overrides=overrides)
    import yaml

    from .calibration import calibrate_measurements
    from .ingest import load_measurements

    ing = load_measurements(paths, overrides=overrides)
    rep = calibrate_measurements(ing.points, folds=folds)
    rep["problems"] = ing.problems
    rep["files"] = list(paths)
    if rep["fitted_rows"] == 0:
        raise SimfrontError("no measured row could be predicted, nothing to calibrate (see `simfront validate` for the reasons)")
    profile = {"simfront_profile": 1, "fitted_on": list(paths), "fitted_rows": rep["fitted_rows"],
               "efficiency": {"serving": rep["profiles"]}, "uncertainty": rep["bands"],
               "error": {"before": rep["before"], "after_cross_validated": rep["after_cv"], "after_in_sample": rep["after_in_sample"]}}
    Path(output).write_text(yaml.safe_dump(profile, sort_keys=False))
    rep["output"] = output
    return rep


def print_calibration(rep: dict) -> None:
    print(f"fitted the serving profile on {rep['fitted_rows']} measured rows from {len(rep['files'])} file(s); {rep['folds']}-fold cross-validation")
    rows = []
    for m in rep["before"]:
        rows.append({"metric": m, "n": rep["before"][m]["count"], "before": rep["before"][m]["mape_pct"],
                     "after_cv": rep["after_cv"].get(m, {}).get("mape_pct"), "in_sample": rep["after_in_sample"].get(m, {}).get("mape_pct")})
    from .format import print_table

    print_table(rows, ["metric", "n", ("before", "MAPE before %", "{:.1f}"), ("after_cv", "MAPE after (k-fold CV) %", "{:.1f}"),
                       ("in_sample", "in-sample %", "{:.1f}")])
    print(f"wrote {rep['output']} (use it with --calibration {rep['output']})")
    for p in rep.get("problems", [])[:10]:
        print(f"problem: {p}")


# ---------------------------------------------------------------------------------------------
# Capacity planning, GPU comparison, launch commands (logic in simfront.planning / simfront.launch)


def plan(model: str, rate: float, **kw) -> dict:
    from .planning import plan as _plan

    return _plan(model, rate, **kw)


def compare_gpus(model: str, gpu_sets: list[str], **kw) -> dict:
    from .planning import compare

    return compare(model, gpu_sets, **kw)


def launch_for(point: dict, model: str, gpus: str, engine: str, isl: int, osl: int) -> dict:
    from .planning import launch_for as _launch_for

    gpu = gpus.split("x", 1)[1] if "x" in gpus.lower() and gpus.split("x", 1)[0].strip().isdigit() else gpus
    return _launch_for(point, model, gpu, engine=engine, isl=isl, osl=osl)


def print_launch(lp: dict) -> None:
    print(f"\nlaunch ({lp['engine']}):")
    for c in lp["commands"]:
        print(f"  {c}")
    for name, content in (lp.get("files") or {}).items():
        print(f"  --- {name} ---")
        for line in content.splitlines():
            print(f"  {line}")
    print(f"benchmark (its result file is what `simfront validate` reads back):\n  {lp['benchmark']}")
    if lp.get("sidecar"):
        print("sidecar YAML to save next to the result file (<result>.simfront.yaml):")
        for line in lp["sidecar"].splitlines():
            print(f"  {line}")
    for n in lp.get("notes", [])[:8]:
        print(f"note: {n}")


def print_plan(res: dict) -> None:
    from .format import print_table

    wl = res.get("workload", {})
    print(f"{res['model']}: {wl.get('rate')} req/s, ISL {wl.get('isl')} / OSL {wl.get('osl')}, SLA {res.get('sla')}")
    feas = [r for r in res["rows"] if r.get("feasible", True) and "num_gpus" in r]
    if feas:
        print_table(feas, ["gpu", ("num_gpus", "GPUs"), "layout", "mode", "precision", ("replicas", "workers"),
                           ("usd_per_hour", "$/hour", "{:,.2f}"), ("monthly_usd", "$/month", "{:,.0f}"), ("usd_per_mtok", "$/Mtok", "{:.3f}"),
                           ("ttft_ms", "TTFT ms", "{:,.0f}"), ("tpot_ms", "TPOT ms", "{:.1f}"), ("headroom", "headroom", "{:.2f}x")])
    for r in res["rows"]:
        if not r.get("feasible", True) or "num_gpus" not in r:
            print(f"{r['gpu']}: not feasible: {r.get('reason')}")
    print(f"({res.get('search_time_s', 0):.2f} s)")


def print_gpu_compare(res: dict) -> None:
    from .format import print_table

    for s in res["sets"]:
        f = s.get("frontier") or []
        status = f"{len(f)} frontier points" if s.get("fits") else f"does not fit: {(s.get('memory') or {}).get('reason')}"
        print(f"{s['gpus']}: {status}")
    if res.get("table"):
        print_table(res["table"], [("tok_s_user", "tok/s/user", "{:,.1f}"), "gpus", ("tok_s_gpu", "tok/s/GPU", "{:,.0f}"),
                                   ("tok_s_per_usd_hour", "tok/s per $/h", "{:,.1f}"), ("usd_per_mtok", "$/Mtok", "{:.3f}")])

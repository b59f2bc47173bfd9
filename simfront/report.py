"""Printing and file writing for the CLI: tables, frontier pages, CSV files.

Everything here formats results that :mod:`simfront.api` returned; nothing here computes a
prediction. The CLI (:mod:`simfront.cli`) calls these; notebooks use the results directly.
"""

from __future__ import annotations

from .format import gib, print_table
from .pareto import sla_text
from .results import point_dict
from .step import DEFAULT_ROUTING_ALPHA

# share of a row's clients that its own latencies must put in decode (Little's law) for `validate` not to name the row:
# below it, most of each request's time passed before its first token
LOAD_REACHED_SHARE = 0.5

FRONTIER_COLUMNS = [("layout", "layout"), ("mode", "mode"), ("batch", "batch/rank"), ("concurrency", "conc"), ("precision", "precision"),
                    ("spec", "spec"), ("ttft_ms", "TTFT ms", "{:,.0f}"), ("tpot_ms", "TPOT ms", "{:.1f}"),
                    ("tok_s_user", "tok/s/user", "{:,.1f}"), ("tok_s_gpu", "tok/s/GPU", "{:,.0f}"), ("usd_per_mtok", "$/Mtok", "{:.3f}")]
# shown when the points carry them (--tails / --sla-percentile; goodput with an SLA): the percentile the SLA is judged
# at (--sla-percentile), else p99
TAIL_PERCENTILE = 99


def tail_columns(percentile: int | None) -> list[tuple[str, str, str]]:
    """Table columns of the tail latencies at ``percentile`` (None: ``TAIL_PERCENTILE``) and the goodput."""
    q = TAIL_PERCENTILE if percentile is None else int(percentile)
    return [(f"ttft_p{q}_ms", f"TTFT p{q}", "{:,.0f}"), (f"tpot_p{q}_ms", f"TPOT p{q}", "{:.1f}"),
            ("goodput_requests_s", "goodput req/s", "{:,.2f}")]


def print_memory(v: dict) -> None:
    lay = v["layout"]
    print(f"{v['model']} on {v['gpus']}  precision {v['precision']}, KV {v['kv_dtype']}, context {v['context_tokens']} tokens")
    if lay:
        print(f"  layout               {lay['label']}" + (f" ({lay['idle_gpus']} GPUs idle)" if lay.get("idle_gpus") else ""))
    print(f"  weights (one copy)   {v['weights_bytes'] / 1e9:,.1f} GB")
    print(f"  weights per GPU      {gib(v['weights_bytes_per_gpu'])}")
    print(f"  runtime reserve/GPU  {gib(v['reserve_bytes_per_gpu'])}  (CUDA context and graphs 3.5 GiB, comm buffers, activations, logits)")
    print(f"  KV budget per GPU    {gib(v['kv_budget_bytes_per_gpu'])}" + _memory_source(v))
    print(f"  KV bytes per token   {_kv_per_token(v)}; {v['kv_bytes_per_token_per_gpu']:,.0f} B per GPU"
          + (" within the window" if v.get("kv_window_tokens") else ""))
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
    for n in v.get("notes") or []:
        print(f"note: {n}")


def _kv_per_token(v: dict) -> str:
    """The memory verdict's model-wide KV bytes per token in words: the part every token adds, and that of the
    sliding-window layers, which stops at their window."""
    grow = f"{v['kv_bytes_per_token']:,.0f} B"
    win, w = v.get("kv_windowed_bytes_per_token") or 0.0, v.get("kv_window_tokens")
    if not (win and w):
        return grow + " (model-wide, one copy)"
    full = f"{grow} full-attention layers + " if v["kv_bytes_per_token"] else ""
    return f"{full}{win:,.0f} B sliding-window layers up to their {w:,}-token window (model-wide, one copy)"


_RULE_READS = {"free": "of the memory free after weights and runtime", "total": "of the GPU for weights, runtime and KV",
               "total_static": "of the GPU for weights and KV pool"}


def _memory_source(v: dict) -> str:
    """Which fraction sized the KV pool: an engine's (--engine) or the one simfront's launch lines give."""
    f, rule = v.get("memory_fraction"), v.get("kv_memory_rule") or "free"
    share = "" if f is None else f"{f:.3f} {_RULE_READS.get(rule, rule)}"
    return f"  ({v['engine']}: {share})" if v.get("engine") else f"  (simfront's launch lines: {share})"


def _plain(x):
    """A typed result as its JSON dict (plain dicts pass through)."""
    return x.to_json() if hasattr(x, "to_json") else x


def print_predict(res, show_all: bool = False) -> None:
    from .pareto import thin_frontier  # noqa: lazily: only the predict table thins

    res = _plain(res)
    wl = res["workload"]
    pre = wl.get("preset")
    preset = (f"{pre['name']} ({pre['turns']} turns, {pre['routing']}"
              + (f" over {pre['replicas']} replicas" if pre["routing"] == "round-robin" else "") + "): ") if pre else ""
    from .step import DEFAULT_ROUTING_ALPHA  # noqa: lazily: only the header names a non-default routing skew

    skew = wl.get("routing_alpha", DEFAULT_ROUTING_ALPHA)
    routing = "" if skew == DEFAULT_ROUTING_ALPHA else (", MoE routing balanced" if skew is None else f", MoE routing skew {skew:g}")
    rr = wl.get("random_range_ratio")
    # a benchmark's lengths uniform in [r L, L]: the evaluator costs their means
    spread = (f" (lengths in [{rr:g} L, L]: mean {wl['mean_isl']:,.0f} / {wl['mean_osl']:,.0f})"
              if rr is not None and rr < 1 and wl.get("mean_isl") is not None else "")
    layouts = res.get("layouts")  # --layout: the layout classes searched
    print(f"{res['model']} on {res['gpus']}  {preset}ISL {wl['isl']} / OSL {wl['osl']}" + spread
          + (f", prefix hit {wl['prefix_hit']:.0%}" if wl["prefix_hit"] else "") + routing
          + (", two-batch overlap" if wl.get("two_batch_overlap") else "")
          + (f", layouts {','.join(layouts)}" if layouts else "")
          + (f", at most PP{res['max_pp']}" if res.get("max_pp") is not None else "")
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
        # first column: * the knee, ~ a layout outside the measured calibration runs (outside_calibration)
        p["layout"] = ("*" if knee and p == knee else " ") + ("~" if p.get("outside_calibration") else " ") + p["layout"]
        rows.append(p)
    cols = FRONTIER_COLUMNS + ([("quality", "quality", "{:.3f}")] if any(r.get("quality") is not None for r in rows) else [])
    extra = [(k, head, fmt) for k, head, fmt in tail_columns(res["sla"].get("percentile"))
             if any(r.get(k) is not None for r in rows)]  # --tails
    cols = cols + extra
    print_table(rows, cols, highlight=lambda r: r["layout"].startswith("*"))
    shown = f"{len(rows)} of the {len(front)} frontier points (--all shows every one); " if len(rows) < len(front) else ""
    off = "; ~ = layout outside the measured calibration runs" if any(r.get("outside_calibration") for r in rows) else ""
    print(f"{shown}lowest latency first; * = knee of the frontier{off}; tok/s/GPU counts output tokens over all GPUs of the set")
    if knee:
        print(f"knee: {knee['layout']} {knee['precision']} batch {knee['batch']}: {knee['tok_s_user']:.1f} tok/s/user, {knee['tok_s_gpu']:,.0f} tok/s/GPU, ${knee['usd_per_mtok']:.3f}/Mtok")
    b = res.get("best_under_sla")
    sla = sla_text(res["sla"])
    # the search's own line when nothing meets the SLA (plain or at a percentile), printed once with the SLA
    miss = [n for n in res["notes"] if n.startswith(("no configuration meets the SLA", "no frontier point meets the SLA"))] if sla else []
    if sla:
        if b:
            pct = res["sla"].get("percentile")
            tails = (f" (p{pct} {b[f'ttft_p{pct}_ms']:.0f} ms, {b[f'tpot_p{pct}_ms']:.1f} ms)"
                     if pct is not None and b.get(f"ttft_p{pct}_ms") is not None and b.get(f"tpot_p{pct}_ms") is not None else "")
            print(f"best under SLA ({sla}): {b['layout']} {b['mode']} {b['precision']} batch {b['batch']}: TTFT {b['ttft_ms']:.0f} ms, "
                  f"TPOT {b['tpot_ms']:.1f} ms{tails}, {b['tok_s_gpu']:,.0f} tok/s/GPU, ${b['usd_per_mtok']:.3f}/Mtok")
        else:
            print(f"{miss[0] if miss else 'no configuration meets the SLA'} ({sla})")
    for n in res["notes"]:
        if n not in miss:
            print(f"note: {n}")


def write_csv(rows: list[dict], path: str) -> None:
    import csv

    rows = [r.to_json() if hasattr(r, "to_json") else r for r in rows]  # typed points -> plain dicts
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_frontier_html(res, points: dict | None, path: str) -> None:
    from .plot import frontier_html

    res = _plain(res)

    allp = []
    if points:
        n = points["tok_s_gpu"].size
        # the plot module samples dominated points itself; hand it plain dicts
        step = max(1, n // 20000)
        for i in range(0, n, step):
            allp.append(point_dict(points, i))
    title = f"{res['model']} on {res['gpus']} - ISL {res['workload']['isl']} / OSL {res['workload']['osl']}"
    f = res["frontier"]
    bands = None
    if f and "tok_s_gpu_low" in f[0]:
        bands = {"x": [p["tok_s_user"] for p in f], "y_low": [p["tok_s_gpu_low"] for p in f], "y_high": [p["tok_s_gpu_high"] for p in f]}
    frontier_html(allp, f, path=path, title=title, bands=bands, knee=res.get("knee"), best=res.get("best_under_sla"),
                  sla=res.get("sla"), notes=res.get("notes"))


def print_explain(res: dict) -> None:

    head = f"{res['model']} on {res['gpus']}  {res['layout']}  {res['phase']}  batch {res['batch']}  "
    rr = res.get("random_range_ratio")
    spread = f", lengths in [{rr:g} L, L]: mean context {res['ctx']:,.0f}" if rr is not None and rr < 1 else ""
    head += f"ISL {res['isl']} / OSL {res['osl']} ({res['mode']}{spread})" if res.get("isl") is not None else f"ctx {res['ctx']:,.0f}"
    moe = any(r["op"] == "moe.experts" for r in res["ops"])
    routing = ("  routing balanced" if res.get("routing_alpha") is None else f"  routing skew {res['routing_alpha']:g}") if moe else ""
    tbo = "  two-batch overlap" if res.get("two_batch_overlap") else ""
    print(head + f"  {res['precision']} (KV {res['kv_dtype']})  spec {res['spec']}  engine profile {res['engine']}{routing}{tbo}")
    rows = sorted(res["ops"], key=lambda r: -r["time_s"])
    tot = res["raw_step_time_s"]
    for r in rows:
        r["share"] = 100 * r["time_s"] / tot if tot else 0
        r["op_label"] = r["op"] + (f" [{r['kernel']}]" if r.get("kernel") else "")  # the kernel, where the op has a choice
    print_table(rows, [("op_label", "op"), ("layers", "layers"), ("count", "n", "{:.0f}"), ("time_s", "time us", "{:,.1f}", 1e6),
                       ("share", "%", "{:.1f}"), ("bound", "bound"), ("flops", "GFLOP", "{:,.2f}", 1e-9),
                       ("mem_bytes", "HBM MB", "{:,.1f}", 1e-6), ("net_bytes", "net MB", "{:,.2f}", 1e-6),
                       ("arithmetic_intensity", "FLOP/B", "{:,.1f}")])
    print(f"sum of ops {tot * 1e3:,.3f} ms; {res['step_flops_per_gpu'] / 1e9:,.1f} GFLOP per GPU; {res['tokens']} tokens per rank")
    print("from the op sum to the step the serving model uses:")
    print_table(res["terms"], [("term", "term"), ("seconds", "ms", "{:+,.4f}", 1e3)])
    line = f"step time {res['step_time_s'] * 1e3:,.4f} ms"
    if res.get("tpot_s") is not None:
        line += f"; {res['accepted_tokens_per_step']:.3f} tokens accepted per step -> TPOT {res['tpot_s'] * 1e3:,.4f} ms"
    print(line)
    if res.get("lone_prompt_step_s") is not None and abs(res["lone_prompt_step_s"] - res["step_time_s"]) > 1e-9:
        print(f"one prompt alone on an idle disaggregated prefill worker (one rank): step {res['lone_prompt_step_s'] * 1e3:,.4f} ms "
              "(the idle-worker TTFT's; a busy worker's prompts share the step above)")
    print(f"worker FLOPs {res['model_flops'] / 1e12:,.2f} TFLOP = weights {res['weight_flops'] / 1e12:,.2f} (2 x active params x tokens: "
          f"{res['weight_flops_reference'] / 1e12:,.2f}, ratio {res['weight_flops_ratio']:.3f}) + attention {res['attention_flops'] / 1e12:,.2f} + elementwise")
    if res.get("engine_refuses"):
        print(f"note: {res['engine']} would not start this worker: {res['engine_refuses']}")
    for n in (res.get("provenance") or {}).get("notes") or []:  # borrowed parameters, estimated peaks, fallback kernels
        print(f"note: {n}")
    print(f"note: {res['note']}")


def print_validation(res: dict, rows: bool = False) -> None:

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
        for r in res["serving"]["rows"]:  # predicted, but the measurement contradicts its own setup
            if r.get("measurement_flag") and "duplicate_of" not in r:
                print(f"left out of the statistics: {r.get('source_file')}:{r.get('line')}: {r['measurement_flag']}")
        starved = [r for r in res["serving"]["rows"] if r.get("measured_in_decode") is not None and r.get("concurrency")
                   and "duplicate_of" not in r and r["measured_in_decode"] < LOAD_REACHED_SHARE * r["concurrency"]]
        if starved:  # the rows' own latencies say most clients were not decoding
            r = starved[0]
            print(f"{len(starved)} row(s) whose own TTFT and TPOT put fewer than {LOAD_REACHED_SHARE:.0%} of their clients in "
                  f"decode (Little's law; e.g. {r.get('source_file')}:{r.get('line')}: {r['measured_in_decode']:.0f} of "
                  f"{r['concurrency']:g}): their clients spent most of each request before its first token, queued outside "
                  f"the engine's batch (a client holding fewer connections, a batch or KV cap) or waiting on prefill; "
                  f"measured_in_decode in --json")
        medians = [r for r in res["serving"]["rows"] if r.get("ttft_statistic") == "median" and "predicted_ttft_ms" in r
                   and "duplicate_of" not in r]
        if medians:  # which statistic the TTFT is, and so what it is compared with
            print(f"{len(medians)} row(s) record the median TTFT over their requests (ttft_statistic): compared with a "
                  f"steady-state request's TTFT, without the benchmark's start-up wave, where that wave is under half the run")
        assumed = [r for r in res["serving"]["rows"] if r.get("assumptions") and "duplicate_of" not in r]
        if assumed:  # predictions that rest on what the rows do not record
            r = assumed[0]
            print(f"{len(assumed)} row(s) whose prediction rests on what the row does not record (e.g. {r.get('source_file')}:"
                  f"{r.get('line')}: {r['assumptions'][0]}); assumptions in --json")
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
        n = len(res["problems"])
        print(f"\n{n} problem{'s' if n != 1 else ''} in the input (rows or files skipped, each named):")
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


def print_compare(res: dict) -> None:
    held = search_text(res.get("search"))
    print(f"{res['model']}: --compare {res['knob']}={','.join(s['value'] for s in res['sets'])}  (baseline {res['baseline']})"
          + (f"; every frontier with {held}" if held else ""))
    for s in res["sets"]:
        f = s["frontier"]
        if f:
            # how many of the set's points no measured calibration run covers (their outside_calibration; ~ in predict)
            off = sum(1 for p in f if p.get("outside_calibration"))
            off_txt = f" ({off} ~ outside the measured layouts)" if off else ""
            print(f"  {s['value']:>12}: {len(f)} frontier points{off_txt}, best {max(p['tok_s_gpu'] for p in f):,.0f} tok/s/GPU, "
                  f"fastest {max(p['tok_s_user'] for p in f):,.1f} tok/s/user")
        else:
            print(f"  {s['value']:>12}: no frontier ({s.get('reason') or s['memory'].get('reason')})")
    for v in res["verdicts"]:
        if "median_gain_pct" in v:
            print(f"  {v['value']} vs {res['baseline']}: {v['verdict']}: throughput at equal tok/s/user {v['median_gain_pct']:+.1f}% median "
                  f"({v['min_gain_pct']:+.1f}% to {v['max_gain_pct']:+.1f}%); fastest tok/s/user {v['max_tok_s_user_change_pct']:+.1f}%")
        else:
            print(f"  {v['value']} vs {res['baseline']}: {v['verdict']} ({v['reason']})")
    for n in knob_compare_notes(res):  # what the sets' numbers rest on
        print(f"note: {n}")


def print_calibration(rep: dict) -> None:
    print(f"fitted the serving profile on {rep['fitted_rows']} measured rows from {len(rep['files'])} file(s); {rep['folds']}-fold cross-validation")
    rows = []
    for m in rep["before"]:
        rows.append({"metric": m, "n": rep["before"][m]["count"], "before": rep["before"][m]["mape_pct"],
                     "after_cv": rep["after_cv"].get(m, {}).get("mape_pct"), "in_sample": rep["after_in_sample"].get(m, {}).get("mape_pct")})

    print_table(rows, ["metric", "n", ("before", "MAPE before %", "{:.1f}"), ("after_cv", "MAPE after (k-fold CV) %", "{:.1f}"),
                       ("in_sample", "in-sample %", "{:.1f}")])
    print(f"wrote {rep['output']} (use it with --calibration {rep['output']})")
    for p in rep.get("problems", [])[:10]:
        print(f"problem: {p}")


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


def search_text(search: dict | None) -> str:
    """The knobs a plan, a GPU comparison or a knob comparison was held to (its ``search``), in the flags' words ('' when
    every default was kept)."""
    if not search:
        return ""
    parts = [f"{flag} {','.join(v) if isinstance(v, (list, tuple)) else v}"
             for flag, v in (("--precision", search.get("precision")), ("--kv-dtype", search.get("kv_dtype")),
                             ("--spec", search.get("spec")), ("--spec-k", search.get("spec_k")),
                             ("--acceptance", search.get("acceptance")))
             if v is not None]
    modes = list(search.get("modes") or ())
    if modes and set(modes) != {"agg", "disagg"}:
        parts.append(f"--mode {','.join(modes)}")
    if search.get("layout"):
        parts.append(f"--layout {','.join(search['layout'])}")
    if search.get("max_pp") is not None:
        parts.append(f"--max-pp {search['max_pp']}")
    if "routing_alpha" in search and search["routing_alpha"] != DEFAULT_ROUTING_ALPHA:
        parts.append("--routing-skew " + ("balanced" if search["routing_alpha"] is None else f"{search['routing_alpha']:g}"))
    if search.get("two_batch_overlap"):
        parts.append("--two-batch-overlap")
    return ", ".join(parts)


def print_plan(res: dict) -> None:

    wl = res.get("workload", {})
    print(f"{res['model']}: {wl.get('rate')} req/s, ISL {wl.get('isl')} / OSL {wl.get('osl')}, SLA: {sla_text(res.get('sla')) or 'none'}"
          + (f"; {restricted}" if (restricted := search_text(res.get("search"))) else ""))
    feas = [r for r in res["rows"] if r.get("feasible", True) and "num_gpus" in r]
    # ~ marks a deployment whose layout no measured calibration run had (the row's outside_calibration)
    feas = [dict(r, layout=("~" if r.get("outside_calibration") else " ") + r["layout"]) for r in feas]
    if feas:
        print_table(feas, ["gpu", ("num_gpus", "GPUs"), "layout", "mode", "precision", "spec", ("replicas", "workers"),
                           ("usd_per_hour", "$/hour", "{:,.2f}"), ("monthly_usd", "$/month", "{:,.0f}"), ("usd_per_mtok", "$/Mtok", "{:.3f}"),
                           ("ttft_ms", "TTFT ms", "{:,.0f}"), ("tpot_ms", "TPOT ms", "{:.1f}"), ("headroom", "headroom", "{:.2f}x")])
    for r in res["rows"]:
        if not r.get("feasible", True) or "num_gpus" not in r:
            print(f"{r['gpu']}: not feasible: {r.get('reason')}")
    for n in res.get("notes") or []:
        print(f"note: {n}")
    # what each chosen deployment's numbers rest on (borrowed parameters, estimated peaks, fallback kernels), once each
    seen = set(res.get("notes") or [])
    pairs = [(r["gpu"], n) for r in feas for n in ((r.get("provenance") or {}).get("notes") or [])]
    for line in merge_named_notes(pairs):
        if line not in seen:
            seen.add(line)
            print(f"note: {line}")
    print(f"({res.get('search_time_s', 0):.2f} s)")


def merge_named_notes(pairs: list[tuple[str, str]]) -> list[str]:
    """Notes of several GPUs (or GPU sets), each as ``(name, note)``, once each: a note that begins with its own name
    (``"b200_sxm: ..."``) or is given without one is keyed on the text after the name, and the names of every note
    with the same text are listed before it once (``"b300_sxm, gb200: ..."``), in order of first appearance."""
    names: dict[str, list[str]] = {}
    for name, note in pairs:
        if note.startswith(f"{name}: "):
            body = note[len(name) + 2:]
        elif note.startswith(name):  # names its GPU in its own words ("mi355x (cdna4, ...)"): shown as it is
            names.setdefault(note, [])
            continue
        else:
            body = note
        listed = names.setdefault(body, [])
        if name not in listed:
            listed.append(name)
    return [f"{', '.join(listed)}: {body}" if listed else body for body, listed in names.items()]


def print_gpu_compare(res: dict) -> None:
    wl = res.get("workload") or {}
    held = search_text(res.get("search"))
    print(f"{res['model']}: ISL {wl.get('isl')} / OSL {wl.get('osl')}" + (f"; every set with {held}" if held else ""))

    for s in res["sets"]:
        f = s.get("frontier") or []
        status = f"{len(f)} frontier points" if s.get("fits") else f"does not fit: {(s.get('memory') or {}).get('reason')}"
        print(f"{s['gpus']}: {status}")
    if res.get("table"):
        print_table(res["table"], [("tok_s_user", "tok/s/user", "{:,.1f}"), "gpus", ("tok_s_gpu", "tok/s/GPU", "{:,.0f}"),
                                   ("tok_s_per_usd_hour", "tok/s per $/h", "{:,.1f}"), ("usd_per_mtok", "$/Mtok", "{:.3f}")])
    sla = sla_text(res.get("sla"))
    if sla:  # each set's best point under the SLA (most tok/s/GPU), cheapest per token first
        best = sorted(((s["gpus"], s.get("best_under_sla")) for s in res["sets"] if s.get("fits")),
                      key=lambda gb: (gb[1] is None, gb[1]["usd_per_mtok"] if gb[1] else 0.0))
        print(f"best under SLA ({sla}):")
        for gpus, b in best:
            print(f"  {gpus}: {b['layout']} {b['mode']} {b['precision']} {b['spec']} batch {b['batch']}: TTFT {b['ttft_ms']:,.0f} ms, "
                  f"TPOT {b['tpot_ms']:.1f} ms, {b['tok_s_user']:.1f} tok/s/user, {b['tok_s_gpu']:,.0f} tok/s/GPU, "
                  f"${b['usd_per_mtok']:.3f}/Mtok" if b else f"  {gpus}: no configuration meets the SLA")
    for n in gpu_compare_notes(res):
        print(f"note: {n}")


def gpu_compare_notes(res: dict) -> list[str]:
    """Each GPU set's notes (borrowed parameters, estimated peaks, fallback kernels, layouts outside the calibration),
    once each, named by the set where the note does not already name its GPU; a note every set has (one about the
    model, such as its sliding windows) once, unnamed."""
    note_sets = [s.get("notes") or [] for s in res["sets"]]
    out = _in_every(note_sets) if len(note_sets) > 1 else []
    common = set(out)
    pairs = []
    for s in res["sets"]:
        hw_id = str(s["gpus"]).split("x", 1)[-1]  # "8xmi300x" -> "mi300x"
        for n in s.get("notes") or []:
            if n not in common:  # a note naming its GPU keeps that name; the others take the set's
                pairs.append((hw_id, n) if n.startswith(hw_id) else (str(s["gpus"]), n))
    return out + [line for line in merge_named_notes(pairs) if line not in common]


def _in_every(note_sets: list[list[str]]) -> list[str]:
    """The notes every one of ``note_sets`` holds, in the first one's order (all of it for one set, none for none)."""
    return [n for n in note_sets[0] if all(n in ns for ns in note_sets[1:])] if note_sets else []


def knob_compare_notes(res: dict) -> list[str]:
    """The notes of a knob comparison's sets: a note every set has once, the others under their value."""
    note_sets = [s.get("notes") or [] for s in res["sets"]]
    common = _in_every(note_sets)
    return common + [f"[{s['value']}] {n}" for s, ns in zip(res["sets"], note_sets) for n in ns if n not in common]



def write_compare_html(res: dict, path: str, title: str | None = None) -> None:
    """The frontiers of a GPU-set comparison (``api.compare_gpus``) overlaid on one offline page."""
    from .plot import compare_html

    names: dict[str, list] = {}
    knees: dict[str, dict | None] = {}
    for s in res["sets"]:
        name, i = s["gpus"], 2
        while name in names:  # the same set twice (e.g. two prices)
            name, i = f"{s['gpus']} ({i})", i + 1
        names[name] = [_plain(p) for p in s["frontier"]]
        knees[name] = _plain(s["knee"]) if s.get("knee") else None
    wl = res["workload"]
    compare_html(names, path=path, title=title or f"{res['model']} - ISL {wl['isl']} / OSL {wl['osl']}", knees=knees,
                 notes=gpu_compare_notes(res))
    res["html"] = str(path)


def write_knob_compare_html(res: dict, path: str, title: str) -> None:
    """The frontiers of a knob comparison (``api.frontier_compare``) overlaid on one offline page."""
    from .plot import compare_html

    frontiers = {s["value"]: [_plain(p) for p in s["frontier"]] for s in res["sets"] if s["frontier"]}
    if not frontiers:
        from .errors import SimfrontError

        raise SimfrontError(f"--html {path}: no value of --compare {res['knob']} fits, so there is no frontier to draw")
    compare_html(frontiers, path=path, title=title, notes=knob_compare_notes(res))

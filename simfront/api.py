"""The Python API behind the CLI, for notebooks and scripts.

Functions take plain names (``"kimi-k3"``, ``"8xB300"``) or objects and return plain dicts /
lists ready for JSON, so the CLI stays a thin formatting layer.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from . import efficiency, kernels
from . import hardware as hwmod
from . import inputs
from . import models as modmod
from .errors import SimfrontError, check_decodes, check_lengths
from .serving import DEFAULT_CHUNK_TOKENS
from .hardware import GpuSet, parse_gpus
from .layout import LAYOUT_CLASSES, check_classes_for, enumerate_layouts, layout_class_mask, parse_layout_classes
from .models import apply_precision, get_model
from .priced import Priced, priced_configs, priced_of, priced_of_columns
from .results import Frontier, MemoryVerdict, Plan, StepBreakdown, ValidationReport, point_dict
from .sizing import memory_verdict
from .step import routing_alpha_of
from .uncertainty import EXTRAPOLATION_WIDENING


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
    from .memory import kv_geometry

    for m in modmod.all_models():
        pc = m.params
        geo = kv_geometry(m, "bf16")  # one copy, TP 1: what kv_bytes_per_token gives, and the windowed layers beside it
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
            "kv_bytes_per_token_bf16": float(geo.per_token),
            "kv_windowed_bytes_per_token_bf16": float(geo.windowed_per_token),  # sliding layers, up to their window
            "kv_window_tokens": int(geo.window) or None,
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


def _with_notes(provenance: dict, *notes: str | None) -> dict:
    """``provenance`` with the given ``notes`` that are not None added to its notes (unchanged without any)."""
    extra = [n for n in notes if n]
    return provenance if not extra else {**provenance, "notes": [*provenance.get("notes", []), *extra]}


def memory(model: str, gpus: str | GpuSet, precision: str = "native", kv_dtype: str = "native", isl: int = 1024, osl: int = 1024,
           tp: int | None = None, pp: int = 1, ep: int = 1, attention_dp: int = 1, engine: str | None = None,
           engine_version: str | None = None, gpu_memory_fraction: float | str | None = None) -> MemoryVerdict:
    """The memory verdict (``fits``, ``weights_bytes_per_gpu``, ``min_gpus`` ...) as a typed result. The KV pool is the
    one simfront's launch lines give; with ``engine``, the one that engine allocates with its release's default memory
    fraction (``engine_version``: which release; the newest without it) or with ``gpu_memory_fraction`` in its terms."""
    inputs.check_memory(model, gpus, isl=isl, osl=osl, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp)  # lengths too
    m = get_model(model)
    g = parse_gpus(gpus) if isinstance(gpus, str) else gpus
    inputs.check_engine_gpu(engine, g.hardware)
    prec = apply_precision(m, precision if precision != "native" else (m.name_precision or "native"), kv_dtype)
    layout = None
    if tp is not None:
        layout = inputs.worker_layout(tp, pp, attention_dp, ep, g.count)
    v = memory_verdict(m, prec, g, isl, osl, layout=layout,
                       memory=inputs.engine_memory(engine, engine_version, gpu_memory_fraction, m))
    from .memory import window_note
    from .scheduler import release_note

    # the fraction of the oldest release family simfront describes; the sliding windows the KV is priced with
    notes = [n for n in (release_note(engine, engine_version), window_note(m, prec.kv, isl + osl)) if n]
    return MemoryVerdict(**v.to_json(), notes=notes)


def use_calibration(path: str) -> None:
    """Install a calibration profile (``simfront calibrate`` output) for this process."""
    inputs.check_calibration_profile(path)
    import yaml


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

def _format_on(name: str, hw) -> str:
    """The format a precision name means on ``hw`` (unknown names pass through to the one-line error)."""
    from .precision import resolve_format

    try:
        return resolve_format(name, hw).name
    except SimfrontError:
        return name


def _frontier(out: dict, t0: float, points: dict | None = None) -> Frontier:
    """The typed result of ``predict`` (``points``: every feasible configuration, kept out of the JSON)."""
    import time

    out["search_time_s"] = time.perf_counter() - t0
    f = Frontier(**out)
    f._points = points
    return f


def _rows_of(points, idx) -> dict:
    """``{column: values at rows idx}`` of a search's points (:meth:`simfront.search.Points.take`)."""
    if hasattr(points, "take"):
        return points.take(idx)
    return {k: np.asarray(v)[np.asarray(idx, dtype=np.int64)] for k, v in points.items()}


def _resolve_workload(isl, osl, prefix_hit, workload, routing, replicas, workload_set) -> tuple[int, int, float, dict | None]:
    """(isl, osl, prefix_hit, preset) from explicit lengths or a named workload preset (simfront.agentic)."""
    if workload is None:
        given = [f for f, v in (("--routing", routing), ("--replicas", replicas), ("--workload-set", workload_set)) if v]
        if given:
            raise SimfrontError(f"{', '.join(given)} only appl{'ies' if len(given) == 1 else 'y'} to a workload preset: add --workload agentic-coding")
        return (1024 if isl is None else isl), (1024 if osl is None else osl), (0.0 if prefix_hit is None else prefix_hit), None
    from .agentic import PRESETS, agentic_workload

    if workload not in PRESETS:
        raise SimfrontError(f"--workload {workload!r} unknown; valid: {', '.join(PRESETS)}")
    clash = [f for f, v in (("--isl", isl), ("--osl", osl), ("--prefix-hit", prefix_hit)) if v is not None]
    if clash:
        raise SimfrontError(f"--workload {workload} sets {', '.join(clash)} from its sessions; change the sessions with "
                            "--workload-set first_prompt=...,output_tokens=...,tool_tokens=...,turns=... instead")
    w = agentic_workload(routing, replicas, workload_set)
    return w["isl"], w["osl"], w["prefix_hit"], w["preset"]


def mla_fallback_note(engine: str | None, rule: tuple, hw, m) -> str | None:
    """A note where ``engine``'s release decodes an MLA model with ``hw``'s native kernel only at some KV heads per rank
    (``rule``, :func:`simfront.step.mla_native_mask`): the search prices the Triton fallback at the other layouts."""
    from .kernels import platform_of

    if not rule or m.arch.attention.kind != "mla" or platform_of(hw) not in rule[0]:
        return None
    return (f"{engine}: MLA decode on {hw.id} runs the native kernel only at {' or '.join(map(str, rule[1]))} KV heads "
            f"per rank over attention TP x attention DP ({m.id} has {m.arch.attention.n_kv_heads}); layouts with other "
            "counts are priced with the Triton fallback (simfront/engines/scheduler.yaml mla_native_heads)")


def cpu_overlap_note(engine: str | None, speculative: bool, version: str | None = None) -> str | None:
    """A note for predictions with speculative decoding on an engine whose releases differ in whether the overlap
    scheduler runs it (SGLang before 0.5.13 ran EAGLE / MTP without it; simfront/engines/scheduler.yaml): which
    release family the points are priced for, and what the other one would change."""
    from .scheduler import release_families, engine_key, release_family

    if not engine or not speculative:
        return None
    key = engine_key(engine)
    fams = release_families(key)
    if len({bool(f.get("cpu_overlap_with_spec")) for f in fams}) < 2:  # every release family alike
        return None
    fam = release_family(key, version)
    other = next(f for f in reversed(fams) if bool(f.get("cpu_overlap_with_spec")) != bool(fam.get("cpu_overlap_with_spec")))
    if fam.get("cpu_overlap_with_spec"):
        return (f"{key} {version or 'newest release'}: speculative-decoding points are priced with the overlap scheduler "
                f"(releases from {fam['since']}); releases before {fam['since']} ran it without, adding the per-step CPU "
                f"work to every step (give --engine-version with such a release to price those)")
    return (f"{key} {version}: speculative-decoding points are priced without the overlap scheduler, as releases before "
            f"{other['since']} ran them (simfront/engines/scheduler.yaml cpu_overlap_with_spec)")


def engine_info(engine: str | None, version: str | None = None) -> dict:
    """``{name, version, scheduler_family}``: the engine profile a prediction uses ("default" when none is named),
    the release the user named, and the release family of simfront/engines/scheduler.yaml it is priced with."""
    from .scheduler import engine_key, release_family

    key = engine_key(engine)
    return {"name": key, "version": version, "scheduler_family": str(release_family(key, version)["since"])}


def _provenance_of(hw, priced: Priced | None = None) -> dict:
    """``provenance`` of a result on ``hw``: parameters, estimated peaks and notes (narrowed to what ``priced``
    prices, when given), and the kernel each op runs (``kernels``)."""
    out = efficiency.provenance(hw, priced=priced).model_dump()
    out["kernels"] = [k.model_dump() for k in kernels.kernel_paths(hw, priced)]
    return out


def predict(model: str, gpus: str | GpuSet, isl: int | None = None, osl: int | None = None, concurrency: int | None = None,
            rate: float | None = None, ttft_ms: float | None = None, tpot_ms: float | None = None, min_tok_s_user: float | None = None,
            precision: list[str] | str | None = None, kv_dtype: list[str] | str | None = None, spec: str | None = None,
            spec_k: int | None = None, acceptance: float | None = None, modes: list[str] | None = None,
            price: float | None = None, prefix_hit: float | None = None, engine: str | None = None, chunk_tokens: int | None = None,
            quality: str | dict | None = None, tails: bool = False, sla_percentile: float | None = None,
            prompts_per_client: float | None = None, workload: str | None = None, routing: str | None = None,
            replicas: int | None = None, workload_set: dict | None = None, routing_skew: float | str | None = None,
            random_range_ratio: float | None = None, engine_version: str | None = None,
            layout: list[str] | str | None = None, max_pp: int | None = None, two_batch_overlap: bool = False) -> Frontier:
    """The predicted frontier of every configuration of ``model`` on ``gpus`` (a :class:`simfront.results.Frontier`:
    attributes, ``["field"]`` access, ``.to_frame()``, ``.points`` for every feasible configuration).

    ``isl``/``osl`` default to 1024 and ``prefix_hit`` to 0; ``workload="agentic-coding"`` sets all three from
    multi-turn sessions instead (:mod:`simfront.agentic`), with ``routing`` (kv-aware or round-robin over
    ``replicas``) deciding the prefix-cache hit rate and ``workload_set`` overriding the session knobs.
    ``routing_skew``: how the MoE router spreads tokens over experts, a power-law exponent (a measured skew) or
    ``"balanced"`` (uniform); default the production-typical exponent (``step.DEFAULT_ROUTING_ALPHA``).
    ``random_range_ratio``: predict a benchmark whose lengths are uniform in [r L, L] (1: every request exactly
    ISL / OSL, which a prefill-first engine serves in waves); default lengths that vary, as a service's do.
    ``engine_version``: the ``engine`` release whose scheduler family is priced (simfront/engines/scheduler.yaml;
    default the newest); ``engine["scheduler_family"]`` of the result names the family used.
    ``layout``: the layout classes to search (``tp``, ``tp+ep``, ``dpa+ep``: :data:`simfront.layout.LAYOUT_CLASSES`),
    for every worker; default every class. ``max_pp``: the most pipeline stages a worker may have (1: none).
    ``two_batch_overlap``: the engine runs two-batch overlap (SGLang ``--enable-two-batch-overlap``, vLLM
    ``--enable-dbo``), so attention-DP + EP steps are priced as two overlapped micro-batches
    (:func:`simfront.step.two_batch_overlap_step`); default off, as engines ship it."""
    classes = parse_layout_classes(layout)
    inputs.check_two_batch_overlap(engine, two_batch_overlap)
    inputs.count("--max-pp", max_pp, lo=1)
    isl, osl, prefix_hit, preset = _resolve_workload(isl, osl, prefix_hit, workload, routing, replicas, workload_set)
    alpha = routing_alpha_of(routing_skew)
    engine_version = inputs.check_engine_version(engine_version)
    inputs.check_predict(model, gpus, isl=isl, osl=osl, concurrency=concurrency, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, min_tok_s_user=min_tok_s_user, spec=spec, spec_k=spec_k, acceptance=acceptance, modes=modes, price=price, prefix_hit=prefix_hit, engine=engine, chunk_tokens=chunk_tokens)
    import time

    from .clients import mean_length
    from .pareto import knee_index, pareto_mask, sla_mask
    from .search import SearchSpace, search, spec_choices
    from .serving import DEFAULT_CHUNK_TOKENS, Workload, engine_workload

    check_decodes(osl)
    inputs.check_range_ratio(random_range_ratio)
    if not 0.0 <= prefix_hit < 1.0:
        raise SimfrontError(f"--prefix-hit {prefix_hit} must be in [0, 1)")
    if concurrency is not None and concurrency < 1:
        raise SimfrontError(f"--concurrency {concurrency} must be at least 1")
    if rate is not None and rate <= 0:
        raise SimfrontError(f"--rate {rate} must be positive")
    if price is not None and price < 0:
        raise SimfrontError(f"--price {price} must be non-negative")
    t0 = time.perf_counter()
    from .quality import parse_quality

    scores = parse_quality(quality)
    if sla_percentile is not None and sla_percentile not in (50, 90, 99):
        raise SimfrontError(f"--sla-percentile {sla_percentile}: valid values are 50, 90, 99")
    if sla_percentile is not None and ttft_ms is None and tpot_ms is None:
        raise SimfrontError(f"--sla-percentile {sla_percentile:g} judges --ttft and --tpot at that percentile: give one "
                            f"of them (--tails adds the percentiles without an SLA)")
    m = get_model(model)
    g = parse_gpus(gpus) if isinstance(gpus, str) else gpus
    inputs.check_engine_gpu(engine, g.hardware)
    check_layout_classes(m, g, classes)
    precs = [precision] if isinstance(precision, str) else precision
    # a generic name means what it means on this GPU (``fp4`` is MXFP4 on CDNA4, NVFP4 elsewhere)
    precs = [q if q == "native" else _format_on(q, g.hardware) for q in precs] if precs else precs
    kvs = [kv_dtype] if isinstance(kv_dtype, str) else kv_dtype
    mem_prec = apply_precision(m, (precs[0] if precs else None) if precs and precs[0] != "native" else (m.name_precision or "native"),
                               kvs[0] if kvs else "native")
    verdict = memory_verdict(m, mem_prec, g, isl, osl).to_json()
    out: dict[str, Any] = {
        "model": m.id, "gpus": g.label, "workload": {"isl": isl, "osl": osl, "concurrency": concurrency, "rate": rate, "prefix_hit": prefix_hit,
                                                      "prompts_per_client": prompts_per_client, "preset": preset,
                                                      "routing_alpha": alpha, "random_range_ratio": random_range_ratio,
                                                      "two_batch_overlap": bool(two_batch_overlap),
                                                      # the mean lengths the evaluator costs (ISL / OSL are the longest with a range ratio)
                                                      "mean_isl": mean_length(isl, random_range_ratio),
                                                      "mean_osl": mean_length(osl, random_range_ratio)},
        "price_usd_per_gpu_hour": g.hardware.price_usd_per_hour if price is None else price,
        "fits": False, "memory": verdict, "n_configs_evaluated": 0, "n_feasible": 0, "frontier": [], "knee": None,
        "best_under_sla": None, "sla": {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "min_tok_s_user": min_tok_s_user,
                "percentile": None if sla_percentile is None else int(sla_percentile)},
        "notes": [f"config.json: {w}" for w in getattr(m, "warnings", ())],  # keys simfront does not understand
        "engine": engine_info(engine, engine_version),
        "layouts": None if classes is None else list(classes),
        "max_pp": max_pp,
    }
    prov_at = len(out["notes"])  # provenance notes go after the config.json warnings

    def finish(points=None) -> Frontier:
        """The result, with the provenance of what the shown points price (the frontier and the best point under the
        SLA, which need not be on it); with none shown, of what the searched configurations price (``points``: every
        feasible one, when the load constraints kept none), else the GPU's whole provenance."""
        shown = out["frontier"] + ([out["best_under_sla"]] if out["best_under_sla"] else [])
        if shown:
            priced = priced_of(m, shown, g.hardware)
        else:
            priced = priced_of_columns(m, points, g.hardware) if points is not None and len(points["precision"]) else None
        out["provenance"] = _provenance_of(g.hardware, priced)
        out["notes"][prov_at:prov_at] = out["provenance"]["notes"]
        return _frontier(out, t0, points)

    specs = None
    if spec is not None:
        specs = spec_choices(spec, spec_k, acceptance, m)
    space = SearchSpace(precisions=precs if precs and precs != ["native"] else None, kv_dtypes=kvs, specs=specs,
                        modes=tuple(modes) if modes else ("agg", "disagg"), engine=engine,
                        engine_version=engine_version, layouts=classes, max_pp=max_pp)
    if precs == ["native"]:
        space.precisions = ["native"]
    if prompts_per_client is not None and not (math.isfinite(prompts_per_client) and prompts_per_client >= 1):
        raise SimfrontError(f"--prompts-per-client {prompts_per_client}: give a number of requests per client, at least 1")
    # steady state by default; a benchmark of K prompts per client sends 1/K of its requests in its first wave
    wave = 0.0 if prompts_per_client is None else 1.0 / prompts_per_client
    inputs.check_range_ratio(random_range_ratio)
    wl = Workload(isl=isl, osl=osl, prefix_hit=prefix_hit, chunk_tokens=chunk_tokens or DEFAULT_CHUNK_TOKENS,
                  startup_wave_share=wave, routing_alpha=alpha, length_range_ratio=random_range_ratio,
                  two_batch_overlap=bool(two_batch_overlap),
                  **engine_workload(engine, engine_version))  # the release priced
    res = search(m, g, wl, space, price)
    out["n_configs_evaluated"] = res.n_evaluated
    out["n_feasible"] = res.n_feasible
    if res.n_feasible == 0:
        out["notes"].append(no_feasible_reason(m.id, g, verdict, space.modes, classes, max_pp))
        return finish()
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
        return finish(pts)
    # the rows the load constraints keep (None: every row, and the columns are read without a copy)
    sel = None if keep.all() else np.nonzero(keep)[0]

    def kept(a):
        return a if sel is None else a[sel]

    if scores:  # quality as the third axis: a point survives when no other is as good on all three
        from .quality import pareto_mask_3d, point_scores

        pts["quality"] = point_scores(scores, pts["precision"], pts["kv_dtype"], pts["spec"])
        on_front = pareto_mask_3d(kept(pts["tok_s_user"]), kept(pts["tok_s_gpu"]), kept(pts["quality"]))
        out["notes"].append("--quality: frontier over tok/s/user, tok/s/GPU and your quality scores (speculative "
                            "decoding counts as lossless unless scored)")
    else:
        on_front = pareto_mask(kept(pts["tok_s_user"]), kept(pts["tok_s_gpu"]))
    front = np.nonzero(on_front)[0] if sel is None else sel[on_front]
    front = front[np.argsort(pts["tok_s_user"][front])]
    from .coverage import calibrated_layouts, outside_note, overlap_unused_note, wide_ep_note
    from .launch import startable_note
    from .uncertainty import prediction_bands

    q, widen = prediction_bands(g.hardware.id, m.id)
    spec_on_front = {str(x) for x in np.asarray(pts["spec"])[front]} - {"none", ""}
    from .memory import window_note
    from .scheduler import release_note
    from .speculative import borrowed_note

    for note in (release_note(engine, engine_version), cpu_overlap_note(engine, bool(spec_on_front), engine_version),
                 borrowed_note(spec_on_front, m.id), window_note(m, m.native.kv, wl.isl + wl.osl),
                 mla_fallback_note(engine, wl.mla_native_heads, g.hardware, m)):
        if note:
            out["notes"].append(note)
    rows = _rows_of(pts, front)  # the frontier's rows only: no column of a 10^6-point search is joined for them
    layouts = calibrated_layouts(g.hardware.family)  # the layouts measured on this GPU family
    out["frontier"] = [_banded(point_dict(rows, j), q, widen, layouts) for j in range(front.size)]
    off = [p["outside_calibration"] for p in out["frontier"] if p["outside_calibration"]]
    note = outside_note(f"{len(off)} of the {len(out['frontier'])} frontier points", off, EXTRAPOLATION_WIDENING)
    if note:
        out["notes"].append(note)
    note = None if engine else startable_note(out["frontier"], "frontier point")
    if note:
        out["notes"].append(note)
    if note := wide_ep_note(out["frontier"], layouts, alpha, two_batch_overlap=bool(two_batch_overlap)):
        out["notes"].append(note)
    if two_batch_overlap and (note := overlap_unused_note(m, out["frontier"], "frontier point")):
        out["notes"].append(note)
    out["uncertainty"] = {"band": "p10-p90 of measured/predicted from leave-one-model-out validation", "widening": widen,
                          "note": "wider (x%.1f on log scale) for GPUs or models outside the calibration data" % widen if widen > 1 else
                          "GPU and model are inside the calibration data"}
    if tails or sla_percentile is not None:  # tail latencies of the frontier points from the step-level simulation
        from .serving import engine_profile
        from .tails import TAIL_FIELDS, goodput_requests_s, scaled_tails, simulate_points, simulated_workload

        raw_sim = simulate_points(m, g, wl, pts, front, engine_profile(engine, engine_version), engine, space)
        sim = scaled_tails(raw_sim, pts["ttft_ms"][front], pts["tpot_ms"][front])
        if ttft_ms is not None or tpot_ms is not None:  # requests/s within the SLA, request by request
            sim["goodput_requests_s"] = goodput_requests_s(raw_sim, pts["ttft_ms"][front], pts["tpot_ms"][front],
                                                           pts["requests_s"][front], ttft_ms, tpot_ms)
        for j, p in enumerate(out["frontier"]):
            for f in TAIL_FIELDS + (("goodput_requests_s",) if "goodput_requests_s" in sim else ()):
                v = float(sim[f][j])
                p[f] = round(v, 4) if np.isfinite(v) else None
        for why, k in sorted(Counter(raw_sim["unsimulated"].values()).items()):  # points the simulation left out, per reason
            out["notes"].append(f"{k} of the {len(out['frontier'])} frontier points {'has' if k == 1 else 'have'} no simulated "
                                f"tails: {why}")
        out["notes"].append("p50/p90/p99 TTFT and TPOT of the frontier points: the evaluator's means times the spread of a "
                            f"step-level simulation (steady closed loop at each point's concurrency, {simulated_workload(wl)}); "
                            "against measured p99 TTFT the reported p99 runs low (README, Accuracy: "
                            "scripts/validate_simulation.py)")
    k = knee_index(pts["tok_s_user"][front], pts["tok_s_gpu"][front])
    out["knee"] = out["frontier"][k] if k >= 0 else None
    if ttft_ms is not None or tpot_ms is not None or min_tok_s_user is not None:
        if sla_percentile is not None:  # the SLA on a percentile: judged on the simulated frontier points
            pct = int(sla_percentile)
            meets = [p for p in out["frontier"]
                     if (ttft_ms is None or (p.get(f"ttft_p{pct}_ms") or np.inf) <= ttft_ms)
                     and (tpot_ms is None or (p.get(f"tpot_p{pct}_ms") or np.inf) <= tpot_ms)
                     and (min_tok_s_user is None or p["tok_s_user"] >= min_tok_s_user)]
            if meets:
                out["best_under_sla"] = max(meets, key=lambda p: p["tok_s_gpu"])
            else:
                out["notes"].append(f"no frontier point meets the SLA at p{pct}")
        else:
            ok = sla_mask(pts, ttft_ms, tpot_ms, min_tok_s_user) & keep
            if ok.any():
                j = int(np.nonzero(ok)[0][np.argmax(pts["tok_s_gpu"][ok])])
                out["best_under_sla"] = _banded(point_dict(_rows_of(pts, [j]), 0), q, widen, layouts)
            else:
                out["notes"].append("no configuration meets the SLA")
    return finish(pts)


# How the note that says why a search found no feasible configuration begins (no_frontier_reason finds it)
NO_FEASIBLE = "no configuration fits"


def check_layout_classes(m, g: GpuSet, classes: tuple[str, ...] | None) -> None:
    """Fail, naming the classes there are, when no layout of ``classes`` (``--layout``) exists for ``m`` on ``g``
    (before memory: a class the model's architecture or the GPU count rules out)."""
    if classes is None:
        return
    check_classes_for(m.arch, m.id, classes)
    lay = enumerate_layouts(m.arch, g.count, max_tp=g.hardware.scaleup.domain_gpus)
    if layout_class_mask(classes, lay["dp"], lay["ep"]).any():
        return
    have = [c for c in LAYOUT_CLASSES if layout_class_mask((c,), lay["dp"], lay["ep"]).any()]
    raise SimfrontError(f"--layout {','.join(classes)}: no such layout of {m.id} on {g.label} (it needs more GPUs); "
                        f"layout classes there: {', '.join(have) or 'none'}")


def no_feasible_reason(model_id: str, g: GpuSet, verdict: dict, modes, layouts=None, max_pp: int | None = None) -> str:
    """Why a search of ``modes`` on the GPU set ``g`` found no configuration, given the memory verdict of the model:
    it fits on no layout of the set, or it fits on one but a disaggregated deployment needs two workers that each
    hold it (a prefill and a decode worker of at least ``min_gpus`` GPUs each), or on none that ``layouts``
    (``--layout``) and ``max_pp`` (``--max-pp``) leave."""
    need = verdict.get("min_gpus")
    if verdict.get("fits") and tuple(modes) == ("disagg",) and need and 2 * need > g.count:
        return (f"{NO_FEASIBLE} as disaggregated on {g.label}: a prefill and a decode worker must each hold {model_id} "
                f"(at least {need}x{g.hardware.id} each), so disaggregation needs {2 * need}x{g.hardware.id} or more; "
                f"use --mode agg, or more GPUs")
    held = ", ".join(x for x in (f"--layout {','.join(layouts)}" if layouts else "",
                                 f"--max-pp {max_pp}" if max_pp is not None else "") if x)
    if held and verdict.get("fits"):
        return f"{NO_FEASIBLE} in memory within {held} on {g.label}; it fits on other layouts: drop or widen {held}"
    return f"{NO_FEASIBLE} in memory with the options given; see 'memory' for the verdict and alternatives"


def _banded(point: dict, q: dict, widen: float, layouts: dict) -> dict:
    """A frontier point with its ``outside_calibration`` knobs (:func:`simfront.coverage.outside_calibration`) and its
    p10-p90 band, widened by ``EXTRAPOLATION_WIDENING`` where a knob lies outside the measured layouts."""
    from .coverage import outside_calibration
    from .uncertainty import add_bands

    point["outside_calibration"] = outside_calibration(point, layouts)
    return add_bands(point, q, widen * (EXTRAPOLATION_WIDENING if point["outside_calibration"] else 1.0))


# ---------------------------------------------------------------------------------------------
# Per-op roofline of one step


def explain(model: str, gpus: str | GpuSet, tp: int = 1, pp: int = 1, ep: int = 1, attention_dp: int = 1, batch: int = 1,
            ctx: int | None = None, phase: str = "decode", precision: str = "native", kv_dtype: str = "native", spec: str | None = None,
            spec_k: int | None = None, acceptance: float | None = None, isl: int | None = None, osl: int | None = None,
            engine: str | None = None, chunk_tokens: int | None = None, mode: str = "agg",
            random_range_ratio: float | None = None, engine_version: str | None = None,
            routing_skew: float | str | None = None, two_batch_overlap: bool = False) -> StepBreakdown:
    """Per-op table of one forward step on one GPU and every term between it and the step time the
    serving model uses (hidden kernel latency, engine step scale, per-step overhead, mixed prefill
    steps, draft passes, tokens accepted per step).

    decode with ``isl``/``osl``: the step of a frontier point, exactly as ``predict`` costs it (an
    aggregated worker's mean of decode-only and mixed steps, or a disaggregated decode worker's pure
    decode step with ``mode="disagg"``); decode with ``ctx`` alone: a pure decode step at that cached
    context; prefill: ``batch`` prompts of ``ctx`` tokens per rank. ``random_range_ratio``: the benchmark's lengths,
    as for :func:`predict` (at 1 a prefill-first engine runs the aggregated worker in waves).
    """
    if ctx is None and isl is not None and osl is not None:  # a serving point's lengths, named as given (not as their --ctx)
        inputs.check_lengths(isl, osl, get_model(model) if isinstance(model, str) else model)
    inputs.check_explain(model, gpus, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, batch=batch,
                         ctx=ctx if ctx is not None else int((isl or 1) + (osl or 0)), phase=phase, precision=precision, kv_dtype=kv_dtype)
    from .layout import check_layout
    from .search import make_spec, spec_label
    from .scheduler import release_note
    from .speculative import borrowed_note
    from .serving import (NO_SPEC, Workload, _split, engine_workload, aggregated_raw, decode_context, decode_raw, engine_profile, finish_aggregated,
                          mean_step_s, others_mixed_share, prefill_raw, runs_in_waves, step_terms)
    from .fusion import fused as allreduce_norm_fused
    from .step import ACT_BYTES, ELEMENTWISE_OPS, StepBatch, forward_step

    if phase not in ("decode", "prefill"):
        raise SimfrontError(f"--phase {phase!r}: valid values are decode, prefill")
    if mode not in ("agg", "disagg"):
        raise SimfrontError(f"--mode {mode!r}: valid values are agg, disagg")
    if batch < 1:
        raise SimfrontError(f"--batch {batch} must be at least 1")
    if phase == "prefill" and ctx is None:
        raise SimfrontError("--phase prefill prices --batch prompts of --ctx tokens: give --ctx (--isl and --osl set "
                            "the decode step of a serving point)")
    if ctx is None and (isl is None or osl is None):
        raise SimfrontError("give --ctx (a bare step) or --isl and --osl (the step of a serving point)")
    if ctx is not None and (isl is not None or osl is not None):
        raise SimfrontError(f"give --ctx (a bare step) or --isl and --osl (the step of a serving point), not both: --ctx "
                            f"{ctx} with --isl {isl} / --osl {osl}")
    if ctx is not None:  # what shapes only a serving point's step would go unused on a bare one
        unused = [flag for flag, v in (("--random-range-ratio", random_range_ratio), ("--chunk-tokens", chunk_tokens)) if v is not None]
        if unused:
            raise SimfrontError(f"{' and '.join(unused)} shape{'s' if len(unused) == 1 else ''} the step of a serving point: "
                                f"give --isl and --osl instead of --ctx")
    inputs.check_spec(spec, spec_k, acceptance)
    m = get_model(model)
    if ctx is not None:
        check_lengths(ctx=ctx)
    g = parse_gpus(gpus) if isinstance(gpus, str) else gpus
    inputs.check_engine_gpu(engine, g.hardware)
    lay = inputs.worker_layout(tp, pp, attention_dp, ep, g.count)
    check_layout(m.arch, lay, g.count)
    prec = apply_precision(m, precision if precision != "native" else (m.name_precision or "native"), kv_dtype)
    sp = NO_SPEC
    if spec is not None or spec_k:
        sp = make_spec(spec or "mtp", spec_k, acceptance, m)
    prof = engine_profile(engine, engine_version)  # the scheduler family of that release (newest when None)
    alpha = routing_alpha_of(routing_skew)  # the MoE routing skew, as predict takes it
    inputs.check_two_batch_overlap(engine, two_batch_overlap)
    tbo = bool(two_batch_overlap)  # the engine's two-batch overlap, as predict takes it
    # the overlap with the smallest step the engine splits, as every workload of this step carries it
    ew = engine_workload(engine, engine_version)  # that release's scheduler facts, as every workload of this step carries them
    overlap = {"two_batch_overlap": tbo, "two_batch_overlap_split": ew["two_batch_overlap_split"]}
    hw = g.hardware
    q = 1 + sp.k
    terms: list[dict] = []
    serving = isl is not None and osl is not None and phase == "decode"
    if serving:
        inputs.check_range_ratio(random_range_ratio)
        wl = Workload(isl=isl, osl=osl, chunk_tokens=float(chunk_tokens or DEFAULT_CHUNK_TOKENS), length_range_ratio=random_range_ratio,
                      routing_alpha=alpha, **{**ew, **overlap})
        # mean cached context of a decoding request on the busiest attention-DP rank (what the evaluator costs)
        ctx_eff = float(decode_context(wl, attention_dp, batch))
        sb = StepBatch(decode_reqs=batch, decode_ctx=ctx_eff, q_tokens=q)
    elif phase == "decode":
        ctx_eff = float(ctx)
        sb = StepBatch(decode_reqs=batch, decode_ctx=ctx_eff, q_tokens=q)
    else:
        ctx_eff = float(ctx)
        sb = StepBatch(prefill_tokens=batch * ctx, prefill_seqs=batch, sampled=batch)
    tokens = batch * q if phase == "decode" else batch * ctx
    st = forward_step(m, prec, hw, tp, pp, attention_dp, ep, sb, routing_alpha=alpha, two_batch_overlap=Workload(**overlap).overlap,
                      allreduce_norm_fusion=ew["allreduce_norm_fusion"], mla_native_heads=ew["mla_native_heads"])
    if serving and mode == "agg":
        raw = aggregated_raw(m, prec, hw, tp, pp, attention_dp, ep, float(batch), wl, sp)
        split = raw.decode_step_s
    elif serving:
        split = decode_raw(m, prec, hw, tp, pp, attention_dp, ep, float(batch), wl, sp)[0]
    elif phase == "decode":
        split = decode_raw(m, prec, hw, tp, pp, attention_dp, ep, float(batch), Workload(isl=ctx_eff, osl=0.0, routing_alpha=alpha,
                                                                                                  **overlap), sp)[0]
    else:
        split, _, _, lone = prefill_raw(m, prec, hw, tp, pp, attention_dp, ep, float(batch), Workload(isl=float(ctx), osl=1.0, routing_alpha=alpha,
                                                                                                          **overlap), np.inf)
    raw_roof, raw_fixed = (float(x) for x in st.split())
    # requests on the rank each decode step: the running batch, which the token budget can hold below --batch
    running = float(np.asarray(raw.batch).ravel()[0]) if serving and mode == "agg" else float(batch)
    charged = running if phase == "decode" else 0.0  # a prefill step charges no per-request decode CPU work
    # a pipelined decode round schedules one micro-batch per stage, each with its own CPU work (serving.step_terms)
    micro = float(pp) if phase == "decode" else 1.0
    t = {k: float(v) for k, v in step_terms(split, prof, charged, sp.accepted_per_step > 1.0, micro).items()}
    terms.append({"term": "ops: roofline legs (compute, memory or wire time)", "seconds": raw_roof})
    terms.append({"term": "ops: fixed latencies (launch, fill, collective latency)", "seconds": raw_fixed})
    # the step's ops with the draft passes, before a pipelined worker's round (serving.pipeline_round)
    whole = float(np.sum(_split(st, m, sp, pipelined=False))) if phase == "decode" else raw_roof + raw_fixed
    if sp.k > 0 and sp.method != "ngram":
        terms.append({"term": f"draft passes ({sp.k} x {sp.draft_layers:g} layer + LM head)", "seconds": whole - raw_roof - raw_fixed})
    if pp > 1:
        terms.append({"term": f"pipeline: {pp} micro-batches through the busiest of {pp} stages (the last holds the LM head"
                              + (" and the drafts" if sp.k > 0 and sp.method != "ngram" else "") + ") plus the sends",
                      "seconds": t["roofline_s"] + t["fixed_s"] - whole})
    terms.append({"term": f"hidden by the engine (kernel_overlap {prof['kernel_overlap']:.3f} of the fixed part)", "seconds": -t["hidden_s"]})
    terms.append({"term": f"engine step scale x{prof['step_scale']:.3f}", "seconds": t["scale_s"]})
    per_mb = f" x {micro:g} micro-batches" if micro > 1 else ""
    terms.append({"term": "per-step CPU overhead" + per_mb, "seconds": t["overhead_s"]})
    terms.append({"term": f"per-request CPU overhead ({charged:g} decode requests x {prof.get('request_overhead_s', 0.0) * 1e6:.1f} us{per_mb})",
                  "seconds": t["request_overhead_s"]})
    if t["cpu_hidden_s"] > 0:
        terms.append({"term": "CPU work the overlap scheduler runs beside the GPU step", "seconds": -t["cpu_hidden_s"]})
    engine_step = t["engine_s"]
    out_step = engine_step
    lone_step = None
    if phase == "prefill":  # what a prompt that finds a disaggregated prefill worker idle takes: its step alone on one rank
        lone_step = float(step_terms(lone, prof)["engine_s"])
    mixed = None
    if serving and mode == "agg":
        t_dec, t_mix, _mean = (float(x) for x in mean_step_s(raw, prof))
        share = float(raw.mixed_share)
        mixed = {"share": share, "prompt_tokens": float(raw.mixed_tokens), "mixed_step_s": t_mix, "decode_step_s": t_dec}
        if runs_in_waves(prof, wl.length_range_ratio):  # the evaluator's wave form (serving._wave_latencies)
            wave_step = float(finish_aggregated(raw, prof).tpot_s) * sp.accepted_per_step
            terms.append({"term": f"prefill-first waves: each round's burst of {float(raw.batch) * float(raw.isl_new):,.0f} prompt "
                                  f"tokens per rank, half of it spread over the OSL - 1 tokens", "seconds": wave_step - t_dec})
            out_step = wave_step
        else:
            # the steps between one request's tokens carry the other requests' prompts (serving.others_mixed_share)
            seen = float(others_mixed_share(raw))
            terms.append({"term": f"mixed steps: {seen:.2%} of the steps between a request's tokens also carry "
                                  f"{float(raw.mixed_tokens):,.0f} prompt tokens of the other requests ({t_mix * 1e3:,.3f} ms each)",
                          "seconds": seen * (t_mix - t_dec)})
            out_step = t_dec + seen * (t_mix - t_dec)
    al = sp.accepted_per_step
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
    flops = float(st.flops)
    attn_names = ("attn.decode", "attn.prefill", "mla.attn_decode", "mla.attn_prefill", "dsa.indexer_decode", "dsa.indexer_prefill",
                  "linear_attn.decode", "linear_attn.prefill")
    model_flops = float(st.model_flops(tp, attention_dp))
    attn_flops = float(sum(float(np.asarray(r.count)) * float(r.cost.flops) * (1 if r.replicated else tp) for r in st.ops
                           if r.name in attn_names)) * attention_dp
    elem_flops = float(sum(float(np.asarray(r.count)) * float(r.cost.flops) * (1 if r.replicated else tp) for r in st.ops
                           if r.name in ELEMENTWISE_OPS)) * attention_dp
    pc = m.params
    sampled = tokens if phase == "decode" else batch
    n_tok = tokens * attention_dp
    # reference: 2 FLOPs per active weight per token (embedding lookup excluded; LM head only for
    # the tokens that are sampled), over every attention-DP rank
    ref = 2.0 * (pc.active - pc.lm_head_active) * n_tok + 2.0 * pc.lm_head_active * sampled * attention_dp
    weight_flops = model_flops - attn_flops - elem_flops
    # the engine's all-reduce + RMSNorm fusion at this step's tokens per rank (simfront.fusion), for the note below
    ar_fused = bool(np.any(allreduce_norm_fused(ew["allreduce_norm_fusion"], m.arch, hw, tp, attention_dp, tokens,
                                                tokens * m.arch.hidden * ACT_BYTES)))
    # the engine's MLA decode away from the platform's native kernel at this layout's heads per rank
    from .step import mla_fallback_reason

    mla_fallback = mla_fallback_reason(ew["mla_native_heads"], hw, m.arch.attention, tp, attention_dp) if phase == "decode" else None
    return StepBreakdown(**{
        "model": m.id, "gpus": g.label, "layout": lay.label(), "phase": phase, "mode": mode, "batch": batch, "ctx": ctx_eff,
        "isl": isl, "osl": osl, "random_range_ratio": random_range_ratio if serving else None,
        "precision": prec.label, "kv_dtype": prec.kv, "spec": spec_label(sp), "engine": engine or "default", "routing_alpha": alpha,
        "two_batch_overlap": tbo,
        # the profile's numbers (the release's fusion rules ride along as rules; the note below says where they apply)
        "profile": {k: v for k, v in prof.items() if isinstance(v, float)}, "tokens": tokens, "ops": rows, "raw_step_time_s": float(st.time_s), "terms": terms,
        "engine_step_s": engine_step, "mixed": mixed, "step_time_s": out_step, "lone_prompt_step_s": lone_step,
        "accepted_tokens_per_step": al,
        "tpot_s": out_step / al if phase == "decode" else None,
        "step_flops_per_gpu": flops, "model_flops": model_flops, "attention_flops": attn_flops, "weight_flops": weight_flops,
        "weight_flops_reference": ref, "weight_flops_ratio": weight_flops / ref if ref else None,
        "provenance": _with_notes(_provenance_of(hw, priced_configs(m, hw, [(prec.label, prec.kv, lay.gpus_per_worker)])),
                                  borrowed_note([spec_label(sp)], m.id) if phase == "decode" else None,
                                  release_note(engine, engine_version)),  # another model's drafter; a release older than simfront knows
        "engine_refuses": _engine_refuses(engine, engine_version, tp, pp, attention_dp, ep, sp.k > 0 and phase == "decode",
                                          mode == "disagg" and phase == "decode"),
        "note": "op times and FLOPs are per GPU of one attention-DP rank, all layers (a PP worker spreads them over its stages); "
                "step_time_s is the step the serving model uses (terms add up to it from the op sum); "
                "model_flops counts the useful work of the whole worker (replicated ops once); reference = 2 x active params x tokens"
                + ("; two-batch overlap: where the step splits, each op of one micro-batch runs twice (n counts both) and "
                   "the all-to-all counts only the share the other micro-batch's compute does not hide" if tbo else "")
                + ("; this engine release runs the TP all-reduce, the residual add and the RMSNorm after it as one kernel "
                   "here (simfront/engines/scheduler.yaml allreduce_norm_fusion), so the norms that follow the all-reduces "
                   "are inside them, not in norms+residual" if ar_fused else "")
                + (f"; mla.attn_decode is priced as the fallback kernel: {mla_fallback}" if mla_fallback else ""),
    })


def _engine_refuses(engine, engine_version, tp, pp, attention_dp, ep, drafts, disagg) -> str | None:
    """Why ``engine`` (at ``engine_version``) would not start this worker (simfront.engine_rules), or None: ``explain``
    prices any layout, and says so when the engine it prices cannot run it."""
    from .engine_rules import why_not
    from .scheduler import engine_key

    key = engine_key(engine) if engine else "default"
    if key == "default":
        return None
    return why_not(key, tp, pp, attention_dp, ep, drafts, engine_version, disagg) or None


# ---------------------------------------------------------------------------------------------
# Validation


def builtin_measurements() -> list[str]:
    from .validation import builtin_files

    return builtin_files()


def validate(paths: list[str], overrides: dict | None = None, frontier: bool = False) -> dict:
    """Measured vs predicted for kernel and serving files (see simfront.validation); ``frontier``: also
    residual trends by knob and measured frontiers against predicted ones (simfront.fidelity)."""
    from .validation import validate_files

    return validate_files(paths, overrides, frontier=frontier)


def validation_flat(res: dict) -> ValidationReport:
    """The ``--json`` shape of a validation (summary, rows, problems) as a typed report."""
    from .validation import flat

    return ValidationReport(**flat(res))


# ---------------------------------------------------------------------------------------------
# Frontier comparison: does a knob move configurations along the frontier or push it out?

COMPARE_KNOBS = ("precision", "kv_dtype", "spec", "mode", "layout", "two_batch_overlap", "gpus")
# --compare two_batch_overlap=off,on: the spellings of each setting
OVERLAP_VALUES = {"off": False, "false": False, "no": False, "0": False, "on": True, "true": True, "yes": True, "1": True}
from .pareto import SAME_FRONTIER_TOLERANCE  # noqa: E402,F401 - re-exported: notebooks read it from the API


def _mean_quality(front) -> float | None:
    """Mean user quality score over a frontier's points (None without ``--quality``)."""
    q = [p["quality"] for p in front if p.get("quality") is not None]
    return float(np.mean(q)) if q else None


def no_frontier_reason(res: Frontier) -> str:
    """Why a prediction shows no frontier: the model fits on no layout of the set (the memory verdict's reason), or the
    note that says what else excluded every configuration (a mode the set cannot hold, a load no configuration meets)."""
    mem = res["memory"] or {}
    if not mem.get("fits", True) and mem.get("reason"):
        return mem["reason"]
    return next((n for n in reversed(res["notes"]) if n.startswith("no configuration")), "no configuration was found")


def frontier_compare(model: str, gpus: str, knob: str, values: list[str], isl: int | None = None, osl: int | None = None, **kw) -> dict:
    """Frontiers for each value of one knob, and how each moves relative to the first value."""
    inputs.check_frontier_compare(model, gpus, knob, values)
    from .pareto import frontier_shift

    knob = knob.replace("-", "_")
    if knob == "kv":
        knob = "kv_dtype"
    if knob not in COMPARE_KNOBS:
        raise SimfrontError(f"--compare {knob!r}: valid knobs are {', '.join(COMPARE_KNOBS)} (e.g. precision=fp8,nvfp4)")
    if len(values) < 2:
        raise SimfrontError(f"--compare {knob}=... needs at least two comma-separated values")
    own = {"precision": "precision", "kv_dtype": "kv_dtype", "spec": "spec", "mode": "modes", "layout": "layout",
           "two_batch_overlap": "two_batch_overlap"}.get(knob)
    if own is not None and kw.get(own) is not None:  # the compared knob takes each value in turn: a held value would be dropped
        flag = {"modes": "--mode", "kv_dtype": "--kv-dtype", "two_batch_overlap": "--two-batch-overlap"}.get(own, f"--{own}")
        raise SimfrontError(f"{flag} cannot be given with --compare {knob}=...: that knob takes each compared value in turn")
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
            if v.strip().lower() in ("none", "off"):  # --spec-k / --acceptance describe the drafting arms only
                args.pop("spec_k", None)
                args.pop("acceptance", None)
        elif knob == "precision":
            args["precision"] = [v]
        elif knob == "kv_dtype":
            args["kv_dtype"] = [v]
        elif knob == "layout":
            args["layout"] = [v]
        elif knob == "two_batch_overlap":
            on = OVERLAP_VALUES.get(v.strip().lower())
            if on is None:
                raise SimfrontError(f"--compare two_batch_overlap={','.join(values)}: {v!r} is not a setting; valid: off, on")
            args["two_batch_overlap"] = on
        res = predict(model, g, isl=isl, osl=osl, **args)
        sets.append({"value": v, "gpus": res["gpus"], "fits": res["fits"], "frontier": res["frontier"], "memory": res["memory"],
                     "n_configs_evaluated": res["n_configs_evaluated"], "reason": None if res["frontier"] else no_frontier_reason(res),
                     "notes": res["notes"]})
        wl = res.workload
    base = sets[0]
    verdicts = []
    for s in sets[1:]:
        if not (base["frontier"] and s["frontier"]):
            empty = base if not base["frontier"] else s
            verdicts.append({"value": s["value"], "verdict": "unknown", "reason": f"{empty['value']} has no frontier; see its set's reason"})
            continue
        bx = np.array([p["tok_s_user"] for p in base["frontier"]])
        by = np.array([p["tok_s_gpu"] for p in base["frontier"]])
        sx = np.array([p["tok_s_user"] for p in s["frontier"]])
        sy = np.array([p["tok_s_gpu"] for p in s["frontier"]])
        shift = frontier_shift(bx, by, sx, sy)
        if shift["verdict"] == "disjoint":
            verdicts.append({"value": s["value"], "verdict": "disjoint", "reason": shift["reason"]})
            continue
        verdict, med, best, worst, reach = (shift[k] for k in ("verdict", "median_gain", "max_gain", "min_gain", "reach_change"))
        xq, gain = shift["x"], shift["gain"]
        qb = _mean_quality(base["frontier"])
        qs = _mean_quality(s["frontier"])
        trade = None
        if qb is not None and qs is not None and abs(qs - qb) > 1e-9:
            d_pts = 100 * (qs - qb)  # quality change in points (score x 100)
            trade = {"quality_change_pts": round(d_pts, 2), "gain_pct_per_quality_pt": round(100 * med / abs(d_pts), 2)}
            if d_pts < 0 and med > 0:
                verdict = (f"trades quality for throughput: {100 * med:+.1f}% tok/s/GPU (median, equal tok/s/user) for "
                           f"{d_pts:.2f} quality points ({trade['gain_pct_per_quality_pt']:.1f}% per point lost)")
        verdicts.append({"value": s["value"], "verdict": verdict, "median_gain_pct": round(100 * med, 1), "quality_trade": trade,
                         "max_gain_pct": round(100 * best, 1), "min_gain_pct": round(100 * worst, 1),
                         "max_tok_s_user_change_pct": round(100 * reach, 1),
                         "gain_at": [{"tok_s_user": round(float(x), 2), "gain_pct": (round(100 * float(gv), 1) if np.isfinite(gv) else None)}
                                     for x, gv in zip(xq, gain)]})
    from .search import held_knobs

    held = held_knobs(routing_alpha_of(kw.get("routing_skew")), **kw)  # the other knobs every frontier was held to
    return {"model": model, "knob": knob, "baseline": values[0], "sets": sets, "verdicts": verdicts, "search": held,
            "workload": {"isl": wl.isl, "osl": wl.osl, **({"preset": wl.preset} if wl.preset else {})}}


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


# ---------------------------------------------------------------------------------------------
# Capacity planning, GPU comparison, launch commands (logic in simfront.planning / simfront.launch)


def plan(model: str, rate: float, routing_skew: float | str | None = None, **kw) -> Plan:
    """Capacity plan (see :func:`simfront.planning.plan`) as a typed :class:`simfront.results.Plan`; ``routing_skew``
    as :func:`predict` takes it (balanced, or a power-law exponent; the production-typical one by default)."""
    from .planning import plan as _plan

    return Plan(**_plan(model, rate, routing_alpha=routing_alpha_of(routing_skew), **kw))


def launch_target(res: Frontier, engine: str, engine_version: str | None = None) -> tuple[Any, str | None]:
    """The point ``--launch ENGINE`` starts: the best point under the SLA (else the knee) when the engine
    can launch its layout, else the best launchable frontier point under the SLA (else the launchable
    point nearest the knee in tok/s/user), with a note saying why; (None, reason) when none is."""
    from .launch import launchable

    sla = res["sla"]
    want = res.get("best_under_sla") or res.get("knee")
    if want is None:
        return None, None
    ok, why = launchable(want, engine, engine_version)
    if ok:
        return want, None
    cands = [p for p in res["frontier"] if launchable(p, engine, engine_version)[0]]
    if not cands:
        return None, f"--launch {engine}: no frontier point is launchable ({why}); with --engine {engine} the search keeps only what {engine} starts"
    meets = [p for p in cands if (sla["ttft_ms"] is None or p["ttft_ms"] <= sla["ttft_ms"])
             and (sla["tpot_ms"] is None or p["tpot_ms"] <= sla["tpot_ms"])
             and (sla["min_tok_s_user"] is None or p["tok_s_user"] >= sla["min_tok_s_user"])]
    if res.get("best_under_sla") is not None and meets:
        pick = max(meets, key=lambda p: p["tok_s_gpu"])
    else:
        pick = min(cands, key=lambda p: abs(math.log(p["tok_s_user"] / want["tok_s_user"])))
    return pick, f"--launch {engine}: {want['layout']} cannot be launched ({why}); launching {pick['layout']} instead"


def launch_for(point: dict, model: str, gpus: str, engine: str, isl: int, osl: int, engine_version: str | None = None,
               random_range_ratio: float | None = None, prompts_per_client: float | None = None, prefix_hit: float = 0.0,
               priced_engine: str | None = None, two_batch_overlap: bool = False) -> dict:
    """Engine launch lines, client benchmark and sidecar for a point (``engine_version``: spell the flags of
    that release; default the newest in simfront's flag tables; ``random_range_ratio``: the benchmark's lengths
    uniform in [r ISL, ISL], and ``prompts_per_client`` requests per client, as ``predict`` priced them; a
    ``prefix_hit`` the benchmark cannot reproduce, and a ``priced_engine`` profile other than ``engine``, are said in
    the notes)."""
    from .planning import launch_for as _launch_for

    gpu = gpus.split("x", 1)[1] if "x" in gpus.lower() and gpus.split("x", 1)[0].strip().isdigit() else gpus
    return _launch_for(point, model, gpu, engine=engine, isl=isl, osl=osl, engine_version=engine_version,
                       random_range_ratio=random_range_ratio, prompts_per_client=prompts_per_client, prefix_hit=prefix_hit,
                       priced_engine=priced_engine, two_batch_overlap=two_batch_overlap)


# ---------------------------------------------------------------------------------------------
# Comparing GPU sets at equal interactivity

COMPARE_LEVELS = 6  # tok/s/user levels of the comparison table


def _gpu_levels(fronts: list[list[dict]], n: int) -> np.ndarray:
    """``n`` tok/s/user levels, log-spaced over the range every frontier reaches."""
    xs = [np.array([p["tok_s_user"] for p in f], float) for f in fronts if f]
    if not xs:
        return np.zeros(0)
    lo, hi = max(x.min() for x in xs), min(x.max() for x in xs)
    if lo > hi:  # no overlap: span what every set can reach (interp_frontier serves x <= its max)
        lo = min(x.min() for x in xs)
    if hi <= 0:
        return np.zeros(0)
    lo = max(lo, hi * 1e-3)
    return np.unique(np.floor(np.geomspace(lo, hi, n) * 100) / 100)  # 2 decimals, never above the reach


def compare_gpus(model: str, gpu_sets: Sequence[str], isl: int = 1024, osl: int = 1024, prices: Mapping[str, float] | None = None,
            levels: int = COMPARE_LEVELS, **predict_kwargs) -> dict:
    """Frontiers of ``model`` on several GPU sets and a table at equal tok/s/user.

    ``predict_kwargs`` go to :func:`simfront.api.predict` (precision, kv_dtype, spec, modes, ttft_ms ...).
    Table rows: ``{tok_s_user, gpus, tok_s_gpu, tok_s_per_usd_hour, usd_per_mtok}`` (NaN-free:
    None where a set cannot reach the level). ``simfront.report.write_compare_html`` draws it.
    """
    from .pareto import interp_frontier
    from .planning import as_list, prices_by_gpu
    from .serving import usd_per_mtok

    sets_in = as_list(gpu_sets) or []
    if not sets_in:
        raise SimfrontError("compare needs at least one GPU set, e.g. 8xH200,8xB200")
    price_of = prices_by_gpu(prices)
    sets = []
    sla = None
    for s in sets_in:  # one prediction per set
        g = parse_gpus(s)
        res = predict(model, g, isl=isl, osl=osl, price=price_of.get(g.hardware.id), **predict_kwargs)
        sla = res["sla"]  # every set's (the same arguments)
        sets.append({"gpus": res["gpus"], "fits": res["fits"], "price_usd_per_gpu_hour": res["price_usd_per_gpu_hour"],
                     "frontier": res["frontier"], "knee": res["knee"], "best_under_sla": res["best_under_sla"],
                     "memory": res["memory"], "notes": res["notes"]})
    lv = _gpu_levels([s["frontier"] for s in sets], levels)
    table = []
    for x in lv:  # a handful of levels
        for s in sets:
            f = s["frontier"]
            y = float(interp_frontier([p["tok_s_user"] for p in f], [p["tok_s_gpu"] for p in f], x)[0]) if f else math.nan
            price = s["price_usd_per_gpu_hour"]
            ok = math.isfinite(y) and y > 0
            table.append({"tok_s_user": float(x), "gpus": s["gpus"], "tok_s_gpu": y if ok else None,
                          # output tok/s bought per USD/hour of rent (tok/s/GPU over USD per GPU-hour)
                          "tok_s_per_usd_hour": (y / price if price > 0 else None) if ok else None,
                          "usd_per_mtok": float(usd_per_mtok(price, y)) if ok else None})
    from .search import held_knobs

    held = held_knobs(routing_alpha_of(predict_kwargs.get("routing_skew")), **predict_kwargs)  # the knobs every set was held to
    out = {"model": get_model(model).id, "workload": {"isl": isl, "osl": osl}, "sla": sla, "search": held,
           "levels": [float(x) for x in lv], "sets": sets, "table": table}
    return out



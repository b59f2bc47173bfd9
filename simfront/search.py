"""Configuration search: enumerate every sensible way to serve a model on a GPU set, as arrays.

Axes: parallel layout (TP x attention-DP x EP x PP, replicas), precision (native plus cheaper
weight / KV formats the GPU supports), speculative decoding, batch per rank (1 .. KV limit),
aggregated or disaggregated prefill/decode (prefill and decode layouts, worker counts matched to
the traffic). Each (precision, spec) combination is one vectorised evaluation over all layouts x
batches; disaggregated pairs are combined by broadcasting prefill results against decode results.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .errors import SimfrontError
from .hardware import GpuSet
from .layout import enumerate_layouts
from .memory import plan_memory
from .models import Model, Precision, apply_precision
from .pareto import pareto_mask
from .serving import (DEFAULT_CHUNK_TOKENS, NO_SPEC, Speculation, Workload, aggregated, decode_worker, engine_profile,
                      finish_prefill, prefill_raw, usd_per_mtok)

BATCH_SIZES = np.array([1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024])
PREFILL_BATCHES = np.array([1, 2, 4, 8])
CHUNK_TOKEN_OPTIONS = (2048, 8192)
# above this many prefill x decode pairs, dominated sides are pruned before pairing (keeps big GPU
# sets such as 72xGB200 interactive; every pair that could reach the frontier is still scored)
MAX_FULL_PAIRS = 200_000
# MTP draft lengths searched (DeepSeek-style MTP reuses its next-n layer autoregressively for k > 1)
MTP_DRAFT_LENGTHS = (1, 2)
# Default per-token draft acceptance for MTP heads: DeepSeek-V3 reports 85-90% acceptance of the
# second token with its 1-layer MTP (DeepSeek-V3 report §5.4.3; modeling-notes §6). Users override.
DEFAULT_MTP_ACCEPTANCE = 0.8
DEFAULT_SPEC_K = {"mtp": 1, "eagle": 3, "ngram": 3}
DEFAULT_ACCEPTANCE = {"mtp": DEFAULT_MTP_ACCEPTANCE, "eagle": 0.7, "ngram": 0.3}
# Acceptance falls with draft position: golden acceptance lengths (InferenceX, SPEED-Bench coding,
# modeling-notes §6) give conditional acceptance of the 2nd draft 0.61-0.79 after 0.79-0.84 for the
# 1st (DeepSeek-V4 MTP 1.79 -> 2.27, GLM-5.2 MTP 1.84 -> 2.50): a ratio of about 0.85.
DEFAULT_POSITION_DECAY = 0.85
# disaggregated worker-ratio efficiency: prefill "pipeline bubble" 0.9 and decode "not saturating
# batch slots" 0.92 (aiconfigurator picking.py, modeling-notes §5)
DISAGG_PREFILL_EFF = 0.90
DISAGG_DECODE_EFF = 0.92


@dataclass
class SearchSpace:
    precisions: list[str] | None = None  # None: native + cheaper formats the GPU supports
    kv_dtypes: list[str] | None = None  # None: native + fp8 where supported
    specs: list[Speculation] | None = None  # None: none + MTP if the model ships MTP layers
    modes: tuple[str, ...] = ("agg", "disagg")
    batches: np.ndarray = field(default_factory=lambda: BATCH_SIZES)
    max_tp: int | None = None  # default: the scale-up domain
    engine: str | None = None
    # engine token budget per step (chunked-prefill size) for aggregated workers: a real serving knob
    # trading TTFT against TPOT (vLLM max_num_batched_tokens / SGLang chunked_prefill_size)
    chunk_tokens: tuple[int, ...] = CHUNK_TOKEN_OPTIONS


def precision_options(model: Model, gpus: GpuSet, space: SearchSpace) -> list[Precision]:
    hw = gpus.hardware
    if space.precisions:
        names = space.precisions
    else:
        names = ["native"]
        if hw.supports("fp8") and model.native.experts in ("bf16", "fp16"):
            names.append("fp8_block")
        if hw.fp4_formats and model.native.experts not in ("nvfp4", "mxfp4"):
            # one 4-bit format per GPU: NVFP4 where supported (finer scales, full FP4 rate), else MXFP4
            names.append("nvfp4" if "nvfp4" in hw.fp4_formats else "mxfp4")
    kvs = space.kv_dtypes or (["native", "fp8"] if hw.supports("fp8") else ["native"])
    out: list[Precision] = []
    for n in names:
        base = model.name_precision if (n == "native" and model.name_precision) else n
        for kv in kvs:
            p = apply_precision(model, base, kv)
            if p not in out:
                out.append(p)
    return out


def spec_options(model: Model, space: SearchSpace) -> list[Speculation]:
    if space.specs is not None:
        return space.specs
    out = [NO_SPEC]
    if model.arch.mtp_layers:
        out += [make_spec("mtp", k, None, model) for k in MTP_DRAFT_LENGTHS]
    return out


def make_spec(method: str, k: int | None = None, acceptance: float | None = None, model: Model | None = None) -> Speculation:
    m = method.lower()
    if m in ("none", "off", ""):
        return NO_SPEC
    if m not in DEFAULT_SPEC_K:
        raise SimfrontError(f"unknown speculative method {method!r}; valid: none, mtp, eagle, ngram")
    if m == "mtp" and model is not None and not model.arch.mtp_layers:
        raise SimfrontError(f"{model.id} ships no MTP (next-n) layers; use eagle or ngram")
    a = DEFAULT_ACCEPTANCE[m] if acceptance is None else acceptance
    if not 0.0 <= a <= 1.0:
        raise SimfrontError(f"--acceptance {a} must be between 0 and 1")
    kk = DEFAULT_SPEC_K[m] if k is None else k
    if kk < 1:
        raise SimfrontError("--spec-k must be at least 1")
    return Speculation(m, kk, a, draft_layers=0.0 if m == "ngram" else 1.0, position_decay=DEFAULT_POSITION_DECAY)


@dataclass
class SearchResult:
    points: dict[str, np.ndarray]  # column -> array over every feasible configuration
    n_evaluated: int
    n_feasible: int
    gpus: GpuSet
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.points["tok_s_gpu"].size) if self.points else 0


def _empty_cols() -> dict[str, list]:
    keys = ["mode", "tp", "pp", "ep", "attention_dp", "replicas", "batch", "concurrency", "precision", "kv_dtype", "spec",
            "ttft_ms", "tpot_ms", "tok_s_user", "tok_s_gpu", "usd_per_mtok", "requests_s", "gpus_used", "chunk_tokens",
            "prefill_tp", "prefill_ep", "prefill_attention_dp", "prefill_workers", "prefill_batch", "decode_workers"]
    return {k: [] for k in keys}


@dataclass
class WorkerTable:
    """Every worker configuration of one (precision, speculation) pair, evaluated as arrays.

    ``L`` holds layout columns of shape (layouts, 1), ``B`` the batch sizes (1, batches), ``ok`` the
    (layout, batch) pairs whose KV fits. ``agg`` maps token budget -> aggregated-worker result,
    ``decode`` is the disaggregated decode-worker result, and ``prefill`` the prefill side for the
    layouts without PP: (layout columns, prefill batches, raw step split, KV bytes to move per
    request over a 1 byte/s link, prompts in flight per worker). The search and the capacity planner
    both read these tables, so they apply the same rules.
    """

    precision: Precision
    spec: Speculation
    L: dict
    B: np.ndarray
    ok: np.ndarray
    agg: dict
    decode: object | None
    prefill: tuple | None


def worker_tables(model: Model, hw, n_gpus: int, wl: Workload, space: SearchSpace):
    """Yield a :class:`WorkerTable` per (precision, speculation) for workers of up to ``n_gpus`` GPUs."""
    max_tp = space.max_tp or hw.scaleup.domain_gpus
    lay = enumerate_layouts(model.arch, n_gpus, max_tp=max_tp)
    if lay["tp"].size == 0:
        raise SimfrontError(f"no valid parallel layout of {model.id} on {n_gpus}x{hw.id}")
    ctx = wl.isl + wl.osl
    chunks = space.chunk_tokens if wl.chunk_tokens == DEFAULT_CHUNK_TOKENS else (wl.chunk_tokens,)
    for prec in precision_options(model, GpuSet(count=n_gpus, hardware=hw), space):
        mem = plan_memory(model, prec, hw, lay["tp"], lay["pp"], lay["dp"], lay["ep"], 1, ctx)
        fit = mem.fits
        if not fit.any():
            continue
        L = {k: v[fit][:, None] for k, v in lay.items()}
        seqs_per_rank = np.floor(mem.max_concurrency[fit] / lay["dp"][fit])  # all micro-batches of one rank
        cap_b = (seqs_per_rank / L["pp"][:, 0])[:, None]  # requests per micro-batch per rank
        B = space.batches[None, :].astype(float)
        ok = B <= cap_b
        prefill = None
        one = L["pp"][:, 0] == 1  # prefill workers run without pipeline stages
        if "disagg" in space.modes and n_gpus >= 2 and one.any():
            P = {k: v[one] for k, v in L.items()}
            pb = PREFILL_BATCHES[None, :].astype(float)
            prefill = (P, pb, *prefill_raw(model, prec, hw, P["tp"], P["pp"], P["dp"], P["ep"], pb, wl, 1.0))
        for spec in spec_options(model, space):
            agg = {}
            if "agg" in space.modes:
                for chunk in chunks:
                    agg[chunk] = aggregated(model, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], B,
                                            replace(wl, chunk_tokens=float(chunk)), spec, space.engine)
            dec = None
            if prefill is not None:
                dec = decode_worker(model, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], B, wl, spec, space.engine)
            yield WorkerTable(prec, spec, L, B, ok, agg, dec, prefill)


def search(model: Model, gpus: GpuSet, wl: Workload, space: SearchSpace | None = None, price_usd_per_hour: float | None = None) -> SearchResult:
    """Evaluate the whole configuration space; every feasible configuration becomes a point."""
    space = space or SearchSpace()
    hw = gpus.hardware
    price = hw.price_usd_per_hour if price_usd_per_hour is None else price_usd_per_hour
    n = gpus.count
    cols = _empty_cols()
    n_eval = 0
    for t in worker_tables(model, hw, n, wl, space):
        L, B, ok, prec, spec = t.L, t.B, t.ok, t.precision, t.spec
        for chunk, r in t.agg.items():
            n_eval += ok.size
            workers = L["replicas"]
            tok_gpu = r.output_tok_s_worker * workers / n  # idle GPUs of the set count against it
            m = ok & np.isfinite(r.tpot_s) & (r.tpot_s > 0)
            _append(cols, m, mode="agg", tp=L["tp"], pp=L["pp"], ep=L["ep"], attention_dp=L["dp"], replicas=workers, batch=B,
                    concurrency=B * L["dp"] * L["pp"] * workers, precision=prec.label, kv_dtype=prec.kv, spec=spec_label(spec),
                    ttft_ms=r.ttft_s * 1e3, tpot_ms=r.tpot_s * 1e3, tok_s_user=r.tok_s_user, tok_s_gpu=tok_gpu,
                    usd_per_mtok=usd_per_mtok(price, tok_gpu), requests_s=r.requests_s_worker * workers,
                    gpus_used=workers * L["tp"] * L["dp"] * L["pp"], chunk_tokens=chunk, prefill_tp=0, prefill_ep=0,
                    prefill_attention_dp=0, prefill_workers=0, prefill_batch=0, decode_workers=0)
        if t.decode is not None:
            n_eval += _disagg(cols, t, hw, gpus, wl, space, price)
    pts = {k: np.asarray(v if not v or not isinstance(v[0], np.ndarray) else np.concatenate(v)) for k, v in cols.items()}
    nf = int(pts["tok_s_gpu"].size) if cols["tok_s_gpu"] else 0
    if nf == 0:
        pts = {}
    return SearchResult(pts, n_eval, nf, gpus)


def kv_link_bytes_per_s(hw, deployment_gpus, prefill_worker_gpus):
    """Link a prompt's KV crosses to its decode worker: scale-up when the whole deployment sits in one
    scale-up domain, else the prefill worker's NICs (one per GPU)."""
    return np.where(deployment_gpus <= hw.scaleup.domain_gpus, hw.scaleup.bandwidth_bytes_per_s,
                    hw.scaleout_bandwidth_bytes_per_s * prefill_worker_gpus)


def spec_label(spec: Speculation) -> str:
    """Short text of a speculative-decoding setting, e.g. ``mtp-k2@0.8`` (``none`` without drafts)."""
    return "none" if spec.k == 0 else f"{spec.method}-k{spec.k}@{spec.acceptance:g}"


def _append(cols: dict, mask: np.ndarray, **values) -> None:
    """Append the masked elements of broadcast arrays (or repeated scalars) to the columns."""
    shape = mask.shape
    idx = mask.ravel()
    k = int(idx.sum())
    for key, v in values.items():
        if isinstance(v, str):
            cols[key].append(np.full(k, v, dtype=object))
        else:
            cols[key].append(np.broadcast_to(np.asarray(v, dtype=float), shape).ravel()[idx])


def _disagg(cols, t: WorkerTable, hw, gpus, wl, space, price) -> int:
    """Pair every prefill layout with every decode configuration; integer worker counts (x, y).

    Workers of one role use one layout; counts are the largest ``y`` decode workers and the ``x``
    prefill workers that keep up with them within the GPU set. KV moves over the link
    :func:`kv_link_bytes_per_s` names.
    """
    n = gpus.count
    L, B, ok, prec, spec = t.L, t.B, t.ok, t.precision, t.spec
    worker = (L["tp"] * L["dp"] * L["pp"])[:, 0]
    d = t.decode
    Pl, pb, p_step, p_kv, p_slots = t.prefill
    gp = (Pl["tp"] * Pl["dp"])[:, 0]
    link = kv_link_bytes_per_s(hw, n, gp)[:, None]
    pr = finish_prefill(p_step, p_kv / link, p_slots, engine_profile(space.engine))
    # flatten both sides
    d_ok = ok & np.isfinite(d.tpot_s)
    di = np.nonzero(d_ok)
    d_gpus = worker[di[0]]
    d_rate = (d.requests_s_worker * DISAGG_DECODE_EFF)[di]
    d_tpot = d.tpot_s[di]
    p_idx = np.nonzero(np.isfinite(pr.ttft_s))
    p_gpus = gp[p_idx[0]]
    p_rate = (pr.requests_s_worker * DISAGG_PREFILL_EFF)[p_idx]
    p_ttft = pr.ttft_s[p_idx]
    if d_rate.size == 0 or p_rate.size == 0:
        return 0
    n_sides = int(d_rate.size + p_rate.size)
    # Large spaces prune dominated sides before pairing (smaller ones score every pair): a decode
    # configuration slower per token AND serving fewer requests/s per GPU than another of the same
    # worker size never makes a better pair (TPOT comes from decode alone, TTFT from prefill alone);
    # likewise for prefill on (TTFT, requests/s per GPU).
    if d_rate.size * p_rate.size > MAX_FULL_PAIRS:
        keep_d = _front_per_size(1.0 / d_tpot, d_rate / d_gpus, d_gpus)
        keep_p = _front_per_size(1.0 / p_ttft, p_rate / p_gpus, p_gpus)
    else:
        keep_d = np.ones(d_rate.size, dtype=bool)
        keep_p = np.ones(p_rate.size, dtype=bool)
    di = (di[0][keep_d], di[1][keep_d])
    d_gpus, d_rate, d_tpot = d_gpus[keep_d], d_rate[keep_d], d_tpot[keep_d]
    p_idx = (p_idx[0][keep_p], p_idx[1][keep_p])
    p_gpus, p_rate, p_ttft = p_gpus[keep_p], p_rate[keep_p], p_ttft[keep_p]
    Dg, Pg = d_gpus[:, None], p_gpus[None, :]
    Dr, Pr = d_rate[:, None], p_rate[None, :]
    best = np.zeros((Dg.size, Pg.size))
    best_y = np.zeros_like(best)
    best_x = np.zeros_like(best)
    for y in range(1, n):  # decode workers (small integer loop, not per configuration)
        rem = n - y * Dg
        x_fit = np.floor(np.maximum(rem, 0) / Pg)  # prefill workers that fit beside them
        x_need = np.ceil(y * Dr / Pr)  # prefill workers needed to keep y decode workers busy
        x = np.minimum(x_fit, x_need)
        good = (x >= 1) & (rem > 0)
        rate = np.minimum(x * Pr, y * Dr)  # served requests/s
        better = good & (rate > best)
        best = np.where(better, rate, best)
        best_y = np.where(better, y, best_y)
        best_x = np.where(better, x, best_x)
    m = best > 0
    tok_gpu = best * wl.osl / n
    dsel = (di[0][:, None] + 0 * Pg).astype(int)
    dbat = (di[1][:, None] + 0 * Pg).astype(int)
    psel = (p_idx[0][None, :] + 0 * Dg).astype(int)
    pbat = (p_idx[1][None, :] + 0 * Dg).astype(int)
    tpot = d_tpot[:, None] + 0 * Pg
    ttft = p_ttft[None, :] + 0 * Dg
    _append(cols, m, mode="disagg", tp=L["tp"][dsel, 0], pp=L["pp"][dsel, 0], ep=L["ep"][dsel, 0], attention_dp=L["dp"][dsel, 0],
            replicas=best_y, batch=B[0, dbat], concurrency=B[0, dbat] * (L["dp"] * L["pp"])[dsel, 0] * best_y,
            precision=prec.label, kv_dtype=prec.kv, spec=spec_label(spec), ttft_ms=ttft * 1e3, tpot_ms=tpot * 1e3,
            tok_s_user=1.0 / tpot, tok_s_gpu=tok_gpu, usd_per_mtok=usd_per_mtok(price, tok_gpu), requests_s=best,
            gpus_used=best_y * Dg + best_x * Pg, chunk_tokens=0, prefill_tp=Pl["tp"][psel, 0], prefill_ep=Pl["ep"][psel, 0],
            prefill_attention_dp=Pl["dp"][psel, 0], prefill_workers=best_x, prefill_batch=PREFILL_BATCHES[pbat],
            decode_workers=best_y)
    return n_sides + int(Dg.size * Pg.size)


def _front_per_size(x: np.ndarray, y: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Mask of points on the (x, y) Pareto front among points of the same worker size."""
    keep = np.zeros(x.size, dtype=bool)
    for g in np.unique(size):  # a handful of distinct worker sizes
        idx = np.nonzero(size == g)[0]
        keep[idx[pareto_mask(x[idx], y[idx])]] = True
    return keep

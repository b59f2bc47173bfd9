"""Configuration search: enumerate every sensible way to serve a model on a GPU set, as arrays.

Axes: parallel layout (TP x attention-DP x EP x PP, replicas), precision (native plus cheaper
weight / KV formats the GPU supports), speculative decoding, batch per rank (1 .. KV limit),
aggregated or disaggregated prefill/decode (prefill and decode layouts, worker counts matched to
the traffic). Each (precision, spec) combination is one vectorised evaluation over all layouts x
batches; disaggregated pairs are combined by broadcasting prefill results against decode results.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field

import numpy as np

from .engine_rules import startable_by_any
from .errors import SimfrontError
from .hardware import GpuSet
from .layout import enumerate_layouts, layout_class_mask, parse_layout_classes
from .memory import plan_memory
from .models import Model, Precision, apply_precision
from .deployment import evaluate_agg, evaluate_disagg
from .scheduler import engine_key
from .speculative import family_for, survival
from .serving import (DEFAULT_CHUNK_TOKENS, NO_SPEC, DecodeResult, PrefillResult, Speculation, Workload, engine_profile,
                      worker_raw, finish_decode, finish_prefill, slot_at_transfer, usd_per_mtok)

BATCH_SIZES = np.array([1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024])
PREFILL_BATCHES = np.array([1, 2, 4, 8])
CHUNK_TOKEN_OPTIONS = (2048, 8192)
# above this many prefill x decode pairs, dominated sides are pruned before pairing (keeps big GPU
# sets such as 72xGB200 interactive; every pair that could reach the frontier is still scored)
MAX_FULL_PAIRS = 200_000
# Draft lengths searched for a speculative method given without --spec-k, and for the MTP a model ships
# (DeepSeek-style MTP reuses its next-n layer autoregressively for k > 1; EAGLE and n-gram drafts chain);
# measured acceptance lengths per position (models/speculative.yaml) decide which one pays off
DRAFT_LENGTHS = (1, 2, 3, 4)
# Default per-token draft acceptance for MTP heads: DeepSeek-V3 reports 85-90% acceptance of the
# second token with its 1-layer MTP (DeepSeek-V3 report §5.4.3; modeling-notes §6). Users override.
DEFAULT_MTP_ACCEPTANCE = 0.8
DEFAULT_SPEC_K = {"mtp": 1, "eagle": 3, "ngram": 3}
DEFAULT_ACCEPTANCE = {"mtp": DEFAULT_MTP_ACCEPTANCE, "eagle": 0.7, "ngram": 0.3}
# Acceptance falls with draft position: golden acceptance lengths (InferenceX, SPEED-Bench coding,
# modeling-notes §6) give conditional acceptance of the 2nd draft 0.61-0.79 after 0.79-0.84 for the
# 1st (DeepSeek-V4 MTP 1.79 -> 2.27, GLM-5.2 MTP 1.84 -> 2.50): a ratio of about 0.85.
DEFAULT_POSITION_DECAY = 0.85


@dataclass
class SearchSpace:
    precisions: list[str] | None = None  # None: native + cheaper formats the GPU supports
    kv_dtypes: list[str] | None = None  # None: native + fp8 where supported
    specs: list[Speculation] | None = None  # None: none + MTP if the model ships MTP layers
    modes: tuple[str, ...] = ("agg", "disagg")
    batches: np.ndarray = field(default_factory=lambda: BATCH_SIZES)
    max_tp: int | None = None  # default: the scale-up domain
    engine: str | None = None
    engine_version: str | None = None  # the engine release whose scheduler family is priced (None: the newest)
    # engine token budget per step (chunked-prefill size) for aggregated workers: a real serving knob
    # trading TTFT against TPOT (vLLM max_num_batched_tokens / SGLang chunked_prefill_size)
    chunk_tokens: tuple[int, ...] = CHUNK_TOKEN_OPTIONS
    # keep only configurations one of these engines can start (simfront.engine_rules), each ``engine`` or
    # ``engine@release`` (the release's rules; the newest without one); None: ``engine`` at ``engine_version`` (no rules
    # for the all-engine average). Validation sets the engines and releases of a measured sweep.
    start_engines: tuple[str, ...] | None = None
    # layout classes searched (simfront.layout.LAYOUT_CLASSES: tp, tp+ep, dpa+ep) for every worker, aggregated, prefill
    # and decode alike; None: every class
    layouts: tuple[str, ...] | None = None
    max_pp: int | None = None  # most pipeline stages per worker (--max-pp; 1: no pipeline parallelism); None: PP_SIZES


def precision_options(model: Model, gpus: GpuSet, space: SearchSpace) -> list[Precision]:
    hw = gpus.hardware
    if space.precisions:
        names = space.precisions
    else:
        names = ["native"]
        if hw.supports("fp8") and model.native.experts in ("bf16", "fp16"):
            # both FP8 formats a 16-bit checkpoint is served in: block-scaled (DeepSeek / Qwen's FP8 checkpoints) and
            # per-tensor (ModelOpt / llm-compressor FP8 checkpoints, and what vLLM's and SGLang's --quantization fp8
            # make of the 16-bit checkpoint at load time, so it needs no other checkpoint)
            names += ["fp8_block", "fp8"]
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
        out += [make_spec("mtp", k, None, model) for k in DRAFT_LENGTHS]
    return out


# the search knobs a plan, a GPU comparison or a knob comparison echoes in its ``search`` field, as the user gave them
HELD_KNOBS = ("precision", "kv_dtype", "spec", "spec_k", "acceptance", "modes", "layout", "max_pp")


def held_knobs(routing_alpha: float | None, **given) -> dict:
    """The ``search`` field of plan, compare and frontier --compare: each of ``HELD_KNOBS`` as given (None: simfront's
    default choice; layout classes in their canonical spelling), the MoE ``routing_alpha`` priced (None: balanced) and
    whether the engine's ``two_batch_overlap`` was priced."""
    out = {k: given.get(k) for k in HELD_KNOBS}
    if out["layout"] is not None:
        out["layout"] = list(parse_layout_classes(out["layout"]))
    return {**out, "routing_alpha": routing_alpha, "two_batch_overlap": bool(given.get("two_batch_overlap"))}


def spec_choices(methods: str, k: int | None = None, acceptance: float | None = None,
                 model: Model | None = None) -> list[Speculation]:
    """Speculation settings a comma list of methods (``--spec``) searches: each method at ``k`` draft tokens, or at
    every length of ``DRAFT_LENGTHS`` when ``k`` is None (as the default search does for a model's MTP); ``none`` once."""
    out: list[Speculation] = []
    for name in methods.split(","):
        m = name.strip()
        ks = [k] if k is not None or m.lower() in ("none", "off", "") else DRAFT_LENGTHS
        for kk in ks:
            sp = make_spec(m, kk, acceptance, model)
            if sp not in out:
                out.append(sp)
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
    layers = 0.0 if m == "ngram" else 1.0
    family, _borrowed = family_for(m, model.id if model is not None else None)
    if acceptance is None and family:  # measured acceptance lengths per position (models/speculative.yaml)
        return Speculation(m, kk, a, draft_layers=layers, survival=survival(family, kk), family=family)
    return Speculation(m, kk, a, draft_layers=layers, position_decay=DEFAULT_POSITION_DECAY)


@dataclass
class SearchResult:
    points: dict[str, np.ndarray]  # column -> array over every feasible configuration
    n_evaluated: int
    n_feasible: int
    gpus: GpuSet
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.points["tok_s_gpu"].size) if self.points else 0


FRONTIER_COLUMNS = ("mode", "tp", "pp", "ep", "attention_dp", "replicas", "batch", "concurrency", "precision", "kv_dtype", "spec",
                    "ttft_ms", "tpot_ms", "tok_s_user", "tok_s_gpu", "usd_per_mtok", "requests_s", "gpus_used", "chunk_tokens",
                    "prefill_tp", "prefill_ep", "prefill_attention_dp", "prefill_workers", "prefill_batch", "decode_workers",
                    "kv_headroom", "queue_ms")


def _empty_cols() -> dict[str, list]:
    return {k: [] for k in FRONTIER_COLUMNS}


@dataclass
class WorkerTable:
    """Every worker configuration of one (precision, speculation) pair, as arrays.

    ``L`` holds layout columns of shape (layouts, 1), ``B`` the batch sizes (1, batches), ``ok`` the
    (layout, batch) pairs whose KV fits and ``kv_batch`` the requests per micro-batch per rank the KV
    cache holds. ``agg`` maps token budget -> raw aggregated-worker step times (engine-independent),
    ``decode`` is the disaggregated decode worker under ``profile``, and ``prefill`` the prefill side
    for the layouts without PP: (layout columns, prefill batches, raw step split, KV bytes to move
    per request over a 1 byte/s link, prompts in flight per worker). The search and the capacity
    planner both read these tables and compose them with :mod:`simfront.deployment` only.
    """

    precision: Precision
    spec: Speculation
    L: dict
    B: np.ndarray
    ok: np.ndarray
    ok_decode: np.ndarray  # ``ok`` for disaggregated decode workers (an engine may start a layout only aggregated)
    kv_batch: np.ndarray
    agg: dict
    decode: DecodeResult | None
    prefill: tuple | None
    profile: dict


def _start_engines(space: SearchSpace) -> tuple[tuple[str, str | None], ...]:
    """(engine, release) pairs whose start-up rules bound the search: ``space.start_engines``, else ``space.engine`` at
    ``space.engine_version``; none for the all-engine average (or when any named engine is the average)."""
    if space.start_engines is None:
        pairs = [(space.engine, space.engine_version)]
    else:
        pairs = [tuple(e.split("@", 1)) if "@" in e else (e, None) for e in space.start_engines]
    keyed = [(engine_key(e) if e is not None else "default", v) for e, v in pairs]
    return () if any(k == "default" for k, _ in keyed) else tuple(sorted(set(keyed), key=str))


def worker_tables(model: Model, hw, n_gpus: int, wl: Workload, space: SearchSpace, profile: dict | None = None):
    """Yield a :class:`WorkerTable` per (precision, speculation) for workers of up to ``n_gpus`` GPUs."""
    prof = profile if profile is not None else engine_profile(space.engine, space.engine_version)
    engines = _start_engines(space)  # whose start-up rules bound the layouts (none: the average engine)
    max_tp = space.max_tp or hw.scaleup.domain_gpus
    lay = enumerate_layouts(model.arch, n_gpus, max_tp=max_tp)
    if lay["tp"].size == 0:
        raise SimfrontError(f"no valid parallel layout of {model.id} on {n_gpus}x{hw.id}")
    if space.layouts is not None or space.max_pp is not None:  # --layout classes, --max-pp; none here: no worker table
        keep = layout_class_mask(space.layouts, lay["dp"], lay["ep"])
        if space.max_pp is not None:
            keep &= lay["pp"] <= space.max_pp
        lay = {k: v[keep] for k, v in lay.items()}
        if lay["tp"].size == 0:
            return
    ctx = wl.mean_isl + wl.mean_osl
    chunks = space.chunk_tokens if wl.chunk_tokens == DEFAULT_CHUNK_TOKENS else (wl.chunk_tokens,)
    memo: dict = {}  # op costs shared by the precisions that differ only in the KV-cache format
    memo_for = None
    for prec in precision_options(model, GpuSet(count=n_gpus, hardware=hw), space):
        weights = (prec.attention, prec.dense, prec.experts, prec.embedding)
        if weights != memo_for:  # a new weight format: its ops are new (drop the last format's costs)
            memo, memo_for = {}, weights
        mem = plan_memory(model, prec, hw, lay["tp"], lay["pp"], lay["dp"], lay["ep"], 1, ctx)
        fit = mem.fits
        if not fit.any():
            continue
        L = {k: v[fit][:, None] for k, v in lay.items()}
        seqs_per_rank = np.floor(mem.max_concurrency[fit] / lay["dp"][fit])  # all micro-batches of one rank
        cap_b = (seqs_per_rank / L["pp"][:, 0])[:, None]  # requests per micro-batch per rank
        B = space.batches[None, :].astype(float)
        ok = B <= cap_b
        # prefill workers run without pipeline stages (and without drafts), in a layout the engine starts
        one = (L["pp"][:, 0] == 1) & startable_by_any(engines, L["tp"], 1, L["dp"], L["ep"])[:, 0]
        with_prefill = "disagg" in space.modes and n_gpus >= 2 and one.any()
        pb = PREFILL_BATCHES[None, :].astype(float)
        specs = spec_options(model, space)
        # every step in one step call: each speculation's decode-only step (the same for every token budget
        # and for disaggregated decode workers), each token budget's mixed step, and the prefill workers'
        # step (prompts per rank ``pb``, on the layouts without PP)
        d_raws, aggs, pre = worker_raw(model, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], B, wl, specs,
                                       chunks if "agg" in space.modes else (), memo=memo,
                                       prefill_batch=pb if with_prefill else None, prefill_rows=one)
        prefill = None
        if with_prefill:
            prefill = ({k: v[one] for k, v in L.items()}, pb, *pre)
        for i, spec in enumerate(specs):
            d_raw = d_raws[i]
            agg = {chunk: raws[i] for chunk, raws in aggs.items()}
            dec = None
            if prefill is not None:
                dec = finish_decode(*d_raw, wl.mean_osl, prof)
            # the aggregated and decode workers the engine can start with this speculation (all for the average engine)
            drafts = spec.k > 0
            ok_agg = ok & startable_by_any(engines, L["tp"], L["pp"], L["dp"], L["ep"], drafts)
            ok_dec = ok & startable_by_any(engines, L["tp"], L["pp"], L["dp"], L["ep"], drafts, disagg=True)
            yield WorkerTable(prec, spec, L, B, ok_agg, ok_dec, cap_b, agg, dec, prefill, prof)


def search(model: Model, gpus: GpuSet, wl: Workload, space: SearchSpace | None = None, price_usd_per_hour: float | None = None,
           profile: dict | None = None) -> SearchResult:
    """Evaluate the whole configuration space; every feasible configuration becomes a point.

    ``profile``: the serving profile to cost with (default: the fitted one of ``space.engine``).
    Each point is a deployment evaluated by :mod:`simfront.deployment` with its decode slots full
    (C = batch x ranks x workers clients), so it obeys C = requests/s x (TTFT + (OSL - 1) TPOT).
    """
    space = space or SearchSpace()
    hw = gpus.hardware
    price = hw.price_usd_per_hour if price_usd_per_hour is None else price_usd_per_hour
    n = gpus.count
    cols = _empty_cols()
    n_eval = 0
    sides: dict = {}  # prefill sides, shared by the speculations of a precision (see _disagg)
    for t in worker_tables(model, hw, n, wl, space, profile):
        L, B, ok, prec, spec = t.L, t.B, t.ok, t.precision, t.spec
        worker_gpus = L["tp"] * L["dp"] * L["pp"]
        workers = L["replicas"]
        conc = B * L["dp"] * L["pp"] * workers  # every batch slot of every worker busy
        for chunk, raw in t.agg.items():
            n_eval += ok.size
            r = evaluate_agg(raw, t.profile, workers, worker_gpus, conc)
            tok_gpu = r.tok_s_gpu(n)  # idle GPUs of the set count against it
            m = ok & np.isfinite(r.tpot_s) & (r.tpot_s > 0)
            _append(cols, m, mode="agg", tp=L["tp"], pp=L["pp"], ep=L["ep"], attention_dp=L["dp"], replicas=workers, batch=B,
                    concurrency=r.concurrency, precision=prec.label, kv_dtype=prec.kv, spec=spec_label(spec),
                    ttft_ms=r.ttft_s * 1e3, tpot_ms=r.tpot_s * 1e3, tok_s_user=r.tok_s_user, tok_s_gpu=tok_gpu,
                    usd_per_mtok=usd_per_mtok(price, tok_gpu), requests_s=r.requests_s, gpus_used=r.gpus, chunk_tokens=chunk,
                    prefill_tp=0, prefill_ep=0, prefill_attention_dp=0, prefill_workers=0, prefill_batch=0, decode_workers=0,
                    kv_headroom=t.kv_batch / B, queue_ms=r.queue_s * 1e3)
        if t.decode is not None:
            n_eval += _disagg(cols, t, hw, gpus, wl, price, sides)
    pts = Points(cols)
    nf = int(pts["tok_s_gpu"].size) if cols["tok_s_gpu"] else 0
    if nf == 0:
        pts = {}
    return SearchResult(pts, n_eval, nf, gpus)


def kv_link_bytes_per_s(hw, deployment_gpus, prefill_worker_gpus):
    """Link a prompt's KV crosses to its decode worker: scale-up when the whole deployment sits in one
    scale-up domain, else the prefill worker's NICs (one per GPU)."""
    return np.where(deployment_gpus <= hw.scaleup.domain_gpus, hw.scaleup.bandwidth_bytes_per_s,
                    hw.scaleout_bandwidth_bytes_per_s * prefill_worker_gpus)


def parse_spec_label(label: str | None) -> tuple[str | None, int, float | None]:
    """(method or None, draft length, per-token acceptance or None for a measured table) of a
    :func:`spec_label` text such as ``mtp-k3@AL2.49`` or ``eagle-k3@0.7``; ``none`` -> (None, 0, None)."""
    if not label or label == "none":
        return None, 0, None
    method, _, rest = str(label).partition("-k")
    k, _, acc = rest.partition("@")
    return method, int(k) if k else 1, (None if not acc or acc.startswith("AL") else float(acc))


def spec_from_label(label: str | None, model: Model) -> Speculation:
    """The speculation a search point's ``spec`` label names (the inverse of :func:`spec_label`)."""
    method, k, acceptance = parse_spec_label(label)
    return NO_SPEC if method is None else make_spec(method, k, acceptance, model)


def spec_label(spec: Speculation) -> str:
    """Short text of a speculative-decoding setting: ``mtp-k2@0.8`` (per-token acceptance given) or
    ``mtp-k3@AL2.49`` (measured acceptance length of the drafter family); ``none`` without drafts."""
    if spec.k == 0:
        return "none"
    return f"{spec.method}-k{spec.k}@" + (f"AL{spec.accepted_per_step:.2f}" if spec.survival else f"{spec.acceptance:g}")


def _append(cols: dict, mask: np.ndarray, **values) -> None:
    """Append the masked elements of broadcast arrays (or repeated scalars) to the columns.

    Elements are gathered in the row-major order of ``mask`` straight from each array's own shape
    (an array of shape (layouts, 1) is read at the layout index only), so no broadcast copy of the
    whole grid is made, and only when the column is first read (:class:`_Block`): a prediction reads two
    columns in full and a few rows of the others. A text value is stored as (label, count) and expanded
    once, at the end (:func:`_columns`): building millions of Python-object cells block by block is slow."""
    idx = np.nonzero(mask)
    k = int(idx[0].size)
    nd = mask.ndim
    for key, v in values.items():
        if isinstance(v, str):
            cols[key].append((v, k))
            continue
        a = np.asarray(v, dtype=float)
        if a.ndim:
            cols[key].append(_Block(a.reshape((1,) * (nd - a.ndim) + a.shape), mask, idx, k))
        else:  # one value repeated: kept as the value, its k copies made only when the column is read
            cols[key].append(_Const(float(a), k))


class _Block:
    """The masked elements of one array appended to a column, gathered when they are read (the array
    is kept as the search made it; nothing writes to it afterwards)."""

    __slots__ = ("a", "mask", "idx", "size")

    def __init__(self, a: np.ndarray, mask: np.ndarray, idx: tuple, size: int):
        self.a, self.mask, self.idx, self.size = a, mask, idx, size

    def values(self) -> np.ndarray:
        if self.a.shape == self.mask.shape:  # a full-grid array: a boolean mask reads it in one pass
            return self.a[self.mask]
        v = self.a[tuple(ix if n > 1 else 0 for ix, n in zip(self.idx, self.a.shape))]
        return v if v.ndim else np.full(self.size, float(v))  # an array of one element: repeated

    def at(self, rows) -> np.ndarray:
        """The elements at these rows of the block (row-major order of the mask)."""
        return self.a[tuple(ix[rows] if n > 1 else 0 for ix, n in zip(self.idx, self.a.shape))]


class _Const:
    """One value appended ``size`` times to a column (a scalar column of a block), repeated when it is read."""

    __slots__ = ("value", "size")

    def __init__(self, value: float, size: int):
        self.value, self.size = value, size

    def values(self) -> np.ndarray:
        return np.full(self.size, self.value)

    def at(self, rows) -> np.ndarray:
        """The value at these rows of the block."""
        return np.full(np.shape(rows), self.value)


def _column(parts: list) -> np.ndarray:
    """The appended blocks of one column as one array (a text column: an object array of str)."""
    if parts and isinstance(parts[0], tuple):  # (label, count) blocks of a text column
        labels = list(dict.fromkeys(lab for lab, _ in parts))
        code = {lab: i for i, lab in enumerate(labels)}
        codes = np.repeat(np.array([code[lab] for lab, _ in parts], dtype=np.intp), [n for _, n in parts])
        return np.array(labels, dtype=object)[codes]
    return np.concatenate([p.values() for p in parts]) if parts else np.asarray(parts)


def _columns(cols: dict) -> dict:
    """Every column as one array (see :func:`_column`)."""
    return {key: _column(parts) for key, parts in cols.items()}


class Points(MutableMapping):
    """Column arrays over every feasible configuration of a search (a mapping like a dict of arrays).

    A column is joined from the search's blocks when it is first read: a search of 10^6
    configurations writes hundreds of MB of columns of which a prediction reads two in full (the
    frontier axes); :meth:`take` reads the rows of a few points without joining any column."""

    def __init__(self, cols: dict):
        self._parts = dict(cols)  # column -> blocks not yet joined
        self._cols: dict = {}  # column -> joined array (or one set by the caller)
        self._keys = list(cols)
        sizes = [p[1] if isinstance(p, tuple) else p.size for p in next(iter(cols.values()))] if cols else []
        self._starts = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))  # first row of each block

    def __getitem__(self, key):
        if key not in self._cols:
            if key not in self._parts:
                raise KeyError(key)
            self._cols[key] = _column(self._parts.pop(key))
        return self._cols[key]

    def __setitem__(self, key, value) -> None:
        if key not in self._keys:
            self._keys.append(key)
        self._parts.pop(key, None)
        self._cols[key] = value

    def __delitem__(self, key) -> None:
        self._keys.remove(key)
        self._parts.pop(key, None)
        self._cols.pop(key, None)

    def __iter__(self):
        return iter(list(self._keys))

    def __len__(self) -> int:
        return len(self._keys)

    def take(self, idx) -> dict:
        """``{column: array over the rows idx}``, the same values and dtypes as ``self[column][idx]``."""
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        block = np.searchsorted(self._starts, idx, side="right") - 1
        row = idx - self._starts[np.maximum(block, 0)]
        out = {}
        for key in self._keys:
            if key in self._cols:
                out[key] = np.asarray(self._cols[key])[idx]
                continue
            parts = self._parts[key]
            if parts and isinstance(parts[0], tuple):
                out[key] = np.array([parts[b][0] for b in block], dtype=object)
            else:
                out[key] = np.array([parts[b].at(r) for b, r in zip(block, row)], dtype=float)
        return out


def worker_counts(d_gpus, d_cap, p_gpus, p_cap, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Worker counts (prefill x, decode y) of prefill/decode pairs on ``n`` GPUs.

    Arrays broadcast over pairs. ``y`` is the number of decode workers that serves the most
    requests/s beside the ``x`` prefill workers it needs (each side at its own capacity, requests/s
    per worker) within ``n`` GPUs; zeros where no pair fits. The deployment evaluator then costs the
    pair with its prefill queue, so a prefill side sized to exactly its need shows its queueing.

    The served rate rises with y while the prefill workers y needs still fit (rate = y x d_cap) and
    cannot rise after (rate = the prefill workers that fit x p_cap, which shrinks with y), so the best
    y is the last that fits its prefill need, y_c, or y_c + 1: y_c is found by bisection inside a bracket that the
    continuous relaxation gives (a few vectorised steps instead of one per decode-worker count).
    """
    shape = np.broadcast(d_gpus, d_cap, p_gpus, p_cap).shape
    dg, dc, pg, pc = (np.broadcast_to(np.asarray(v, dtype=float), shape) for v in (d_gpus, d_cap, p_gpus, p_cap))
    y_max = np.floor((n - 1) / np.maximum(dg, 1.0))  # the most decode workers that leave a GPU (rem > 0)

    # fits(y): the prefill workers y decode workers need fit beside them, ceil(y dc / pc) <= floor((n - y dg) / pg).
    # y_c lies in [(n - 2 pg) / D, n / D], D = dg + pg dc / pc (GPUs one decode worker takes with its share of
    # prefill workers): fits(y) implies y dc / pc <= (n - y dg) / pg, and y dc / pc + 1 <= (n - y dg) / pg - 1 implies
    # fits(y) (a ceiling adds under 1, a floor takes off under 1). Bisection starts inside that bracket (one step wider
    # on each side against rounding), a few halvings where the whole range takes about log2(n).
    per_decode_gpus = dg + pg * dc / pc
    lo = np.clip(np.floor((n - 2.0 * pg) / per_decode_gpus) - 1.0, 0.0, y_max)  # invariant: fits(lo) (y = 0 needs none)
    hi = np.maximum(np.minimum(y_max, np.floor(n / per_decode_gpus) + 1.0), lo)  # invariant: y_c <= hi
    # a few vectorised halvings over the pairs whose bracket is still open (most close after one or two)
    lo = lo.copy()
    idx = np.flatnonzero(lo < hi)
    L, H, DC, PC, DG, PG = lo[idx], hi[idx], dc[idx], pc[idx], dg[idx], pg[idx]
    while idx.size:
        mid = np.ceil((L + H) / 2.0)
        ok = np.ceil(mid * DC / PC) <= np.floor(np.maximum(n - mid * DG, 0) / PG)  # fits(mid), on the open pairs
        L = np.where(ok, mid, L)
        H = np.where(ok, H, mid - 1.0)
        done = L >= H
        if done.any():
            lo[idx[done]] = L[done]
            keep = ~done
            idx, L, H, DC, PC, DG, PG = idx[keep], L[keep], H[keep], DC[keep], PC[keep], DG[keep], PG[keep]
    best, best_x, best_y = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for y in (lo, lo + 1.0):  # the last y that fits its need, and the first that does not
        rem = n - y * dg
        x = np.minimum(np.floor(np.maximum(rem, 0) / pg), np.ceil(y * dc / pc))  # prefill workers: needed, or what fits
        rate = np.minimum(x * pc, y * dc)  # requests/s the slower side allows
        better = (y >= 1) & (y <= y_max) & (x >= 1) & (rem > 0) & (rate > best)
        best = np.where(better, rate, best)
        best_y = np.where(better, y, best_y)
        best_x = np.where(better, x, best_x)
    return best_x, best_y


def _disagg(cols, t: WorkerTable, hw, gpus, wl, price, sides: dict | None = None) -> int:
    """Pair every prefill layout with every decode configuration; integer worker counts (x, y).

    Workers of one role use one layout; :func:`worker_counts` sizes each pair, and a second
    candidate with one more prefill worker (where it fits) shortens the prefill queue. KV moves
    over the link :func:`kv_link_bytes_per_s` names. Every candidate is a deployment costed by
    :func:`simfront.deployment.evaluate_disagg` with its decode slots full. ``sides``: a dict kept across
    the tables of one search, holding each prefill side (the same for every speculation of a precision).
    """
    n = gpus.count
    L, B, ok, prec, spec = t.L, t.B, t.ok_decode, t.precision, t.spec
    worker = (L["tp"] * L["dp"] * L["pp"])[:, 0]
    ranks = (L["dp"] * L["pp"])[:, 0]
    d = t.decode
    Pl = t.prefill[0]
    side = _prefill_side(t, hw, n, sides)
    pr, p_idx, p_gpus, p_cap, p_ttft = side["pr"], side["p_idx"], side["p_gpus"], side["p_cap"], side["p_ttft"]
    # flatten both sides
    di = np.nonzero(ok & np.isfinite(d.tpot_s))
    d_gpus, d_cap, d_tpot = worker[di[0]], d.capacity_requests_s[di], d.tpot_s[di]
    if d_cap.size == 0 or p_cap.size == 0:
        return 0
    n_sides = int(d_cap.size + p_cap.size)
    # Large spaces prune dominated sides before pairing (smaller ones score every pair), each side on the
    # quantities the pair's evaluation reads from it: a decode configuration slower per token AND holding fewer
    # slots per worker than another of the same worker size is dropped (its capacity, slots / (TPOT (OSL - 1)),
    # is then lower too); a prefill configuration where another of the same worker size is no worse in idle
    # TTFT, busy step, shared-step extra and requests/s (prefill_dominated). The pair's metrics are monotone
    # in each, up to the integer worker counts the pairing sizes (tests/test_speed_paths.py: forced on small
    # sets, the pruned frontier is the full pairing's; 1 % short at one point of 72xGB200).
    if d_cap.size * p_cap.size > MAX_FULL_PAIRS:
        # decode slots per worker: a pair's capacity is slots / (TPOT (OSL - 1)) (serving.finish_decode), so (TPOT, slots)
        # is all the pair's evaluation reads from its decode side
        d_slots = B[0, di[1]] * ranks[di[0]]
        keep_d = _front_per_size(1.0 / d_tpot, d_slots, d_gpus)
        if "keep_p" not in side:
            full = pr.ttft_base_s.shape  # the prefill table's (layout, batch) grid, which p_idx indexes
            side["keep_p"] = ~prefill_dominated(p_ttft, np.broadcast_to(pr.prefill_s, full)[p_idx],
                                                np.broadcast_to(pr.shared_extra_s, full)[p_idx], p_cap, p_gpus)
        keep_p = side["keep_p"]
        di = (di[0][keep_d], di[1][keep_d])
        d_gpus, d_cap = d_gpus[keep_d], d_cap[keep_d]
        p_idx = (p_idx[0][keep_p], p_idx[1][keep_p])
        p_gpus, p_cap = p_gpus[keep_p], p_cap[keep_p]
    Dg, Pg = d_gpus[:, None], p_gpus[None, :]
    n_pairs = int(Dg.size * Pg.size)
    # a pair needs at least one worker of each side: pairs whose two workers exceed the set get no worker
    # counts (worker_counts gives them none), so only the others are sized and costed, as flat arrays
    # (row-major over decode x prefill, the order the full grid appends them in)
    ii, jj = np.nonzero(Dg + Pg <= n)
    if ii.size == 0:
        return n_sides + 2 * n_pairs
    dg, pg = d_gpus[ii], p_gpus[jj]
    x0, y = worker_counts(dg, d_cap[ii], pg, p_cap[jj], n)
    dsel = (di[0][ii], di[1][ii])
    psel = (p_idx[0][jj], p_idx[1][jj])
    dec = DecodeResult(d.tpot_s[dsel], d.step_s[dsel], d.capacity_requests_s[dsel])
    pre = PrefillResult(pr.ttft_base_s[psel], pr.prefill_s[psel], pr.transfer_s[psel], pr.requests_s_worker[psel], pr.ttft_scale,
                        pr.shared_extra_s[psel])
    batch = B[0, dsel[1]]
    slots = batch * ranks[dsel[0]] * y  # decode slots of the deployment
    # the layout columns as the float columns they are appended to, converted once for both candidates
    dl = {k: L[k][dsel[0], 0].astype(float) for k in ("tp", "pp", "ep", "dp")}
    pl = {k: Pl[k][psel[0], 0].astype(float) for k in ("tp", "ep", "dp")}
    p_batch = PREFILL_BATCHES[psel[1]].astype(float)
    headroom = t.kv_batch[dsel[0], 0] / batch
    for x in (x0, x0 + 1):  # the sized prefill side, and one more worker for a shorter queue
        used = y * dg + x * pg
        m = (x0 >= 1) & (y >= 1) & (used <= n)
        r = evaluate_disagg(pre, x, dec, slots, slots, wl.mean_osl, used, wl.startup_wave_share,
                            slot_at_transfer=slot_at_transfer(t.profile), range_ratio=wl.length_range_ratio)
        tok_gpu = r.tok_s_gpu(n)
        _append(cols, m, mode="disagg", tp=dl["tp"], pp=dl["pp"], ep=dl["ep"],
                attention_dp=dl["dp"], replicas=y, batch=batch, concurrency=r.concurrency, precision=prec.label,
                kv_dtype=prec.kv, spec=spec_label(spec), ttft_ms=r.ttft_s * 1e3, tpot_ms=r.tpot_s * 1e3,
                tok_s_user=r.tok_s_user, tok_s_gpu=tok_gpu, usd_per_mtok=usd_per_mtok(price, tok_gpu),
                requests_s=r.requests_s, gpus_used=used, chunk_tokens=0, prefill_tp=pl["tp"],
                prefill_ep=pl["ep"], prefill_attention_dp=pl["dp"], prefill_workers=x,
                prefill_batch=p_batch, decode_workers=y,
                kv_headroom=headroom, queue_ms=r.queue_s * 1e3)
    return n_sides + 2 * n_pairs


def _prefill_side(t: WorkerTable, hw, n: int, sides: dict | None) -> dict:
    """The prefill workers of a table at the deployment's KV link, flattened to the finite ones (computed
    once per prefill table and profile when ``sides`` is kept across the tables of a search)."""
    key = (id(t.prefill), id(t.profile))
    if sides is not None and key in sides:
        return sides[key]
    Pl, pb, p_step, p_kv, p_slots, p_lone = t.prefill
    gp = (Pl["tp"] * Pl["dp"])[:, 0]
    link = kv_link_bytes_per_s(hw, n, gp)[:, None]
    pr = finish_prefill(p_step, p_kv / link, p_slots, p_lone, t.profile)
    p_idx = np.nonzero(np.isfinite(pr.ttft_base_s))
    side = {"pr": pr, "p_idx": p_idx, "p_gpus": gp[p_idx[0]], "p_cap": pr.requests_s_worker[p_idx], "p_ttft": pr.ttft_base_s[p_idx],
            "refs": (t.prefill, t.profile)}  # kept alive so that their ids are not reused
    if sides is not None:
        sides[key] = side
    return side


def prefill_dominated(ttft_s, step_s, shared_s, requests_s, size) -> np.ndarray:
    """Mask of prefill configurations another of the same worker size makes redundant in every pairing: one no worse
    in each quantity a disaggregated pair's evaluation reads from its prefill side (idle-worker TTFT, the busy worker's
    step, the extra of a shared step, the requests/s a worker completes; :func:`simfront.deployment.evaluate_disagg`,
    :func:`worker_counts`). The pair's metrics are monotone in each at given worker counts, so a dominated
    configuration makes no pair its dominator does not make at least as well, up to the integer sizing of the worker
    counts (each pair's are sized from its own capacities). The search's pairing and the plan's sizing both use it."""
    cost = np.stack([np.asarray(v, dtype=float) for v in (ttft_s, step_s, shared_s, -np.asarray(requests_s, dtype=float))], axis=1)
    return dominated_per_size(cost, np.asarray(size, dtype=float))


def dominated_per_size(cost: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Mask of points another of the same ``size`` dominates: ``cost`` is (points, quantities), lower better in each;
    a point is dominated where another is no worse in every quantity and better in one, or equal in all and earlier
    (one of equal points stays). Quadratic in the points of one size (a prefill side holds a few hundred per size)."""
    out = np.zeros(size.size, dtype=bool)
    for g in np.unique(size):
        idx = np.flatnonzero(size == g)
        # one (points x points) comparison per quantity, combined in place: the same masks as comparing the
        # (points x points x quantities) block and reducing its last axis, about 5x faster (no strided reduction)
        le = lt = None  # le[j, i]: j no worse than i in every quantity; lt[j, i]: j better in one (or earlier)
        for q in range(cost.shape[1]):
            v = np.ascontiguousarray(cost[idx, q])
            if le is None:
                le, lt = v[:, None] <= v[None, :], v[:, None] < v[None, :]
            else:
                le &= v[:, None] <= v[None, :]
                lt |= v[:, None] < v[None, :]
        lt |= np.arange(idx.size)[:, None] < np.arange(idx.size)[None, :]
        out[idx] = (le & lt).any(axis=0)
    return out


def _front_per_size(x: np.ndarray, y: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Mask of points on the (x, y) Pareto front among points of the same worker size.

    One sort for all sizes: y is replaced by its rank (exact, ties kept equal) and offset by the
    size's index times the number of points, so a running maximum over (size, x descending, y
    descending) order restarts at each size; a point is kept when it beats that running maximum."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size == 0:
        return np.zeros(0, dtype=bool)
    fast = _front_per_size_finite(x, y, np.asarray(size, dtype=float))
    if fast is not None:
        return fast
    _, g = np.unique(size, return_inverse=True)
    _, y_rank = np.unique(y, return_inverse=True)
    key = g.astype(np.int64) * (x.size + 1) + y_rank.astype(np.int64)
    order = np.lexsort((-y, -x, g))  # by size, then x descending, ties by y descending
    ks = key[order]
    prev = np.concatenate(([-1], np.maximum.accumulate(ks)[:-1]))
    first = np.concatenate(([True], g[order][1:] != g[order][:-1]))  # first point of its size
    keep = np.zeros(x.size, dtype=bool)
    keep[order[first | (ks > prev)]] = True
    return keep


def _front_per_size_finite(x: np.ndarray, y: np.ndarray, size: np.ndarray) -> np.ndarray | None:
    """:func:`_front_per_size` where x and y are finite and the sizes are small whole numbers (else None):
    the same mask from one sort by (x, y) descending, a radix sort by size and a running maximum of y over
    each size's run (a handful of worker sizes)."""
    if not (np.isfinite(x).all() and np.isfinite(y).all() and size.min() >= 0 and size.max() < 2**15
            and (size == np.floor(size)).all()):
        return None
    g = size.astype(np.int16)
    # x descending, equal x by y descending, equal points by index (numpy orders complex numbers by real part, then
    # imaginary part; stable, so that of two equal points the first stays, as in the three-key sort)
    by_xy = np.argsort(-(x + 1j * y), kind="stable")
    order = by_xy[np.argsort(g[by_xy], kind="stable")]  # by size, x descending within a size
    gs, ys = g[order], y[order]
    first = np.concatenate(([True], gs[1:] != gs[:-1]))  # first point of its size
    starts = np.flatnonzero(first).tolist()
    best = np.empty_like(ys)  # running maximum of y within each size's run
    for a, b in zip(starts, starts[1:] + [ys.size]):
        np.maximum.accumulate(ys[a:b], out=best[a:b])
    prev = np.empty_like(ys)
    prev[1:] = best[:-1]
    prev[first] = -np.inf
    keep = np.zeros(x.size, dtype=bool)
    keep[order[ys > prev]] = True
    return keep

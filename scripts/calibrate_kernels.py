#!/usr/bin/env python
"""Fit the per-family kernel efficiency parameters and report how well they predict.

Reads ``<gpu>__<op>.csv`` kernel timings (default: ../shared/calibration/kernels beside the repo, the
aiconfigurator 0.12.0 perf database, Apache-2.0), fits each efficiency kind's few parameters per
architecture family with bounded ``scipy.optimize.least_squares`` on log-space relative residuals
(soft-L1 loss), writes ``hardware/efficiency/<kind>.yaml``, and writes docs/calibration_kernels.md
with: (a) 5-fold cross-validation over shape groups, (b) leave-one-GPU-out, (c) the naive
roofline ``max(F/peak, B/BW)`` for contrast. Never fits per row.

    .venv/bin/python scripts/calibrate_kernels.py [--data DIR] [--quick] [--ops gemm,moe] [--no-write]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import comm, elementwise, gemm, moe  # noqa: E402
from simfront.hardware import get_hardware  # noqa: E402
from simfront.kernel_ops import all_ops  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("SIMFRONT_KERNEL_DATA", Path(__file__).resolve().parents[2] / "shared" / "calibration" / "kernels"))
EFF_DIR = ROOT / "hardware" / "efficiency"
REPORT = ROOT / "docs" / "calibration_kernels.md"
# Families with no calibration data borrow the nearest measured architecture: Ampere/Ada and CDNA3
# tensor-core GEMM/attention pipelines are closest to Hopper's; CDNA4 (MI355X, FP4) to Blackwell's.
FAMILY_FALLBACK = {"ampere": "hopper", "ada": "hopper", "cdna3": "hopper", "cdna4": "blackwell"}
# Issue targets (cross-validated MAPE, %) per op
TARGETS = {"gemm": 10, "attention_decode": 15, "mla_decode": 15, "attention_prefill": 20, "mla_prefill": 20, "moe": 20, "nccl": 20}
LOGO_TARGET = 25
FOLDS = 5
QUICK_ROWS = 1200  # rows per (op, GPU) used for fitting with --quick
# DeepSeek-V3 MLA geometry of the calibration rows (shared/calibration/README.md): kv_lora_rank 512,
# rope 64, qk_nope 128, v_head 128
MLA_KV_ELEMS = 512 + 64  # latent KV row read per cached token
MLA_DECODE_ELEMS = MLA_KV_ELEMS + 512  # per KV token per head: QK^T over 576 + PV over 512
MLA_PREFILL_ELEMS = (128 + 64) + 128  # d_qk + d_v of the decompressed heads
# soft-L1 scale in log units: residuals beyond ~10% count linearly, so a few odd kernels do not steer the fit
LOSS_SCALE = 0.1
# stop when the cost or the log-parameters move by less than this (relative); tighter changes nothing visible
FIT_TOL = 1e-5


# ----------------------------------------------------------------------------- data

def load_csv(path: Path) -> dict[str, np.ndarray]:
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    cols: dict[str, np.ndarray] = {}
    for key in rows[0]:
        vals = [r[key] for r in rows]
        try:
            cols[key] = np.array([float(v) for v in vals])
        except ValueError:
            cols[key] = np.array(vals)
    return cols


def _shown(path) -> str:
    """A data path as written into fit files and reports: relative to the repository, never this machine's."""
    import os

    return os.path.relpath(Path(path).resolve(), ROOT)


def load_data(data_dir: Path, ops: dict) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """{op: {gpu: columns}} for every ``<gpu>__<op>.csv`` whose op is registered."""
    out: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for path in sorted(data_dir.glob("*__*.csv")):
        gpu, op = path.stem.split("__", 1)
        if op in ops:
            out.setdefault(op, {})[gpu] = load_csv(path)
    return out


def take(cols: dict[str, np.ndarray], sel) -> dict[str, np.ndarray]:
    return {k: v[sel] for k, v in cols.items()}


def group_fold(cols: dict[str, np.ndarray], entry: dict, folds: int) -> np.ndarray:
    """Fold of each row, keyed on the shape without the varied column (same shape -> same fold on every GPU)."""
    keys = [c for c in entry["columns"] if c != entry["vary"] and c in cols]
    n = len(next(iter(cols.values())))
    return np.array([zlib.crc32("|".join(str(cols[c][i]) for c in keys).encode()) % folds for i in range(n)])


# ----------------------------------------------------------------------------- fitting

def _bounds(spec):
    lo, hi = spec[1], spec[2]
    return np.log(lo if lo > 0 else hi * 1e-4), np.log(hi)


def transfer(entry, params: dict, source_hw, target_hw) -> dict:
    """Values fitted on ``source_hw`` as ``target_hw`` uses them (the entry's ``transfer``: gemm.transfer_params for its kind,
    a class whose kernel is another library on the target takes its sibling's values); unchanged elsewhere."""
    fn = entry.get("transfer")
    return params if fn is None else fn(params, source_hw, target_hw)


def predict_op(entry, cols, hw, params) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(entry["predict"](cols, hw, params), dtype=np.float64) * 1e6  # microseconds


def log_residual(entry, cols, hw, params) -> np.ndarray:
    """Fit residual log(predicted / measured) per row.

    An op whose rows were timed on one of several kernels with no column saying which (entry
    ``"paths"``, per-kernel predictions, inf where a kernel does not exist) is scored on the kernel
    that explains each row best (hard assignment), so the fit recovers every kernel. Scoring and
    prediction (``predict_op``) use the op's own choice among them, never this assignment.
    """
    y = np.log(cols["latency_us"])
    if "paths" not in entry:
        return np.log(np.maximum(predict_op(entry, cols, hw, params), 1e-9)) - y
    with np.errstate(all="ignore"):
        r = np.log(np.maximum(np.asarray(entry["paths"](cols, hw, params), dtype=np.float64) * 1e6, 1e-9)) - y
        nearest = np.argmin(np.where(np.isfinite(r), np.abs(r), np.inf), axis=0)
    return r[nearest, np.arange(r.shape[1])]


def fit_kind(kind_ops: dict, samples: list, family: str) -> tuple[dict, list[str]]:
    """Fit one kind's parameters for one family on ``samples`` = [(op, hw, cols)]; returns (params, fitted names)."""
    specs: dict = {}
    fam_def: dict = {}
    for entry in kind_ops.values():
        specs.update(entry["params"])
        fam_def.update(entry.get("family_defaults", {}).get(family, {}))
    base = {k: v[0] for k, v in specs.items()}
    base.update(fam_def)
    if not samples:
        return base, []

    def residual(params):
        r = np.concatenate([log_residual(kind_ops[op], c, hw, params) for op, hw, c in samples])
        return np.where(np.isfinite(r), r, 10.0)

    # free parameters: a real range and a visible effect on these rows
    r0 = residual(base)
    free = []
    for name, spec in specs.items():
        if spec[1] >= spec[2] or name in fam_def:
            continue
        trial = dict(base)
        trial[name] = float(np.clip(base[name] * 1.2 if base[name] > 0 else spec[2] * 0.1, spec[1], spec[2]))
        if trial[name] == base[name]:
            trial[name] = float(np.clip(base[name] / 1.2, spec[1], spec[2]))
        if np.max(np.abs(residual(trial) - r0)) > 1e-6:
            free.append(name)
    if not free:
        return base, []
    lo, hi = np.array([_bounds(specs[n]) for n in free]).T
    x0 = np.clip(np.log(np.maximum([base[n] for n in free], 1e-30)), lo + 1e-6, hi - 1e-6)

    def res_x(x):
        p = dict(base)
        p.update(zip(free, np.exp(x)))
        return residual(p)

    sol = least_squares(res_x, x0, bounds=(lo, hi), loss="soft_l1", f_scale=LOSS_SCALE, diff_step=1e-3, x_scale=1.0,
                        ftol=FIT_TOL, xtol=FIT_TOL, max_nfev=200)
    out = dict(base)
    out.update({n: float(v) for n, v in zip(free, np.exp(sol.x))})
    return borrow_classes(kind_ops, out, free), free


def borrow_classes(kind_ops: dict, params: dict, free: list[str]) -> dict:
    """A dtype class whose parameters these rows left unfitted (no NVFP4 rows on H100) takes the fitted
    values of its measured sibling class (entry ``class_fallback``, e.g. ``gemm.CLASS_FALLBACK``) instead
    of the module priors: same kernel pipeline, another tensor rate. Parameters named in the entry's
    ``param_class_fallback`` (``moe.PARAM_CLASS_FALLBACK``: block-scale costs) take another measured class's value. The borrowed names stay out of
    ``fitted`` (the yaml lists only what the data moved)."""
    out = dict(params)
    fitted = set(free)
    for entry in kind_ops.values():
        for cls, src in entry.get("class_fallback", {}).items():
            per_param = entry.get("param_class_fallback", {}).get(cls, {})
            for name in entry["params"]:
                if not name.endswith(f"_{cls}") or name in fitted:
                    continue
                base = name[: -len(cls) - 1]
                # a parameter of the block scales borrows from the measured block-scaled class when it is fitted
                sibs = [f"{base}_{per_param[base]}"] if base in per_param else []
                sibs.append(f"{base}_{src}")
                lo, hi = entry["params"][name][1:]  # the class's own bounds still hold
                sib = next((x for x in sibs if x in fitted), None)
                if sib is not None:
                    out[name] = float(np.clip(params[sib], lo, hi))
    return out


# ----------------------------------------------------------------------------- scoring

def score(pred: np.ndarray, meas: np.ndarray) -> dict:
    ok = np.isfinite(pred) & (pred > 0)
    ape = np.abs(pred[ok] / meas[ok] - 1.0) * 100.0
    if ape.size == 0:
        return {"n": int(meas.size), "coverage": 0.0, "mape": np.nan, "median": np.nan, "p90": np.nan}
    return {"n": int(meas.size), "coverage": float(ok.mean() * 100.0), "mape": float(ape.mean()),
            "median": float(np.median(ape)), "p90": float(np.percentile(ape, 90))}


def naive_roofline_us(op: str, cols: dict, hw) -> np.ndarray | None:
    """max(F/peak, B/BW) at datasheet peaks, no efficiency (None for ops it does not know)."""
    from simfront.kernel_ops import csv_format, moe_gated, routing_alpha
    from simfront.precision import gemm_rate_dtype, get_format

    if op == "gemm":
        out = np.empty(len(cols["m"]))
        for d in np.unique(cols["dtype"]):
            s = cols["dtype"] == d
            f = get_format(csv_format(d))
            m, n, k = cols["m"][s], cols["n"][s], cols["k"][s]
            flops = 2 * m * n * k
            byts = m * k * f.act_bytes + n * k * f.bytes_per_element + m * n * gemm.OUT_BYTES
            out[s] = np.maximum(flops / hw.peak_flops_per_s[gemm_rate_dtype(f, hw)], byts / hw.hbm_bandwidth_bytes_per_s)
        return out * 1e6
    if op == "moe":
        out = np.empty(len(cols["num_tokens"]))
        gated = moe_gated(cols)
        for d in np.unique(cols["dtype"]):
            for dist in np.unique(cols["distribution"]):
                for g in (True, False):
                    s = (cols["dtype"] == d) & (cols["distribution"] == dist) & (gated == g)
                    if not s.any():
                        continue
                    f = get_format(csv_format(d))
                    c = moe.moe_cost(cols["num_tokens"][s], cols["hidden_size"][s], cols["inter_size"][s], cols["topk"][s],
                                     cols["num_experts"][s], cols["moe_tp_size"][s], cols["moe_ep_size"][s], csv_format(d), hw,
                                     alpha=routing_alpha(dist), gated=g)
                    out[s] = np.maximum(c.flops / hw.peak_flops_per_s[gemm_rate_dtype(f, hw)], c.mem_bytes / hw.hbm_bandwidth_bytes_per_s)
        return out * 1e6
    if op == "nccl":
        out = np.empty(len(cols["message_bytes"]))
        for kind in np.unique(cols["collective"]):
            s = cols["collective"] == kind
            n = cols["num_gpus"][s]
            out[s] = cols["message_bytes"][s] * comm._bus_factor(str(kind), n) / hw.scaleup.bandwidth_bytes_per_s
        return out * 1e6
    if op in ("attention_decode", "attention_prefill", "mla_decode", "mla_prefill"):
        return _attention_roofline_us(op, cols, hw)
    return None


def _attention_roofline_us(op: str, cols: dict, hw) -> np.ndarray:
    """Speed-of-light attention per modeling-notes.md §1.2-1.4 (AIC SOL formulas), BF16 MMA rate."""
    from simfront.precision import kv_bytes

    b_kv = np.array([kv_bytes(str(v)) for v in cols["kv_cache_dtype"]])
    B, heads = cols["batch"], cols["n_heads"]
    peak, bw = hw.peak_flops_per_s["bf16"], hw.hbm_bandwidth_bytes_per_s
    if op.startswith("attention"):
        d, kv_heads, w = cols["head_dim"], cols["n_kv_heads"], cols["window_size"]
        if op == "attention_decode":
            s = np.where(w > 0, np.minimum(cols["kv_len"], w), cols["kv_len"])
            flops = B * 4 * heads * d * s  # QK^T + PV over s cached tokens
            byts = B * 2 * kv_heads * d * s * b_kv  # K and V
        else:
            s = cols["seq_len"]
            pairs = np.where((w > 0) & (w < s), s * w - w * w / 2, s * s / 2)  # causal (windowed) query-key pairs
            flops = B * 4 * heads * d * pairs
            byts = B * (2 * s * heads * 2 * d + b_kv * s * kv_heads * 2 * d)  # Q, O in BF16; K, V
    elif op == "mla_decode":
        s = cols["kv_len"]
        flops = 2 * B * heads * MLA_DECODE_ELEMS * s  # latent attention over s cached tokens
        byts = B * (heads * MLA_DECODE_ELEMS * 2 + s * MLA_KV_ELEMS * b_kv)
    else:
        s = cols["seq_len"]
        flops = B * heads * MLA_PREFILL_ELEMS * s * s  # 2·heads·(d_qk + d_v)·s²/2, causal half
        byts = B * heads * (b_kv * s * MLA_PREFILL_ELEMS + 2 * s * MLA_PREFILL_ELEMS)
    return np.maximum(flops / peak, byts / bw) * 1e6


# ----------------------------------------------------------------------------- driver

def kernel_args(description: str, writes: str, report: Path, argv=None) -> tuple[argparse.Namespace, dict]:
    """The options the kernel-fitting scripts share (data folder, --quick, --ops, --no-write, --report) and the
    ops they select."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of <gpu>__<op>.csv kernel timings")
    ap.add_argument("--quick", action="store_true", help=f"fit on at most {QUICK_ROWS} rows per op and GPU")
    ap.add_argument("--ops", default="", help="comma-separated ops (default: all registered)")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {writes} or the report")
    ap.add_argument("--report", type=Path, default=report)
    args = ap.parse_args(argv)
    ops = all_ops()
    if args.ops:
        ops = {k: v for k, v in ops.items() if k in args.ops.split(",")}
    return args, ops


def main(argv=None) -> int:
    args, ops = kernel_args(__doc__.split("\n")[0], "hardware/efficiency/*.yaml", REPORT, argv)
    t_start = time.time()
    data = load_data(args.data, ops)
    if not data:
        print(f"no calibration CSVs for {', '.join(ops)} in {args.data}", file=sys.stderr)
        return 1
    hws = {gpu: get_hardware(gpu) for per in data.values() for gpu in per}
    families = sorted({hw.family for hw in hws.values()})
    rng = np.random.default_rng(0)
    fit_mask = {}
    for op, per in data.items():
        for gpu, cols in per.items():
            n = len(cols["latency_us"])
            m = np.ones(n, bool)
            if args.quick and n > QUICK_ROWS:
                m[:] = False
                m[rng.choice(n, QUICK_ROWS, replace=False)] = True
            fit_mask[(op, gpu)] = m
    folds = {(op, gpu): group_fold(cols, ops[op], FOLDS) for op, per in data.items() for gpu, cols in per.items()}
    kinds: dict[str, dict] = {}
    for op in data:
        kinds.setdefault(ops[op]["kind"], {})[op] = ops[op]

    def samples(kind, gpus, row_sel=None):
        """[(op, hw, columns)] of the fitting rows of ``kind`` on ``gpus`` (``row_sel(op, gpu)`` narrows)."""
        out = []
        for op in kinds[kind]:
            for gpu in gpus:
                if gpu in data[op]:
                    keep = fit_mask[(op, gpu)].copy()
                    if row_sel is not None:
                        keep &= row_sel(op, gpu)
                    if keep.any():
                        out.append((op, hws[gpu], take(data[op][gpu], keep)))
        return out

    gpus_of = {fam: [g for g, hw in hws.items() if hw.family == fam] for fam in families}
    final: dict[str, dict] = {}
    fitted_names: dict[str, dict] = {}
    cv_pred: dict = {}
    logo_pred: dict = {}
    for kind, kops in kinds.items():
        t0 = time.time()
        final[kind], fitted_names[kind] = {}, {}
        for fam in families:
            final[kind][fam], fitted_names[kind][fam] = fit_kind(kops, samples(kind, gpus_of[fam]), fam)
        final[kind]["default"], fitted_names[kind]["default"] = fit_kind(kops, samples(kind, list(hws)), "default")
        # (a) cross-validation over shape groups, per family
        for op in kops:
            for gpu in data[op]:
                cv_pred[(op, gpu)] = np.full(len(data[op][gpu]["latency_us"]), np.nan)
        for f in range(FOLDS):
            for fam in families:
                p, _ = fit_kind(kops, samples(kind, gpus_of[fam], lambda op, gpu: folds[(op, gpu)] != f), fam)
                for op in kops:
                    for gpu in gpus_of[fam]:
                        if gpu in data[op]:
                            te = folds[(op, gpu)] == f
                            if te.any():
                                cv_pred[(op, gpu)][te] = predict_op(kops[op], take(data[op][gpu], te), hws[gpu], p)
        # (b) leave one GPU out: fit on the others, apply that block to this GPU's datasheet
        for gpu in hws:
            others = [g for g in hws if g != gpu]
            src_fams = sorted({hws[g].family for g in others})
            if not others:
                continue
            p, _ = fit_kind(kops, samples(kind, others), src_fams[0] if len(src_fams) == 1 else "default")
            for op in kops:
                if gpu in data[op]:
                    # as a GPU borrowing these values uses them (gemm.transfer_params for its kind: another kernel library there)
                    p_gpu = transfer(kops[op], p, hws[others[0]], hws[gpu])
                    logo_pred[(op, gpu)] = predict_op(kops[op], data[op][gpu], hws[gpu], p_gpu)
        print(f"[{kind}] fitted in {time.time() - t0:.1f} s", flush=True)

    # ------------------------------------------------------------------ report
    lines = report_lines(data, ops, hws, cv_pred, logo_pred, final, fitted_names, args, time.time() - t_start)
    if not args.no_write:
        EFF_DIR.mkdir(parents=True, exist_ok=True)
        for kind in final:
            write_kind(kind, final[kind], fitted_names[kind], sorted(hws), args)
        if "elementwise" not in final:
            write_kind("elementwise", {"default": {k: v[0] for k, v in elementwise.PARAMS.items()}}, {}, [], args, fitted_any=False)
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines) + "\n")
        print(f"wrote {args.report} and {EFF_DIR}/*.yaml", file=sys.stderr)
    print("\n".join(lines))
    return 0


def write_kind(kind: str, blocks: dict, fitted: dict, gpus: list[str], args, fitted_any: bool = True) -> None:
    """Write hardware/efficiency/<kind>.yaml with a header naming the script and data."""
    header = [
        f"# Efficiency parameters for kind '{kind}', one block per architecture family.",
        "# Written by scripts/calibrate_kernels.py; do not edit by hand (rerun the script).",
    ]
    if fitted_any:
        header.append(f"# Fitted on {_shown(args.data)} (aiconfigurator 0.12.0 perf database, Apache-2.0): GPUs {', '.join(gpus)}"
                      + (" (--quick subsample)" if args.quick else "") + ".")
        header.append("# 'default' is the fit pooled over all calibration GPUs; 'fitted' lists the parameters the data moved,")
        header.append("# the rest are the priors named in the simfront module's PARAMS table.")
    else:
        header.append("# Not fitted: the calibration set has no standalone kernels of this kind; values are the")
        header.append("# priors in the module's PARAMS table (aiconfigurator systems/*.yaml, specs.md A.3).")
    path = EFF_DIR / f"{kind}.yaml"
    previous = (yaml.safe_load(path.read_text()) or {}).get("families", {}) if path.exists() else {}
    merged = {}
    for fam, block in blocks.items():
        keep = {k: v for k, v in (previous.get(fam) or {}).items() if k not in block}  # keys this script does not own
        merged[fam] = {**keep, **{k: _num(v) for k, v in sorted(block.items())}}
    doc = {
        "fitted_by": "scripts/calibrate_kernels.py",
        "fitted_on": list(gpus),
        "data": _shown(args.data),
        "date": dt.date.today().isoformat(),
        "families": merged,
        "family_fallback": dict(FAMILY_FALLBACK),
        "fitted": {fam: sorted(names) for fam, names in fitted.items()},
    }
    text = "\n".join(header) + "\n" + yaml.safe_dump(doc, sort_keys=False, width=120)
    path.write_text(text)


def _num(v):
    v = float(v)
    return float(f"{v:.4g}")


def data_notes(data, hws) -> list[str]:
    """Measured-data quirks that bound any model: non-monotone token sweeps and impossible bandwidths."""
    lines = []
    if "moe" in data:
        from simfront.kernel_ops import csv_format
        from simfront.precision import get_format

        for gpu in sorted(data["moe"]):
            c = data["moe"][gpu]
            keys = ["dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "distribution"]
            groups: dict = {}
            for i in range(len(c["latency_us"])):
                groups.setdefault(tuple(c[k][i] for k in keys), []).append(i)
            drops = []
            for idx in groups.values():
                idx = sorted(idx, key=lambda i: c["num_tokens"][i])
                drops += [c["latency_us"][b] / c["latency_us"][a] for a, b in zip(idx, idx[1:])]
            drops = np.array(drops)
            # weight bytes of the experts the balanced tokens must touch, at datasheet HBM bandwidth
            local = c["num_experts"] / c["moe_ep_size"]
            pairs = c["num_tokens"] * c["topk"] / c["moe_ep_size"]
            b_w = np.array([get_format(csv_format(d)).bytes_per_element for d in c["dtype"]])
            floor_us = np.minimum(local, pairs) * 3 * c["hidden_size"] * c["inter_size"] / c["moe_tp_size"] * b_w / hws[gpu].hbm_bandwidth_bytes_per_s * 1e6
            bal = c["distribution"] == "balanced"
            lines.append(
                f"- moe on {gpu}: {np.mean(drops < 0.7) * 100:.1f}% of consecutive token-sweep points get >30% faster with "
                f"more tokens (same shape); {np.mean(c['latency_us'][bal] < floor_us[bal]) * 100:.1f}% of balanced rows are faster "
                "than streaming the touched experts' weights at datasheet HBM bandwidth. Both bound any physical model; "
                "they are kept in every score.")
    lines.append("- Leave-one-GPU-out moves a whole family block across architectures: fixed latencies (kernel launch, "
                 "NCCL protocol floors) differ between Hopper and Blackwell in ways no datasheet figure predicts, which "
                 "is why the per-family fit exists.")
    return lines


def report_lines(data, ops, hws, cv_pred, logo_pred, final, fitted_names, args, elapsed) -> list[str]:
    out = [
        "# Kernel calibration report",
        "",
        f"Generated by `scripts/calibrate_kernels.py{' --quick' if args.quick else ''}` on {dt.date.today().isoformat()} "
        f"from `{_shown(args.data)}` (aiconfigurator 0.12.0 perf database, Apache-2.0) in {elapsed:.0f} s.",
        "APE = |predicted / measured - 1|; coverage = rows with a finite positive prediction.",
        "",
    ]

    def table(title, preds, note, target_of=None):
        out.extend([f"## {title}", "", note, "",
                    "| op | GPU | rows | coverage % | MAPE % | median APE % | p90 APE % | target |",
                    "|---|---|---:|---:|---:|---:|---:|---|"])
        for op in data:
            for gpu in sorted(data[op]):
                key = (op, gpu)
                if key not in preds or preds[key] is None:
                    out.append(f"| {op} | {gpu} | {len(data[op][gpu]['latency_us'])} | n/a | n/a | n/a | n/a | |")
                    continue
                s = score(preds[key], data[op][gpu]["latency_us"])
                tgt = target_of(op) if target_of else None
                flag = "" if tgt is None else (f"<= {tgt} " + ("ok" if s["mape"] <= tgt and s["coverage"] >= 98 else "MISS"))
                out.append(f"| {op} | {gpu} | {s['n']} | {s['coverage']:.1f} | {s['mape']:.1f} | {s['median']:.1f} | {s['p90']:.1f} | {flag} |")
        out.append("")

    table("(a) 5-fold cross-validation over shape groups", cv_pred,
          f"Rows are split into {FOLDS} folds by shape group (every column except the varied "
          "m / num_tokens / batch / message_bytes); each fold is predicted by parameters fitted on the other four, "
          "per architecture family. No scored row was fitted.", lambda op: TARGETS.get(op))
    split_by = {"gemm": "dtype", "moe": "dtype", "nccl": "collective"}
    out.extend(["Cross-validated MAPE % by format / collective:", "", "| op | GPU | " + "breakdown (rows) |", "|---|---|---|"])
    for op, col in split_by.items():
        for gpu in sorted(data.get(op, {})):
            if (op, gpu) not in cv_pred:
                continue
            c = data[op][gpu]
            parts = []
            for v in np.unique(c[col]):
                sel = c[col] == v
                parts.append(f"{v} {score(cv_pred[(op, gpu)][sel], c['latency_us'][sel])['mape']:.1f} ({int(sel.sum())})")
            out.append(f"| {op} | {gpu} | {'; '.join(parts)} |")
    out.append("")
    table("(b) Leave one GPU out", logo_pred,
          "Parameters fitted on the other GPU's family, applied to this GPU's datasheet peaks. Formats the other "
          "GPU lacks (NVFP4 on H100) fall back to the unfitted priors.", lambda op: LOGO_TARGET)
    naive = {}
    for op in data:
        for gpu in data[op]:
            naive[(op, gpu)] = naive_roofline_us(op, data[op][gpu], hws[gpu])
    table("(c) Naive roofline baseline", naive, "`max(FLOPs / peak, bytes / HBM BW)` at datasheet peaks, no fitted "
          "parameter (NCCL: wire bytes / one-direction link bandwidth). Shown for contrast only.")
    out.extend(["## Data notes", ""])
    out.extend(data_notes(data, hws))
    out.extend(["", "## Fitted parameters", ""])
    for kind in final:
        out.append(f"**{kind}** (`hardware/efficiency/{kind}.yaml`)")
        out.append("")
        fams = [f for f in final[kind] if f != "default"] + ["default"]
        names = sorted({n for f in fams for n in fitted_names[kind].get(f, [])})
        if not names:
            out.extend(["(no free parameters)", ""])
            continue
        out.append("| parameter | " + " | ".join(fams) + " |")
        out.append("|---|" + "---:|" * len(fams))
        for n in names:
            out.append(f"| {n} | " + " | ".join(f"{final[kind][f][n]:.4g}" + ("" if n in fitted_names[kind].get(f, []) else " (prior)") for f in fams) + " |")
        out.append("")
    return out


if __name__ == "__main__":
    raise SystemExit(main())

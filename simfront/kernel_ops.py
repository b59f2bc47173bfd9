"""Registry of calibration ops: how each kernel-CSV op maps onto a cost function and its parameters.

``OPS[name]`` = ``{"kind": efficiency-file kind, "params": {name: (default, lo, hi)},
"family_defaults": {family: {name: value}}, "predict": fn(cols, hw, p) -> seconds,
"columns": required CSV columns, "vary": column varied inside one shape group, "class_fallback":
{dtype class: measured class} for per-class parameters a family's rows leave unfitted,
"param_class_fallback": {dtype class: {parameter: measured class}} where one parameter borrows from another class}``, plus optionally
``"paths": fn(cols, hw, p) -> seconds of shape (kernels, rows)`` for ops whose rows were timed on one
of several kernels with no column saying which (inf where a kernel does not exist); ``predict`` is
then what an engine runs (for MoE, the fastest kernel) and the fit scores each row on its nearest kernel.
Op names are the calibration file ops (``<gpu>__<op>.csv``). Attention and MLA entries come from
``simfront.attention.CALIBRATION_OPS`` and ``simfront.mla.CALIBRATION_OPS`` when those modules
import; ``p`` is a complete parameter dict for the op's kind.
"""

from __future__ import annotations

import importlib
import re
from functools import partial
from typing import Any, Callable

import numpy as np

from . import comm, gemm, moe

# Calibration-file dtype spellings that precision.normalize_format does not map the way the
# kernels ran them: W4A16-MXFP4 MoE is 4-bit weight-only with BF16 math (aiconfigurator
# MoEQuantMode), W4A8-MXFP4 is MXFP4 weights x MXFP8 activations.
_DTYPE_TO_FORMAT = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "w4a16_mxfp4": "w4a16",
    "w4a8_mxfp4_mxfp8": "mxfp4",
}
# nccl-tests collective names to simfront kinds
_COLLECTIVE = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather", "allgather": "all_gather",
               "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter", "alltoall": "alltoall", "all_to_all": "alltoall"}


def csv_format(dtype: str, hw=None) -> str:
    """simfront format for a calibration-file dtype string, read for ``hw`` when given (a bare ``fp4``
    is MXFP4 on GPUs without NVFP4, e.g. CDNA4). Weight-only ``int4_wo`` / ``int8_wo`` and SmoothQuant
    ``sq`` map to ``w4a16`` / ``w8a16`` / ``int8``."""
    from .precision import normalize_format, resolve_format

    d = str(dtype).strip().lower()
    if d in _DTYPE_TO_FORMAT:
        return _DTYPE_TO_FORMAT[d]
    return resolve_format(d, hw).name if hw is not None else normalize_format(d)


def routing_alpha(distribution: str) -> float | None:
    """``balanced`` -> None; ``power_law_1.2`` -> 1.2."""
    m = re.match(r"power_?law_?([0-9.]+)", str(distribution).strip().lower())
    return float(m.group(1)) if m else None


def _by_values(out: np.ndarray, keys: list[np.ndarray], fn: Callable[[np.ndarray, tuple], np.ndarray]) -> np.ndarray:
    """Fill ``out`` group by group over the unique combinations of ``keys`` (not per row)."""
    codes = np.zeros(len(out), dtype=np.int64)
    for key in keys:
        uniq, inv = np.unique(np.asarray(key), return_inverse=True)
        codes = codes * len(uniq) + inv.reshape(-1)
    for code in np.unique(codes):
        sel = codes == code
        first = int(np.argmax(sel))
        out[sel] = fn(sel, tuple(np.asarray(k)[first] for k in keys))
    return out


def _f(cols, name, sel):
    return np.asarray(cols[name], dtype=np.float64)[sel]


def predict_gemm(cols: dict, hw, p: dict) -> np.ndarray:
    out = np.empty(len(cols["m"]))

    def one(sel, key):
        return gemm.gemm_cost(_f(cols, "m", sel), _f(cols, "n", sel), _f(cols, "k", sel), csv_format(key[0], hw), hw, p).time_s

    return _by_values(out, [cols["dtype"]], one)


# Expert geometries (hidden_size, inter_size, num_experts, topk) of MoE models whose experts are not
# gated: squared-ReLU up then down, two matrices instead of SwiGLU's three. These are the NVIDIA
# Nemotron-3 family (Nano 2688/1856/128/6; Super and Ultra LatentMoE, 512 experts top-22, timed at
# their latent and full widths); the aiconfigurator perf database times exactly these shapes with its
# non-gated MoE flow (kernel_source moe_torch_flow_nongated). The CSVs carry no gating column.
NONGATED_MOE_SHAPES = frozenset({
    (2688, 1856, 128, 6),
    (1024, 2688, 512, 22), (4096, 2688, 512, 22),
    (2048, 5120, 512, 22), (8192, 5120, 512, 22),
})


def moe_gated(cols: dict) -> np.ndarray:
    """Per row: True for gated (SwiGLU, three matrices) experts. A ``gated`` column wins when present."""
    if "gated" in cols:
        return np.array([str(v).strip().lower() in ("1", "1.0", "true", "yes") for v in cols["gated"]])
    shape = zip(*(np.asarray(cols[c], dtype=np.float64).astype(np.int64) for c in ("hidden_size", "inter_size", "num_experts", "topk")))
    return np.array([tuple(int(x) for x in s) not in NONGATED_MOE_SHAPES for s in shape], dtype=bool)


# MoE kernels a row may have been timed on (``moe.moe_path_costs``); the CSVs do not say which ran
MOE_PATHS = ("grouped", "fused")


def predict_moe_paths(cols: dict, hw, p: dict) -> np.ndarray:
    """Seconds per MoE row on each kernel of ``MOE_PATHS``, shape (paths, rows); inf where that kernel
    does not exist (the fused FP4 kernel off datacenter Blackwell). ``predict_moe`` is their minimum."""
    out = np.full((len(cols["num_tokens"]), len(MOE_PATHS)), np.inf)

    def one(sel, key):
        paths = moe.moe_path_costs(
            _f(cols, "num_tokens", sel), _f(cols, "hidden_size", sel), _f(cols, "inter_size", sel), _f(cols, "topk", sel),
            _f(cols, "num_experts", sel), _f(cols, "moe_tp_size", sel), _f(cols, "moe_ep_size", sel), csv_format(key[0], hw), hw,
            alpha=routing_alpha(key[1]), gated=bool(key[2]), p=p, spread_balanced=True, collector_router=True, timed_kernel=True,
        )
        n = int(np.sum(sel))
        return np.stack([np.broadcast_to(paths[name].time_s, (n,)) if name in paths else np.full(n, np.inf) for name in MOE_PATHS], axis=1)

    return _by_values(out, [cols["dtype"], cols["distribution"], moe_gated(cols)], one).T


def predict_moe(cols: dict, hw, p: dict) -> np.ndarray:
    """Seconds per MoE row: the kernel an engine runs, the fastest of ``predict_moe_paths`` (as
    ``moe.moe_cost``). The benchmark's balanced router gives every pair its own expert until all are
    busy (``spread_balanced``); its power-law rows follow ``moe.power_law_rank_load``."""
    return predict_moe_paths(cols, hw, p).min(axis=0)


def predict_nccl(cols: dict, hw, p: dict) -> np.ndarray:
    out = np.empty(len(cols["message_bytes"]))

    def one(sel, key):
        kind = _COLLECTIVE.get(str(key[0]).strip().lower(), str(key[0]))
        return comm.collective_cost(kind, _f(cols, "message_bytes", sel), _f(cols, "num_gpus", sel), hw, p).time_s

    return _by_values(out, [cols["collective"]], one)


def _entry(kind, module, predict, columns, vary, paths=None) -> dict[str, Any]:
    e = {"kind": kind, "params": module.PARAMS, "family_defaults": module.FAMILY_DEFAULTS,
         "predict": predict, "columns": columns, "vary": vary, "class_fallback": getattr(module, "CLASS_FALLBACK", {}),
         "param_class_fallback": getattr(module, "PARAM_CLASS_FALLBACK", {})}
    # (values fitted on one GPU, it, another GPU) -> what the other uses: the kernel-library class swap of this kind
    e["transfer"] = partial(gemm.transfer_params, kind)
    if paths is not None:
        e["paths"] = paths
    return e


OPS: dict[str, dict[str, Any]] = {
    "gemm": _entry("gemm", gemm, predict_gemm, ["dtype", "m", "n", "k"], "m"),
    "moe": _entry("moe", moe, predict_moe, ["dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                                            "moe_tp_size", "moe_ep_size", "distribution"], "num_tokens", paths=predict_moe_paths),
    "nccl": _entry("comm", comm, predict_nccl, ["collective", "num_gpus", "message_bytes"], "message_bytes"),
}

# Modules of other op families exporting CALIBRATION_OPS of the same shape.
EXTERNAL_MODULES = ("simfront.attention", "simfront.mla")


def all_ops() -> dict[str, dict[str, Any]]:
    """OPS plus whatever attention/MLA entries import now (absent modules are skipped)."""
    ops = dict(OPS)
    for mod_name in EXTERNAL_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        for name, entry in getattr(mod, "CALIBRATION_OPS", {}).items():
            e = dict(entry)
            e.setdefault("family_defaults", {})
            e.setdefault("vary", "batch" if "batch" in e.get("columns", []) else e.get("columns", [None])[0])
            ops[name] = e
    return ops


def op_params(entry: dict, hw, p: dict | None = None) -> dict[str, Any]:
    """Complete parameter dict of an op for ``hw``: defaults, family defaults, fitted file, then ``p``."""
    return gemm.resolve_params(entry["kind"], hw, p, entry["params"], entry.get("family_defaults", {}))

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

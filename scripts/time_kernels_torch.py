#!/usr/bin/env python
"""Time GEMM and attention kernels on the local CUDA GPU with PyTorch, written in the calibration CSV format.

Public-library kernels (cuBLAS through ``torch.mm`` / ``torch._scaled_mm``, the fastest of PyTorch's
scaled-dot-product-attention backends) give a held-out GPU measured rows that ``simfront validate``
compares with its predictions. The shapes come from ``--shapes DIR`` (``gemm.csv``, ``attention_prefill.csv``,
``attention_decode.csv`` with the calibration columns; ``--sample-from`` writes such a folder from calibration
CSVs on a machine without a GPU; or a folder of measured ``<gpu>__<op>.csv`` files such as
``measurements/kernels``, whose shapes are timed again on this GPU). Each kernel is captured ``REPEATS`` times in a CUDA graph and replayed, so
launch gaps are not timed (an engine's decode steps replay graphs too); inputs stay the same between replays, so
small weights are served from L2 as they are in an engine's repeated steps. ``--sample-from`` draws with a fixed
seed, so the shape folder is reproducible from the calibration files.

    python scripts/time_kernels_torch.py --sample-from ../shared/calibration/kernels --shapes devrun/shapes
    python scripts/time_kernels_torch.py --shapes devrun/shapes --out $OUT --gpu h200_sxm   # on the GPU
    python scripts/time_kernels_torch.py --streaming --out $OUT --gpu h200_sxm              # HBM: streaming GEMMs
    python scripts/time_kernels_torch.py --peaks --out $OUT --gpu h200_sxm                  # largest GEMM rates
    simfront validate $OUT/h200_sxm__gemm.csv ...                                          # anywhere
    python scripts/time_kernels_torch.py --shapes measurements/kernels --gpu l40s --out out  # your GPU, same shapes
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

REPEATS = 10  # kernel launches captured per CUDA graph; latency = graph replay time / REPEATS
REPLAYS = 5  # graph replays timed; the median is kept
MAX_OPERAND_BYTES = 6e9  # skip shapes whose operands exceed this (keeps one run inside a short GPU lease)
OPS = ("gemm", "attention_prefill", "attention_decode")


def sample_shapes(src: Path, dst: Path, per_group: int, seed: int = 0) -> None:
    """Write ``dst/<op>.csv`` with up to ``per_group`` shapes per dtype (GEMM) or per KV dtype (attention).

    Rows come from ``src/h100_sxm__<op>.csv``; only bf16 attention without a window (what PyTorch's dense
    kernels compute) and shapes whose operands fit ``MAX_OPERAND_BYTES``."""
    import numpy as np
    import pandas as pd

    dst.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for op in OPS:
        df = pd.read_csv(src / f"h100_sxm__{op}.csv")
        if op == "gemm":
            a_b = (df.m * df.k + df.n * df.k + df.m * df.n) * 2  # bf16 operand bytes (fp8 is smaller)
            df = df[(a_b < MAX_OPERAND_BYTES) & (df.latency_us < 20_000)]
            groups = [g for _, g in df.groupby("dtype")]
            cols = ["dtype", "m", "n", "k"]
        else:
            length = "seq_len" if op == "attention_prefill" else "kv_len"
            kv_bytes = 2 * df.batch * df[length] * df.n_kv_heads * df.head_dim * 2  # K and V, bf16
            df = df[(df.window_size == 0) & (df.kv_cache_dtype == "bfloat16") & (kv_bytes < MAX_OPERAND_BYTES)
                    & (df.latency_us < 20_000)]
            groups = [df]
            cols = ["batch", length, "n_heads", "n_kv_heads", "head_dim", "window_size", "kv_cache_dtype"]
        picked = pd.concat([g.iloc[rng.permutation(len(g))[:per_group]] for g in groups])
        picked[cols].to_csv(dst / f"{op}.csv", index=False)
        print(f"{op}: {len(picked)} shapes -> {dst / f'{op}.csv'}")


def shape_file(shapes: Path, op: str) -> Path | None:
    """The shape list of ``op`` in ``shapes``: ``<op>.csv`` (``--sample-from``), else a measured ``<gpu>__<op>.csv`` of
    any GPU (e.g. ``measurements/kernels``: time the shapes simfront was checked on, on another GPU)."""
    own = shapes / f"{op}.csv"
    if own.exists():
        return own
    measured = sorted(shapes.glob(f"*__{op}.csv"))
    return measured[0] if measured else None


def _graph_time_us(fn, torch) -> float:
    """Median microseconds per call of ``fn`` replayed from a CUDA graph of ``REPEATS`` calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm-up outside the graph (library autotuning, workspace allocation)
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPEATS):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / REPEATS)  # ms -> us per call
    del graph
    return sorted(times)[len(times) // 2]


def _copy_rate(torch) -> tuple[float, float]:
    """Microseconds and bytes/s (read + written) of a 4 GiB device-to-device ``copy_`` replayed from a CUDA graph.

    In a graph the copy is a memcpy node, which may run on a copy engine rather than the SMs, so this is a lower
    bound on what kernels stream from HBM, not the achievable HBM bandwidth."""
    src = torch.empty(2 ** 31, device="cuda", dtype=torch.int16)
    dst = torch.empty_like(src)
    us = _graph_time_us(lambda: dst.copy_(src), torch)
    return us, 2 * src.numel() * src.element_size() / (us * 1e-6)


def _gemm_fn(dtype: str, m: int, n: int, k: int, torch):
    """A callable computing one (m x k) @ (k x n) GEMM in ``dtype`` the way an engine's linear layer does."""
    dev = "cuda"
    if dtype == "bfloat16":
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        return lambda: torch.mm(a, w.t())
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
    if dtype == "fp8":  # per-tensor scales
        one = torch.ones((), device=dev, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if dtype == "fp8_quant":  # per-tensor scales with the activation quantised in the timed call, as engines do
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        one = torch.ones((), device=dev, dtype=torch.float32)
        fp8_max = torch.finfo(torch.float8_e4m3fn).max

        def quant_gemm():
            scale = x.abs().amax().float().clamp(min=1e-12) / fp8_max  # dynamic per-tensor scale
            xq = (x / scale).to(torch.float8_e4m3fn)
            return torch._scaled_mm(xq, w.t(), scale_a=scale, scale_b=one, out_dtype=torch.bfloat16)
        return quant_gemm
    if dtype == "fp8_block":  # DeepSeek-style 1x128 activation and 128x128 weight scales
        sa, sb = _block_scales(m, n, k, torch)
        return lambda: torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    raise ValueError(dtype)


_BLOCK_LAYOUT: list = []  # the scale layout torch._scaled_mm accepted for 1x128 / 128x128 block scales, once found


def _block_scales(m: int, n: int, k: int, torch):
    """Scale tensors for a block-scaled FP8 GEMM in the first layout this PyTorch build accepts."""
    dev = "cuda"
    layouts = {  # name -> (scale_a, scale_b)
        "a(m,k/128) m-major, b(n/128,k/128)^T": lambda m, n, k: (
            torch.ones(k // 128, m, device=dev).t(), torch.ones(n // 128, k // 128, device=dev).t()),
        "a(m,k/128) m-major, b(k/128,n/128)": lambda m, n, k: (
            torch.ones(k // 128, m, device=dev).t(), torch.ones(k // 128, n // 128, device=dev)),
        "a(m,k/128) k-major, b(n/128,k/128)^T": lambda m, n, k: (
            torch.ones(m, k // 128, device=dev), torch.ones(n // 128, k // 128, device=dev).t()),
        "a(m,k/128) k-major, b(k/128,n/128)": lambda m, n, k: (
            torch.ones(m, k // 128, device=dev), torch.ones(k // 128, n // 128, device=dev)),
    }
    if not _BLOCK_LAYOUT:
        a = torch.zeros(256, 512, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        w = torch.zeros(512, 512, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        for name, make in layouts.items():
            try:
                sa, sb = make(256, 512, 512)
                torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
                torch.cuda.synchronize()
                _BLOCK_LAYOUT.append(name)
                break
            except Exception:  # this layout is not one the build accepts: try the next
                continue
        if not _BLOCK_LAYOUT:
            _BLOCK_LAYOUT.append(None)
    if _BLOCK_LAYOUT[0] is None:
        raise RuntimeError("no block-scale layout accepted by torch._scaled_mm")
    return layouts[_BLOCK_LAYOUT[0]](m, n, k)


def _attention_fns(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int, torch):
    """Callables for causal (prefill) or single-query (decode) attention, one per SDPA backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    q = torch.randn(batch, heads, q_len, head_dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, kv_heads, kv_len, head_dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    causal = q_len > 1
    fns = {}
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        def fn(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != heads)
        fns[name] = fn
    return fns


# weight-streaming GEMMs (scripts/achievable_hbm.py's method: a few token rows against weights several L2 caches big,
# so the time is the weight bytes over the bandwidth HBM sustains): token rows x (n, k) of common LLM weight matrices
STREAMING_ROWS = (1, 2, 4, 8, 16, 32, 64)
STREAMING_NK = ((8192, 28672), (28672, 8192), (16384, 16384), (7168, 18432), (18432, 7168), (57344, 8192))
STREAMING_DTYPES = ("bfloat16", "fp8")


def time_streaming(out: Path, gpu: str) -> dict:
    """Time the weight-streaming GEMMs and two SM-driven streams (a sum over 8 GiB; a scaled copy of 4 GiB) and write
    ``<gpu>__gemm_streaming.csv``; returns the streams' bytes/s."""
    import warnings

    import torch

    warnings.filterwarnings("ignore", category=UserWarning)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for dtype in STREAMING_DTYPES:
        for n, k in STREAMING_NK:
            for m in STREAMING_ROWS:
                us = _graph_time_us(_gemm_fn(dtype, m, n, k, torch), torch)
                rows.append({"gpu": gpu, "dtype": dtype, "m": m, "n": n, "k": k, "latency_us": round(us, 4)})
                torch.cuda.empty_cache()
    with (out / f"{gpu}__gemm_streaming.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    src = torch.ones(2 ** 32, device="cuda", dtype=torch.bfloat16)  # 8 GiB
    us_sum = _graph_time_us(lambda: src.sum(), torch)
    half = src[: 2 ** 31]
    dst = torch.empty_like(half)
    us_mul = _graph_time_us(lambda: torch.mul(half, 2.0, out=dst), torch)
    return {"sum_8GiB_us": us_sum, "sum_read_bytes_per_s": src.numel() * 2 / (us_sum * 1e-6),
            "scaled_copy_4GiB_us": us_mul, "scaled_copy_bytes_per_s": 2 * half.numel() * 2 / (us_mul * 1e-6)}


PEAK_SIZES = (4096, 8192, 12288, 16384)  # square GEMMs for the largest rate a dtype reaches (m = n = k)


def time_peaks(gpu: str) -> dict:
    """Largest dense GEMM rate per dtype over ``PEAK_SIZES`` (FLOP/s): BF16 and per-tensor FP8 through cuBLAS, INT8
    through ``torch._int_mm`` (INT8 x INT8 -> INT32, cuBLASLt IMMA)."""
    import torch

    out: dict[str, dict] = {}
    for dtype in ("bfloat16", "fp8", "int8"):
        best = 0.0
        for size in PEAK_SIZES:
            if dtype == "int8":
                a = torch.randint(-64, 64, (size, size), device="cuda", dtype=torch.int8)
                b = torch.randint(-64, 64, (size, size), device="cuda", dtype=torch.int8).t()  # column-major, as IMMA wants
                us = _graph_time_us(lambda: torch._int_mm(a, b), torch)
                del a, b
            else:
                us = _graph_time_us(_gemm_fn(dtype, size, size, size, torch), torch)
            rate = 2.0 * size ** 3 / (us * 1e-6)  # GEMM FLOPs over its time
            out.setdefault(dtype, {})[str(size)] = rate
            best = max(best, rate)
            torch.cuda.empty_cache()
        out[dtype]["max_flops_per_s"] = best
    return {"gpu": gpu, "peaks": out}


def time_shapes(shapes: Path, out: Path, gpu: str, budget_s: float, ops: tuple[str, ...] = OPS) -> dict:
    import warnings

    import torch

    warnings.filterwarnings("ignore", category=UserWarning)  # SDPA explains every backend it declines

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    info = {"gpu": gpu, "device_name": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "repeats_per_graph": REPEATS, "replays": REPLAYS, "skipped": {}, "backends": {}}
    info["copy_us_4GiB"], info["copy_bytes_per_s"] = _copy_rate(torch)
    for op in ops:
        path = shape_file(shapes, op)
        if path is None:
            continue
        rows = [{k: v for k, v in r.items() if k not in ("gpu", "latency_us")} for r in csv.DictReader(path.open())]
        done = []
        for r in rows:
            if time.time() - t0 > budget_s:
                info["skipped"].setdefault(op, []).append("time budget")
                break
            try:
                if op == "gemm":
                    fns = {"cublas": _gemm_fn(r["dtype"], int(r["m"]), int(r["n"]), int(r["k"]), torch)}
                    if r["dtype"] == "fp8":  # the same GEMM with its activation quantisation, kept beside
                        us = _graph_time_us(_gemm_fn("fp8_quant", int(r["m"]), int(r["n"]), int(r["k"]), torch), torch)
                        info.setdefault("fp8_with_activation_quant", []).append(
                            {"m": int(r["m"]), "n": int(r["n"]), "k": int(r["k"]), "latency_us": round(us, 4)})
                else:
                    length = int(r["seq_len"] if op == "attention_prefill" else r["kv_len"])
                    q_len = length if op == "attention_prefill" else 1
                    fns = _attention_fns(int(r["batch"]), q_len, length, int(r["n_heads"]), int(r["n_kv_heads"]),
                                         int(r["head_dim"]), torch)
                best, best_name = float("inf"), None
                for name, fn in fns.items():
                    try:
                        us = _graph_time_us(fn, torch)
                    except Exception as exc:  # a backend that cannot run this shape
                        info["skipped"].setdefault(f"{op}:{name}", []).append(str(exc).splitlines()[0][:160])
                        continue
                    if us < best:
                        best, best_name = us, name
                if best_name is None:
                    continue
                info["backends"].setdefault(op, {}).setdefault(best_name, 0)
                info["backends"][op][best_name] += 1
                done.append({"gpu": gpu, **r, "latency_us": round(best, 4)})
            except Exception as exc:  # shape the library rejects: recorded, not fatal
                info["skipped"].setdefault(op, []).append(f"{dict(r)}: {str(exc).splitlines()[0][:160]}")
            finally:
                torch.cuda.empty_cache()
        if done:
            with (out / f"{gpu}__{op}.csv").open("w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=list(done[0].keys()))
                w.writeheader()
                w.writerows(done)
        print(f"{op}: {len(done)} of {len(rows)} timed, {time.time() - t0:.0f} s", flush=True)
    info["elapsed_s"] = time.time() - t0
    info["fp8_block_scale_layout"] = _BLOCK_LAYOUT[0] if _BLOCK_LAYOUT else None
    for key, msgs in info["skipped"].items():
        info["skipped"][key] = {"count": len(msgs), "first": msgs[:3]}
    (out / f"{gpu}__torch_kernels.json").write_text(json.dumps(info, indent=1))
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", type=Path, help="folder of <op>.csv shape lists")
    ap.add_argument("--sample-from", type=Path, help="calibration kernel folder to sample shapes from (no GPU needed)")
    ap.add_argument("--per-group", type=int, default=120, help="shapes per GEMM dtype / attention op when sampling")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--gpu", default="h200_sxm", help="catalog id written in the gpu column")
    ap.add_argument("--budget-s", type=float, default=300.0, help="stop timing new shapes after this many seconds")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated ops to time")
    ap.add_argument("--streaming", action="store_true", help="time weight-streaming GEMMs and SM streams instead (HBM)")
    ap.add_argument("--peaks", action="store_true", help="time square GEMMs for each dtype's largest rate instead")
    args = ap.parse_args(argv)
    if args.sample_from:
        sample_shapes(args.sample_from, args.shapes, args.per_group)
        return 0
    if args.peaks:
        peaks = time_peaks(args.gpu)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.gpu}__peaks.json").write_text(json.dumps(peaks, indent=1))
        print(json.dumps(peaks, indent=1))
        if not args.streaming:
            return 0
    if args.streaming:
        streams = time_streaming(args.out, args.gpu)
        (args.out / f"{args.gpu}__streaming.json").write_text(json.dumps(streams, indent=1))
        print(json.dumps(streams, indent=1))
        return 0
    if args.shapes is None:
        ap.error("--shapes is required (or --streaming)")
    info = time_shapes(args.shapes, args.out, args.gpu, args.budget_s, tuple(args.ops.split(",")))
    print(json.dumps({k: v for k, v in info.items() if k != "skipped"}, indent=1))
    print("skipped:", json.dumps(info["skipped"], indent=1)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())

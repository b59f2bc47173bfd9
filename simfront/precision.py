"""Numeric formats for weights, activations and the KV cache.

A *format* says how many bytes one element takes in HBM (block scales included) and which
tensor-core rate a GEMM in that format runs at. Byte counts follow from the format
definitions themselves (cited inline), so they live here rather than in a data file.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SimfrontError


@dataclass(frozen=True)
class Format:
    name: str
    bytes_per_element: float  # HBM bytes per weight element, block-scale overhead included
    compute_dtype: str  # tensor-core rate used when the GPU supports it (key of Hardware.peak_flops_per_s)
    fallback_dtype: str  # rate used when it does not (weight-only dequantize then MMA)
    act_bytes: float  # bytes per activation element fed to the GEMM
    needs: str | None = None  # hardware capability required for the fast path: "fp8" or "nvfp4"/"mxfp4"
    description: str = ""


# Bytes per element, with scale overhead [specs.md; modeling-notes.md §1.1]:
FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        Format("bf16", 2.0, "bf16", "bf16", 2.0, None, "BF16 weights and activations"),
        Format("fp16", 2.0, "bf16", "bf16", 2.0, None, "FP16 (same rate as BF16)"),
        # Per-tensor FP8 E4M3: one scalar scale per tensor, negligible.
        Format("fp8", 1.0, "fp8", "bf16", 1.0, "fp8", "FP8 E4M3, per-tensor scales"),
        # DeepSeek block FP8: one FP32 scale per 128x128 weight block -> +4/16384 B per element;
        # activations carry one FP32 scale per 1x128 group -> +4/128 B per element.
        Format("fp8_block", 1.0 + 4.0 / (128 * 128), "fp8", "bf16", 1.0 + 4.0 / 128, "fp8", "FP8 E4M3, 128x128 block scales"),
        # NVFP4: E2M1 (0.5 B) + one E4M3 scale per 16 elements -> 0.5 + 1/16 = 0.5625 B.
        Format("nvfp4", 0.5 + 1.0 / 16, "fp4", "bf16", 0.5 + 1.0 / 16, "nvfp4", "NVFP4, 16-element blocks, FP8 scales"),
        # MXFP4: E2M1 + one E8M0 scale per 32 elements -> 0.5 + 1/32 = 0.53125 B. On GPUs with FP4
        # tensor cores the MoE kernels run it as W4A8 (MXFP4 x MXFP8) at the FP8 rate (aiconfigurator).
        Format("mxfp4", 0.5 + 1.0 / 32, "fp8", "bf16", 1.0 + 1.0 / 32, "mxfp4", "MXFP4, 32-element blocks, E8M0 scales"),
        # INT4 weight-only (AWQ/GPTQ/compressed-tensors pack): 0.5 B + a BF16 scale per group of 32.
        Format("w4a16", 0.5 + 2.0 / 32, "bf16", "bf16", 2.0, None, "4-bit integer weights, BF16 math (weight-only)"),
        # INT8 weight-only (TensorRT-LLM int8_wo): per-channel scales, negligible; dequantised in the
        # GEMM main loop, BF16 math
        Format("w8a16", 1.0, "bf16", "bf16", 2.0, None, "8-bit integer weights, BF16 math (weight-only)"),
        # INT8 W8A8 (SmoothQuant): per-channel weight and per-token activation scales, negligible
        Format("int8", 1.0, "int8", "bf16", 1.0, "int8", "INT8 W8A8 (SmoothQuant)"),
    ]
}

KV_FORMATS: dict[str, float] = {
    # bytes per KV element
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
}

PRECISION_CHOICES = ["native", "bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "w4a16"]
# Format names that mean different formats on different GPUs: a bare "fp4" checkpoint or kernel is
# NVFP4 where the GPU runs NVFP4 and MXFP4 where it only runs MXFP4 (AMD CDNA4 has no NVFP4).
GENERIC_FP4 = ("fp4",)


def weights_of(label: str) -> str:
    """Weight format of a precision label (``fp8_block+kvfp8`` -> ``fp8_block``)."""
    return str(label).split("+kv")[0]


def get_format(name: str) -> Format:
    key = normalize_format(name)
    if key not in FORMATS:
        raise SimfrontError(f"unknown precision {name!r}; valid: {', '.join(FORMATS)}")
    return FORMATS[key]


def normalize_format(name: str) -> str:
    """Map the many spellings of a format to one key ('FP4 (NVFP4)' -> 'nvfp4', 'fp4' -> 'nvfp4')."""
    n = str(name).strip().lower().replace("-", "_").replace(" ", "")
    aliases = {
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
        "auto": "bf16",
        "fp8_e4m3": "fp8",
        "float8_e4m3fn": "fp8",
        "fp8e4m3": "fp8",
        "fp4": "nvfp4",
        "fp4(nvfp4)": "nvfp4",
        "w4a16_mxfp4": "mxfp4",
        "w4a8_mxfp4_fp8": "mxfp4",
        "mxfp4_pack_quantized": "mxfp4",
        "int4": "w4a16",
        "int4_wo": "w4a16",
        "w4a16_awq": "w4a16",
        "int8_wo": "w8a16",
        "int8_weight_only": "w8a16",
        "sq": "int8",
        "smoothquant": "int8",
        "w8a8": "int8",
        "w8a8_int8": "int8",
        "int8_sq": "int8",
        "awq": "w4a16",
        "gptq": "w4a16",
        "fp8block": "fp8_block",
    }
    return aliases.get(n, n)


def resolve_format(name: str, hw=None) -> Format:
    """The format ``name`` means on ``hw``: a generic ``fp4`` is NVFP4 where the GPU has NVFP4 tensor
    cores and MXFP4 where it has only MXFP4 (CDNA4); without a GPU, the name's default reading."""
    raw = str(name).strip().lower().replace("-", "_").replace(" ", "")
    if hw is not None and raw in GENERIC_FP4:
        fp4 = list(getattr(hw, "fp4_formats", []) or [])
        if "nvfp4" not in fp4 and "mxfp4" in fp4:
            return FORMATS["mxfp4"]
    return get_format(name)


def kv_bytes(name: str) -> float:
    n = normalize_format(name)
    if n in ("fp8_block",):
        n = "fp8"
    if n not in KV_FORMATS:
        raise SimfrontError(f"unknown KV-cache dtype {name!r}; valid: {', '.join(KV_FORMATS)}")
    return KV_FORMATS[n]


def format_fallback_notes(hw, weights=None) -> list[str]:
    """One line per weight format (of ``weights``; None: every known format) whose GEMMs run weight-only on ``hw``
    because it lacks the tensor cores the format's fast path needs (FP8 on Ampere, FP4 on Hopper): the weights are
    dequantised in the GEMM's main loop and the math runs at the fallback rate, which is how simfront prices them."""
    names = FORMATS if weights is None else weights
    out = []
    for name in names:
        fmt = FORMATS.get(name)
        if fmt is None or fmt.needs is None:
            continue
        rate = gemm_rate_dtype(fmt, hw)
        if rate == fmt.fallback_dtype and rate != fmt.compute_dtype:
            out.append(f"{hw.id}: no {fmt.needs} tensor cores: {fmt.name} weights run weight-only (dequantised to "
                       f"{fmt.fallback_dtype} in the GEMM, {fmt.fallback_dtype} math), as priced")
    return out


def gemm_rate_dtype(fmt: Format, hw) -> str:
    """The tensor-core dtype a GEMM in ``fmt`` runs at on ``hw`` (fast path if supported, else fallback).

    A GPU's ``format_rates`` names a different fast-path rate where its kernels run the format natively
    (MI355X: MXFP4 MFMA at the FP4 rate)."""
    native = (getattr(hw, "format_rates", None) or {}).get(fmt.name)
    if native is not None and hw.supports(native) and (fmt.needs is None or fmt.needs not in ("nvfp4", "mxfp4") or fmt.needs in hw.fp4_formats):
        return native
    if fmt.needs is None:
        return fmt.compute_dtype
    if fmt.needs in ("nvfp4", "mxfp4"):
        ok = fmt.needs in hw.fp4_formats
    else:
        ok = hw.supports(fmt.needs)
    return fmt.compute_dtype if ok and hw.supports(fmt.compute_dtype) else fmt.fallback_dtype

"""Kernel availability per platform: which kernel an engine runs for an op on a GPU (``hardware/kernels.yaml``).

A platform is a GPU's NVIDIA compute capability (``"9.0"``) or AMD gfx target (``"gfx942"``). Each op of
the file lists its native kernels with the platforms they are built for, and the path taken elsewhere
(``fallback``). The cost modules ask :func:`has_native` which path to price (MLA decode runs the Triton
grouped kernel off Hopper / datacenter Blackwell / CDNA; the fused FP4 MoE kernel exists on sm_100 /
sm_103 only), and :func:`kernel_paths` reports, per op, the kernel a GPU takes, for provenance.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from . import yamlio
from .errors import SimfrontError

KERNELS_FILE = Path(__file__).resolve().parent.parent / "hardware" / "kernels.yaml"


class NativeKernel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kernel: str
    platforms: list[str] = Field(min_length=1)
    source: str = Field(min_length=1)
    launches: int | None = Field(default=None, ge=1)  # kernels one call launches back to back
    launches_source: str | None = None
    max_experts: int | None = Field(default=None, ge=1)  # MoE kernels: most experts its router supports
    max_experts_source: str | None = None
    # MoE kernels: True where the kernel is the only MoE kernel its platform prices for the op's formats (no grouped
    # CUTLASS path beside it)
    sole_moe_kernel: bool = False
    sole_moe_kernel_source: str | None = None
    # what the calibration of this kernel does not cover on its platforms (engines that serve the op with another
    # kernel, measured runs that ran slower than priced): said in a prediction's notes wherever it prices the op
    caveat: str | None = None
    caveat_source: str | None = None
    # MoE kernels timed by the calibration whose platform's engines serve the op with a kernel that routes on the
    # device and builds no per-expert groups: serving prices carry no setup per held expert (moe local_expert_s)
    served_without_group_setup: bool = False
    served_without_group_setup_source: str | None = None
    # GEMM kernels whose calibration rows were timed on an untuned tactic while serving engines tune theirs at start-up:
    # serving prices them with the tuned kernel's values (hardware/efficiency/served_gemm.yaml, fitted on public
    # microbenchmarks by scripts/fit_served_gemm.py)
    served_tuned_tactic: bool = False
    served_tuned_tactic_source: str | None = None


class Fallback(BaseModel):
    model_config = ConfigDict(extra="allow")  # path-specific geometry (e.g. head_block), `measured`
    kernel: str
    source: str = Field(min_length=1)


class LaunchCost(BaseModel):
    model_config = ConfigDict(extra="forbid")
    per_launch_s: float = Field(gt=0)  # seconds one dependent kernel launch adds to a call
    source: str = Field(min_length=1)


class EfficiencyClass(BaseModel):
    """The fitted efficiency class whose values describe an op's kernel on the platform it was fitted on."""

    model_config = ConfigDict(extra="forbid")
    kind: str  # efficiency kind (hardware/efficiency/<kind>.yaml)
    cls: str = Field(alias="class")  # dtype class of that kind whose values the kernel's rows fitted
    sibling: str  # class whose values a platform running ANOTHER kernel for the op takes instead


class PricedFor(BaseModel):
    """The configurations that price an op (every condition given must hold; see simfront/priced.py)."""

    model_config = ConfigDict(extra="forbid")
    attention: list[str] | None = None  # attention kinds: gqa, mla
    moe: bool | None = None  # True: MoE models only
    weights: list[str] | None = None  # weight formats (precision names)
    kv: list[str] | None = None  # KV-cache dtypes


class OpKernels(BaseModel):
    model_config = ConfigDict(extra="forbid")
    what: str
    priced_for: PricedFor | None = None  # None: every configuration prices the op
    native: list[NativeKernel] = Field(min_length=1)
    fallback: Fallback
    efficiency_class: EfficiencyClass | None = None


class KernelPath(BaseModel):
    """The kernel a GPU takes for one op."""

    op: str  # key of hardware/kernels.yaml (mla_decode, moe_fused_fp4, gemm_smoothquant, ...)
    kernel: str  # e.g. "flashmla", "triton-mla-decode"
    native: bool  # False: the op's fallback path (no native kernel for this platform)
    source: str
    priced: bool | None = None  # whether the prediction it is reported with prices the op (None: not asked)
    caveat: str | None = None  # what the kernel's calibration does not cover on this platform (None: nothing known)


@lru_cache(maxsize=None)
def _doc() -> dict:
    return yamlio.loads(KERNELS_FILE.read_text()) or {}  # the C loader where PyYAML has it


@lru_cache(maxsize=None)
def table() -> dict[str, OpKernels]:
    """All ops of ``hardware/kernels.yaml``, validated."""
    return {op: OpKernels(**spec) for op, spec in (_doc().get("ops") or {}).items()}


@lru_cache(maxsize=None)
def launch_cost() -> LaunchCost:
    """The cost of one kernel launch (``launch`` block of hardware/kernels.yaml, with its source)."""
    if "launch" not in _doc():
        raise SimfrontError(f"{KERNELS_FILE} has no 'launch' block (per_launch_s with its source)")
    return LaunchCost(**_doc()["launch"])


def launches(op: str, hw, fallback: bool = False) -> int:
    """Kernels one call of ``op`` launches on ``hw`` (its native kernel's, else, or with ``fallback``, its fallback's
    ``launches``)."""
    k = None if fallback else native_kernel(op, hw)
    n = k.launches if k is not None else _op(op).fallback.model_dump().get("launches")
    if n is None:
        raise SimfrontError(f"hardware/kernels.yaml: op {op!r} kernel for {platform_of(hw)} has no 'launches' count")
    return int(n)


def launch_seconds(op: str, hw, fallback: bool = False) -> float:
    """Seconds the kernel launches of one call of ``op`` on ``hw`` cost: launches x per-launch cost (data); with
    ``fallback``, those of the op's fallback kernel (an engine that leaves the native one)."""
    return launches(op, hw, fallback) * launch_cost().per_launch_s


def platform_of(hw) -> str | None:
    """Key of ``hw`` in hardware/kernels.yaml: its compute capability (NVIDIA) or gfx target (AMD)."""
    return getattr(hw, "compute_capability", None) or getattr(hw, "gfx_target", None)


def _op(op: str) -> OpKernels:
    t = table()
    if op not in t:
        raise SimfrontError(f"unknown kernel op {op!r}; valid: {', '.join(t)}")
    return t[op]


def platforms(op: str) -> frozenset[str]:
    """Platforms with a native kernel for ``op``."""
    return frozenset(p for k in _op(op).native for p in k.platforms)


def native_kernel(op: str, hw) -> NativeKernel | None:
    """The native kernel ``hw`` runs for ``op``, or None where it takes the fallback."""
    plat = platform_of(hw)
    return next((k for k in _op(op).native if plat in k.platforms), None)


def has_native(op: str, hw) -> bool:
    return native_kernel(op, hw) is not None


def max_experts(op: str, hw) -> float:
    """Most experts (whole model, before expert parallelism) the native MoE kernel of ``op`` routes on ``hw``:
    its ``max_experts`` (hardware/kernels.yaml); inf where it names none; 0 where ``hw`` has no native kernel."""
    k = native_kernel(op, hw)
    if k is None:
        return 0.0
    return float(k.max_experts) if k.max_experts is not None else float("inf")


def sole_moe_kernel(op: str, hw) -> bool:
    """Whether the native MoE kernel of ``op`` on ``hw`` is the only MoE kernel priced there for the op's formats
    (``sole_moe_kernel`` in hardware/kernels.yaml); False where ``hw`` has no native kernel."""
    return _native_flag(op, hw, "sole_moe_kernel")


def served_without_group_setup(kind: str, cls: str, hw) -> bool:
    """Whether engines on ``hw`` serve experts of efficiency class ``cls`` with a kernel that builds no per-expert
    groups (``served_without_group_setup`` on the native kernel of the op whose ``efficiency_class`` is
    (``kind``, ``cls``) in hardware/kernels.yaml), although the kernel the calibration timed there does."""
    op = class_op(kind, cls)
    return op is not None and _native_flag(op, hw, "served_without_group_setup")


def served_tuned_tactic(op: str, hw) -> bool:
    """Whether engines on ``hw`` serve ``op`` with a tactic their autotuner chose where the calibration timed the
    untuned one (``served_tuned_tactic`` on the op's native kernel in hardware/kernels.yaml)."""
    return _native_flag(op, hw, "served_tuned_tactic")


def _native_flag(op: str, hw, flag: str) -> bool:
    """A boolean fact of the native kernel ``hw`` runs for ``op`` (False where it takes the fallback)."""
    k = native_kernel(op, hw)
    return bool(k is not None and getattr(k, flag))


@lru_cache(maxsize=None)
def class_op(kind: str, cls: str) -> str | None:
    """The op of hardware/kernels.yaml whose ``efficiency_class`` is (``kind``, ``cls``); None where none is."""
    return next((op for op, spec in table().items() if spec.efficiency_class is not None
                 and (spec.efficiency_class.kind, spec.efficiency_class.cls) == (kind, cls)), None)


def fallback(op: str) -> dict[str, Any]:
    """The fallback entry of ``op`` (kernel, source and its path-specific geometry)."""
    return _op(op).fallback.model_dump()


def op_priced(op: str, priced) -> bool:
    """Whether configurations described by ``priced`` (a :class:`simfront.priced.Priced`; None: any) price ``op``
    (an op with an efficiency class only where a weight format runs that class on the GPU)."""
    spec = _op(op)
    cond = spec.priced_for
    if priced is None:
        return True
    if cond is not None and not ((cond.attention is None or bool(priced.attention & set(cond.attention)))
                                 and (cond.moe is None or cond.moe == priced.moe)
                                 and (cond.weights is None or bool(priced.weights & set(cond.weights)))
                                 and (cond.kv is None or bool(priced.kv & set(cond.kv)))):
        return False
    ec = spec.efficiency_class
    return ec is None or (ec.kind, ec.cls) in priced.classes


def kernel_path(op: str, hw, priced=None) -> KernelPath:
    """The kernel ``hw`` takes for ``op``; with ``priced``, also whether those configurations price the op."""
    flag = None if priced is None else op_priced(op, priced)
    k = native_kernel(op, hw)
    if k is not None:
        return KernelPath(op=op, kernel=k.kernel, native=True, source=k.source, priced=flag, caveat=k.caveat)
    fb = _op(op).fallback
    return KernelPath(op=op, kernel=fb.kernel, native=False, source=fb.source, priced=flag)


def kernel_paths(hw, priced=None) -> list[KernelPath]:
    """Per op of hardware/kernels.yaml, the kernel ``hw`` takes (``hw``: Hardware or GPU name), each marked
    ``priced`` when ``priced`` (:class:`simfront.priced.Priced`) describes a prediction's configurations."""
    from .hardware import get_hardware

    hw = get_hardware(hw) if isinstance(hw, str) else hw
    return [kernel_path(op, hw, priced) for op in table()]


@lru_cache(maxsize=None)
def _class_swaps(kind: str, source_platform: str | None, target_platform: str | None) -> tuple[tuple[str, str, str, str, str], ...]:
    """(class, sibling, op, source kernel, target kernel) per op of ``kind`` whose kernel differs between the platforms."""
    out = []
    for op, spec in table().items():
        ec = spec.efficiency_class
        if ec is None or ec.kind != kind:
            continue
        src, dst = (next((k.kernel for k in spec.native if plat in k.platforms), spec.fallback.kernel)
                    for plat in (source_platform, target_platform))
        if src != dst:
            out.append((ec.cls, ec.sibling, op, src, dst))
    return tuple(out)


def class_swaps(kind: str, source_hw, target_hw) -> dict[str, str]:
    """{class: sibling class} of ``kind`` whose fitted values do not describe ``target_hw``'s kernel.

    Values fitted on ``source_hw``'s platform describe that platform's kernel for the op; where ``target_hw`` runs
    another kernel (another library, or none of the calibrated ones), the class takes the values of its sibling
    (``efficiency_class.sibling`` in hardware/kernels.yaml: the same tensor pipeline without the library's
    format-specific costs), as a format class with no rows on the fitted family does."""
    return {c: sib for c, sib, *_ in _class_swaps(kind, platform_of(source_hw), platform_of(target_hw))}


def class_swap_notes(kind: str, source_hw, target_hw) -> list[str]:
    """One line per class :func:`class_swaps` replaces, naming both kernels."""
    return [f"{kind} class {c} takes the {sib} values: {target_hw.id} runs {dst} for {op}, the fitted {source_hw.id} ran {src}"
            for c, sib, op, src, dst in _class_swaps(kind, platform_of(source_hw), platform_of(target_hw))]


def caveat_notes(hw, priced=None) -> list[str]:
    """One line per op whose native kernel on ``hw`` carries a caveat and that the prediction prices (``priced``: only
    the ops those configurations price; None: every op)."""
    return [f"{hw.id}: {p.op} priced as {p.kernel}, but {p.caveat}" for p in kernel_paths(hw, priced)
            if p.native and p.caveat and p.priced is not False]


def fallback_notes(hw, priced=None) -> list[str]:
    """One line per op where ``hw`` has no native kernel and the prediction prices the fallback path (``priced``:
    only the ops those configurations price; None: every op)."""
    out = []
    for p in kernel_paths(hw, priced):
        if not p.native and p.priced is not False:
            out.append(f"{hw.id}: no native {p.op} kernel for {platform_of(hw) or 'this platform'}: priced as {p.kernel}")
    return out

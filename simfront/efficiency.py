"""Fitted efficiency parameters: the few physical knobs between achievable peaks and measured time.

They live as data in ``hardware/efficiency/<kind>.yaml`` (kind = gemm, attention, moe, comm,
serving, ...), one block per architecture family (never per GPU row), each file written by
the calibration script that fitted it. A user profile (``--calibration profile.yaml``) can
override any value, either for the whole process (:func:`set_override`) or for a block of code
(``with efficiency.using(profile): ...``, a context variable, so two profiles can be used side by
side in one notebook, thread or asyncio task).

File layout::

    # hardware/efficiency/gemm.yaml
    fitted_by: scripts/calibrate_kernels.py
    fitted_on: [h100_sxm, b200_sxm]
    families:
      hopper:   {param_a: 0.8, ...}
      blackwell: {...}
      default:  {...}          # used for families with no fitted block (CDNA, Ada, Ampere)
    family_fallback: {ampere: hopper, ada: hopper, cdna3: hopper, cdna4: blackwell}

:func:`provenance` says, for one GPU, which family's parameters each op kind uses (fitted on this
family, or borrowed from which one), which of its achievable peaks are estimates, and how much the
uncertainty band widens for borrowed parameters (``hardware/efficiency/transfer.yaml``, written by
``scripts/leave_one_family_out.py`` from leave-one-family-out residuals).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, Field

from . import yamlio
from .kernels import caveat_notes, class_swap_notes, fallback_notes
from .precision import format_fallback_notes


EFFICIENCY_DIR = Path(__file__).resolve().parent.parent / "hardware" / "efficiency"

Profile = dict[str, dict[str, dict[str, Any]]]  # {kind: {family_or_default: {param: value}}}

# process-wide profile (set_override); a `using` block replaces it for its own context
_global_overrides: Profile = {}
_active: ContextVar[Profile | None] = ContextVar("simfront_efficiency_profile", default=None)

# Kernel op kinds whose parameters a prediction uses (serving is per engine, not per family)
KERNEL_KINDS = ("gemm", "attention", "mla", "moe", "comm", "elementwise")


@lru_cache(maxsize=None)
def _load(kind: str) -> dict[str, Any]:
    path = EFFICIENCY_DIR / f"{kind}.yaml"
    if not path.exists():
        return {}  # nothing fitted yet: callers fall back to their documented priors
    return yamlio.load(path) or {}


def active_overrides() -> Profile:
    """The profile in force here: the innermost ``using`` block's, else the process-wide one."""
    ctx = _active.get()
    return _global_overrides if ctx is None else ctx


def override_key() -> str:
    """A stable string of the active profile, for caches whose results depend on it."""
    return json.dumps(active_overrides(), sort_keys=True, default=str)


def __getattr__(name: str):
    # ``efficiency._overrides`` (read by caches elsewhere) is the ACTIVE profile, context included
    if name == "_overrides":
        return active_overrides()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _resolve_family(data: dict, family: str) -> str | None:
    """The family block ``family`` reads: its own, or the end of its ``family_fallback`` chain (None: default)."""
    fams = data.get("families", {})
    fallback = data.get("family_fallback", {})
    fam = family
    seen = set()
    while fam not in fams and fam in fallback and fam not in seen:
        seen.add(fam)
        fam = fallback[fam]
    return fam if fam in fams else None


def params(kind: str, family: str, profile: Profile | None = None) -> dict[str, Any]:
    """Parameters of ``kind`` for an architecture ``family``, with fallbacks and overrides applied.

    ``profile`` (explicit) wins over the active one (:func:`using` / :func:`set_override`)."""
    data = _load(kind)
    fams = data.get("families", {})
    fam = _resolve_family(data, family)
    base = dict(fams.get("default", {}))
    if fam is not None:
        base.update(fams.get(fam, {}))
    ov = (active_overrides() if profile is None else profile).get(kind, {})
    base.update(ov.get("default", {}))
    base.update(ov.get(family, {}))
    return base


def params_with_priors(kind: str, family: str, p: dict | None, *priors: dict) -> dict[str, Any]:
    """A copy of ``p`` when given; else the priors (tables of name -> (default, lo, hi)) under the fitted values of
    ``kind`` for ``family`` (:func:`params`)."""
    if p is not None:
        return dict(p)
    out = {name: spec[0] for table in priors for name, spec in table.items()}
    out.update(params(kind, family))
    return out


def fitted_gpus(kind: str, family: str) -> list[str]:
    """Calibration GPUs whose rows fitted the block ``family`` reads for ``kind`` (its own, a fallback family's, or
    the pooled default's); empty where nothing was fitted."""
    data = _load(kind)
    return _fitted_gpus(data, _resolve_family(data, family) or "default")


def set_override(profile: Profile | None) -> None:
    """Install user-calibrated values for the whole process: ``{kind: {family_or_default: {param: value}}}``."""
    _global_overrides.clear()
    if profile:
        _global_overrides.update(profile)


@contextmanager
def using(profile: Profile | None) -> Iterator[Profile]:
    """Use ``profile`` (or, with None, no profile: the shipped fits) inside the block only.

    Context-local (``contextvars``): nested blocks, threads and asyncio tasks each see their own;
    the process-wide :func:`set_override` profile is untouched and comes back after the block."""
    prof = dict(profile or {})
    token = _active.set(prof)
    try:
        yield prof
    finally:
        _active.reset(token)


def clear_cache() -> None:
    _load.cache_clear()


# ----------------------------------------------------------------------------- provenance


class ParamProvenance(BaseModel):
    """Where one op kind's parameters come from for a GPU."""

    kind: str  # efficiency kind: gemm, attention, mla, moe, comm, elementwise
    source_family: str | None  # family block used ("default" = pooled fit; None = priors only)
    borrowed: bool  # True when not fitted on this GPU's own family (or its own compute capability)
    fitted_on: list[str] = Field(default_factory=list)  # calibration GPUs of the block used
    overridden: bool = False  # a user calibration profile replaces some of these values
    note: str = ""


class Provenance(BaseModel):
    """Which parameters a prediction for ``gpu`` borrows and which peaks are estimates."""

    gpu: str
    family: str
    params: list[ParamProvenance]
    estimated_peaks: list[str]  # achievable figures marked ``estimate: true`` in hardware/<gpu>.yaml
    notes: list[str]  # one line each, for text output
    band_widening: float  # factor on the log-width of the p10-p90 band from borrowed parameters


def borrowed_family_widening() -> float | None:
    """Band widening for borrowed parameters, from leave-one-family-out residuals (None: not computed)."""
    w = _load("transfer").get("borrowed_family_widening")
    return float(w) if w else None


def _major(cc: str | None) -> str | None:
    return None if cc is None else str(cc).split(".")[0]


def provenance(hw, kinds: tuple[str, ...] = KERNEL_KINDS, priced=None) -> Provenance:
    """Provenance of the kernel parameters and achievable peaks a prediction on ``hw`` uses.

    ``priced`` (:class:`simfront.priced.Priced`): what the prediction's configurations price; its ``notes`` then
    name only the estimated peaks and fallback kernels those rely on (the structured fields stay complete).

    ``hw`` is a :class:`~simfront.hardware.Hardware` or a GPU name. A kind is *borrowed* when the
    block used was fitted on another family (``family_fallback`` or the pooled default) or on another
    NVIDIA compute-capability major (workstation Blackwell sm_120 on datacenter sm_100 fits)."""
    from .hardware import get_hardware

    hw = get_hardware(hw) if isinstance(hw, str) else hw
    ov = active_overrides()
    out: list[ParamProvenance] = []
    notes: list[str] = []
    for kind in kinds:
        data = _load(kind)
        fitted = data.get("fitted") or {}
        fam = _resolve_family(data, hw.family)
        block = fam or "default"
        names = fitted.get(block) or []
        fitted_on = _fitted_gpus(data, block)
        overridden = bool(ov.get(kind, {}).get("default") or ov.get(kind, {}).get(hw.family))
        if not names:
            p = ParamProvenance(kind=kind, source_family=None, borrowed=False, fitted_on=[], overridden=overridden,
                                note="priors (no fitted values for this kind)")
        elif block == hw.family:
            p = ParamProvenance(kind=kind, source_family=block, borrowed=False, fitted_on=fitted_on, overridden=overridden)
            other_cc = _cc_mismatch(hw, fitted_on)
            if other_cc:
                p.borrowed = True
                p.note = f"fitted on {hw.family} GPUs of compute capability {other_cc}.x, this GPU is {hw.compute_capability}"
        else:
            p = ParamProvenance(kind=kind, source_family=block, borrowed=True, fitted_on=fitted_on, overridden=overridden,
                                note=f"no {hw.family} calibration data: {block} parameters")
        if fitted_on:
            from .hardware import get_hardware

            swaps = class_swap_notes(kind, get_hardware(fitted_on[0]), hw)  # another kernel library on this platform
            if swaps:
                p.borrowed = True
                p.note = "; ".join(([p.note] if p.note else []) + swaps)
        if overridden:
            p.note = (p.note + "; " if p.note else "") + "user calibration profile overrides some values"
        out.append(p)
    borrowed = [p for p in out if p.borrowed]
    if borrowed:
        by_src: dict[str, list[str]] = {}
        for p in borrowed:
            src = p.source_family if p.source_family != hw.family else f"{p.source_family} sm_{_fitted_cc(p.fitted_on)}"
            by_src.setdefault(src, []).append(p.kind)
        for src, ks in by_src.items():
            notes.append(f"{hw.id} ({hw.family}, no calibration data): {', '.join(ks)} parameters borrowed from {src} "
                         f"(fitted on {', '.join(next(p.fitted_on for p in borrowed if p.kind == ks[0])) or 'priors'})")
    est = hw.estimated_peaks()
    shown = [e for e in est if priced is None or priced.prices_peak(e)]
    if shown:
        notes.append(f"{hw.id}: achievable peaks estimated, not measured: {', '.join(shown)}")
    widen = 1.0
    if borrowed:
        w = borrowed_family_widening()
        widen = w if w is not None else 1.0
        notes.append(f"uncertainty band widened x{widen:.2f} for borrowed parameters"
                     + (" (leave-one-family-out residuals)" if w is not None else " (no leave-one-family-out data: not widened)"))
    notes += format_fallback_notes(hw, None if priced is None else sorted(priced.weights))  # formats run weight-only here
    notes += fallback_notes(hw, priced)  # ops that run a fallback kernel on this platform
    notes += caveat_notes(hw, priced)  # priced kernels whose calibration is known not to cover what engines serve
    return Provenance(gpu=hw.id, family=hw.family, params=out, estimated_peaks=est, notes=notes, band_widening=widen)


def _fitted_gpus(data: dict, block: str) -> list[str]:
    """Calibration GPUs whose rows fitted ``block`` (the pooled default: all of them)."""
    from .hardware import catalog

    gpus = list(data.get("fitted_on") or [])
    if block == "default":
        return gpus
    cat = catalog()
    return [g for g in gpus if g in cat and cat[g].family == block]


def _fitted_cc(gpus: list[str]) -> str:
    from .hardware import catalog

    ccs = sorted({(catalog()[g].compute_capability or "").replace(".", "") for g in gpus if g in catalog()})
    return "/".join(c for c in ccs if c) or "?"


def _cc_mismatch(hw, fitted_on: list[str]) -> str | None:
    """Compute-capability major of the fitting GPUs when it differs from ``hw``'s (NVIDIA only)."""
    from .hardware import catalog

    if hw.compute_capability is None or not fitted_on:
        return None
    majors = {_major(catalog()[g].compute_capability) for g in fitted_on if g in catalog()}
    majors.discard(None)
    if majors and _major(hw.compute_capability) not in majors:
        return "/".join(sorted(majors))
    return None

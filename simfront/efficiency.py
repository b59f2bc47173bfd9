"""Fitted efficiency parameters: the few physical knobs between datasheet peaks and measured time.

They live as data in ``hardware/efficiency/<kind>.yaml`` (kind = gemm, attention, moe, comm,
serving, ...), one block per architecture family (never per GPU row), each file written by
the calibration script that fitted it. A user profile (``--calibration profile.yaml``) can
override any value: :func:`set_override` installs it for the process.

File layout::

    # hardware/efficiency/gemm.yaml
    fitted_by: scripts/calibrate_kernels.py
    fitted_on: [h100_sxm, b200_sxm]
    families:
      hopper:   {param_a: 0.8, ...}
      blackwell: {...}
      default:  {...}          # used for families with no fitted block (CDNA, Ada, Ampere)
    family_fallback: {ampere: hopper, ada: hopper, cdna3: hopper, cdna4: blackwell}
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml


EFFICIENCY_DIR = Path(__file__).resolve().parent.parent / "hardware" / "efficiency"

_overrides: dict[str, dict[str, dict[str, Any]]] = {}


@lru_cache(maxsize=None)
def _load(kind: str) -> dict[str, Any]:
    path = EFFICIENCY_DIR / f"{kind}.yaml"
    if not path.exists():
        return {}  # nothing fitted yet: callers fall back to their documented priors
    return yaml.safe_load(path.read_text()) or {}


def params(kind: str, family: str) -> dict[str, Any]:
    """Parameters of ``kind`` for an architecture ``family``, with fallbacks and user overrides applied."""
    data = _load(kind)
    fams = data.get("families", {})
    fallback = data.get("family_fallback", {})
    fam = family
    seen = set()
    while fam not in fams and fam in fallback and fam not in seen:
        seen.add(fam)
        fam = fallback[fam]
    base = dict(fams.get("default", {}))
    base.update(fams.get(fam, {}))
    ov = _overrides.get(kind, {})
    base.update(ov.get("default", {}))
    base.update(ov.get(family, {}))
    return base


def set_override(profile: dict[str, dict[str, dict[str, Any]]] | None) -> None:
    """Install user-calibrated values: ``{kind: {family_or_default: {param: value}}}``."""
    _overrides.clear()
    if profile:
        _overrides.update(profile)


def clear_cache() -> None:
    _load.cache_clear()

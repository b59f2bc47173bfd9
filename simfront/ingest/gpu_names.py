"""GPU names as benchmark result files write them, checked against the hardware catalog at ingest.

Most spellings ("NVIDIA H100-SXM-80GB", "B200 180GB (DGX B200)") resolve through the catalog's
aliases (:func:`simfront.hardware.get_hardware`). Two cases need more, from ``gpu_spellings.yaml``:
a virtualised part (``MI300X-VF``, GRID, vGPU) is predicted as its physical part with a warning, and
a part the catalog lacks although a sibling shares its name (``H200-NVL``) gets a warning saying so,
so that the row's "GPU unresolved" reason is never read as a typo.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml

from ..errors import SimfrontError
from ..hardware import get_hardware

SPELLINGS_FILE = Path(__file__).with_name("gpu_spellings.yaml")


@lru_cache(maxsize=None)
def _spellings() -> dict:
    return yaml.safe_load(SPELLINGS_FILE.read_text(encoding="utf-8"))


def _norm(name: str) -> str:
    return " ".join(re.sub(r"[\s_\-()]+", " ", name.lower()).split())


def other_part(name: str) -> dict | None:
    """The ``other_parts`` entry a GPU name denotes (a part the catalog lacks), else None."""
    key = _norm(name)
    return next((p for p in _spellings()["other_parts"] if re.search(p["pattern"], key)), None)


def check_gpu(name: str) -> tuple[str, list[str], str | None]:
    """(name to predict with, warnings, note) for the ``gpu`` field of a row.

    The name is returned unchanged unless it is a virtualised part, which becomes its catalog id."""
    part = other_part(name)
    if part is not None:
        return name, [f"gpu {name!r} is the {part['part']}, a different part from the catalog's {part['sibling']} "
                      f"({' '.join(part['why'].split())}); it is not in the catalog, so this row is not predicted "
                      f"(add a hardware/*.yaml for it)"], None
    key = _norm(name)
    markers = [m for m in _spellings()["virtual_markers"] if re.search(m["pattern"], key)]
    if not markers:
        return name, [], None
    physical = key
    for m in markers:
        physical = re.sub(m["pattern"], " ", physical)
    physical = " ".join(physical.split())
    try:
        hw = get_hardware(physical)
    except SimfrontError:
        return name, [f"gpu {name!r} is a virtualised part ({markers[0]['meaning']}) of {physical!r}, which is not "
                      "in the catalog"], None
    return hw.id, [f"virtualised part {name!r} ({markers[0]['meaning']}): treated as {hw.id}, the physical part; "
                   "a GPU shared between VMs (time-sliced or partitioned) runs slower than predicted"], \
        f"virtualised {name!r} read as {hw.id}"


def unresolved_reason(name: str) -> str | None:
    """The reason a row naming a part the catalog lacks is not predicted, else None (for the predictor's
    "GPU unresolved" reason, so that it says which part it is instead of suggesting the sibling)."""
    part = other_part(str(name))
    if part is None:
        return None
    return (f"GPU {name!r} is the {part['part']}, not in the catalog (a different part from {part['sibling']}: "
            f"{' '.join(part['why'].split())}); add a hardware/*.yaml for it")

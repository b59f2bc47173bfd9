"""Fitted parameters that sit at a bound of their allowed range (issue 13: explain or remove each).

    python scripts/params_at_bounds.py

Reads every ``hardware/efficiency/*.yaml`` block and the serving profile, compares each fitted value
with the (initial, low, high) range its module declares (``PARAMS`` of gemm, attention, mla, moe, comm,
elementwise, linear attention; attention and MLA through their ``CALIBRATION_OPS`` tables; and ``simfront.calibration.PARAMS`` for the serving profile), and lists
the values within 1 % of the range's width of a bound. Prints nothing fitted: it only reads.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = {"gemm": "simfront.gemm", "attention": "simfront.attention", "mla": "simfront.mla", "moe": "simfront.moe",
         "comm": "simfront.comm", "elementwise": "simfront.elementwise", "linear_attention": "simfront.linear_attention",
         "serving": "simfront.calibration"}
NEAR = 0.01  # share of the allowed range within which a value counts as at its bound
LOG_RANGE = 100.0  # ranges wider than this ratio are judged in log space


def module_params(mod) -> dict:
    """(initial, low, high) ranges a module declares: ``PARAMS``, else the union of its calibration ops'
    tables (attention and MLA keep decode and prefill tables in ``CALIBRATION_OPS``)."""
    if hasattr(mod, "PARAMS"):
        return dict(mod.PARAMS)
    out: dict = {}
    for entry in getattr(mod, "CALIBRATION_OPS", {}).values():
        out.update(entry.get("params", {}))
    return out


def main() -> None:
    rows = []
    for kind, module in KINDS.items():
        path = ROOT / "hardware" / "efficiency" / f"{kind}.yaml"
        if not path.exists():
            continue
        try:
            params = module_params(importlib.import_module(module))
        except ImportError:
            continue
        if not params:
            continue
        fams = (yaml.safe_load(path.read_text()) or {}).get("families", {})
        for fam, vals in fams.items():
            for name, v in (vals or {}).items():
                if name not in params or not isinstance(v, (int, float)):
                    continue
                _, lo, hi = params[name]
                if hi <= lo:
                    continue  # a fixed value, not fitted
                if lo > 0 and hi / lo > LOG_RANGE and v > 0:  # wide positive ranges are judged on a log scale
                    a, b, x = math.log(lo), math.log(hi), math.log(v)
                else:
                    a, b, x = lo, hi, v
                span = b - a
                side = "low" if x <= a + NEAR * span else "high" if x >= b - NEAR * span else None
                if side:
                    rows.append((kind, fam, name, v, lo, hi, side))
    print(f"{len(rows)} fitted values at a bound (within {NEAR:.0%} of the range)")
    for kind, fam, name, v, lo, hi, side in rows:
        print(f"  {kind:12} {fam:10} {name:34} {v:.4g}  ({side} bound of [{lo:.4g}, {hi:.4g}])")


if __name__ == "__main__":
    main()

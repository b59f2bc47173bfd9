"""Shared loader for the calibration kernel CSVs used by the op tests."""

import csv
import os
from pathlib import Path

import numpy as np

KERNEL_DIR = Path(os.environ.get("SIMFRONT_KERNEL_DATA", Path(__file__).resolve().parents[2] / "shared" / "calibration" / "kernels"))


def load_columns(gpu: str, op: str) -> dict[str, np.ndarray]:
    """One calibration file as column arrays (numeric where every value parses)."""
    with (KERNEL_DIR / f"{gpu}__{op}.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    cols = {}
    for k in rows[0]:
        vals = [r[k] for r in rows]
        try:
            cols[k] = np.array(vals, dtype=float)
        except ValueError:
            cols[k] = np.array(vals)
    return cols

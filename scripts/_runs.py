"""The InferenceX run each row of the calibration file is (its ``notes`` name the run: ``run=<GitHub Actions URL>``)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

RUN_NOTE = re.compile(r"run=(\S+?)(?:;|$)")  # how the measured-point CSV's notes name the benchmark run


def run_urls(path: Path) -> dict[int, str]:
    """File line (header = line 1) -> run URL, for the rows of a measured-point CSV whose notes name their run."""
    out = {}
    with Path(path).open(newline="") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            found = RUN_NOTE.search(row.get("notes") or "")
            if found:
                out[line] = found.group(1)
    return out

"""Fit files, reports and data name paths relative to the repository, never the machine they ran on."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ABSOLUTE = re.compile(r"(?<![\w.])/(work|home|root|tmp|Users|mnt)/")


def test_no_absolute_machine_paths_in_data_or_docs():
    files = [p for d in ("hardware", "models", "measurements", "docs") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in (".yaml", ".yml", ".md", ".csv", ".json")]
    bad = [f"{p.relative_to(ROOT)}:{i + 1}" for p in files for i, line in enumerate(p.read_text(errors="ignore").splitlines())
           if ABSOLUTE.search(line)]
    assert not bad, bad[:10]

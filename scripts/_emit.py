"""Shared tail of the report scripts: print the markdown report, and write it and the JSON rows where asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(text: str, report: Path | None = None, json_path: Path | None = None, data: Any = None) -> None:
    """Print ``text``; write it to ``report`` and ``data`` as JSON to ``json_path`` when those are given."""
    print(text)
    if report:
        Path(report).write_text(text)
    if json_path:
        Path(json_path).write_text(json.dumps(data, indent=1))

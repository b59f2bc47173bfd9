"""Plain-text tables for the terminal (friendly units live here, not in the library)."""

from __future__ import annotations

import sys
from typing import Any, Iterable, Sequence


def _cell(v: Any, fmt: str | None, scale: float) -> str:
    if v is None:
        return "-"
    if fmt and isinstance(v, (int, float)):
        try:
            return fmt.format(v * scale)
        except (ValueError, TypeError):
            return str(v)
    if isinstance(v, float):
        return f"{v * scale:.3g}"
    return str(v)


def table_lines(rows: Sequence[dict], columns: Iterable) -> list[str]:
    """Columns are keys or tuples (key, header, format, scale)."""
    cols = []
    for c in columns:
        if isinstance(c, str):
            cols.append((c, c, None, 1.0))
        else:
            key, header, *rest = c
            cols.append((key, header, rest[0] if rest else None, rest[1] if len(rest) > 1 else 1.0))
    cells = [[h for _, h, _, _ in cols]] + [[_cell(r.get(k), f, s) for k, _, f, s in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    out = []
    for j, row in enumerate(cells):
        out.append("  ".join(c.rjust(w) if j and _numeric(c) else c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def _numeric(s: str) -> bool:
    t = s.replace(",", "").replace("%", "").replace("B", "").replace("x", "").strip()
    try:
        float(t)
        return True
    except ValueError:
        return False


def print_table(rows: Sequence[dict], columns: Iterable, file=None) -> None:
    f = file or sys.stdout
    for line in table_lines(rows, columns):
        f.write(line + "\n")


def gib(x: float) -> str:
    return f"{x / 2**30:,.1f} GiB"

"""Terminal output: tables and progress bars (friendly units live here, not in the library).

On a terminal, tables are drawn by rich (boxed, numbers right-aligned, cells folded rather than cut
when the terminal is narrow) and long commands show a rich progress bar on stderr. When stdout is
not a terminal (a pipe, a file, a test), tables are plain aligned text, the same bytes every run;
when stderr is not a terminal, or with ``--quiet``, there is no progress output at all.
rich is imported only on the terminal path (typer depends on it, so it is always installed).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

# Environment variable that forces plain tables even on a terminal (e.g. to copy a table into a text file)
PLAIN_ENV = "SIMFRONT_PLAIN"


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


def _columns(columns: Iterable) -> list[tuple[str, str, str | None, float]]:
    """Columns are keys or tuples (key, header, format, scale)."""
    cols = []
    for c in columns:
        if isinstance(c, str):
            cols.append((c, c, None, 1.0))
        else:
            key, header, *rest = c
            cols.append((key, header, rest[0] if rest else None, rest[1] if len(rest) > 1 else 1.0))
    return cols


def _cells(rows: Sequence[dict], cols) -> list[list[str]]:
    return [[_cell(r.get(k), f, s) for k, _, f, s in cols] for r in rows]


def table_lines(rows: Sequence[dict], columns: Iterable) -> list[str]:
    """The plain-text table: header, dashes, one line per row; numbers right-aligned."""
    cols = _columns(columns)
    cells = [[h for _, h, _, _ in cols]] + _cells(rows, cols)
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


def is_terminal(f) -> bool:
    """True when ``f`` is an interactive terminal (and plain output was not asked for)."""
    import os

    if os.environ.get(PLAIN_ENV):
        return False
    try:
        return bool(f.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def rich_table(rows: Sequence[dict], columns: Iterable, highlight: Callable[[dict], bool] | None = None):
    """The rich ``Table`` of the same cells as :func:`table_lines` (rows where ``highlight`` is true in bold)."""
    from rich import box
    from rich.table import Table

    cols = _columns(columns)
    cells = _cells(rows, cols)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for i, (_, header, _, _) in enumerate(cols):
        numeric = bool(cells) and all(_numeric(r[i]) or r[i] == "-" for r in cells)
        table.add_column(header, justify="right" if numeric else "left", overflow="fold")
    for r, row in zip(rows, cells):
        table.add_row(*row, style="bold" if highlight and highlight(r) else None)
    return table


def print_table(rows: Sequence[dict], columns: Iterable, file=None, highlight: Callable[[dict], bool] | None = None) -> None:
    """A table on ``file`` (stdout): rich on a terminal, plain aligned text otherwise."""
    f = file or sys.stdout
    if is_terminal(f):
        from rich.console import Console

        Console(file=f, highlight=False).print(rich_table(rows, columns, highlight))
        return
    for line in table_lines(rows, columns):
        f.write(line + "\n")


def gib(x: float) -> str:
    return f"{x / 2**30:,.1f} GiB"


class Bar:
    """What a command reports progress through: ``step(message)`` after each unit of work is done."""

    active = False

    def step(self, message: str | None = None) -> None:
        """One unit done; ``message`` (a finished item's result) is printed above the bar."""


class _RichBar(Bar):
    active = True

    def __init__(self, progress, task) -> None:
        self._progress, self._task = progress, task

    def step(self, message: str | None = None) -> None:
        if message:
            self._progress.console.print(message, markup=False, highlight=False)
        self._progress.advance(self._task)


@contextmanager
def progress(description: str, total: int | None = None, quiet: bool = False, file=None) -> Iterator[Bar]:
    """A progress bar on stderr (``total`` steps; None: a pulsing bar with the elapsed time).

    Nothing at all with ``quiet`` or when stderr is not a terminal; the bar is removed when done
    (lines printed through ``step`` stay)."""
    f = file or sys.stderr
    if quiet or not is_terminal(f):
        yield Bar()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    cols = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn()]
    cols += [MofNCompleteColumn()] if total else []
    cols += [TimeElapsedColumn()]
    with Progress(*cols, console=Console(file=f, highlight=False), transient=True) as p:
        yield _RichBar(p, p.add_task(description, total=total))

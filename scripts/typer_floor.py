#!/usr/bin/env python
"""A bare typer app and nothing else: what the CLI framework alone costs a command (``bench_speed.py``'s typer case).

    python scripts/typer_floor.py N [ARGS...]

Builds one ``predict`` command with N string options (and a second command, as a multi-command app has), then
parses ``predict ARGS``; it imports neither numpy nor simfront. bench_speed.py runs it with the option count of
``simfront predict``, so the ratio it prints is the part of every ``simfront`` command's time that typer takes.
"""

from __future__ import annotations

import inspect
import sys

import typer


def main(argv: list[str]) -> None:
    n = int(argv[0])

    def predict(**options) -> None:  # the options are parsed, then ignored
        return None

    predict.__signature__ = inspect.Signature(  # N keyword options, as `def predict(opt0: str = typer.Option(...), ...)`
        [inspect.Parameter(f"opt{i}", inspect.Parameter.KEYWORD_ONLY, default=typer.Option("x", help="an option"), annotation=str)
         for i in range(n)])
    app = typer.Typer()
    app.command("predict")(predict)
    app.command("other")(lambda: None)
    app(["predict", *argv[1:]])


if __name__ == "__main__":
    main(sys.argv[1:])

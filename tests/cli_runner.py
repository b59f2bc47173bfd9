"""Run the CLI in this process, as a user would, and capture what it prints (shared by the CLI tests)."""

from __future__ import annotations

import os

from simfront import cli


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``simfront ARGV`` run in this process."""
    capsys.readouterr()
    try:
        cli.main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def read_terminal(master: int, seen: bytes = b"") -> bytes:
    """Everything written to a pseudo-terminal (``master`` end) until the child closes it, after ``seen``."""
    chunks = [seen]
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return b"".join(chunks)

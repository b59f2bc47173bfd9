"""Run the CLI in this process, as a user would, and capture what it prints (shared by the CLI tests)."""

from __future__ import annotations

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

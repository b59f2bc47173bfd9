"""scripts/bench_speed.py's typer case: a bare typer app the size of `simfront predict` (scripts/typer_floor.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_speed", ROOT / "scripts" / "bench_speed.py")
bs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bs)


def test_the_typer_case_has_predicts_option_count():
    n = bs.predict_option_count()
    import typer.main

    from simfront import cli

    assert n == len(typer.main.get_command(cli.app).commands["predict"].params) and n > 20


def test_the_bare_typer_app_parses_its_options_and_rejects_others():
    script = str(ROOT / "scripts" / "typer_floor.py")
    ok = subprocess.run([sys.executable, script, "3", "--opt0", "a", "--opt2", "b"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, script, "3", "--opt7", "a"], capture_output=True, text=True)
    assert bad.returncode != 0 and "opt7" in bad.stderr

"""Command-line conventions: --version, python -m simfront, shell completion, help on every option,
rich tables and progress bars on a terminal (plain text and silence otherwise), lazy imports."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from simfront import __version__, cli
from simfront.format import is_terminal, print_table, progress, table_lines
from cli_runner import read_terminal

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
ENV.pop("SIMFRONT_PLAIN", None)


def run(*args, env=None, ok=True):
    p = subprocess.run([sys.executable, "-m", "simfront", *args], capture_output=True, text=True, timeout=300, env=env or ENV)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def run_tty(*args, stdout_tty: bool, stderr_tty: bool) -> tuple[str, str, int]:
    """Run simfront with stdout and/or stderr on a pseudo-terminal (what a user's terminal is)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "simfront", *args], env=ENV, stdin=subprocess.DEVNULL,
                         stdout=slave if stdout_tty else subprocess.PIPE, stderr=slave if stderr_tty else subprocess.PIPE)
    os.close(slave)
    tty = read_terminal(master).decode("utf-8", "replace")
    out, err = p.communicate(timeout=300)
    return (tty if stdout_tty else out.decode()), (tty if stderr_tty else err.decode()), p.returncode


def test_version_matches_the_package_metadata():
    import tomllib

    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == want
    assert run("--version").stdout.strip() == f"simfront {want}"


def test_python_dash_m_simfront_is_the_cli():
    p = run("--help")
    assert "Usage: simfront" in p.stdout and "predict" in p.stdout and "--version" in p.stdout
    bad = run("predict", "--model", "deepseek-r1", "--gpus", "8xBanana", ok=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr


def _walk(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _walk(sub, path + (name,))


def test_every_option_of_every_command_has_help():
    root = typer.main.get_command(cli.app)
    missing, seen = [], 0
    for path, cmd in _walk(root):
        for p in cmd.params:
            seen += 1
            if not (getattr(p, "help", None) or "").strip():
                missing.append(f"simfront {' '.join(path)} {'/'.join(p.opts)}")
    assert seen > 100  # the walk reached every command's options
    assert not missing, "options without help text:\n" + "\n".join(missing)


def test_the_help_check_can_fail():
    app = typer.Typer()

    @app.command()
    def f(x: int = typer.Option(1, "--x")) -> None: ...

    @app.command()
    def g(y: int = typer.Option(1, "--y", help="has help")) -> None: ...

    params = [p for _, c in _walk(typer.main.get_command(app)) for p in c.params]
    assert [p.opts for p in params if not p.help] == [["--x"]]


def test_shell_completion_commands_models_and_gpus():
    def complete(words: str, cword: int) -> list[str]:
        env = dict(ENV, _SIMFRONT_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword))
        p = run(env=env)
        return p.stdout.split()

    assert complete("simfront pre", 1) == ["predict"]
    assert "deepseek-r1" in complete("simfront predict --model deeps", 3)
    gpus = complete("simfront predict --gpus 16xh2", 3)
    assert "16xh200_sxm" in gpus and all(g.startswith("16xh2") for g in gpus)


def test_show_completion_prints_the_script_for_a_named_shell():
    env = dict(ENV, _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    script = run("--show-completion", "bash", env=env).stdout
    assert "_SIMFRONT_COMPLETE=complete_bash" in script and "complete " in script
    assert "--install-completion" in run("--help").stdout


def test_cli_import_is_light():
    """`simfront --help`, --version and completion import neither the library nor its heavy dependencies."""
    code = ("import sys, simfront.cli; heavy = [m for m in ('numpy', 'pydantic', 'plotly', 'scipy', 'rich', 'simfront.api', "
            "'simfront.search', 'simfront.ingest') if m in sys.modules]; print(heavy)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, check=True)
    assert p.stdout.strip() == "[]"


# ---------- tables ----------

ROWS = [{"gpu": "h200_sxm", "n": 16, "cost": 1234.5}, {"gpu": "b200_sxm", "n": 8, "cost": None}]
COLS = ["gpu", ("n", "GPUs"), ("cost", "$/h", "{:,.2f}")]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_table_when_not_a_terminal():
    f = io.StringIO()
    print_table(ROWS, COLS, file=f)
    assert f.getvalue().splitlines() == table_lines(ROWS, COLS)
    assert table_lines(ROWS, COLS)[1].startswith("--------")
    assert "1,234.50" in f.getvalue() and "│" not in f.getvalue()


def test_rich_table_on_a_terminal(monkeypatch):
    monkeypatch.delenv("SIMFRONT_PLAIN", raising=False)
    f = _Tty()
    print_table(ROWS, COLS, file=f, highlight=lambda r: r["n"] == 16)
    out = f.getvalue()
    assert "━" in out or "─" in out  # rich's header rule
    assert "1,234.50" in out and "h200_sxm" in out and "$/h" in out
    assert "\x1b[1m" in out  # the highlighted row is bold
    monkeypatch.setenv("SIMFRONT_PLAIN", "1")
    assert not is_terminal(_Tty())


def test_tables_through_a_real_terminal_and_a_pipe():
    out, _, rc = run_tty("hardware", stdout_tty=True, stderr_tty=False)
    assert rc == 0 and "b200_sxm" in out and ("━" in out or "─" in out)
    piped = run("hardware").stdout
    assert "b200_sxm" in piped and "━" not in piped and "\x1b[" not in piped
    assert piped.splitlines()[1].startswith("--")  # the plain header rule


# ---------- progress ----------

def test_progress_is_silent_off_a_terminal_and_when_quiet():
    err = io.StringIO()
    with progress("x", total=2, file=err) as bar:
        assert not bar.active
        bar.step("done")
    assert err.getvalue() == ""
    with progress("x", total=2, quiet=True, file=_Tty()) as bar:
        assert not bar.active


def test_progress_bar_on_a_terminal():
    err = _Tty()
    with progress("planning", total=2, file=err) as bar:
        assert bar.active
        bar.step("h100_sxm: 8 GPUs")
        bar.step("b200_sxm: 4 GPUs")
    out = err.getvalue()
    assert "h100_sxm: 8 GPUs" in out and "b200_sxm: 4 GPUs" in out and "planning" in out


def test_plan_progress_bar_on_a_terminal_stderr_only():
    args = ("plan", "--model", "llama-3.1-70b", "--rate", "5", "--hardware", "h100,b200")
    out, err, rc = run_tty(*args, stdout_tty=False, stderr_tty=True)
    assert rc == 0 and "h100_sxm" in out
    assert "planning llama-3.1-70b on 2 GPU types" in err and "h100_sxm:" in err and "b200_sxm:" in err
    _, err_q, rc = run_tty(*args, "--quiet", stdout_tty=False, stderr_tty=True)
    assert rc == 0 and err_q.strip() == ""


def test_predict_shows_a_pulsing_bar_on_a_terminal_stderr_only():
    args = ("predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--tails")
    out, err, rc = run_tty(*args, stdout_tty=False, stderr_tty=True)
    assert rc == 0 and "frontier" in out.lower()
    assert "predicting llama-3.1-8b on 1xH100, simulating the frontier's tails" in err
    _, err_q, rc = run_tty(*args, "--quiet", stdout_tty=False, stderr_tty=True)
    assert rc == 0 and err_q.strip() == ""
    _, err_j, rc = run_tty(*args, "--json", stdout_tty=False, stderr_tty=True)  # a JSON consumer's stderr stays clean
    assert rc == 0 and err_j.strip() == ""


@pytest.mark.parametrize("args", [
    ("compare", "--model", "llama-3.1-8b", "--gpus", "1xH100,1xB200"),
    ("frontier", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--compare", "kv_dtype=bf16,fp8"),
])
def test_long_commands_show_progress_on_a_terminal(args):
    out, err, rc = run_tty(*args, stdout_tty=False, stderr_tty=True)
    assert rc == 0 and out
    assert "predicting 2" in err
    _, err_q, _ = run_tty(*args, "--quiet", stdout_tty=False, stderr_tty=True)
    assert err_q.strip() == ""

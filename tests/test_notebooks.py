"""The notebooks in notebooks/ run top to bottom without errors, and are committed without outputs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
TIMEOUT_S = 300  # per cell
SIMFRONT_MODULES = ("simfront.api", "simfront.planning", "simfront.plot", "simfront.pareto", "simfront.ingest", "simfront.measured")


def test_the_three_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == ["01_capacity_planning.ipynb", "02_frontier_tour.ipynb", "03_validation.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs_and_with_prose(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "clear the outputs before committing"
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= 3
    src = "\n".join(c.source for c in code)
    assert "subprocess" not in src and "!simfront" not in src and "simfront.cli" not in src  # Python API only
    imported = {line.split()[1] for line in src.splitlines() if line.startswith("from simfront")}
    assert imported and all(m.startswith(SIMFRONT_MODULES) or m == "simfront" for m in imported)


_EXECUTED: dict[str, object] = {}


def executed(path: Path, tmp_path_factory) -> object:
    """The notebook run top to bottom, once per test session (a copy: the committed notebook stays untouched)."""
    if path.name not in _EXECUTED:
        copy = tmp_path_factory.mktemp(path.stem) / path.name
        shutil.copy(path, copy)
        nb = nbformat.read(copy, as_version=4)
        client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=TIMEOUT_S,
                                         resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
        client.execute()  # raises CellExecutionError on the first failing cell
        _EXECUTED[path.name] = nb
    return _EXECUTED[path.name]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path_factory):
    nb = executed(path, tmp_path_factory)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, [f"{e.ename}: {e.evalue}" for e in errors]
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")


# The verdicts notebook 02 prints for each push-out knob (its `verdict` function): the prose states no
# conclusion of its own, so the printed lines are the conclusions and must agree with their own numbers.
VERDICT = re.compile(r"^(?P<knob>[^:\n]+): (?P<kind>trades: better in part of the range, worse elsewhere|pushes the frontier out|"
                     r"pulls the frontier in|leaves the frontier where it is \(within (?P<tol>\d+)%\)); throughput at equal "
                     r"tok/s/user x(?P<lo>[\d.]+) to x(?P<hi>[\d.]+), largest change at \d+ tok/s/user \(x[\d.]+\); "
                     r"fastest tok/s/user \d+ vs \d+ \((?P<reach>[+-]\d+)%\)$", re.M)
KNOBS = ("FP8 KV cache", "MTP speculative decoding", "disaggregated allowed")


def _stdout(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream" and o.get("name") == "stdout")


def test_notebook_02_prints_a_computed_conclusion_per_knob(tmp_path_factory):
    from simfront.api import SAME_FRONTIER_TOLERANCE as tol

    nb = executed(NOTEBOOK_DIR / "02_frontier_tour.ipynb", tmp_path_factory)
    out = _stdout(nb)
    verdicts = {m["knob"]: m for m in VERDICT.finditer(out)}
    assert set(KNOBS) <= set(verdicts), f"missing verdict lines for {set(KNOBS) - set(verdicts)} in:\n{out}"
    slack = 0.006  # the line prints gains to 2 decimals and the reach to whole percent
    better = {}
    for knob in KNOBS:
        m = verdicts[knob]
        lo, hi, reach = float(m["lo"]), float(m["hi"]), int(m["reach"]) / 100
        kind = m["kind"]
        says_better = kind.startswith(("trades", "pushes"))
        says_worse = kind.startswith(("trades", "pulls"))
        # the words agree with the printed numbers (up to their rounding)
        if says_better:
            assert hi > 1 + tol - slack or reach > tol - slack, m.group(0)
        else:
            assert hi <= 1 + tol + slack and reach <= tol + slack, m.group(0)
        if says_worse:
            assert lo < 1 - tol + slack or reach < -tol + slack, m.group(0)
        else:
            assert lo >= 1 - tol - slack and reach >= -tol - slack, m.group(0)
        better[knob] = says_better
    # the disaggregation summary line restates the same verdict
    disagg = re.search(r"^disaggregation (pushes the frontier out|does not push this frontier out)", out, re.M)
    assert disagg, out
    assert disagg[1].startswith("pushes") == better["disaggregated allowed"], out


def test_notebook_02_prose_states_no_verdict_of_its_own():
    """Markdown cells explain mechanisms; whether a knob helps is only ever printed by a code cell."""
    nb = nbformat.read(NOTEBOOK_DIR / "02_frontier_tour.ipynb", as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown").lower()
    for knob in ("disaggregation", "fp8 kv", "mtp"):
        for claim in ("does not help", "doesn't help", "hurts", "always helps", "no gain", "does not push", "pushes this frontier"):
            assert not re.search(rf"{knob}[^.\n]{{0,80}}{claim}", prose), (knob, claim)

"""The notebooks in notebooks/ run top to bottom without errors, and are committed without outputs."""

from __future__ import annotations

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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path):
    copy = tmp_path / path.name
    shutil.copy(path, copy)  # the committed notebook stays untouched
    nb = nbformat.read(copy, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=TIMEOUT_S,
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, [f"{e.ename}: {e.evalue}" for e in errors]
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")

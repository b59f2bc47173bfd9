"""The band helpers of scripts/leave_one_family_out.py: symmetric per-op half-width sized on held-out residuals."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_spec = importlib.util.spec_from_file_location(
    "leave_one_family_out", Path(__file__).resolve().parent.parent / "scripts" / "leave_one_family_out.py")
lofo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lofo)


def test_halfwidth_holds_the_target_share_of_the_rows_it_was_sized_on():
    rng = np.random.default_rng(1)
    held = rng.normal(0.1, 0.3, 4000)
    d = {"heldout": held, "median": 0.05}
    h = lofo.fit_halfwidth(d)
    assert lofo.halfwidth_coverage(held, 0.05, h) == pytest.approx(lofo.TARGET_COVERAGE, abs=0.005)
    # sized on one sample, it transfers to another draw of the same spread, and not to a wider one
    other = rng.normal(0.1, 0.3, 4000)
    assert lofo.halfwidth_coverage(other, 0.05, h) == pytest.approx(0.8, abs=0.03)
    assert lofo.halfwidth_coverage(rng.normal(0.1, 0.6, 4000), 0.05, h) < 0.6


def test_halfwidth_ignores_unpredicted_rows():
    held = np.array([0.0, 0.1, -0.1, np.nan, np.inf, 0.2])
    assert np.isfinite(lofo.fit_halfwidth({"heldout": held, "median": 0.0}))
    assert lofo.halfwidth_coverage(held, 0.0, 0.15) == pytest.approx(3 / 4)

"""scripts/fuzz_api.py: random calls of the public API report nothing but one-line input errors."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import fuzz_api  # noqa: E402


def test_a_short_seeded_run_reports_nothing(capsys):
    """Forty seeded calls of every kind (predict with tails on a quarter of them): no exception other than a
    SimfrontError, no NaN or infinite number, none slower than a minute; the summary line counts the calls."""
    rc = fuzz_api.main(["--seed", "7", "--calls", "40", "--kinds", ",".join(fuzz_api.KINDS), "--tails", "0.25", "--slow", "60"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.startswith("40 calls") and "0 reported" in out


def test_non_finite_numbers_are_found_anywhere_in_a_result():
    assert fuzz_api.non_finite({"a": [1.0, {"b": float("nan")}], "c": float("inf"), "d": "x"}) == [".a[1].b", ".c"]
    assert fuzz_api.non_finite({"a": [1.0, 2], "b": None}) == []

"""The README's JSON section lists exactly the fields of the typed results the CLI prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simfront import api
from simfront.results import Frontier, FrontierPoint, MemoryVerdict, Plan, StepBreakdown, ValidationReport

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _top_level_keys(spec: str) -> set[str]:
    """Keys of ``{a, b{...}, c[...], d[]}`` at the outer level."""
    inner = spec.strip()[1:-1]
    keys, depth, cur = [], 0, ""
    for ch in inner:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 0:
            keys.append(cur)
            cur = ""
        elif depth == 0:
            cur += ch
    keys.append(cur)
    return {k.strip() for k in keys if k.strip() and not k.strip().startswith("...")}


def _documented(command: str) -> set[str]:
    m = re.search(r"`simfront " + re.escape(command) + r" --json`: `(\{.*?\})`", README, re.S)
    assert m, f"README documents no JSON for {command}"
    return _top_level_keys(m.group(1).replace("\n", " "))


@pytest.mark.parametrize("command, model", [("predict", Frontier), ("memory", MemoryVerdict), ("explain", StepBreakdown),
                                            ("plan", Plan)])
def test_readme_lists_the_model_fields(command, model):
    assert _documented(command) == set(model.model_fields), command


def test_readme_lists_frontier_point_fields():
    m = re.search(r"Each frontier\s+point .*?has `(\{.*?\})`", README, re.S)
    assert m
    assert _top_level_keys(m.group(1).replace("\n", " ")) == set(FrontierPoint.model_fields)


def test_readme_lists_validation_report_fields():
    m = re.search(r"`simfront validate FILES --json`: `(\{.*?\})`", README, re.S)
    assert m and _top_level_keys(m.group(1)) == set(ValidationReport.model_fields)


def test_cli_json_is_the_model_dump():
    res = api.predict("llama-3.1-8b", "1xH100", modes=["agg"])
    doc = json.loads(json.dumps(res.to_json(), allow_nan=False))
    assert set(doc) >= set(Frontier.model_fields) - {"launch"}
    assert all(set(p) >= set(FrontierPoint.model_fields) for p in doc["frontier"])
    assert Frontier.model_validate(doc).frontier[0].tok_s_gpu == res.frontier[0].tok_s_gpu


def test_results_support_notebook_use():
    res = api.predict("llama-3.1-8b", "1xH100", modes=["agg"])
    assert res["frontier"][0]["tp"] == res.frontier[0].tp
    assert "knee" in res and res.get("missing", 3) == 3
    assert set(res.points) >= {"tok_s_gpu", "tok_s_user"} and res.points["tok_s_gpu"].size >= len(res.frontier)
    point = res.frontier[0]
    # a result reads as a mapping: iteration gives field names, as keys() does
    assert list(point) == point.keys() and len(point) == len(point.keys())
    assert {k: point[k] for k in point} == dict(point) == dict(point.items())
    assert point.values() == [point[k] for k in point.keys()]
    assert point == type(point).model_validate(point.to_json())  # pydantic equality and validation still work
    pd = pytest.importorskip("pandas")
    df = res.to_frame()
    assert isinstance(df, pd.DataFrame) and len(df) == len(res.frontier) and "tok_s_gpu" in df

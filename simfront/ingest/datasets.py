"""Mean request lengths of named benchmark datasets, for rows that give a dataset but no ISL/OSL.

The lengths live in ``mlperf_benchmarks.yaml`` (MLPerf Inference LLM benchmarks: model, dataset,
mean input/output tokens, each with its source or marked an estimate with its basis). Token counts
depend on the tokenizer, so a dataset name shared by two benchmarks (CNN/DailyMail: GPT-J and
Llama-3.1-8B) is resolved by the row's model. ShareGPT and other open-ended datasets have no
entry: their lengths depend on the client's sampling, so such rows keep isl/osl unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

BENCHMARKS_FILE = Path(__file__).with_name("mlperf_benchmarks.yaml")


@dataclass(frozen=True)
class Lengths:
    """Mean request lengths of one benchmark's dataset, with where each figure comes from."""

    benchmark: str
    model: str  # Hugging Face id the benchmark runs (whose tokenizer counts the tokens)
    dataset: str
    isl: float
    osl: float
    isl_source: str  # citation, or "estimate: <basis>"
    osl_source: str
    estimated: tuple[str, ...]  # "isl" / "osl" where the figure is an estimate

    def citation(self) -> str:
        est = f"; {' and '.join(self.estimated)} ESTIMATED" if self.estimated else ""
        return f"MLPerf {self.benchmark} dataset {self.dataset} mean lengths{est} (simfront/ingest/mlperf_benchmarks.yaml)"


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "-", str(name).strip().lower())  # "llama3_1-8b" = "llama3-1-8b"; "." kept


def _figure(entry: dict) -> tuple[float, str, bool]:
    est = bool(entry.get("estimate"))
    text = f"estimate: {entry['basis']}" if est else entry["source"]
    return float(entry["value"]), " ".join(str(text).split()), est


@lru_cache(maxsize=None)
def benchmarks() -> dict[str, Lengths]:
    """Every benchmark of the data file, by its canonical name."""
    doc = yaml.safe_load(BENCHMARKS_FILE.read_text(encoding="utf-8"))
    out = {}
    for name, b in doc["benchmarks"].items():
        isl, isl_src, isl_est = _figure(b["mean_input_tokens"])
        osl, osl_src, osl_est = _figure(b["mean_output_tokens"])
        out[name] = Lengths(name, b["model"], b["dataset"], isl, osl, isl_src, osl_src,
                            tuple(k for k, e in (("isl", isl_est), ("osl", osl_est)) if e))
    return out


@lru_cache(maxsize=None)
def _index() -> tuple[dict[str, str], dict[str, list[str]]]:
    """(benchmark spelling -> benchmark, dataset spelling -> benchmarks using it)."""
    doc = yaml.safe_load(BENCHMARKS_FILE.read_text(encoding="utf-8"))["benchmarks"]
    by_name: dict[str, str] = {}
    by_dataset: dict[str, list[str]] = {}
    for name, b in doc.items():
        for n in [name, *b.get("names", [])]:
            by_name[_norm(n)] = name
        for d in [b["dataset"], *b.get("dataset_names", [])]:
            by_dataset.setdefault(_norm(d), [])
            if name not in by_dataset[_norm(d)]:
                by_dataset[_norm(d)].append(name)
    return by_name, by_dataset


def benchmark_named(name: str | None) -> Lengths | None:
    """The MLPerf benchmark a model column names (``llama2-70b-99.9``, ``mixtral-8x7b``), else None."""
    if not name:
        return None
    key = _index()[0].get(_norm(name))
    return benchmarks()[key] if key else None


def _same_model(row_model: str | None, bench_model: str) -> bool:
    if not row_model:
        return False
    if _norm(row_model) == _norm(bench_model) or _norm(row_model) == _norm(bench_model.split("/")[-1]):
        return True
    from ..models import resolve_name  # the model catalog's own spelling rules

    try:
        return resolve_name(str(row_model))[0] == resolve_name(bench_model)[0]
    except Exception:  # noqa: BLE001 - an unknown model simply does not match
        return False


def dataset_lengths(name: str | None, model: str | None = None) -> tuple[Lengths | None, str | None]:
    """(lengths, None) for a tabulated dataset, else (None, why not). ``model`` picks between benchmarks
    sharing a dataset (their tokenizers differ); a single candidate is used whatever the model."""
    if not name:
        return None, "no dataset named"
    cands = _index()[1].get(_norm(name), [])
    if not cands:
        return None, (f"dataset {name!r} has no tabulated mean lengths (tabulated: MLPerf "
                      f"{', '.join(sorted({b.dataset for b in benchmarks().values()}))}); isl/osl unknown")
    matching = [c for c in cands if _same_model(model, benchmarks()[c].model)]
    if len(matching) == 1 or len(cands) == 1:
        return benchmarks()[(matching or cands)[0]], None
    return None, (f"dataset {name!r} is used by MLPerf {', '.join(cands)} with different tokenizers and the row's "
                  f"model {model!r} matches neither; isl/osl unknown")

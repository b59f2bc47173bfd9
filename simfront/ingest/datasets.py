"""Mean request lengths of named benchmark datasets, for rows that give a dataset but no ISL/OSL.

Only datasets whose mean lengths can be cited from a file in shared/reference belong
here. None can at present: ecosystem.md names ShareGPT as vLLM's default dataset (§1.2) but
gives no lengths, and modeling-notes.md only covers the synthetic random dataset (mean =
0.9 x nominal for range ratio 0.8, §harness definitions), which always carries its lengths.
So the table is empty and such rows keep isl/osl None with a warning; add an entry together
with its citation when a source is available.
"""

from __future__ import annotations

# dataset name (lower case) -> (mean input tokens, mean output tokens, citation)
DATASET_MEAN_LENGTHS: dict[str, tuple[float, float, str]] = {}


def dataset_lengths(name: str | None) -> tuple[float, float, str] | None:
    """(mean isl, mean osl, citation) of a named dataset, or None when not tabulated."""
    if not name:
        return None
    return DATASET_MEAN_LENGTHS.get(name.strip().lower())

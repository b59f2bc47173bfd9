"""User-facing errors: one line, naming the bad value and what would be valid.

The CLI catches :class:`SimfrontError` and prints ``error: <message>`` with a non-zero exit
code and no traceback. Library users get an ordinary exception.
"""

from __future__ import annotations

import difflib
import numbers
from typing import Iterable


class SimfrontError(ValueError):
    """A problem with user input that simfront can explain in one line."""


def nearest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Closest spellings of ``name`` among ``candidates`` (case-insensitive)."""
    cands = list(dict.fromkeys(candidates))
    lower = {c.lower(): c for c in cands}
    hits = difflib.get_close_matches(name.lower(), list(lower), n=n, cutoff=0.5)
    if not hits:  # fall back to substring matches so "k3" still finds "kimi-k3"
        hits = [c for c in lower if name.lower() in c][:n]
    return [lower[h] for h in hits]


MAX_LISTED = 12  # names listed in an unknown-name error before "and N more" (one readable line)
LIST_COMMAND = {"model": "simfront models", "GPU": "simfront hardware"}  # where the full list is


def unknown(kind: str, name: str, candidates: Iterable[str]) -> SimfrontError:
    """An error for an unknown name, suggesting the nearest valid ones."""
    cands = list(candidates)
    near = nearest(name, cands)
    listed = sorted(cands)[:MAX_LISTED]
    where = LIST_COMMAND.get(kind)
    more = (f" and {len(cands) - len(listed)} more" + (f" ('{where}' lists them)" if where else "")) if len(cands) > len(listed) else ""
    hint = f"did you mean {', '.join(near)}?" if near else f"valid: {', '.join(listed)}{more}"
    return SimfrontError(f"unknown {kind} {name!r}; {hint}")


def check_lengths(**lengths: int | None) -> None:
    """Token lengths must be integers of at least one token (a request has a prompt and an output); a float, even a
    whole one (1024.0), is refused, as the JSON outputs echo lengths as integers."""
    for name, v in lengths.items():
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise SimfrontError(f"--{name} {v!r} must be an integer number of tokens")
        if v < 1:
            raise SimfrontError(f"--{name} {v} is invalid; lengths must be positive token counts (at least 1)")


def check_decodes(osl: int | float | None) -> None:
    """A frontier needs requests that decode: with one output token there is no second token, so TPOT and tok/s/user
    (the frontier's latency axis) do not exist and would be made up."""
    if osl is not None and not isinstance(osl, bool) and isinstance(osl, (int, float)) and 1 <= osl < 2:
        raise SimfrontError(f"--osl {osl:g}: a request of one output token never decodes, so TPOT and tok/s/user (the "
                            f"frontier's latency axis) do not exist; give --osl 2 or more ('simfront explain --phase "
                            f"prefill' prices the prompt's step alone)")

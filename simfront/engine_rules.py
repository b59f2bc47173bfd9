"""What an engine can start, as data: the ``layout_rules`` of ``simfront/engines/<engine>.yaml``.

Each rule names a combination of knobs the engine's own argument checks reject at start-up (the yaml gives the
reason and its source). One vectorised test serves every caller: the search keeps only the configurations the
engine it prices can start (``SearchSpace.engine``), ``plan`` chooses among them, and ``--launch`` writes lines
only for them (:func:`simfront.launch.launchable`).

A rule is a reason (it holds for every release) or ``{why: ..., before: "X.Y.Z"}`` (it holds for the releases older
than X.Y.Z; a search or launch line for the newest release, no ``--engine-version``, is not bound by it).

Rules (a layout is ``tp`` attention TP inside each of ``attention_dp`` groups, ``pp`` stages, ``ep`` expert ranks
over the ``tp x attention_dp`` GPUs of a stage, and ``drafts``: whether the worker runs speculative decoding):

* ``ep_all_or_none``: experts are sharded over all ``tp x attention_dp`` GPUs of a stage, or not at all;
* ``attention_dp_tp1``: attention data parallelism runs attention with TP 1 on every rank;
* ``no_pp_with_drafts``: a pipelined worker cannot run speculative decoding;
* ``pp_drafts_aggregated_without_attention_dp``: a pipelined worker runs speculative decoding only as an aggregated
  server without attention DP (``disagg``: the worker is a disaggregated decode worker).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from . import yamlio
from .errors import SimfrontError
from .scheduler import release_key

RULES_DIR = Path(__file__).with_name("engines")


# rule name -> (which layouts break it, vectorised; the layout's label and what would start, for one layout). Arguments:
# tp, pp, attention_dp, ep (float arrays or numbers), drafts (bool array or bool), disagg (bool)
_RULES = {
    "ep_all_or_none": (
        lambda tp, pp, dp, ep, drafts, disagg: (ep != 1) & (ep != tp * dp),  # experts over part of the stage
        lambda tp, pp, dp, ep, disagg: (f"TP{tp} DPA{dp} EP{ep}", f"ep must be 1 or {tp * dp}")),
    "attention_dp_tp1": (
        lambda tp, pp, dp, ep, drafts, disagg: (dp > 1) & (tp > 1),  # attention-DP ranks with attention TP
        lambda tp, pp, dp, ep, disagg: (f"TP{tp} DPA{dp}", f"use tp=1, attention_dp={tp * dp}")),
    "no_pp_with_drafts": (
        lambda tp, pp, dp, ep, drafts, disagg: (pp > 1) & drafts,  # drafts on pipeline stages
        lambda tp, pp, dp, ep, disagg: (f"PP{pp} with speculative decoding", "use pp=1 or no drafts")),
    "pp_drafts_aggregated_without_attention_dp": (
        # drafts on stages of a worker with attention DP, or of a disaggregated decode worker
        lambda tp, pp, dp, ep, drafts, disagg: (pp > 1) & drafts & ((dp > 1) | disagg),
        lambda tp, pp, dp, ep, disagg: (f"PP{pp} with speculative decoding on "
                                        + (f"DPA{dp}" if dp > 1 else "a disaggregated decode worker"),
                                        "use pp=1, no drafts or an aggregated TP worker")),
}
KNOWN_RULES = tuple(_RULES)


@lru_cache(maxsize=None)
def _rules(engine: str) -> dict[str, dict]:
    """{rule name: {why, before}} of an engine's table (``before`` None: every release)."""
    doc = yamlio.load(RULES_DIR / f"{engine}.yaml")
    out = {}
    for name, rule in dict(doc.get("layout_rules") or {}).items():
        if name not in KNOWN_RULES:
            raise SimfrontError(f"{engine}.yaml layout_rules: unknown rule {name!r}; known: {', '.join(KNOWN_RULES)}")
        out[name] = dict(rule) if isinstance(rule, dict) else {"why": str(rule)}
        out[name].setdefault("before", None)
    return out


def layout_rules(engine: str | None, version: str | None = None) -> dict[str, str]:
    """{rule name: why} that bind ``engine`` at release ``version`` (None: the newest); {} for the average engine."""
    if engine is None:
        return {}
    return {name: r["why"] for name, r in _rules(engine).items()
            if r["before"] is None or (version is not None and release_key(version) < release_key(r["before"]))}


def startable(engine: str | None, tp, pp, attention_dp, ep, drafts=False, version: str | None = None,
              disagg: bool = False) -> np.ndarray:
    """Whether ``engine`` (at release ``version``, None: the newest) starts each layout (arrays broadcast; every layout for
    the average engine, None); ``disagg``: the workers are disaggregated decode workers."""
    tp, pp, dp, ep = (np.asarray(x, dtype=np.float64) for x in (tp, pp, attention_dp, ep))
    drafts = np.asarray(drafts, dtype=bool)
    ok = np.ones(np.broadcast_shapes(tp.shape, pp.shape, dp.shape, ep.shape, drafts.shape), dtype=bool)
    for name in layout_rules(engine, version):
        ok &= ~_RULES[name][0](tp, pp, dp, ep, drafts, bool(disagg))
    return ok


def why_not(engine: str | None, tp: int, pp: int, attention_dp: int, ep: int, drafts: bool = False,
            version: str | None = None, disagg: bool = False) -> str:
    """The first rule one layout breaks at ``engine``'s release ``version``, as ``"<layout>: <why>; <what would start>"``
    ("" when it starts)."""
    rules = layout_rules(engine, version)
    for name in (n for n in KNOWN_RULES if n in rules):  # in the order the rules are listed here
        why = rules[name]
        breaks, says = _RULES[name]
        if breaks(tp, pp, attention_dp, ep, bool(drafts), bool(disagg)):
            label, fix = says(tp, pp, attention_dp, ep, bool(disagg))
            return f"{label}: {why}; {fix}"
    return ""


def startable_by_any(engines, tp, pp, attention_dp, ep, drafts=False, disagg: bool = False) -> np.ndarray:
    """Whether at least one of ``engines`` ((engine, release) pairs; release None: the newest) starts each layout (every
    layout when ``engines`` is empty)."""
    ok = startable(None, tp, pp, attention_dp, ep, drafts)
    if not engines:
        return ok
    return np.logical_or.reduce([startable(e, tp, pp, attention_dp, ep, drafts, v, disagg) for e, v in engines])

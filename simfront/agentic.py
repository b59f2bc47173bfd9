"""Agentic-coding sessions as a steady-state serving workload (``--workload agentic-coding``).

A session is ``turns`` requests (:class:`simfront.clients.AgenticCoding`, whose defaults are the preset's):
turn ``t`` (0-based) sends the whole conversation so far, P_t = first_prompt + t (output + tool) tokens,
and generates ``output_tokens``. The replica that served turn t-1 holds that turn's prompt and output in its
KV cache, a prefix of P_t - tool tokens. A KV-aware router sends turn t back to that replica; a round-robin
router over R replicas finds it 1/R of the time (``AgenticCoding.route_hit``). So the share of prompt
tokens served from the prefix cache is

    prefix_hit = route_hit x sum_{t>=1} (P_t - tool) / sum_t P_t

and the steady-state workload is the mean prompt, the output per turn and that hit rate. The analytical
evaluator assumes a session's context stays resident between turns (think time short against the cache's
turnover); the step-level simulation (``simfront.simulate``) evicts by capacity.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .clients import ROUTINGS, AgenticCoding
from .errors import SimfrontError

PRESETS = ("agentic-coding",)
# engine replicas a router spreads sessions over when the user does not say: a fleet of 8 deployments
# (round-robin's hit rate is 1/R, so this sets how much KV-aware routing gains; --replicas sets yours)
DEFAULT_REPLICAS = 8
# the preset's session knobs a user may override (--workload-set name=value,...)
SETTABLE = ("turns", "first_prompt", "output_tokens", "tool_tokens")


def agentic_workload(routing: str | None = None, replicas: int | None = None, overrides: dict | None = None) -> dict:
    """``{isl, osl, prefix_hit, preset{...}}`` of the agentic-coding preset under a routing policy."""
    routing = routing or "kv-aware"
    if routing not in ROUTINGS:
        raise SimfrontError(f"--routing {routing!r} unknown; valid: {', '.join(ROUTINGS)}")
    replicas = DEFAULT_REPLICAS if replicas is None else replicas
    if int(replicas) != replicas or replicas < 1:
        raise SimfrontError(f"--replicas {replicas} must be a whole number of at least 1")
    kw = {}
    for k, v in (overrides or {}).items():
        if k not in SETTABLE:
            raise SimfrontError(f"--workload-set {k}: unknown session knob; valid: {', '.join(SETTABLE)}")
        try:
            kw[k] = int(v) if k == "turns" else float(v)
        except (TypeError, ValueError):
            raise SimfrontError(f"--workload-set {k}={v!r} is not a number") from None
        if kw[k] < (1 if k in ("turns", "first_prompt", "output_tokens") else 0):
            raise SimfrontError(f"--workload-set {k}={v} must be {'at least 1' if k != 'tool_tokens' else 'non-negative'}")
    a = AgenticCoding(routing=routing, replicas=int(replicas), **kw)
    prompts = a.turn_prompt(np.arange(a.turns))  # P_t, tokens
    cached = np.where(np.arange(a.turns) >= 1, prompts - a.tool_tokens, 0.0)  # prefix the holder replica has, tokens
    hit = a.route_hit() * float(cached.sum() / prompts.sum())  # share of prompt tokens from the prefix cache
    preset = {"name": "agentic-coding", "routing": routing, "replicas": int(replicas), "route_hit": a.route_hit(),
              **{k: getattr(a, k) for k in SETTABLE}, "think_s": a.think_s}
    return {"isl": int(round(float(prompts.mean()))), "osl": int(round(a.output_tokens)), "prefix_hit": hit, "preset": preset}


def preset_defaults() -> dict:
    """The preset's documented defaults (for --help and the README)."""
    a = AgenticCoding()
    return {f.name: getattr(a, f.name) for f in dataclasses.fields(a) if f.name in SETTABLE}

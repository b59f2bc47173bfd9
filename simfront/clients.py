"""Client and workload models that drive the step-level simulation (:mod:`simfront.simulate`).

- :class:`ClosedLoop`: ``concurrency`` users, ``num_prompts`` requests in all; each user sends its
  next request when the last one finished (plus ``think_s``). With ``first_wave`` all users send at
  t = 0 (``benchmark_serving --request-rate inf --max-concurrency C``: the first wave arrives at once);
  without it their first requests are spread over one request's lifetime (steady state).
- :class:`OpenLoop`: requests at ``rate_per_s``, Poisson or constant spacing, optionally capped at
  ``max_concurrency`` in flight (the benchmark's semaphore).
- Lengths: fixed, or uniform integers in ``[floor(r L), L]`` (``--random-range-ratio r``, the vLLM
  random dataset; mean = (1 + r) L / 2 for large L).
- :class:`AgenticCoding`: multi-turn sessions whose prompt grows by each turn's output and tool
  result; the previous turn's context is a prefix-cache hit when the request lands on the replica
  holding it (always with KV-aware routing, 1/R of the time with round-robin over R replicas) and
  the replica's KV cache still holds it.

Everything here is numpy sampling; nothing depends on the cost model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import SimfrontError

# InferenceX / SemiAnalysis benchmark: --random-range-ratio 0.8 and num_prompts = 10 x concurrency
# (InferenceX .github/workflows/benchmark-tmpl.yml, benchmarks/benchmark_lib.sh; modeling-notes §5).
BENCHMARK_RANGE_RATIO = 0.8
BENCHMARK_PROMPTS_PER_USER = 10
ROUTINGS = ("kv-aware", "round-robin")


def mean_length(nominal: float, range_ratio: float | None) -> float:
    """Mean of a client's lengths: uniform integers in [floor(r L), L] (``--random-range-ratio r``; None or 1:
    every request exactly L). The analytical evaluator costs this mean; the simulation samples the lengths."""
    if range_ratio is None or range_ratio >= 1.0:
        return float(nominal)
    lo = max(np.floor(nominal * range_ratio), 1.0)  # shortest length the client draws
    return float((lo + max(nominal, lo)) / 2.0)  # mean of a uniform integer draw between the two ends


def nominal_length(mean: float, range_ratio: float | None) -> float:
    """The longest length L of a client whose lengths are uniform in [r L, L] and average ``mean`` (the inverse of
    :func:`mean_length`, to a fraction of a token): what a measured mean is costed back from."""
    if range_ratio is None or range_ratio >= 1.0:
        return float(mean)
    return float(2.0 * mean / (1.0 + range_ratio))  # mean = (r L + L) / 2


@dataclass(frozen=True)
class Lengths:
    isl: float  # nominal (maximum) input tokens
    osl: float  # nominal (maximum) output tokens
    range_ratio: float = 1.0  # lengths uniform in [floor(r L), L]; 1 = fixed

    def __post_init__(self):
        if not (0.0 < self.range_ratio <= 1.0):
            raise SimfrontError(f"random range ratio {self.range_ratio} must be in (0, 1]")
        if not (self.isl >= 1 and self.osl >= 1):
            raise SimfrontError(f"input ({self.isl}) and output ({self.osl}) tokens must be at least 1")

    @property
    def mean_isl(self) -> float:
        return mean_length(self.isl, self.range_ratio)

    @property
    def mean_osl(self) -> float:
        return mean_length(self.osl, self.range_ratio)

    @property
    def fixed(self) -> bool:
        """Whether every request has the same input and output length (each range holds one whole number)."""
        return all(lo == hi for lo, hi in (_ends(L, self.range_ratio) for L in (self.isl, self.osl)))

    def sample(self, rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
        """(input, output) token counts of ``shape`` requests (a read-only view of one value where the range holds one)."""
        return _uniform_int(rng, self.isl, self.range_ratio, shape), _uniform_int(rng, self.osl, self.range_ratio, shape)


def _ends(L: float, r: float) -> tuple[int, int]:
    """(shortest, longest) whole length of a range [r L, L]."""
    lo = max(int(np.floor(L * r)), 1)
    return lo, max(int(L), lo)


def _uniform_int(rng, L: float, r: float, shape) -> np.ndarray:
    lo, hi = _ends(L, r)
    if lo == hi:  # one length: a read-only broadcast of it (callers compute from it, none writes into it)
        return np.broadcast_to(float(hi), shape)
    return rng.integers(lo, hi + 1, size=shape).astype(float)


@dataclass(frozen=True)
class ClosedLoop:
    concurrency: float
    lengths: Lengths
    num_prompts: float | None = None  # default: BENCHMARK_PROMPTS_PER_USER x concurrency
    first_wave: bool = True
    think_s: float = 0.0
    warmup: float = 0  # first requests left out of the statistics
    prefix_hit: float = 0.0  # share of each prompt found in the prefix cache

    def prompts(self) -> float:
        return float(self.num_prompts if self.num_prompts is not None else BENCHMARK_PROMPTS_PER_USER * self.concurrency)


@dataclass(frozen=True)
class OpenLoop:
    rate_per_s: float
    lengths: Lengths
    num_prompts: float = 1000
    arrival: str = "poisson"  # poisson | constant
    max_concurrency: float | None = None
    warmup: float = 0
    prefix_hit: float = 0.0

    def __post_init__(self):
        if self.arrival not in ("poisson", "constant"):
            raise SimfrontError(f"arrival process {self.arrival!r} unknown; valid: poisson, constant")
        if not self.rate_per_s > 0:
            raise SimfrontError(f"request rate {self.rate_per_s} must be above 0")


@dataclass(frozen=True)
class AgenticCoding:
    """Agentic-coding sessions (the preset's documented defaults; each overridable).

    A session of ``turns`` requests: turn 1 sends ``first_prompt`` tokens; every later turn sends the
    whole conversation so far (previous prompt + previous output + ``tool_tokens`` of tool result).
    Between turns the user waits ``think_s`` (tool execution, reading). ``sessions`` users run
    sessions back to back. ``replicas`` is R, the engine replicas a router spreads requests over.
    """

    sessions: float = 8  # concurrent users
    turns: int = 8  # requests per session
    first_prompt: float = 4096  # tokens of the first request (system prompt + task + repository context)
    output_tokens: float = 512  # tokens generated per turn (edits, tool calls)
    tool_tokens: float = 1024  # tokens a tool result adds to the next turn
    think_s: float = 2.0  # tool execution / user time between turns
    routing: str = "kv-aware"
    replicas: int = 1
    num_sessions: float | None = None  # sessions in all (default 3 per user)
    range_ratio: float = 1.0

    def __post_init__(self):
        if self.routing not in ROUTINGS:
            raise SimfrontError(f"--routing {self.routing!r} unknown; valid: {', '.join(ROUTINGS)}")
        if self.turns < 1 or self.replicas < 1:
            raise SimfrontError(f"turns ({self.turns}) and replicas ({self.replicas}) must be at least 1")

    def turn_prompt(self, t) -> np.ndarray:
        """Prompt tokens of turn ``t`` (0-based)."""
        t = np.asarray(t, dtype=float)
        return self.first_prompt + t * (self.output_tokens + self.tool_tokens)

    def route_hit(self) -> float:
        """Probability that a turn lands on the replica holding its session's KV."""
        return 1.0 if self.routing == "kv-aware" or self.replicas == 1 else 1.0 / self.replicas

    def resident_share(self, kv_capacity_tokens: float, sessions_per_replica: float) -> float:
        """Share of a session's previous context still in the replica's KV cache (LRU over the
        contexts of the sessions the replica serves: all fit, or the cache holds that share)."""
        ctx = float(np.mean(self.turn_prompt(np.arange(self.turns)) + self.output_tokens))
        held = sessions_per_replica * ctx * (self.replicas if self.routing == "round-robin" else 1.0)
        return float(min(1.0, kv_capacity_tokens / max(held, 1.0)))

    def expected_hit_tokens(self, kv_capacity_tokens: float = np.inf, sessions_per_replica: float = 1.0) -> float:
        """Closed form: mean prompt tokens per request served from the prefix cache."""
        t = np.arange(self.turns)
        prev = np.where(t > 0, self.turn_prompt(t - 1) + self.output_tokens, 0.0)  # context the previous turn left
        p = self.route_hit() * self.resident_share(kv_capacity_tokens, sessions_per_replica)
        return float(np.mean(prev) * p)


@dataclass
class RequestPlan:
    """Per-request arrays (deployments x requests) a simulation consumes.

    ``arrival_s``: earliest send time (closed loop: 0 = as soon as a user is free); ``after_s``:
    delay after the user's previous request finished (think time); ``cached``: prompt tokens found
    in the prefix cache; ``first_wave``: users start at once; ``users``: requests in flight from
    the client at most; ``session_turn``: the turn index (0 for one-shot requests).
    """

    isl: np.ndarray
    osl: np.ndarray
    cached: np.ndarray
    arrival_s: np.ndarray
    after_s: np.ndarray
    users: np.ndarray  # (deployments,) users / concurrency cap
    n: np.ndarray  # (deployments,) requests per deployment (<= columns)
    warmup: np.ndarray  # (deployments,) requests left out of the statistics
    first_wave: bool = True
    open_loop: bool = False
    extra: dict = field(default_factory=dict)
    # (deployments,) requests, in sending order, inside the statistics window; those after it only keep
    # the load up (a closed loop's clients keep sending while the counted requests run), and a loop may
    # stop once this many have finished. None: every request after the warm-up counts.
    count_until: np.ndarray | None = None


def plan_closed(c: ClosedLoop, users, n_deployments: int, seed: int = 0, prompts=None, counted=None) -> RequestPlan:
    """Requests of a closed-loop client, ``users`` per deployment (arrays allowed: a simulated
    server's share of the clients); ``prompts`` (default: the client's, scaled to ``users``); ``counted``:
    requests per user inside the statistics window after the warm-up (default: all the rest; the requests
    after the window only keep the load up, ``RequestPlan.count_until``)."""
    u = np.broadcast_to(np.asarray(users, dtype=float), (n_deployments,)).copy()
    n = (np.asarray(prompts, dtype=float) if prompts is not None else np.ceil(c.prompts() * u / max(c.concurrency, 1.0)))
    n = np.broadcast_to(np.maximum(n, u), (n_deployments,)).astype(int)
    rng = np.random.default_rng(seed)
    shape = (n_deployments, int(n.max()))
    isl, osl = c.lengths.sample(rng, shape)
    if c.lengths.fixed:  # every request alike: read-only views of one value, no (deployments x requests) arrays to fill
        cached = np.broadcast_to(np.floor(float(isl.flat[0]) * c.prefix_hit), shape)
        arrival, after = np.broadcast_to(0.0, shape), np.broadcast_to(float(c.think_s), shape)
    else:
        cached = np.floor(isl * c.prefix_hit)
        arrival, after = np.zeros(shape), np.full(shape, float(c.think_s))
    warm = np.broadcast_to(np.ceil(np.asarray(c.warmup, dtype=float) * u / max(c.concurrency, 1.0)), (n_deployments,))
    until = None if counted is None else warm + np.ceil(counted * u)
    return RequestPlan(isl, osl, cached, arrival, after, u, n, warm.astype(int), first_wave=c.first_wave, count_until=until)


def plan_open(o: OpenLoop, share, n_deployments: int, seed: int = 0) -> RequestPlan:
    """Requests of an open-loop client; each simulated server gets ``share`` of the rate."""
    s = np.broadcast_to(np.asarray(share, dtype=float), (n_deployments,))
    rng = np.random.default_rng(seed)
    n = int(o.num_prompts)
    isl, osl = o.lengths.sample(rng, (n_deployments, n))
    rate = o.rate_per_s * s[:, None]
    gaps = rng.exponential(1.0, size=(n_deployments, n)) if o.arrival == "poisson" else np.ones((n_deployments, n))
    arr = np.cumsum(gaps, axis=1) / rate - gaps[:, :1] / rate  # first request at t = 0
    cap = np.full(n_deployments, float(n) if o.max_concurrency is None else max(float(o.max_concurrency) * 1.0, 1.0))
    if o.max_concurrency is not None:
        cap = np.maximum(np.ceil(o.max_concurrency * s), 1.0)
    warm = np.full(n_deployments, int(o.warmup))
    return RequestPlan(isl, osl, np.floor(isl * o.prefix_hit), arr, np.zeros_like(isl), cap, np.full(n_deployments, n), warm,
                       first_wave=True, open_loop=True)


def plan_agentic(a: AgenticCoding, users, n_deployments: int, kv_capacity_tokens=np.inf, seed: int = 0) -> RequestPlan:
    """Requests of agentic sessions on one simulated server with ``users`` sessions at once.

    Each request's cached prefix is drawn per turn: the previous turn's context is a hit with
    probability route_hit x resident share (see :class:`AgenticCoding`)."""
    u = np.broadcast_to(np.asarray(users, dtype=float), (n_deployments,))
    sess = np.ceil((a.num_sessions if a.num_sessions is not None else 3 * a.sessions) * u / max(a.sessions, 1.0))
    n = (sess * a.turns).astype(int)
    cols = int(n.max())
    rng = np.random.default_rng(seed)
    j = np.arange(cols)[None, :]
    # users run sessions back to back: request j of a user is turn j mod turns. Requests are issued in
    # order as users free up, so the k-th request of the plan belongs to some user's turn; with all
    # users in lockstep by turn the plan interleaves users (turn = (j // users) mod turns).
    turn = (j // np.maximum(u[:, None], 1).astype(int)) % a.turns
    isl = np.broadcast_to(a.turn_prompt(turn), (n_deployments, cols)).astype(float)
    if a.range_ratio < 1.0:
        isl = np.floor(isl * rng.uniform(a.range_ratio, 1.0, size=isl.shape))
    osl = np.full((n_deployments, cols), float(a.output_tokens))
    kv = np.broadcast_to(np.asarray(kv_capacity_tokens, dtype=float), (n_deployments,))
    p = np.array([a.route_hit() * a.resident_share(kv[d], u[d]) for d in range(n_deployments)])  # per deployment (small loop)
    prev = np.where(turn > 0, a.turn_prompt(turn - 1) + a.output_tokens, 0.0)
    hit = rng.random((n_deployments, cols)) < p[:, None]
    cached = np.where(hit, np.minimum(prev, isl - 1), 0.0)
    after = np.where(turn < a.turns - 1, a.think_s, 0.0) + 0 * isl
    return RequestPlan(isl, osl, cached, np.zeros_like(isl), after, u.copy(), n, np.zeros(n_deployments, dtype=int),
                       first_wave=True, extra={"turn": turn, "hit_probability": p})


__all__ = ["Lengths", "ClosedLoop", "OpenLoop", "AgenticCoding", "RequestPlan", "plan_closed", "plan_open", "plan_agentic",
           "BENCHMARK_RANGE_RATIO", "BENCHMARK_PROMPTS_PER_USER", "ROUTINGS"]

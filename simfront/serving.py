"""Serving metrics of configurations under a workload: TTFT, TPOT, tok/s/user, tok/s/GPU, $/Mtok.

Aggregated serving (continuous batching with chunked prefill), mean-field steady state:
every step runs the ``b`` decode requests of a micro-batch on each attention-DP rank plus the
prefill tokens that keep the batch full.
With ``N`` steps in a request's life, ``b/N`` requests
finish per step, so ``p = b * isl_new / N`` prompt tokens join each step; the step time, and so
TPOT, includes that interference. TTFT is the prefill of the request's own prompt plus the wait
for the current step and for the prefill queue (an M/D/1 wait at the prefill utilisation of the
token budget); a benchmark's synchronised start-up wave adds half the rest of the wave for its
share of the requests.

Disaggregated serving: prefill workers run whole prompts (TTFT = queue + prefill + KV transfer
over the real link), decode workers run pure decode steps; worker counts are matched to the
traffic (see :mod:`search`).

Speculative decoding: ``k`` drafts per step accepted with per-token probability ``a`` give
``AL = (1 - a^(k+1)) / (1 - a)`` tokens per verify step (Leviathan et al. 2023); the step verifies
``k+1`` tokens per request and pays the draft's own cost; TPOT = step / AL.

All arrays broadcast: one call evaluates every configuration of a search.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from . import efficiency
from .clients import mean_length
from .hardware import Hardware
from .memory import kv_bytes_per_token
from .models import Model, Precision
from .scheduler import TWO_BATCH_OVERLAP_SPLIT, scheduler_settings, settings_key
from .step import DEFAULT_ROUTING_ALPHA, StepBatch, forward_step

# Default engine token budget per step (max_num_batched_tokens / max_num_tokens; 8192 is the
# vLLM V1 and TensorRT-LLM default for serving; ecosystem.md §8).
DEFAULT_CHUNK_TOKENS = 8192


@dataclass(frozen=True)
class Workload:
    # input / output tokens per request: the mean, or with ``length_range_ratio`` r the longest L of a benchmark
    # client's lengths uniform in [r L, L]; the cost model uses ``mean_isl`` / ``mean_osl``
    isl: float = 1024
    osl: float = 1024
    prefix_hit: float = 0.0  # share of input tokens whose KV is reused from the prefix cache
    chunk_tokens: float = DEFAULT_CHUNK_TOKENS  # engine token budget per step per rank
    # share of requests sent in a synchronised start-up wave: a benchmark of N prompts at concurrency C
    # sends its first C at once (share C / N); a service in steady state has none (0)
    startup_wave_share: float = 0.0
    # how tokens spread over experts: the power-law exponent of the busiest experts' share (step.py's
    # DEFAULT_ROUTING_ALPHA, production-typical), or None for balanced uniform routing (a router trained to balance)
    routing_alpha: float | None = DEFAULT_ROUTING_ALPHA
    # attention-DP balance of the engine (TensorRT-LLM attention_dp_config enable_balance / timeout_iters): a rank
    # holding a new prompt waits up to this many steps for every attention-DP rank to hold one, so the ranks
    # prefill in the same steps; 0: each rank schedules its prompts alone (see :func:`adp_gate_iters`)
    adp_gate_iters: float = 0.0
    # a benchmark client's lengths: uniform in [r L, L] (--random-range-ratio r); None: lengths that vary as a
    # service's do. At r = 1 (every request exactly ISL / OSL) closed-loop clients stay in step, so an engine that
    # prefills before it decodes serves them in waves (see :func:`finish_aggregated`)
    length_range_ratio: float | None = None
    # the engine takes new requests in only every this many decode steps (SGLang --scheduler-recv-interval, its
    # SchedulerRecvSkipper: a decode or verify step counts 1, a prefill step receives at once); 1 = every step
    recv_interval_steps: float = 1.0
    # the token budget also carries the running requests' decode tokens, so a step's prompt chunk gets what they leave
    # (policy mixed: vLLM V1, TensorRT-LLM in-flight batching; simfront/engines/scheduler.yaml); False: prompts run in
    # steps of their own (prefill_first: SGLang's default), which the budget fills whole (see :func:`decode_in_budget`)
    decode_in_budget: bool = True
    # the engine runs two-batch overlap (SGLang --enable-two-batch-overlap, vLLM --enable-dbo): attention-DP + EP steps
    # split into two micro-batches whose all-to-all hides behind the other's compute (step.two_batch_overlap_step)
    two_batch_overlap: bool = False
    # the smallest step the engine splits (engine_workload: simfront/engines/scheduler.yaml two_batch_overlap_split)
    two_batch_overlap_split: tuple = TWO_BATCH_OVERLAP_SPLIT
    # where the engine runs the TP all-reduce, residual add and RMSNorm as one kernel (engine_workload:
    # simfront/engines/scheduler.yaml allreduce_norm_fusion; simfront.fusion); () for none
    allreduce_norm_fusion: tuple = ()
    # where the engine runs its MLA decode's native kernel only at some KV heads per rank (engine_workload:
    # simfront/engines/scheduler.yaml mla_native_heads; simfront.step.mla_native_mask); () for no such rule
    mla_native_heads: tuple = ()

    @property
    def step_kwargs(self) -> dict:
        """The engine facts every :func:`simfront.step.forward_step` of this workload takes: routing skew, two-batch
        overlap and the all-reduce + RMSNorm fusion rules."""
        return {"routing_alpha": self.routing_alpha, "two_batch_overlap": self.overlap,
                "allreduce_norm_fusion": self.allreduce_norm_fusion, "mla_native_heads": self.mla_native_heads}

    @property
    def overlap(self) -> tuple | None:
        """What :func:`simfront.step.forward_step` takes as ``two_batch_overlap``: the engine's split thresholds when
        the overlap is on, else None."""
        return self.two_batch_overlap_split if self.two_batch_overlap else None

    @property
    def fixed_lengths(self) -> bool:
        """Every request has exactly ISL input and OSL output tokens."""
        return fixed_lengths(self.length_range_ratio)

    @property
    def mean_isl(self) -> float:
        """Mean input tokens per request (what prefill, KV and decode contexts are costed at)."""
        return mean_length(self.isl, self.length_range_ratio)

    @property
    def mean_osl(self) -> float:
        """Mean output tokens per request (decode steps, request lifetimes, Little's law)."""
        return mean_length(self.osl, self.length_range_ratio)


def fixed_lengths(range_ratio: float | None) -> bool:
    """Whether a client of random range ratio ``range_ratio`` (None: lengths that vary) sends every request at
    exactly its ISL / OSL."""
    return range_ratio is not None and range_ratio >= 1.0


def engine_workload(engine: str | None = None, version: str | None = None, constants: dict | None = None) -> dict:
    """The :class:`Workload` fields an engine's scheduler sets (``constants``: :func:`engine_constants` already read for
    a release or a date; else those of ``engine``'s release ``version``, the newest when None): its attention-DP balance
    gate in steps, whether its token budget carries the running requests' decode tokens, its two-batch overlap split
    and its all-reduce + RMSNorm fusion rules. Every workload priced for an engine takes them here."""
    c = engine_constants(engine, version) if constants is None else dict(constants)
    split = tuple(float(c.get(k, d)) for k, d in zip(("tbo_decode_tokens_above", "tbo_prompt_tokens_above", "tbo_min_requests"),
                                                     TWO_BATCH_OVERLAP_SPLIT))
    return {"adp_gate_iters": float(c["adp_balance_timeout_iters"]), "decode_in_budget": not c["prefill_first"],
            "two_batch_overlap_split": split, "allreduce_norm_fusion": tuple(c.get("allreduce_norm_fusion", ())),
            "mla_native_heads": tuple(c.get("mla_native_heads", ()))}


def adp_gate_iters(engine: str | None) -> float:
    """The attention-DP balance gate of ``engine`` in steps (simfront/engines/scheduler.yaml), 0 when it has none."""
    return engine_workload(engine)["adp_gate_iters"]


def decode_in_budget(engine: str | None) -> bool:
    """Whether ``engine``'s token budget also carries its running requests' decode tokens (scheduler policy mixed)."""
    return engine_workload(engine)["decode_in_budget"]


@dataclass(frozen=True)
class Speculation:
    method: str = "none"  # none, mtp, eagle, ngram
    k: int = 0  # draft tokens per step
    acceptance: float = 0.0  # per-token acceptance probability
    draft_layers: float = 0.0  # target-size layers the drafter costs per draft token (MTP/EAGLE: 1)
    position_decay: float = 1.0  # conditional acceptance of draft i+1 relative to draft i (1 = i.i.d.)
    # measured P(drafts 1..i all accepted), i = 1..k (simfront.speculative); overrides the two above
    survival: tuple[float, ...] = ()
    family: str = ""  # drafter family the survival table comes from ("" for a user-given acceptance)

    @property
    def accepted_per_step(self) -> float:
        """Expected tokens emitted per verify step, bonus token included.

        With a measured table: 1 + sum of P(drafts 1..i accepted). Otherwise draft i is accepted with
        conditional probability ``acceptance * position_decay**(i-1)`` given the drafts before it were;
        with no decay this is Leviathan et al.'s (1 - a^(k+1)) / (1 - a).
        """
        if self.survival:
            return 1.0 + float(sum(self.survival[: self.k]))
        survive = 1.0  # probability that drafts 1..i were all accepted
        total = 1.0  # the verified (bonus) token is always emitted
        for i in range(self.k):  # k is a handful of drafts
            survive *= min(self.acceptance * self.position_decay ** i, 1.0)
            total += survive
        return total


NO_SPEC = Speculation()


# The serving profile with no engine effects: isolated-kernel times, no hidden latency, no queueing
# beyond the model's own, no per-request overhead. Fitted per-engine values override these.
NEUTRAL_PROFILE = {
    "kernel_overlap": 0.0,  # share of per-kernel fixed latency hidden by CUDA graphs / PDL / fusion inside a step
    "step_overhead_s": 0.0,  # CPU scheduling + launch per step
    # CPU work per request per step on a rank (scheduling, input preparation, sampling bookkeeping,
    # detokenisation): what makes a step at 256 requests slower than the GPU kernels alone
    "request_overhead_s": 0.0,
    "step_scale": 1.0,  # multiplicative efficiency of the engine's kernels
    "ttft_overhead_s": 0.0,  # API / tokenisation / queue per request
    # engine steps between a prompt's last prefill step and its first streamed token (overlap
    # schedulers process a step's outputs during the next step)
    "ttft_extra_steps": 0.0,
    "ttft_scale": 1.0,
    # a busy disaggregated prefill worker's time per batch of prompts, in units of the op sum (engine step
    # applied): what its prompts/s and the prefill queue see; the idle-worker TTFT keeps ttft_scale
    "prefill_scale": 1.0,
    # per-request latency of the disaggregated path before its prefill starts and after its KV lands: the
    # router's remote-prefill hand-off and the KV-cache transfer handshake (not in the op sum or the link time)
    "disagg_overhead_s": 0.0,
}


def engine_profile(engine: str | None = None, version: str | None = None) -> dict:
    """Per-engine serving profile fitted on measured runs (hardware/efficiency/serving.yaml), plus the
    scheduler constants of the engine's release ``version`` (newest when None) that enter the evaluator
    (:func:`engine_constants`)."""
    p = efficiency.params("serving", engine or "default")
    return {**engine_constants(engine, version), **{k: float(p.get(k, v)) for k, v in NEUTRAL_PROFILE.items()}}


def engine_settings(engine: str | None, version: str | None = None, measured_on: str | None = None):
    """Scheduler settings of ``engine`` at ``version`` (or the release out on ``measured_on``); an engine the table
    does not know takes the default engine's."""
    return scheduler_settings(settings_key(engine), version, measured_on=measured_on)


def engine_constants(engine: str | None = None, version: str | None = None, measured_on: str | None = None) -> dict:
    """Scheduler settings of ``engine`` (simfront/engines/scheduler.yaml) that the analytical evaluator uses, for
    its release ``version`` (or the release out on the date ``measured_on``; the newest family when neither is
    given); an engine the table does not know takes the default engine's."""
    sched = engine_settings(engine, version, measured_on)
    # prefill_first: a step with admissible prompts prefills only, and the running requests decode after it
    return {"adp_balance_timeout_iters": sched.adp_balance_timeout_iters, "prefill_first": float(sched.policy == "prefill_first"),
            # the engine's CPU work per step runs beside the GPU step (overlap scheduler), without and with speculation
            "cpu_overlap": float(sched.cpu_overlap), "cpu_overlap_spec": float(sched.cpu_overlap_with_spec),
            # disaggregated: the decode slot is taken at KV transfer (1) or before the prefill (0)
            "decode_slot_at_transfer": float(sched.decode_slot_at == "transfer"),
            # two-batch overlap: the smallest step the engine splits (decode tokens above, prompt tokens above, requests)
            "tbo_decode_tokens_above": sched.two_batch_overlap_split[0], "tbo_prompt_tokens_above": sched.two_batch_overlap_split[1],
            "tbo_min_requests": sched.two_batch_overlap_split[2],
            # where the engine runs the TP all-reduce, residual add and RMSNorm as one kernel (not a number: the rules)
            "allreduce_norm_fusion": sched.allreduce_norm_fusion,
            # where the engine's MLA decode runs the native kernel only at some heads per rank (not a number: the rule)
            "mla_native_heads": sched.mla_native_heads}


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _drafts(spec: Speculation) -> bool:
    """Whether the speculation's draft passes cost target-model layers and the LM head."""
    return spec.k > 0 and spec.method not in ("none", "ngram")


def _draft_sums(st) -> tuple:
    """The step's (roofline, fixed) sums as StepCost.split adds them (same order, same numbers), and the
    (roofline, fixed) sums of its layers and of its LM head and sampling."""
    roof, extra, layers, head = st.sums(("lm_head", "sampling"))
    if layers is None:  # a layer op after a model-edge op: sum the layers on their own
        return _draft_sums_apart(st)
    return roof, extra, layers, head


def _draft_sums_apart(st) -> tuple:
    """:func:`_draft_sums` for any op order: the layers' sums accumulated on their own."""
    roof, extra = 0.0, 0.0
    layers = [0.0, 0.0]
    head = [0.0, 0.0]
    for r in st.ops:
        parts = st.parts(r)
        roof = roof + parts[0]
        extra = extra + parts[1]
        tgt = head if (r.group == "model" and r.name in ("lm_head", "sampling")) else (layers if r.group != "model" else None)
        if tgt is not None:
            tgt[0] = tgt[0] + parts[0]
            tgt[1] = tgt[1] + parts[1]
    return np.asarray(roof), np.asarray(extra), layers, head


def _split(st, model: Model, spec: Speculation, pipelined: bool = True) -> np.ndarray:
    """Step time as a stacked (roofline, fixed-latency) pair, drafts included; for a pipelined worker the round of
    its ``pp`` micro-batches (:func:`pipeline_round`) unless ``pipelined`` is False (a prompt alone on the worker)."""
    return _drafted_pair(st, model, spec.k * spec.draft_layers, spec.k, _drafts(spec), pipelined and _pipelined(st))


def _drafted_pair(st, model: Model, draft_layers, k, drafts, piped: bool) -> np.ndarray:
    """The step's stacked (roofline, fixed) pair plus, where ``drafts``, ``k`` sequential draft passes that cost
    ``draft_layers`` average layers in all and the LM head each; the round of a pipelined worker when ``piped``.
    ``draft_layers``, ``k`` and ``drafts`` are scalars (one speculation) or arrays (columns of several)."""
    if not np.any(drafts) and not piped:
        roof, extra = st.split()
        return np.stack(np.broadcast_arrays(roof, extra))
    roof, extra, layers, head = _draft_sums(st)
    f = draft_layers / model.arch.n_layers  # share of the layers the draft passes run
    roof = np.where(drafts, roof + f * layers[0] + k * head[0], roof)
    extra = np.where(drafts, extra + f * layers[1] + k * head[1], extra)
    pair = np.stack(np.broadcast_arrays(roof, extra))
    return pipeline_round(pair, st, model, layers) if piped else pair


def _pipelined(st) -> bool:
    """Whether any layout of the step pipelines (PP > 1), so its micro-batches go round (:func:`pipeline_round`)."""
    return bool(np.any(np.asarray(st.pp) > 1))


def pipeline_round(pair: np.ndarray, st, model: Model, layers) -> np.ndarray:
    """(roofline, fixed) time between two steps of one micro-batch of a pipelined worker: ``pp`` times its busiest
    stage, plus the stage-to-stage sends (``pair`` where ``pp`` is 1).

    ``pair`` is the whole step (every layer, the model-edge ops, the draft passes and the sends) and ``layers`` the
    pair of its layers alone. The stages split the layers as vLLM's default does (``get_pp_indices`` in
    vllm/distributed/utils.py: ``n // pp`` each, the remainder to stages other than the last, which holds the final
    norm and the LM head): the busiest of the others has ``ceil(n / pp)`` layers, the last ``floor(n / pp)`` plus
    the model-edge ops, the sampling and the draft passes (the MTP / EAGLE head runs after the last stage). With ``pp``
    micro-batches in flight each stage serves every one of them in turn, so the busiest stage sets the pace; with
    balanced stages and nothing after the last layer the round is the step itself. Layers are taken at their
    average cost (the first dense layers of a MoE model are not told apart)."""
    pp = np.asarray(st.pp, dtype=np.float64)
    n = float(model.arch.n_layers)
    c_other = np.ceil(n / pp) / n  # share of the layers on the busiest stage before the last
    c_last = np.floor(n / pp) / n  # share on the last stage
    (l0, l1), (s0, s1) = layers, st.op_parts("pp.send")
    l_sum = l0 + l1
    # the last stage holds its layers and the tail (model-edge ops and draft passes: the step minus its layers and
    # sends); it is the busiest when its tail outweighs the extra layer of the others
    last_wins = (pair[0] + pair[1] - l_sum - s0 - s1) >= (c_other - c_last) * l_sum
    out = [pp * np.where(last_wins, p - s - (1.0 - c_last) * lay, c_other * lay) + s
           for p, lay, s in ((pair[0], l0, s0), (pair[1], l1, s1))]
    return np.where(pp > 1, np.stack(np.broadcast_arrays(*out)), pair)


@dataclass(frozen=True)
class SpecColumns:
    """Several speculations side by side along the batch axis (the last one): speculation ``i`` owns
    columns ``i * nb .. (i + 1) * nb - 1`` of every array whose last axis has ``len(specs) * nb``
    entries. One step costs them all at once; :meth:`take` gives one speculation's columns back."""

    specs: tuple[Speculation, ...]
    nb: int  # batch columns per speculation
    batch: np.ndarray  # the batch array tiled once per speculation
    q: np.ndarray  # tokens verified per request per column (1 + drafts)
    al: np.ndarray  # tokens emitted per verify step per column
    k: np.ndarray  # drafts per column
    draft_layers: np.ndarray  # target-size layers a column's draft passes cost in all (drafts x layers per draft)
    drafts: np.ndarray  # columns whose drafts cost target layers and the LM head

    @classmethod
    def of(cls, specs, batch) -> "SpecColumns":
        """Columns of ``specs`` for ``batch`` (its last axis is the batch axis; layouts broadcast against
        it on the axes before, with a last axis of 1)."""
        b = _f(batch)
        if b.ndim == 0:
            b = b.reshape(1)
        nb, S = b.shape[-1], len(specs)
        shape = (1,) * (b.ndim - 1) + (S * nb,)

        def col(vals):  # one value per speculation, repeated over its batch columns
            return np.repeat(np.array(vals, dtype=np.float64), nb).reshape(shape)

        return cls(tuple(specs), nb, np.tile(b, (1,) * (b.ndim - 1) + (S,)), col([sp.k + 1 for sp in specs]),
                   col([sp.accepted_per_step for sp in specs]), col([sp.k for sp in specs]),
                   col([sp.k * sp.draft_layers for sp in specs]),
                   np.repeat(np.array([_drafts(sp) for sp in specs]), nb).reshape(shape))

    def take(self, x, i: int):
        """Speculation ``i``'s columns of an array over every speculation's columns (others unchanged)."""
        if isinstance(x, np.ndarray) and x.ndim and x.shape[-1] == len(self.specs) * self.nb:
            return x[..., i * self.nb:(i + 1) * self.nb]
        return x

    def split(self, st, model: Model) -> np.ndarray:
        """:func:`_split` of every column at its own speculation (the same sums in the same order)."""
        return _drafted_pair(st, model, self.draft_layers, self.k, self.drafts, _pipelined(st))


def cpu_overlapped(prof: dict, speculative=False):
    """Whether the engine's CPU work of a step runs beside its GPU step (the overlap scheduler: the next step is
    prepared while this one runs), for steps with or without speculative decoding (``speculative``, broadcasts)."""
    spec = np.asarray(speculative, dtype=bool)
    return np.where(spec, prof.get("cpu_overlap_spec", 0.0) > 0, prof.get("cpu_overlap", 0.0) > 0)


def slot_at_transfer(prof: dict) -> bool:
    """Whether a disaggregated decode server of the engine profile ``prof`` gives a request its slot only when its KV
    arrives (:func:`simfront.deployment.evaluate_disagg`), rather than before its prefill."""
    return prof.get("decode_slot_at_transfer", 0.0) > 0


def _with_cpu(gpu_s, cpu_s, overlapped):
    """Engine step from its GPU part and its CPU part: the longer of the two where the engine overlaps them
    (the overlap scheduler), their sum where the CPU works between GPU steps."""
    return np.where(overlapped, np.maximum(gpu_s, cpu_s), gpu_s + cpu_s)


def _cpu_parts(prof: dict, requests, micro_batches) -> tuple[np.ndarray, np.ndarray]:
    """(per-step, per-request) CPU seconds of an engine step: the scheduler's work per step and per request of the
    rank, once per micro-batch the step schedules (:func:`step_terms`)."""
    mb = np.asarray(micro_batches, dtype=np.float64)
    return mb * prof["step_overhead_s"], mb * prof.get("request_overhead_s", 0.0) * np.asarray(requests, dtype=np.float64)


def step_terms(split: np.ndarray, prof: dict, requests=0.0, speculative=False, micro_batches=1.0) -> dict:
    """Every term of an engine step from a (roofline, fixed) pair under an engine profile.

    ``micro_batches``: the micro-batches one step (a pipelined worker's round, :func:`pipeline_round`) schedules:
    the engine's scheduler runs once per micro-batch (vLLM's batch queue of PP micro-batches, SGLang's and
    TensorRT-LLM's PP event loops), so its CPU work (per step and per request of the micro-batch) is paid that
    many times per round.

    ``roofline_s``: the ops' dominant legs (compute, memory or wire time); ``fixed_s``: their fixed
    latencies (launch, pipeline fill, collective latency); ``hidden_s``: the share of the fixed part
    the engine hides (CUDA graphs, PDL, fusion); ``scale_s``: what the engine's step scale adds;
    ``overhead_s``: per-step CPU scheduling; ``request_overhead_s``: CPU work for the ``requests`` of
    the rank; ``cpu_hidden_s``: the CPU work an overlap scheduler runs beside the GPU step
    (:func:`cpu_overlapped`; ``speculative``: a speculative-decoding step); ``engine_s``: the step the
    serving model uses.
    """
    roof, fixed = split[0], split[1]
    hidden = prof["kernel_overlap"] * fixed  # fixed latency the engine overlaps
    kernels = roof + fixed - hidden
    scaled = kernels * prof["step_scale"]
    overhead, per_request = _cpu_parts(prof, requests, micro_batches)  # CPU scheduling per step and per request
    cpu = overhead + per_request  # CPU seconds of the step
    engine = _with_cpu(scaled, cpu, cpu_overlapped(prof, speculative))
    return {"roofline_s": roof, "fixed_s": fixed, "hidden_s": hidden, "scale_s": scaled - kernels,
            "overhead_s": overhead + 0 * roof, "request_overhead_s": per_request + 0 * roof,
            "cpu_hidden_s": scaled + cpu - engine, "engine_s": engine}


def _apply(split: np.ndarray, prof: dict, requests=0.0, speculative=False, micro_batches=1.0) -> np.ndarray:
    """Engine step time from a (roofline, fixed) pair under an engine profile (``requests`` on the rank in each of
    ``micro_batches``): :func:`step_terms`' ``engine_s``, the same operations without the terms it does not need."""
    roof, fixed = split[0], split[1]
    scaled = (roof + fixed - prof["kernel_overlap"] * fixed) * prof["step_scale"]
    overhead, per_request = _cpu_parts(prof, requests, micro_batches)
    return _with_cpu(scaled, overhead + per_request, cpu_overlapped(prof, speculative))


@dataclass
class AggRaw:
    """Engine-independent step times of aggregated workers (profile not yet applied)."""

    decode_step_s: np.ndarray  # split parts of a step of the decode batch alone, drafts included
    mixed_step_s: np.ndarray  # split parts of a step that also carries ``mixed_tokens`` prompt tokens
    mixed_tokens: np.ndarray  # prompt tokens a mixed step carries (a whole prompt, or a full chunk)
    mixed_share: np.ndarray  # share of steps that carry prompt tokens
    batch: np.ndarray  # requests per micro-batch per rank
    chunk: np.ndarray | float  # prompt tokens a step can carry (the token budget less the decode tokens it carries)
    isl_new: float  # prompt tokens of one request that need computing (prefix-cache hits excluded)
    rho: np.ndarray  # share of the step token budget spent on prefill
    al: float  # tokens per verify step
    osl: float
    slots: np.ndarray  # requests in flight per worker (batch x DP x PP)
    wave_share: float = 0.0  # the workload's share of requests in a synchronised start-up wave
    ranks: np.ndarray | float = 1.0  # attention-DP ranks of the worker
    range_ratio: float | None = None  # the workload's length spread (Workload.length_range_ratio)
    recv_interval: float = 1.0  # decode steps between the engine's intakes of new requests (Workload.recv_interval_steps)
    micro_batches: np.ndarray | float = 1.0  # micro-batches one step schedules (PP: one per stage; step_terms)


@dataclass
class AggResult:
    """Latencies of one aggregated worker at its running batch (throughput is the deployment's:
    :func:`simfront.deployment.evaluate_agg`)."""

    ttft_s: np.ndarray  # TTFT of a request admitted at once (no wait for a batch slot)
    tpot_s: np.ndarray
    step_s: np.ndarray  # mean engine step (decode-only and mixed steps)
    e2e_s: np.ndarray  # TTFT + (OSL - 1) x TPOT
    wave_half_s: np.ndarray | float = 0.0  # start-up wave: half the time to prefill a rank's whole first wave


def aggregated_raw(model: Model, precision: Precision, hw: Hardware, tp, pp, dp, ep, batch, wl: Workload,
                   spec: Speculation = NO_SPEC, decode_step: np.ndarray | None = None) -> AggRaw:
    """Steps of a continuous-batching worker: most carry only the decode batch; some also carry
    prompt tokens (one prompt, or a full token budget when prompts queue). Step costs are not
    linear in tokens (MoE layers touch more experts), so the two kinds are costed separately."""
    return _aggregated(model, precision, hw, tp, pp, dp, ep, _f(batch), wl, spec.k + 1, spec.accepted_per_step,
                       lambda st: _split(st, model, spec), decode_step)


def _aggregated(model, precision, hw, tp, pp, dp, ep, b, wl: Workload, q, al, split, decode_step) -> AggRaw:
    """:func:`aggregated_raw` with ``q`` verified and ``al`` emitted tokens per request and step (scalars, or
    arrays over the batch columns) and ``split`` turning a :class:`StepCost` into its (roofline, fixed) pair."""
    dec, mix, raw = _agg_steps(dp, pp, b, wl, q, al)
    if decode_step is None:  # callers that costed the same decode step already (decode_raw) pass it in
        decode_step = split(forward_step(model, precision, hw, tp, pp, dp, ep, dec, **wl.step_kwargs))
    raw.decode_step_s = decode_step
    raw.mixed_step_s = split(forward_step(model, precision, hw, tp, pp, dp, ep, mix, **wl.step_kwargs))
    return raw


@dataclass
class MixedSteps:
    """How an aggregated worker's prompt tokens fall into its steps (:func:`mixed_steps`); arrays over its batches."""

    batch: np.ndarray  # running requests per rank (the batch, or fewer where the token budget turns them over)
    prompt_tokens: np.ndarray  # prompt tokens per step per rank, on average, that keep the batch full
    mixed_tokens: np.ndarray  # prompt tokens a mixed step carries on a prefilling rank
    rank_share: np.ndarray  # share of one rank's steps that carry its own prompt tokens
    mixed_share: np.ndarray  # share of the worker's steps in which any attention-DP rank prefills
    prefill_ranks: np.ndarray  # attention-DP ranks prefilling in a mixed step, on average
    prompt_budget: np.ndarray  # prompt tokens a step can carry: the token budget less the running requests' decode tokens


def mixed_steps(dp, b, isl_new: float, osl: float, chunk, al, gate_iters=0.0, decode_q=0.0) -> MixedSteps:
    """Prompt tokens of an aggregated worker with ``b`` requests per rank on ``dp`` attention-DP ranks: ``isl_new``
    prompt tokens to compute per request, ``osl`` output tokens at ``al`` per verify step, a token budget of ``chunk``
    per step (a number or one per deployment); ``gate_iters``: the engine's attention-DP balance gate in steps (0:
    none); ``decode_q``: tokens each running request puts through the budget of a step with prompt tokens (1 + drafts
    where the budget carries decode tokens, :attr:`Workload.decode_in_budget`; 0 where prompts get steps of their own).
    The evaluator's mixed steps (:func:`_agg_steps`) and the simulation's other-rank prefills
    (:func:`simfront.simulate.simulate_agg`) read it."""
    decode_steps = np.maximum(np.ceil((osl - 1) / al), 1.0)  # verify steps after the first token
    pre_steps = np.maximum(np.ceil(isl_new / chunk), 1.0)  # steps one prompt's prefill spans
    n_life = decode_steps + pre_steps  # steps in one request's life
    # running requests per rank: the batch, unless its prompts need more tokens per step than the budget leaves them
    # beside the running requests' decode tokens; then the budget sets how many requests turn over and the rest wait
    b = np.minimum(b, np.maximum(chunk / (max(isl_new, 1.0) / n_life + _f(decode_q)), 1.0))
    prompt_budget = np.maximum(chunk - b * _f(decode_q), 1.0)  # prompt tokens a step can carry beside the decode tokens
    p = b * isl_new / n_life  # prompt tokens per step, on average, that keep the batch full (at most the budget)
    group = arrival_group(b, isl_new, prompt_budget)
    mixed_tokens = np.minimum(prompt_budget, np.maximum(np.minimum(group * isl_new, prompt_budget), p)) + 0 * b  # prompt tokens in a mixed step
    rank_share = np.minimum(p / np.maximum(mixed_tokens, 1.0), 1.0)  # share of one rank's steps that carry prompt tokens
    # attention-DP ranks step together (every MoE layer waits for all of them), so a step is mixed when ANY
    # rank prefills: 1 - (1 - s)^dp of the steps, carrying on average dp*s / that many prefilling ranks
    ranks = _f(dp) + 0 * b
    mixed_share = 1.0 - (1.0 - rank_share) ** ranks
    gate = _f(gate_iters)
    if np.any(gate > 0):
        # attention-DP balance: a rank's prompt waits up to the gate for the other ranks' prompts, so the ranks
        # prefill together: besides the first, each other rank has a prompt by then with probability
        # 1 - exp(-s gate) (its prompt steps come at rate s per step); the prompt steps of all ranks, dp*s per
        # step, then fall into dp*s / (ranks prefilling together) mixed steps
        together = 1.0 + (ranks - 1.0) * (1.0 - np.exp(-rank_share * gate))  # ranks prefilling per mixed step
        mixed_share = np.where(gate > 0, np.minimum(np.minimum(ranks * rank_share / together, 1.0), mixed_share), mixed_share)
    prefill_ranks = np.where(mixed_share > 0, ranks * rank_share / np.maximum(mixed_share, 1e-300), 1.0)
    return MixedSteps(b, p, mixed_tokens, rank_share, mixed_share, prefill_ranks, prompt_budget + 0 * b)


def _agg_steps(dp, pp, b, wl: Workload, q, al) -> tuple[StepBatch, StepBatch, AggRaw]:
    """The decode-only and the mixed step of an aggregated worker, and its :class:`AggRaw` without step times."""
    isl_new = wl.mean_isl * (1.0 - wl.prefix_hit)  # prompt tokens that need computing
    prefix = wl.mean_isl * wl.prefix_hit
    chunk = float(wl.chunk_tokens)
    b_dec = b
    ms = mixed_steps(dp, b, isl_new, wl.mean_osl, chunk, al, wl.adp_gate_iters, q if wl.decode_in_budget else 0.0)
    b, p, mixed_tokens, mixed_share, prefill_ranks = ms.batch, ms.prompt_tokens, ms.mixed_tokens, ms.mixed_share, ms.prefill_ranks
    ctx = decode_context(wl, dp, b)  # the busiest rank's mean context, running batch
    ranks = _f(dp) + 0 * b
    # the decode-only step at the batch (shared with the disaggregated decode worker of the same batch: where the
    # budget caps the running batch every step is mixed, so this step then only enters the TTFT terms)
    dec = StepBatch(decode_reqs=b_dec, decode_ctx=decode_context(wl, dp, b_dec), q_tokens=q)
    mix = StepBatch(decode_reqs=b, decode_ctx=ctx, q_tokens=q, prefill_tokens=mixed_tokens,
                    prefill_seqs=np.maximum(mixed_tokens / max(isl_new, 1.0), 1.0), prefill_prefix=prefix,
                    prefill_ranks=prefill_ranks)
    rho = np.clip(p / ms.prompt_budget, 0.0, 0.95)
    raw = AggRaw(decode_step_s=None, mixed_step_s=None, mixed_tokens=mixed_tokens, mixed_share=mixed_share,
                 batch=b, chunk=ms.prompt_budget, isl_new=isl_new, rho=rho + 0 * b, al=al,
                 osl=wl.mean_osl, slots=b * _f(dp) * _f(pp), wave_share=float(wl.startup_wave_share), ranks=ranks,
                 range_ratio=wl.length_range_ratio, recv_interval=float(wl.recv_interval_steps), micro_batches=_f(pp) + 0 * b)
    return dec, mix, raw


def worker_raw(model: Model, precision: Precision, hw: Hardware, tp, pp, dp, ep, batch, wl: Workload, specs,
               chunks=(), memo: dict | None = None, prefill_batch=None, prefill_rows=None) -> tuple:
    """:func:`decode_raw` of each of ``specs`` and :func:`aggregated_raw` of each (token budget in ``chunks``,
    speculation), from ONE step call: the decode-only step and each budget's mixed step side by side on
    the batch axis, each of them for every speculation (:class:`SpecColumns`). ``batch`` ends in its batch
    axis; the layout arrays broadcast against it with a last axis of 1. Every step is costed column by
    column exactly as the separate calls cost it. ``memo``: see :func:`simfront.step.forward_step`.

    Returns (decode_raw per speculation, {token budget: aggregated_raw per speculation}, prefill) where
    ``prefill`` is :func:`prefill_raw` (at a 1 byte/s link) for ``prefill_batch`` prompts per rank on the
    layouts ``prefill_rows`` selects (their prefill block rides in the same step call), or None."""
    cols = SpecColumns.of(specs, batch)
    b = cols.batch
    dec, _, _ = _agg_steps(dp, pp, b, wl, cols.q, cols.al)
    mixes = {c: _agg_steps(dp, pp, b, replace(wl, chunk_tokens=float(c)), cols.q, cols.al)[1:] for c in chunks}
    blocks = [dec] + [m for m, _ in mixes.values()]
    widths = [b.shape[-1]] * len(blocks)
    drafts = [(cols.k, cols.draft_layers, cols.drafts)] * len(blocks)
    pb = None
    if prefill_batch is not None:  # the prefill blocks: whole prompts, no decode requests, no drafts
        pb = _f(prefill_batch)
        # and one prompt alone on the worker (the idle worker's latency), one column
        for block in (_prefill_step(pb, wl), _lone_prefill_step(wl, pb.shape[:-1] + (1,))):
            x = _f(block.prefill_seqs)
            blocks.append(block)
            widths.append(x.shape[-1])
            drafts.append((0.0 * x, 0.0 * x, np.zeros(x.shape, dtype=bool)))

    def col(x, like):  # one block's input over that block's columns
        return _f(x) + 0 * like

    # the decode-only block carries no prompt tokens; its experts see the decode tokens of every rank. The
    # sampled requests are what forward_step's default gives (decode requests x q + prompts that finish)
    likes = [x.decode_reqs + 0 * _f(x.prefill_tokens) for x in blocks]
    step = StepBatch(decode_reqs=_cat([col(x.decode_reqs, k) for x, k in zip(blocks, likes)]),
                     decode_ctx=_cat([col(x.decode_ctx, k) for x, k in zip(blocks, likes)]),
                     q_tokens=_cat([col(x.q_tokens, k) for x, k in zip(blocks, likes)]),
                     prefill_tokens=_cat([col(x.prefill_tokens, k) for x, k in zip(blocks, likes)]),
                     prefill_seqs=_cat([col(x.prefill_seqs, k) for x, k in zip(blocks, likes)]),
                     prefill_prefix=_cat([col(x.prefill_prefix, k) for x, k in zip(blocks, likes)]),
                     prefill_ranks=_cat([col(dp if x.prefill_ranks is None else x.prefill_ranks, k) for x, k in zip(blocks, likes)]),
                     sampled=_cat([col(_default_sampled(x) if x.sampled is None else x.sampled, k) for x, k in zip(blocks, likes)]))
    blocked = SpecColumns(cols.specs, cols.nb, _cat(likes), step.q_tokens, None, _cat([d[0] for d in drafts]),
                          _cat([d[1] for d in drafts]), _cat([d[2] for d in drafts]) != 0)
    split = blocked.split(forward_step(model, precision, hw, tp, pp, dp, ep, step, **wl.step_kwargs, memo=memo), model)
    ends = np.cumsum([0] + widths)
    parts = [split[..., ends[i]:ends[i + 1]] for i in range(len(blocks))]
    slots = b * _f(dp) * _f(pp)
    micro = _f(pp) + 0 * b  # micro-batches a decode round schedules
    d_raws = [(cols.take(parts[0], i), sp.accepted_per_step, cols.take(slots, i), cols.take(b, i), cols.take(micro, i))
              for i, sp in enumerate(cols.specs)]
    aggs = {}
    for j, (c, (_, raw)) in enumerate(mixes.items()):
        # each speculation's columns of every per-column field (the rest as they are), with its own step times
        aggs[c] = [replace(raw, **{**{f.name: cols.take(getattr(raw, f.name), i) for f in fields(AggRaw)},
                                   "decode_step_s": cols.take(parts[0], i), "mixed_step_s": cols.take(parts[1 + j], i),
                                   "al": sp.accepted_per_step})
                   for i, sp in enumerate(cols.specs)]
    pre = None
    if pb is not None:
        rows = slice(None) if prefill_rows is None else prefill_rows
        t, lone = parts[-2][:, rows], parts[-1][:, rows]
        pre = _prefill_out(t, model, precision, _rows(dp, rows), _rows(pp, rows), pb, wl, 1.0, lone)
    return d_raws, aggs, pre


def _rows(x, rows):
    """Layouts ``rows`` of a layout column (arrays with the layout axis first; scalars as they are)."""
    x = _f(x)
    return x[rows] if x.ndim and x.shape[0] > 1 else x


def _default_sampled(sb: StepBatch):
    """The requests that sample a token in a step, as :func:`simfront.step.forward_step` defaults them."""
    B, q, P, nps = (_f(v) for v in (sb.decode_reqs, sb.q_tokens, sb.prefill_tokens, sb.prefill_seqs))
    return B * q + np.minimum(nps, P)


def _cat(blocks: list) -> np.ndarray:
    """Arrays side by side on the last (batch) axis, their other axes broadcast together."""
    arrs = [_f(x) for x in blocks]
    nd = max(a.ndim for a in arrs)
    arrs = [a.reshape((1,) * (nd - a.ndim) + a.shape) for a in arrs]
    lead = np.broadcast_shapes(*(a.shape[:-1] for a in arrs))
    return np.concatenate([np.broadcast_to(a, lead + a.shape[-1:]) for a in arrs], axis=-1)


def busiest_rank_context(ctx, dp, batch, isl: float, osl: float) -> np.ndarray:
    """Mean cached context per request on the busiest of ``dp`` attention-DP ranks.

    Every rank waits for the slowest at each MoE layer, so the step's attention runs at the busiest rank's
    KV. With requests spread evenly over ranks (engines balance the counts), a rank's KV is the sum of
    ``batch`` contexts, each somewhere in its decode, uniform over [ISL, ISL + OSL]: coefficient of variation
    cv = (OSL / sqrt(12)) / (ISL + OSL / 2) per request, cv / sqrt(batch) per rank. The largest of ``dp``
    such sums sits about sqrt(2 ln dp) standard deviations above the mean (Gaussian extreme-value bound).
    """
    d = _f(dp)
    cv = (osl / np.sqrt(12.0)) / max(isl + osl / 2.0, 1.0)  # one request's context spread
    z = np.sqrt(2.0 * np.log(np.maximum(d, 1.0)))  # expected-maximum multiplier over dp ranks
    return _f(ctx) * (1.0 + z * cv / np.sqrt(np.maximum(_f(batch), 1.0)))


def decode_context(wl: Workload, dp, batch) -> np.ndarray:
    """Mean cached context of a decoding request on the busiest of ``dp`` attention-DP ranks holding ``batch`` requests
    each: halfway through its output, at the workload's mean lengths (:func:`busiest_rank_context`)."""
    return busiest_rank_context(wl.mean_isl + wl.mean_osl / 2.0, dp, batch, wl.mean_isl, wl.mean_osl)


def arrival_group(batch, isl_new: float, budget_tokens) -> np.ndarray:
    """Prompts that arrive together in steady state under closed-loop clients with equal lengths.

    The prompts that shared a prefill step get their first token together, finish together and
    come back together, so a group is as many prompts as one step's token budget holds (at least
    one, at most the batch).
    """
    return np.clip(np.floor(_f(budget_tokens) / max(isl_new, 1.0)), 1.0, np.maximum(_f(batch), 1.0))


def md1_wait_s(service_s, rho) -> np.ndarray:
    """Mean wait in an M/D/1 queue (Poisson arrivals, deterministic service) at utilisation ``rho``.

    Pollaczek-Khinchine with zero service variance: W = rho * service / (2 (1 - rho)). The one
    queueing formula of simfront: an aggregated worker's token budget and a disaggregated
    deployment's prefill workers both queue by it.
    """
    r = np.clip(_f(rho), 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(r < 1.0, _f(service_s) * r / (2.0 * (1.0 - r)), np.inf)


def mean_step_s(raw: AggRaw, prof: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(decode-only engine step, mixed engine step, mean step) of an aggregated worker."""
    spec = np.asarray(raw.al) > 1.0  # speculative decoding: more than one token per verify step
    t_dec = _apply(raw.decode_step_s, prof, raw.batch, spec, raw.micro_batches)
    t_mix = _apply(raw.mixed_step_s, prof, raw.batch, spec, raw.micro_batches)
    return t_dec, t_mix, (1.0 - raw.mixed_share) * t_dec + raw.mixed_share * t_mix  # decode-only and mixed steps


def others_mixed_share(raw: AggRaw) -> np.ndarray:
    """Share of the steps between one request's tokens that carry prompt tokens: the mixed steps of the OTHER
    requests in flight on the worker. In a closed loop a request's own prompt is prefilled before its first token
    (inside its TTFT), so of the ``slots`` prompts that pass through the worker in one request's life, the
    ``slots - 1`` of the others fall between its tokens: ``mixed_share x (slots - 1) / slots``. A request alone on
    its worker decodes with no prompt beside it. (Attention-DP ranks step together, so every rank's requests count.)"""
    slots = np.maximum(_f(raw.slots), 1.0)
    return raw.mixed_share * (slots - 1.0) / slots


def finish_aggregated(raw: AggRaw, prof: dict) -> AggResult:
    """Apply an engine profile to raw step times: TTFT and TPOT of one worker at its running batch."""
    budget = raw.chunk  # prompt tokens per step: the engine's token budget less the decode tokens it carries
    t_dec, t_mix, step = mean_step_s(raw, prof)
    seen = others_mixed_share(raw)
    tpot = ((1.0 - seen) * t_dec + seen * t_mix) / raw.al  # the steps between one request's tokens, per token
    wait = 0.5 * step + md1_wait_s(step, raw.rho)  # finish the running step + M/D/1 queue for the token budget
    # prompt tokens computed before this request's first token: its own prompt, plus, for the workload's share of
    # requests that belong to a synchronised start-up wave, on average half of the rest of that wave. (The measured
    # TTFTs reject a mean-field steady-state arrival group whose prompts all stream at its end: round 37 of
    # docs/model_changes.md; the step-level simulation serves a group in arrival order.)
    wave_tokens = np.maximum(raw.batch - 1.0, 0.0) * raw.isl_new / 2.0  # half the rest of a start-up wave
    tokens = raw.isl_new + raw.wave_share * wave_tokens
    steps = np.maximum(1.0, tokens / budget)  # steps those tokens span at the token budget
    per_token = np.maximum(t_mix - t_dec, 0.0) / np.maximum(raw.mixed_tokens, 1.0)  # extra step time per prompt token
    ttft = (wait + (steps + prof["ttft_extra_steps"]) * t_dec + tokens * per_token) * prof["ttft_scale"] + prof["ttft_overhead_s"]
    # a start-up wave request's mean wait for the half of its wave ahead of it (the tokens term above, per request)
    wave_half = wave_tokens * (per_token + t_dec / budget) * prof["ttft_scale"]
    if runs_in_waves(prof, raw.range_ratio):
        ttft, tpot = _wave_latencies(raw, prof, t_dec, per_token)
        wave_half = np.zeros_like(wave_half)  # every round is a wave: the start-up one is no later than the rest
    # a request that arrives while the engine decodes waits for its next intake: half the interval on average
    ttft = ttft + 0.5 * np.maximum(raw.recv_interval - 1.0, 0.0) * t_dec
    ttft = ttft + adp_balance_wait_s(raw.ranks, raw.slots / np.maximum(ttft + (raw.osl - 1) * tpot, 1e-30), step,
                                     prof.get("adp_balance_timeout_iters", 0.0))
    e2e = ttft + (raw.osl - 1) * tpot  # one request's life: first token, then OSL - 1 decode tokens
    return AggResult(ttft, tpot, step, e2e, wave_half)


def runs_in_waves(prof: dict, range_ratio: float | None) -> bool:
    """Whether an aggregated worker of the engine profile ``prof`` serves clients of this length spread in waves
    (a prefill-first engine and fixed lengths: :func:`_wave_latencies`)."""
    return bool(prof.get("prefill_first", 0.0)) and fixed_lengths(range_ratio)


def _wave_latencies(raw: AggRaw, prof: dict, t_dec, per_token) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, TPOT) of a prefill-first engine serving closed-loop clients whose requests all have the same lengths.

    Requests that start decoding together finish together and come back together, and an engine that prefills
    every waiting prompt before it decodes again (SGLang's default) keeps them together: each round, the batch's
    prompts are prefilled in one burst of prefill-only steps, then the batch decodes OSL - 1 steps with no prompt
    tokens. A prompt's first token comes at the end of the prefill step that completes it (half the burst on
    average, plus the engine's steps to stream it), and it then waits for the rest of the burst before its next
    token (half the burst, spread over its OSL - 1 tokens). The cycle is the mixed-step form's; TTFT and TPOT
    split it differently. Lengths that vary (a random range ratio below 1) spread each wave's finish times, and
    the spread compounds from round to round, so the waves dissolve and the mixed-step form holds: on
    InferenceMAX's SGLang runs (lengths in [0.8 L, L]) even a first-order share of requests in waves,
    min(1, burst / ((1 - r) OSL decode steps)), raised TTFT MAPE from 47 to 58 % out of source.
    """
    burst = raw.batch * raw.isl_new * per_token  # prefill-only steps for every running prompt of a rank
    first_step = np.minimum(raw.chunk, raw.batch * raw.isl_new) * per_token  # one prefill step of the burst
    tpot = t_dec / raw.al + 0.5 * burst / np.maximum(raw.osl - 1.0, 1.0)  # pure decode, plus the burst's tail
    # a prompt's first token comes at the end of the prefill step that completes it: (n + 1) / 2 of n steps on average
    ttft = (0.5 * (burst + first_step) + prof["ttft_extra_steps"] * t_dec) * prof["ttft_scale"] + prof["ttft_overhead_s"]
    return ttft, tpot


EULER_GAMMA = 0.5772156649015329  # Euler-Mascheroni constant (harmonic numbers H_n ~ ln n + gamma + 1/2n - 1/12n^2)


def adp_cover_s(ranks, arrivals_per_s) -> np.ndarray:
    """Time from a round's first new prompt until every one of ``ranks`` attention-DP ranks holds one, prompts
    arriving at ``arrivals_per_s`` (all ranks together) on ranks at random: about ranks x H(ranks) arrivals
    (coupon collector), the first one not counted."""
    n = np.maximum(_f(ranks), 1.0)
    harmonic = np.log(n) + EULER_GAMMA + 0.5 / n - 1.0 / (12.0 * n * n)  # H_n, exact at n = 1 to 0.6 %
    return np.maximum(n * harmonic - 1.0, 0.0) / np.maximum(_f(arrivals_per_s), 1e-30)


def adp_balance_wait_s(ranks, arrivals_per_s, step_s, timeout_iters) -> np.ndarray:
    """Mean wait of a new prompt for attention-DP balance (TensorRT-LLM ``attention_dp_config``).

    A rank holding a new prompt waits until every one of the ``ranks`` attention-DP ranks holds one, or
    ``timeout_iters`` steps. Prompts arrive at ``arrivals_per_s`` and land on ranks at random, so all ranks hold
    one after about ranks x H(ranks) arrivals (coupon collector): the gate opens G = min(timeout, (ranks H - 1)
    / rate) after a round's first prompt. That one waits G, the lambda G that follow wait G/2 on average:
    mean wait G (1 + lambda G / 2) / (1 + lambda G). Zero with one rank or no balance.
    """
    n = np.maximum(_f(ranks), 1.0)
    lam = np.maximum(_f(arrivals_per_s), 1e-30)
    gate_s = np.minimum(_f(timeout_iters) * _f(step_s), adp_cover_s(n, lam))
    wait = gate_s * (1.0 + 0.5 * lam * gate_s) / (1.0 + lam * gate_s)
    return np.where((n > 1.0) & (_f(timeout_iters) > 0), wait, 0.0)


@dataclass
class PrefillResult:
    """A disaggregated prefill worker under an engine profile (no queueing yet: that depends on the
    deployment's load, see :func:`simfront.deployment.evaluate_disagg`)."""

    ttft_base_s: np.ndarray  # TTFT of a prompt that finds the worker idle: its prefill alone + KV transfer, profile applied
    prefill_s: np.ndarray  # one prefill step of a busy worker (its batch of prompts; prefill_scale applied)
    transfer_s: np.ndarray  # KV of one prompt over the link to its decode worker
    requests_s_worker: np.ndarray  # prompts per second one worker completes when always busy
    ttft_scale: float  # the profile's TTFT scale (the idle-worker latency; the queue waits on prefill_s)
    # what a prompt's own prefill takes beyond ``ttft_base_s`` when it shares a busy worker's step with the rest of the
    # worker's batch (the batch step minus the lone prompt's step, TTFT scale applied): 0 for a worker of one
    # prompt per step; on an attention-DP worker the other ranks' prompts add expert tokens and all-to-all traffic
    shared_extra_s: np.ndarray


def prefill_raw(model: Model, precision: Precision, hw: Hardware, tp, pp, dp, ep, batch, wl: Workload, link_bytes_per_s,
                memo: dict | None = None, chunk_tokens: float | None = None) -> tuple:
    """(step seconds for ``batch`` prompts per DP rank, KV transfer seconds, prompts per step per worker, step seconds
    of one prompt alone on the worker: :func:`finish_prefill`'s arguments before the profile).

    ``chunk_tokens``: the server's token budget per step per attention-DP rank where it is below a prompt (an engine
    that prefills a long prompt in chunks: SGLang's ``--chunked-prefill-size`` over its attention-DP size,
    TensorRT-LLM's ``max_num_tokens`` with chunked context); the "steps" are then the chunk steps that prefill the
    batch's prompts (:func:`prefill_chunks`). None: whole prompts in one step, as the search prices its workers (its
    launch lines set the budget to the batch's prompts)."""
    b = _f(batch)
    busy_n, lone_n = prefill_chunks(wl, chunk_tokens)
    t = busy_n * _split(forward_step(model, precision, hw, tp, pp, dp, ep, _prefill_step(b, wl, chunks=busy_n),
                                     **wl.step_kwargs, memo=memo), model, NO_SPEC)
    lone = lone_n * _split(forward_step(model, precision, hw, tp, pp, dp, ep, _lone_prefill_step(wl, chunks=lone_n),
                                        **wl.step_kwargs, memo=memo),
                           model, NO_SPEC, pipelined=False)  # a prompt alone passes the stages once
    return _prefill_out(t, model, precision, dp, pp, b, wl, link_bytes_per_s, lone)


def prefill_chunks(wl: Workload, chunk_tokens: float | None) -> tuple[float, float]:
    """Steps a prompt's prefill takes on a server whose per-rank token budget is ``chunk_tokens``: (on a busy server,
    which fills every step's budget with the next prompt's first chunk, so a prompt takes new tokens / budget steps;
    alone, whole chunks of the budget: the ceiling). (1, 1) where the prompt fits one step or no budget is given."""
    isl_new = wl.mean_isl * (1.0 - wl.prefix_hit)  # prompt tokens to prefill
    if chunk_tokens is None or not chunk_tokens < isl_new:
        return 1.0, 1.0
    return isl_new / float(chunk_tokens), float(np.ceil(isl_new / float(chunk_tokens)))


def _prefill_step(b: np.ndarray, wl: Workload, ranks=None, chunks: float = 1.0) -> StepBatch:
    """A prefill worker's step: ``b`` whole prompts per attention-DP rank (on ``ranks`` of them; default all), or with
    ``chunks`` > 1 one of the ``chunks`` equal chunk steps that prefill them. A chunk attends to the chunks before it
    (the prefix grows by a chunk per step), so the chunk steps' mean prefix, half of the prompt less one chunk, makes
    their attention work add up to the whole prompt's; only the last chunk samples a token."""
    isl_new = wl.mean_isl * (1.0 - wl.prefix_hit)  # prompt tokens to prefill
    chunk = isl_new / chunks  # new tokens of one prompt in one step
    prefix = wl.mean_isl * wl.prefix_hit + (isl_new - chunk) / 2.0  # cached tokens a chunk attends to, on average
    return StepBatch(decode_reqs=0, prefill_tokens=b * chunk, prefill_seqs=b, prefill_prefix=prefix, sampled=b / chunks,
                     prefill_ranks=ranks)


def _lone_prefill_step(wl: Workload, shape: tuple = (), chunks: float = 1.0) -> StepBatch:
    """The step of a prompt that finds its prefill worker idle: that prompt alone, on one attention-DP rank (the
    other ranks have nothing to prefill, and the experts see only its tokens); arrays of ``shape``."""
    return _prefill_step(np.ones(shape), wl, ranks=1.0, chunks=chunks)


def _prefill_out(t, model: Model, precision: Precision, dp, pp, b, wl: Workload, link_bytes_per_s, lone) -> tuple:
    """:func:`prefill_raw`'s result from its step split ``t`` and the lone prompt's step split ``lone``."""
    kv = kv_bytes_per_token(model, precision.kv) * wl.mean_isl  # KV of one prompt, all layers
    transfer = kv / _f(link_bytes_per_s)  # streamed to the decode worker
    return t, transfer + 0 * t[0], b * _f(dp) * _f(pp), lone


def finish_prefill(t_raw, transfer, slots, lone_raw, prof: dict) -> PrefillResult:
    """A prefill worker under the profile ``prof`` from :func:`prefill_raw`'s result: ``t_raw`` the step of its batch,
    ``lone_raw`` the step of one prompt alone on it."""
    t = _apply(t_raw, prof)
    lone = _apply(lone_raw, prof)
    # an idle worker starts the prompt at once, alone, after the disaggregated hand-off
    ttft = (lone + transfer) * prof["ttft_scale"] + prof["ttft_overhead_s"] + prof.get("disagg_overhead_s", 0.0)
    busy = t * prof.get("prefill_scale", 1.0)  # a busy worker's time per batch of prompts
    shared = np.maximum(t - lone, 0.0) * prof["ttft_scale"]  # the prompt's own step, when the batch shares it
    return PrefillResult(ttft, busy, transfer, slots / busy, prof["ttft_scale"], shared + 0 * ttft)


@dataclass
class DecodeResult:
    tpot_s: np.ndarray
    step_s: np.ndarray  # one engine decode step (drafts and verification included)
    capacity_requests_s: np.ndarray  # requests/s one worker finishes with every slot busy decoding


def decode_raw(model: Model, precision: Precision, hw: Hardware, tp, pp, dp, ep, batch, wl: Workload,
               spec: Speculation = NO_SPEC) -> tuple:
    """(raw step seconds, tokens per step, requests in flight per worker, requests per rank, micro-batches per step)."""
    b = _f(batch)
    sb = StepBatch(decode_reqs=b, decode_ctx=decode_context(wl, dp, b), q_tokens=spec.k + 1)
    st = forward_step(model, precision, hw, tp, pp, dp, ep, sb, **wl.step_kwargs)
    return _split(st, model, spec), spec.accepted_per_step, b * _f(dp) * _f(pp), b, _f(pp) + 0 * b


def finish_decode(step_raw, al, slots, batch, micro_batches, osl, prof: dict) -> DecodeResult:
    step = _apply(step_raw, prof, batch, np.asarray(al) > 1.0, micro_batches)
    tpot = step / al
    cap = slots / (tpot * max(osl - 1, 1))  # slots / time a request holds one (Little's law)
    return DecodeResult(tpot, step, cap)


def usd_per_mtok(price_usd_per_gpu_hour: float, tok_s_per_gpu) -> np.ndarray:
    """Dollars per million output tokens at a GPU-hour price."""
    with np.errstate(divide="ignore"):
        return price_usd_per_gpu_hour / (np.asarray(tok_s_per_gpu) * 3600.0 / 1e6)

"""One forward step of a serving engine: the op list per layer kind and phase, and its time.

A step runs, on every GPU of a worker, the decode tokens of the requests on that attention-DP
rank plus an optional prefill chunk (continuous batching with chunked prefill). All inputs are
numpy arrays that broadcast, so one call costs thousands of configurations.

Overlap assumption: ops run back to back; communication is not overlapped with compute (the serving
calibration's per-engine factors absorb what engines overlap on average). Two-batch overlap (SGLang
``--enable-two-batch-overlap``, vLLM ``--enable-dbo``), which an engine runs only when it is switched on, is the
exception: ``forward_step(..., two_batch_overlap=True)`` splits an attention-DP + EP step into two micro-batches
whose all-to-all hides behind the other's compute (:func:`two_batch_overlap_step`).

Pipeline parallelism: a token passes all ``pp`` stages, so the step latency sums every layer plus
the stage-to-stage sends; each GPU only computes ``1/pp`` of the layers. With ``pp`` micro-batches in
flight a stage serves each of them in turn, so the busiest stage sets the pace (``serving.pipeline_round``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .attention import attention_decode_cost, attention_prefill_cost
from .comm import collective_cost, engine_allreduce_cost, p2p_cost
from . import efficiency, kernels
from .cost import _FIELDS as _COST_FIELDS
from .cost import Cost
from .elementwise import memory_op_cost
from .errors import SimfrontError
from .fusion import fused as allreduce_norm_fused
from .gemm import gemm_cost
from .hardware import Hardware
from .linear_attention import linear_attention_decode_cost, linear_attention_prefill_cost
from .mla import dsa_indexer_cost, mla_decode_cost, mla_prefill_cost
from .models import Model, Precision
from .moe import moe_cost
from .precision import kv_bytes
from .scheduler import TWO_BATCH_OVERLAP_SPLIT

ACT_BYTES = 2.0  # BF16 activations between ops
DISPATCH_BYTES = 1.0  # EP dispatch sends FP8 activations (DeepEP low-latency; modeling-notes §3)
COMBINE_BYTES = 2.0  # EP combine returns BF16
LOGIT_BYTES = 4.0  # FP32 logits
# memory-bound ops that carry no weights (norms, activations, RoPE, embedding lookup, sampling): their FLOPs are
# neither weight nor attention FLOPs in a step's accounting (explain's breakdown, the FLOP-invariance tests)
ELEMENTWISE_OPS = ("norms+residual", "mla.latent_norms", "rope+kv_write", "mlp.act", "moe.shared_act", "embedding",
                   "final_norm", "sampling")
# Routing skew of real traffic: power-law exponent of tokens over experts, the "typical production"
# alpha aiconfigurator collects MoE kernels under (docs/POWER_LAW_DISTRIBUTION.md, modeling-notes §1.8).
DEFAULT_ROUTING_ALPHA = 1.01
# most skewed power-law routing exponent accepted (the calibration kernels' skewed rows use 1.01-1.2; beyond a
# few, one expert takes nearly every token)
MAX_ROUTING_ALPHA = 5.0
# Fewest layouts on a step's layout axis for which its ops are costed once per group of layouts with equal
# inputs (LayoutRows); below it every op runs over every layout (the plain path, same results)
LAYOUT_GROUPING_MIN_LAYOUTS = 2


@dataclass
class StepBatch:
    """What one attention-DP rank processes in a step (arrays broadcast)."""

    decode_reqs: object = 0  # decode requests on the rank
    decode_ctx: object = 1  # mean cached context of those requests (tokens)
    q_tokens: object = 1  # tokens verified per decode request (1 + speculative drafts)
    prefill_tokens: object = 0  # new prompt tokens in this step (a chunk, or whole prompts)
    prefill_seqs: object = 0  # how many sequences those prompt tokens belong to
    prefill_prefix: object = 0  # cached prefix each prefill sequence attends to (chunked prefill, prefix cache)
    sampled: object | None = None  # requests that sample a token (default: decode reqs*q + prefill seqs)
    # attention-DP ranks that carry the prefill tokens (default: all). The op list is the busiest rank's
    # (it sets the step: every rank waits for it at each MoE layer); the experts see the decode tokens of
    # every rank plus the prompt tokens of this many ranks.
    prefill_ranks: object | None = None


class LayoutRows:
    """Distinct layouts an op's inputs take, so an op is costed once per distinct input row.

    In a search, ``forward_step`` gets layout columns of shape (layouts, 1) beside batch arrays; most
    ops read few of them (a dense GEMM the TP degree alone), so of 1,000 layouts a GEMM sees 7
    distinct rows, attention a few dozen and an MoE op a few hundred. For each op the coarsest
    grouping of the layouts (by TP; by TP and attention-DP; by TP, attention-DP and EP) under which
    every array input with the layout axis (axis 0, length ``n``) is the same within each group is
    found by checking those inputs (not assumed); the op is costed on one layout per group and its
    :class:`OpRow` keeps the index (``rows``) that expands it back. Every cost model is elementwise,
    so identical inputs give identical outputs: the results are unchanged. When the step's tokens per
    decode request are one per layout (step tables of several speculation settings), they group right
    after TP (by TP; by TP and q; ...), the pair a GEMM's token count and width follow.
    """

    def __init__(self, nd: int, n: int, columns: list[np.ndarray]):
        self.nd, self.n = nd, n  # dimensions of the step's broadcast shape; length of its layout axis
        self._columns = [np.broadcast_to(c, (n,) + c.shape[1:]).reshape(n, -1)[:, 0] for c in columns]  # coarse to fine
        self._levels: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
        self._checked: dict[int, tuple] = {}  # id(array) -> (array, coarsest level it is constant on)
        self._maps: dict[tuple, np.ndarray] = {}

    def has_axis(self, x) -> bool:
        return isinstance(x, np.ndarray) and x.ndim == self.nd and x.shape[0] == self.n

    def _level(self, i: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(first layout of each group, group of each layout) grouping by the first ``i + 1`` columns."""
        if i not in self._levels:
            key = np.stack(self._columns[: i + 1], axis=1)
            _, rep, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
            self._levels[i] = None if rep.size == self.n else (rep, inv.reshape(-1))
        return self._levels[i]

    def _constant_level(self, a: np.ndarray) -> int | None:
        """The coarsest grouping under which ``a`` is the same within every group (None: none is).

        A few sampled columns reject a grouping cheaply; the grouping that passes them is then checked
        exactly, element by element. NaN never compares equal, so an array holding NaN is simply not
        reduced."""
        hit = self._checked.get(id(a))
        if hit is not None:
            return hit[1]
        flat = a.reshape(self.n, -1)
        m = flat.shape[1]
        proj = flat[:, 0] if m == 1 else flat[:, sorted({0, m // 3, 2 * m // 3, m - 1})]
        level = None
        for i in range(len(self._columns)):
            lv = self._level(i)
            if lv is None:
                break
            rep, inv = lv
            if np.array_equal(proj[rep][inv], proj) and (m == 1 or np.array_equal(flat[rep][inv], flat)):
                level = i
                break
        self._checked[id(a)] = (a, level)  # the array is kept alive so that its id is not reused
        return level

    def reduce(self, args) -> tuple[int, np.ndarray, np.ndarray] | None:
        """(grouping level, representative layout per group, group of each layout) for an op reading
        ``args``; None when no input has the layout axis or no grouping holds them constant."""
        level = -1
        for a in args:
            if self.has_axis(a):
                lv = self._constant_level(a)
                if lv is None:
                    return None
                level = max(level, lv)
        return None if level < 0 else (level, *self._level(level))

    def finest(self) -> int | None:
        """The finest grouping level that still groups layouts (None: every layout is distinct)."""
        top = None
        for i in range(len(self._columns)):
            if self._level(i) is None:
                break
            top = i
        return top

    def to_level(self, i: int, j: int) -> np.ndarray:
        """Group of level ``i`` that each group of the finer level ``j`` lies in (the groupings nest)."""
        key = ("map", i, j)
        if key not in self._maps:
            self._maps[key] = self._level(i)[1][self._level(j)[0]]
        return self._maps[key]

    def take(self, x, rep: np.ndarray):
        return x[rep] if self.has_axis(x) else x


class OpRow:
    """One op of a step: ``count`` calls of ``cost`` per step.

    With ``rows`` set (a search over many layouts, see :class:`LayoutRows`), the op was costed over
    ``n_rows`` distinct layout rows only (``cost_rows``) and ``rows`` maps every layout to its row;
    ``cost`` is the op's cost over every layout either way."""

    __slots__ = ("name", "group", "count", "cost_rows", "replicated", "rows", "n_rows", "nd", "level")

    def __init__(self, name: str, group: str, count, cost: Cost, replicated: bool = False,
                 rows: np.ndarray | None = None, n_rows: int = 0, nd: int = 0, level: int = -1):
        self.name = name
        self.group = group  # layer group or "model"
        self.count = count  # times per step (layers of the group)
        self.cost_rows = cost
        self.replicated = replicated  # every TP rank computes the whole op (not split)
        self.rows, self.n_rows, self.nd = rows, n_rows, nd
        self.level = level  # the LayoutRows grouping level of ``rows``

    def expand(self, x):
        """An array of this op over its distinct layout rows, back over every layout."""
        if self.rows is None:
            return x
        x = np.asarray(x)
        return x[self.rows] if x.ndim == self.nd and x.shape[0] == self.n_rows else x

    @property
    def cost(self) -> Cost:
        """The op's cost over every layout."""
        c = self.cost_rows
        if self.rows is None:
            return c
        return Cost(*(self.expand(getattr(c, n)) for n in _COST_FIELDS), kernel=c.kernel)


# GEMMs whose input is the output of an RMSNorm (the layer's input or post-attention norm, MLA's latent norms) or of
# the gated activation: the kernels an engine fuses the GEMM's activation quantization into (gemm.FUSED_QUANT_CLASSES).
# The attention output projection reads the attention kernel's output (vLLM's fuse_attn_quant is off by default) and
# MLA's kv_b_proj a cached latent, so they keep their quantize pass.
NORM_OR_ACT_INPUT = frozenset({
    # the normalized hidden state (or MLA's normalized query latent)
    "attn.qkv_proj", "linear_attn.qkv_proj", "linear_attn.gates", "linear_attn.gate_down", "mla.q_proj", "mla.q_a_proj",
    "mla.kv_a_proj", "mla.q_b_proj", "mla.output_gate", "dsa.indexer_proj", "mlp.gate_up", "moe.shared_gate_up",
    "moe.latent_down",
    # the gated activation's output
    "mlp.down", "moe.shared_down",
})


@dataclass
class StepCost:
    ops: list[OpRow] = field(default_factory=list)
    layout: LayoutRows | None = None  # the layout groupings the ops were costed on (None: every op over every layout)
    pp: np.ndarray | float = 1.0  # pipeline stages of each layout (the step sums all of them: serving.pipeline_round)

    def total(self, attr: str = "time_s") -> np.ndarray:
        out = 0.0
        for r in self.ops:
            out = out + np.asarray(r.count) * r.expand(getattr(r.cost_rows, attr))
        return np.asarray(out)

    @property
    def time_s(self) -> np.ndarray:
        return self.total("time_s")

    def _legs(self, r: OpRow) -> tuple[np.ndarray, np.ndarray]:
        """(roofline, fixed) seconds of one call of an op, over its distinct layout rows."""
        c = r.cost_rows
        # a collective stays on the critical path whole: its latency is a synchronisation among GPUs (barriers,
        # protocol round trips, NIC hops) that CUDA graphs and programmatic dependent launch do not shorten;
        # a kernel's dominant leg is its roofline part, the rest (launch, fill, tail) what the engine may hide
        leg = np.where(c.network_s > 0, c.time_s, np.minimum(np.maximum(c.compute_s, c.memory_s), c.time_s))
        return leg, c.time_s - leg

    def parts(self, r: OpRow) -> tuple[np.ndarray, np.ndarray]:
        """(roofline, fixed) seconds of one op row, counts applied."""
        leg, rest = self._legs(r)
        n = np.asarray(r.count)
        if r.rows is not None and n.ndim == r.nd and n.shape[0] == r.rows.size:  # the count varies over layouts
            return n * r.expand(leg), n * r.expand(rest)
        return r.expand(n * leg), r.expand(n * rest)  # the same products, on the op's distinct rows

    def _coarse_parts(self, r: OpRow, top: int, rep: np.ndarray):
        """:meth:`parts` on the groups of grouping level ``top`` (the same products), or None when the op
        or its count varies within those groups."""
        lay = self.layout
        leg, rest = self._legs(r)
        if r.rows is None:
            if leg.ndim == lay.nd and leg.shape[0] == lay.n or rest.ndim == lay.nd and rest.shape[0] == lay.n:
                return None  # costed over every layout
        elif r.level > top:
            return None
        else:
            to = lay.to_level(r.level, top)
            leg = leg[to] if leg.ndim == r.nd and leg.shape[0] == r.n_rows else leg
            rest = rest[to] if rest.ndim == r.nd and rest.shape[0] == r.n_rows else rest
        n = np.asarray(r.count)
        if lay.has_axis(n):
            lv = lay._constant_level(n)
            if lv is None or lv > top:
                return None
            n = n[rep]
        return n * leg, n * rest

    def sums(self, head: tuple[str, ...] = ()) -> tuple:
        """(roofline sum, fixed sum, layers, head) of the ops in order: ``layers`` is the pair of running
        sums where the first model-edge op starts (the layers' own sums when every layer op comes first;
        None when a layer op follows a model-edge op) and ``head`` the pair of sums over the model-edge
        ops named ``head``.

        Every element gets the same additions in the same order as :meth:`split`. Over many layouts the
        sums run on the finest layout grouping (:class:`LayoutRows`), one value per group, for as long as
        every op and its count are the same within each group, and over every layout from the first op
        that is not (the pipeline send, whose count follows the PP degree)."""
        lay = self.layout
        top = None if lay is None else lay.finest()
        coarse = top is not None
        rep, inv = lay._level(top) if coarse else (None, None)

        def full(x):  # a coarse sum over every layout
            x = np.asarray(x)
            return x[inv] if x.ndim == lay.nd and x.shape[0] == rep.size else x

        roof, extra = 0.0, 0.0
        layers = None
        in_order = True
        hd = [0.0, 0.0]
        for r in self.ops:
            if r.group == "model" and layers is None:
                layers = [roof, extra]
            elif r.group != "model" and layers is not None:
                in_order = False
            parts = self._coarse_parts(r, top, rep) if coarse else None
            if parts is None:
                if coarse:  # from here on over every layout
                    roof, extra, hd = full(roof), full(extra), [full(hd[0]), full(hd[1])]
                    layers = None if layers is None else [full(layers[0]), full(layers[1])]
                    coarse = False
                parts = self.parts(r)
            roof = roof + parts[0]
            extra = extra + parts[1]
            if r.group == "model" and r.name in head:
                hd[0] = hd[0] + parts[0]
                hd[1] = hd[1] + parts[1]
        if layers is None:
            layers = [roof, extra]
        if coarse:
            roof, extra, hd = full(roof), full(extra), [full(hd[0]), full(hd[1])]
            layers = [full(layers[0]), full(layers[1])]
        return np.asarray(roof), np.asarray(extra), (layers if in_order else None), hd

    def op_parts(self, name: str) -> tuple:
        """(roofline, fixed) seconds of the ops called ``name``, counts applied (0.0 when there is none)."""
        roof, extra = 0.0, 0.0
        for r in self.ops:
            if r.name == name:
                leg, rest = self.parts(r)
                roof, extra = roof + leg, extra + rest
        return roof, extra

    def split(self) -> tuple[np.ndarray, np.ndarray]:
        """(roofline part, fixed/latency part) of the step time.

        The roofline part sums each op's dominant leg (compute, memory or network time); the rest
        (launch latency, pipeline fill, tail effects) is what CUDA graphs, programmatic dependent
        launch and kernel fusion in a serving engine partly hide (see serving.engine_profile).
        """
        roof, extra, _, _ = self.sums()
        return roof, extra

    @property
    def flops(self) -> np.ndarray:
        """FLOPs one GPU executes in the step (replicated work included)."""
        return self.total("flops")

    def model_flops(self, tp, dp) -> np.ndarray:
        """Useful FLOPs of the whole worker for one step: split ops x tp, replicated ops once, x dp ranks."""
        out = 0.0
        for r in self.ops:
            mult = 1.0 if r.replicated else np.asarray(tp, dtype=float)
            out = out + np.asarray(r.count) * r.expand(r.cost_rows.flops) * mult
        return np.asarray(out) * np.asarray(dp, dtype=float)


def routing_alpha_of(skew, name: str = "--routing-skew") -> float | None:
    """The power-law exponent a routing skew names (``balanced``: None, tokens spread evenly over the experts; a number:
    that exponent); the production-typical one where none is given. ``name``: how the caller's input is spelled."""
    bad = f"{name} {skew!r}: give balanced or a power-law exponent in (0, {MAX_ROUTING_ALPHA:g}]"
    if skew is None:
        return DEFAULT_ROUTING_ALPHA
    if isinstance(skew, str) and skew.strip().lower() == "balanced":
        return None
    try:
        a = float(skew)
    except (TypeError, ValueError):
        raise SimfrontError(bad) from None
    if not (np.isfinite(a) and 0.0 < a <= MAX_ROUTING_ALPHA):
        raise SimfrontError(bad)
    return a


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


_GROUPS: dict[int, tuple] = {}  # id(arch) -> (arch, its layer groups): the architectures are immutable


def _groups(arch) -> list:
    """``arch.groups()`` as (layer kind, layers) pairs, computed once per architecture."""
    hit = _GROUPS.get(id(arch))
    if hit is None or hit[0] is not arch:
        hit = _GROUPS[id(arch)] = (arch, list(arch.groups().items()))
    return hit[1]


def _memo_key(fn, args: tuple, kw: dict):
    """A key equal for two op calls exactly when they cost the same function on the same values (arrays
    by shape, dtype and bytes); None when an argument is neither plain data nor an array."""
    def one(x):
        if isinstance(x, np.ndarray):
            return ("a", x.shape, x.dtype.str, x.tobytes())
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, Hardware):
            return ("hw", id(x))
        return _UNKEYED
    key = (fn, tuple(one(a) for a in args), tuple(sorted((k, one(v)) for k, v in kw.items())))
    return None if _UNKEYED in key[1] or any(v is _UNKEYED for _, v in key[2]) else key


_UNKEYED = object()  # an argument a memo key cannot hold


def mla_native_mask(rule: tuple, hw, attention, tp, dp):
    """Where an engine's MLA decode runs ``hw``'s native kernel, by the engine's ``rule`` ((platforms), (KV heads per
    rank)) for the layouts ``tp`` x ``dp``: the heads are counted over attention TP x attention DP, as SGLang counts
    them over its --tp-size (its ROCm aiter backend takes 16 or 128; other counts run the Triton kernel that
    hardware/kernels.yaml prices as the mla_decode fallback). None (the platform's own kernel everywhere) where the rule
    does not cover ``hw``."""
    if not rule or kernels.platform_of(hw) not in rule[0]:
        return None
    per_rank = attention.n_kv_heads / (_f(tp) * _f(dp))  # KV heads over the engine's TP size
    return np.isin(per_rank, np.asarray(rule[1], dtype=np.float64))


def mla_fallback_reason(rule: tuple, hw, attention, tp: int, dp: int) -> str | None:
    """Why one layout (``tp`` x ``dp``) decodes MLA with the fallback kernel under the engine's ``rule``
    (:func:`mla_native_mask`), in words; None where it runs the native kernel or the rule does not cover ``hw``."""
    mask = mla_native_mask(rule, hw, attention, tp, dp) if attention.kind == "mla" else None
    if mask is None or bool(np.all(mask)):
        return None
    return (f"this engine release decodes MLA with the native kernel on {hw.id} only at "
            f"{' or '.join(map(str, rule[1]))} KV heads per rank over attention TP x attention DP "
            f"(simfront/engines/scheduler.yaml mla_native_heads), and this layout has "
            f"{attention.n_kv_heads / (tp * dp):g} ({attention.n_kv_heads} over {tp * dp}), so it runs Triton's MLA decode, "
            "the hardware/kernels.yaml mla_decode fallback")


def forward_step(model: Model, precision: Precision, hw: Hardware, tp, pp, dp, ep, batch: StepBatch,
                 routing_alpha: float | None = DEFAULT_ROUTING_ALPHA, memo: dict | None = None,
                 two_batch_overlap: bool | tuple | None = None, allreduce_norm_fusion: tuple = (),
                 mla_native_heads: tuple = ()) -> StepCost:
    """Per-GPU op list of one step, with time, FLOPs and bytes of each op (per rank, all layers).

    ``memo``: a dict shared by step calls that may repeat ops (a search's precisions that differ only in
    the KV-cache format run the same GEMMs, experts and collectives): an op called again with the same
    function, the same input values and the same efficiency overrides in force takes the cost computed
    the first time (the caller keeps the hardware object alive while the dict lives, and drops the dict
    when the efficiency files themselves may change). ``two_batch_overlap``: the engine runs two-batch overlap
    (:func:`two_batch_overlap_step`) wherever the step has an all-to-all and is large enough to split: True for the
    least split (``scheduler.TWO_BATCH_OVERLAP_SPLIT``), or the engine's thresholds (decode tokens above, prompt tokens above, decode requests
    at least; :attr:`simfront.serving.Workload.overlap`); None or False: off. ``allreduce_norm_fusion``: the engine's
    rules for running a TP all-reduce and the RMSNorm after it as one kernel (:mod:`simfront.fusion`,
    :attr:`simfront.serving.Workload.allreduce_norm_fusion`); () for none. ``mla_native_heads``: the engine's rule
    for where its MLA decode runs the platform's native kernel (:func:`mla_native_mask`); () for everywhere."""
    if two_batch_overlap is not None and two_batch_overlap is not False:
        split_at = TWO_BATCH_OVERLAP_SPLIT if two_batch_overlap is True else tuple(two_batch_overlap)
        return two_batch_overlap_step(model, precision, hw, tp, pp, dp, ep, batch, routing_alpha, memo, split_at,
                                      allreduce_norm_fusion, mla_native_heads)
    arch = model.arch
    tp, pp, dp, ep = (_f(x) for x in (tp, pp, dp, ep))
    B = _f(batch.decode_reqs)
    ctx = _f(batch.decode_ctx)
    q = _f(batch.q_tokens)
    P = _f(batch.prefill_tokens)
    nps = _f(batch.prefill_seqs)
    prefix = _f(batch.prefill_prefix)
    seq = np.where(nps > 0, P / np.maximum(nps, 1), 0.0)  # new tokens per prefill sequence
    T = B * q + P  # tokens through the dense parts of the model on this rank
    has_dec = B > 0
    has_pre = P > 0
    # Prefill attention kernels run over whole sequences. A mean-field step may carry a fraction of
    # one prompt (p tokens per step of a prompt of seq tokens): cost one sequence and count the
    # fraction, i.e. the prompt's attention work spread over the steps that share it.
    pre_seqs = np.maximum(nps, 1.0)  # sequences a prefill kernel call covers
    pre_share = has_pre * np.where(nps < 1.0, nps, 1.0)  # calls per step (a fraction when nps < 1)
    Bd = np.maximum(B, 1.0)  # decode kernels are costed at >= 1 request and counted only when present
    H = arch.hidden
    st = StepCost(pp=pp)
    kvb = kv_bytes(precision.kv)

    # ops are costed once per distinct layout row of their inputs when the step spans many layouts
    shape = np.broadcast_shapes(*(x.shape for x in (B, ctx, q, P, nps, prefix)),
                                *(np.shape(x) for x in (batch.sampled, batch.prefill_ranks) if x is not None))
    lay_shape = np.broadcast_shapes(tp.shape, pp.shape, dp.shape, ep.shape)
    full = np.broadcast_shapes(shape, lay_shape)
    rows = None
    if lay_shape and len(lay_shape) == len(full) and lay_shape[0] == full[0] >= max(LAYOUT_GROUPING_MIN_LAYOUTS, 2):
        columns = [tp, dp, ep]
        if q.ndim == len(full) and q.shape[0] == full[0] and q.size == full[0]:
            # tokens per decode request set per layout (several speculation settings in one step): the token counts
            # of every GEMM and most other ops follow (TP, q), so q groups right after TP
            columns = [tp, q, dp, ep]
        rows = st.layout = LayoutRows(len(full), full[0], columns)

    profile_key = None if memo is None else efficiency.override_key()  # the fitted parameters in force

    def cost_of(fn, args, kw):
        key = None if memo is None else _memo_key(fn, args, kw)
        key = None if key is None else (profile_key, key)
        if key is not None and key in memo:
            return memo[key]
        cost = fn(*args, **kw)
        if key is not None:
            memo[key] = cost
        return cost

    def op(name, group, count, fn, *args, replicated=False, **kw):
        """Cost ``fn(*args, **kw)`` (over the distinct layout rows of its inputs) as ``count`` calls per step."""
        red = None if rows is None else rows.reduce(args + tuple(kw.values()))
        if red is None:
            st.ops.append(OpRow(name, group, count, cost_of(fn, args, kw), replicated))
            return
        level, rep, inv = red
        cost = cost_of(fn, tuple(rows.take(a, rep) for a in args), {k: rows.take(v, rep) for k, v in kw.items()})
        st.ops.append(OpRow(name, group, count, cost, replicated, inv, int(rep.size), rows.nd, level))

    def gemm(name, group, count, m, n, k, fmt, replicated=False):
        # serving engines run per-tensor FP8 with the checkpoint's static activation scale, write a norm's or gated
        # activation's output already quantized for the GEMM after it (gemm.gemm_cost, gemm.FUSED_QUANT_CLASSES), and run
        # the GEMM tactics their autotuners chose (gemm.served_values)
        op(name, group, count, gemm_cost, m, n, k, fmt, hw, replicated=replicated, static_act_scale=True,
           fused_act_quant=name in NORM_OR_ACT_INPUT, served=True)

    def allreduce(name, group, count, tokens, width):
        msg = tokens * width * ACT_BYTES  # one BF16 activation row per token
        op(name, group, count * (tp > 1), engine_allreduce_cost, msg, tp, hw)

    # where the engine runs a TP all-reduce and the residual add + RMSNorm after it as one kernel, per layout
    ar_norm = allreduce_norm_fused(allreduce_norm_fusion, arch, hw, tp, dp, T, T * H * ACT_BYTES)
    for layer, n in _groups(arch):
        g = f"{layer.mixer}/{layer.ffn}" + (f"/idx-{layer.indexer}" if layer.indexer else "")
        # two fused residual-add + RMSNorm kernels per layer (before the mixer, before the FFN): each reads the
        # residual and the update and writes both back. At TP > 1 each follows an all-reduce (the mixer's, and the
        # FFN's, which a MoE layer with attention-DP replaces by its all-to-all combine); where the engine fuses those
        # norms into the all-reduce kernel they leave the op list (their bytes and launches)
        after_allreduce = 1.0 + (1.0 if layer.ffn == "dense" else (dp <= 1))  # norms per layer that follow an all-reduce
        op("norms+residual", g, n * (2.0 - ar_norm * after_allreduce), memory_op_cost, 2 * T * H * ACT_BYTES, hw,
           flops=5 * T * H, replicated=True)
        # ---------------- token mixer ----------------
        if layer.mixer == "linear":
            la = arch.linear
            width = (2 * la.n_k_heads * la.head_k_dim + la.n_v_heads * la.head_v_dim) / tp
            gemm("linear_attn.qkv_proj", g, n, T, width, H, precision.attention)
            if la.kind == "gdn":  # output gate z (full width) + beta and decay per value head
                gemm("linear_attn.gates", g, n, T, (la.n_v_heads * la.head_v_dim + 2 * la.n_v_heads) / tp, H, precision.attention)
            else:  # KDA: decay gate f (full rank or low rank), low-rank output gate g, beta per head
                f_full = la.n_k_heads * la.head_k_dim if la.full_rank_gate else 0
                gemm("linear_attn.gates", g, n, T, (f_full + la.n_v_heads) / tp, H, precision.attention)
                down = (0 if la.full_rank_gate else la.head_k_dim) + la.head_v_dim
                gemm("linear_attn.gate_down", g, n, T, down, H, precision.attention, replicated=True)
                up_f = 0 if la.full_rank_gate else la.n_k_heads * la.head_k_dim
                gemm("linear_attn.gate_up", g, n, T, (up_f + la.n_v_heads * la.head_v_dim) / tp, la.head_v_dim, precision.attention)
            op("linear_attn.decode", g, n * has_dec, linear_attention_decode_cost,
                Bd, la.n_v_heads / tp, la.head_k_dim, la.head_v_dim, hw, conv_dim=la.conv_channels / tp, conv_kernel=la.conv_kernel, q_tokens=q)
            op("linear_attn.prefill", g, n * pre_share, linear_attention_prefill_cost,
                pre_seqs, np.maximum(seq, 1), la.n_v_heads / tp, la.head_k_dim, la.head_v_dim, hw)
            gemm("linear_attn.o_proj", g, n, T, H, la.n_v_heads * la.head_v_dim / tp, precision.attention)
        elif arch.attention.kind == "mla":
            a = arch.attention
            heads = a.n_heads / tp
            qk = a.qk_nope_dim + a.qk_rope_dim
            if a.q_lora_rank:
                gemm("mla.q_a_proj", g, n, T, a.q_lora_rank, H, precision.attention, replicated=True)
                gemm("mla.q_b_proj", g, n, T, heads * qk, a.q_lora_rank, precision.attention)
            else:
                gemm("mla.q_proj", g, n, T, heads * qk, H, precision.attention)
            gemm("mla.kv_a_proj", g, n, T, a.kv_lora_rank + a.qk_rope_dim, H, precision.attention, replicated=True)
            # RMSNorms of the compressed query and KV latents (q_a_layernorm, kv_a_layernorm): one kernel each
            kernels = 2 if a.q_lora_rank else 1
            lat = ((a.q_lora_rank or 0) + a.kv_lora_rank) / kernels  # latent width one kernel normalises, on average
            op("mla.latent_norms", g, n * kernels, memory_op_cost, 2 * T * lat * ACT_BYTES, hw, flops=5 * T * lat, replicated=True)
            topk = a.index_topk if layer.indexer else None
            if layer.indexer:
                q_in = a.q_lora_rank or H
                gemm("dsa.indexer_proj", g, n, T, a.index_n_heads * a.index_head_dim + a.index_head_dim + a.index_n_heads, q_in, precision.attention, replicated=True)
                if layer.indexer == "full":
                    op("dsa.indexer_decode", g, n * has_dec, dsa_indexer_cost, Bd, q, ctx, a.index_n_heads, a.index_head_dim, hw, replicated=True)
                    op("dsa.indexer_prefill", g, n * pre_share, dsa_indexer_cost, pre_seqs, np.maximum(seq, 1), prefix + seq, a.index_n_heads, a.index_head_dim, hw, replicated=True)
            # decode: weight absorption (W_UK into q, W_UV after attention) as batched GEMMs
            gemm("mla.absorb_uk", g, n * has_dec, Bd * q, heads * a.kv_lora_rank, a.qk_nope_dim, "bf16")
            op("mla.attn_decode", g, n * has_dec, mla_decode_cost,
                Bd, ctx, heads, kvb, hw, kv_lora_rank=a.kv_lora_rank, qk_rope_dim=a.qk_rope_dim, qk_nope_dim=a.qk_nope_dim,
                v_head_dim=a.head_dim_v, q_tokens=q, topk=topk, native=mla_native_mask(mla_native_heads, hw, a, tp, dp))
            gemm("mla.absorb_uv", g, n * has_dec, Bd * q, heads * a.head_dim_v, a.kv_lora_rank, "bf16")
            # prefill: decompress K_nope, V for the new tokens and run ordinary causal attention
            gemm("mla.kv_b_proj", g, n * has_pre, np.maximum(P, 1), heads * (a.qk_nope_dim + a.head_dim_v), a.kv_lora_rank, precision.attention)
            op("mla.attn_prefill", g, n * pre_share, mla_prefill_cost,
                pre_seqs, np.maximum(seq, 1), heads, hw, prefix_len=prefix, kv_lora_rank=a.kv_lora_rank,
                qk_rope_dim=a.qk_rope_dim, qk_nope_dim=a.qk_nope_dim, v_head_dim=a.head_dim_v, kv_bytes=kvb, topk=topk)
            if a.output_gate:
                gemm("mla.output_gate", g, n, T, heads * a.head_dim_v, H, precision.attention)
            gemm("mla.o_proj", g, n, T, H, heads * a.head_dim_v, precision.attention)
        else:
            a = arch.attention
            heads = a.n_heads / tp
            kv_heads = np.ceil(a.n_kv_heads / tp)  # replicated once TP exceeds the KV heads
            width = heads * a.head_dim + 2 * kv_heads * a.head_dim + (heads * a.head_dim if a.output_gate else 0)
            gemm("attn.qkv_proj", g, n, T, width, H, precision.attention)
            window = layer.window
            op("attn.decode", g, n * has_dec, attention_decode_cost, Bd, ctx, heads, kv_heads, a.head_dim, window, kvb, hw, q_tokens=q)
            op("attn.prefill", g, n * pre_share, attention_prefill_cost,
                pre_seqs, np.maximum(seq, 1), heads, kv_heads, a.head_dim, window, hw, prefix_len=prefix, kv_bytes=kvb)
            gemm("attn.o_proj", g, n, T, H, heads * a.head_dim_v, precision.attention)
        op("rope+kv_write", g, n * (layer.mixer != "linear"), memory_op_cost, T * H * ACT_BYTES, hw, replicated=True)
        allreduce("tp.allreduce_attn", g, n, T, H)
        # ---------------- FFN ----------------
        if layer.ffn == "dense":
            inter = arch.dense_inter / tp
            gemm("mlp.gate_up", g, n, T, 2 * inter, H, precision.dense)
            op("mlp.act", g, n, memory_op_cost, 3 * T * inter * ACT_BYTES, hw, flops=4 * T * inter)
            gemm("mlp.down", g, n, T, H, inter, precision.dense)
            allreduce("tp.allreduce_mlp", g, n, T, H)
        else:
            m = arch.moe
            gemm("moe.router", g, n, T, m.n_experts, H, "bf16", replicated=True)
            if m.n_shared:
                sh = m.n_shared * m.shared_inter / tp
                gemm("moe.shared_gate_up", g, n, T, 2 * sh, H, precision.dense)
                op("moe.shared_act", g, n, memory_op_cost, 3 * T * sh * ACT_BYTES, hw, flops=4 * T * sh)
                gemm("moe.shared_down", g, n, T, H, sh, precision.dense)
            width = m.latent_dim or H
            if m.latent_dim:
                gemm("moe.latent_down", g, n, T, m.latent_dim, H, precision.dense, replicated=True)
            group = tp * dp
            moe_tp = group / ep
            # Tokens entering the experts of this GPU's EP group: every attention-DP rank's tokens
            # (TP ranks of one DP group share theirs).
            pre_ranks = dp if batch.prefill_ranks is None else np.minimum(_f(batch.prefill_ranks), dp)
            tokens_group = B * q * dp + P * pre_ranks
            # with attention-DP the tokens reach their experts' ranks by an all-to-all dispatch (below): a rank routes only
            # its own tokens and its kernels see only the tokens dispatched to it
            op("moe.experts", g, n, moe_cost, tokens_group, width, m.expert_inter, m.top_k, m.n_experts, moe_tp, ep,
               precision.experts, hw, alpha=routing_alpha, gated=m.gated, dispatched=dp > 1, routed_tokens=T)
            if m.latent_dim:
                gemm("moe.latent_up", g, n, T, H, m.latent_dim, precision.dense, replicated=True)
            # Communication around the experts. With attention-DP each rank owns distinct tokens:
            # dispatch them to the experts' ranks and combine the results (all-to-all); the TP ranks
            # of a DP group share the sending (tokens / tp each). Without attention-DP every GPU
            # already holds all tokens: each computes its experts' part and one all-reduce sums them.
            a2a = dp > 1
            t_loc = T / tp
            op("ep.dispatch", g, n * a2a, collective_cost, "alltoall", t_loc * m.top_k * width * DISPATCH_BYTES, group, hw)
            op("ep.combine", g, n * a2a, collective_cost, "alltoall", t_loc * m.top_k * width * COMBINE_BYTES, group, hw)
            allreduce("tp.allreduce_moe", g, n * ~a2a, T, H)
    # ---------------- model edges ----------------
    sampled = _f(batch.sampled) if batch.sampled is not None else B * q + np.minimum(nps, P)
    op("embedding", "model", 1, memory_op_cost, T * H * ACT_BYTES * 2, hw, replicated=True)
    op("final_norm", "model", 1, memory_op_cost, 2 * T * H * ACT_BYTES, hw, replicated=True)
    gemm("lm_head", "model", 1, np.maximum(sampled, 1), arch.vocab / tp, H, precision.embedding)
    op("sampling", "model", 1, memory_op_cost, sampled * arch.vocab / tp * LOGIT_BYTES * 2, hw)
    op("tp.gather_logits", "model", 1 * (tp > 1), collective_cost, "all_gather", sampled * arch.vocab * LOGIT_BYTES, tp, hw)
    # stage boundaries that fall between scale-up domains (a worker of tp x dp x pp GPUs over domains of
    # hw.scaleup.domain_gpus, its stages laid out in order) send over the NICs; the rest over the scale-up links
    crossing = np.minimum(pp - 1, np.ceil(tp * dp * pp / hw.scaleup.domain_gpus) - 1)
    op("pp.send", "model", pp - 1 - crossing, p2p_cost, T * H * ACT_BYTES, hw, scope="scaleup")
    op("pp.send", "model", crossing, p2p_cost, T * H * ACT_BYTES, hw, scope="scaleout")
    return st


# ---------------- two-batch overlap ----------------
# An engine with two-batch overlap (SGLang --enable-two-batch-overlap, vLLM --enable-dbo "dual batch overlap", after
# DeepSeek's dual micro-batch overlap) splits a step's batch into two micro-batches and runs each layer as four phases,
# each one micro-batch's compute beside the other's all-to-all (vLLM docs/design/dbo.md, its decode schedule):
#   compute  | A0            | E1        | S1 + E0    | S0 + A1    |
#   comm     | dispatch 1    | dispatch 0| combine 1  | combine 0  |
# A: the layer's ops up to the router (norms, attention, projections), E: the routed experts, S: the shared experts.
# Each phase takes the longer of its two streams; the weights are read once per micro-batch; beside a normal-mode
# all-to-all (steps with prompt tokens) the compute has the SMs DeepEP's kernels leave (DEEPEP_NORMAL_SMS). Engines split only
# attention-DP + EP steps (the all-to-all it hides; vLLM: "only targets DP+EP deployments"), and only a step large
# enough: (decode tokens above, prompt tokens above for a step that carries any, decode requests at least), per engine in
# simfront/engines/scheduler.yaml (two_batch_overlap_split; vLLM 32 / 512 tokens); scheduler.TWO_BATCH_OVERLAP_SPLIT is the
# least a split needs.
# SMs DeepEP's normal kernels (the all-to-all of steps with prompt tokens) take while they run: deep_ep/buffer.py
# Buffer.num_sms = 20. Overlapped, the other micro-batch's compute has the rest; the low-latency kernels of decode
# steps receive through hooks and take none (DeepEP README).
DEEPEP_NORMAL_SMS = 20.0
_TBO_COMM = ("ep.dispatch", "ep.combine")
_TBO_SHARED = ("moe.shared_gate_up", "moe.shared_act", "moe.shared_down")
_TBO_EXPERTS = ("moe.experts", "moe.latent_down", "moe.latent_up")


def _halved(batch: StepBatch, split) -> StepBatch:
    """One micro-batch of ``batch`` where ``split`` (half its requests, prompt tokens and sampled rows), else the batch."""
    def half(x):
        return None if x is None else np.where(split, _f(x) / 2.0, _f(x))
    return StepBatch(decode_reqs=half(batch.decode_reqs), decode_ctx=batch.decode_ctx, q_tokens=batch.q_tokens,
                     prefill_tokens=half(batch.prefill_tokens), prefill_seqs=half(batch.prefill_seqs),
                     prefill_prefix=batch.prefill_prefix, sampled=half(batch.sampled), prefill_ranks=batch.prefill_ranks)


def two_batch_overlap_step(model: Model, precision: Precision, hw: Hardware, tp, pp, dp, ep, batch: StepBatch,
                           routing_alpha: float | None = DEFAULT_ROUTING_ALPHA, memo: dict | None = None,
                           split_at: tuple = TWO_BATCH_OVERLAP_SPLIT, allreduce_norm_fusion: tuple = (),
                           mla_native_heads: tuple = ()) -> StepCost:
    """The step of an engine running two-batch overlap: where the step splits (attention-DP > 1, so its MoE layers move
    tokens all-to-all, and above the engine's ``split_at`` thresholds: decode tokens above, prompt tokens above,
    decode requests at least), the op list of one micro-batch, each compute op counted twice and the all-to-all
    counted for the share the phases leave exposed (the four-phase schedule above, per layer group); elsewhere the
    plain step."""
    dp_ = _f(dp)
    B, P = _f(batch.decode_reqs), _f(batch.prefill_tokens)
    dec_above, pre_above, min_reqs = (float(x) for x in split_at)
    tokens = B * _f(batch.q_tokens) + P  # tokens of the rank's step
    big = np.where(P > 0, tokens > pre_above, (tokens > dec_above) & (B >= min_reqs))
    # steps the engine splits: only a MoE model's attention-DP steps have an all-to-all to hide
    split = (dp_ > 1) & big & (model.arch.moe is not None)
    if not np.any(split):
        return forward_step(model, precision, hw, tp, pp, dp, ep, batch, routing_alpha, memo,
                            allreduce_norm_fusion=allreduce_norm_fusion, mla_native_heads=mla_native_heads)
    st = forward_step(model, precision, hw, tp, pp, dp, ep, _halved(batch, split), routing_alpha, memo,
                      allreduce_norm_fusion=allreduce_norm_fusion, mla_native_heads=mla_native_heads)
    runs = np.where(split, 2.0, 1.0)  # micro-batches that run each compute op

    def total(r: OpRow):  # seconds of one micro-batch's calls of an op, over every layout
        return np.asarray(r.count) * r.expand(r.cost_rows.time_s)

    parts: dict[str, dict[str, object]] = {}
    for r in st.ops:
        if r.group == "model":
            continue
        kind = "D" if r.name == "ep.dispatch" else "C" if r.name == "ep.combine" else \
            "S" if r.name in _TBO_SHARED else "E" if r.name in _TBO_EXPERTS else "A"
        g = parts.setdefault(r.group, {k: 0.0 for k in "ADCES"})
        g[kind] = g[kind] + total(r)
    # compute beside a normal-mode all-to-all runs on the SMs DeepEP leaves it
    slow = np.where(P > 0, hw.sm_count / max(hw.sm_count - DEEPEP_NORMAL_SMS, 1.0), 1.0)
    exposed_share: dict[str, object] = {}
    for group, t in parts.items():
        a, d, c, e, s = (t[k] for k in "ADCES")
        comm = d + c
        sl = np.where(comm > 0, slow, 1.0)
        a_, e_, s_ = a * sl, e * sl, s * sl  # each micro-batch's compute while the other one's all-to-all runs
        phases = np.maximum(a_, d) + np.maximum(e_, d) + np.maximum(s_ + e_, c) + np.maximum(s_ + a_, c)  # the layer group, both
        # what the phases add to both micro-batches' compute alone: all-to-all time the compute stream does not cover, and
        # the compute slowed by a normal-mode all-to-all's SMs (charged to the all-to-all ops)
        exposed = np.maximum(phases - 2.0 * (a + e + s), 0.0)
        exposed_share[group] = np.where(split, exposed / np.where(comm > 0, comm, 1.0), 1.0)
    ops = []
    for r in st.ops:
        n = np.asarray(r.count)
        n = n * exposed_share[r.group] if r.name in _TBO_COMM else n * runs
        ops.append(OpRow(r.name, r.group, n, r.cost_rows, r.replicated, r.rows, r.n_rows, r.nd, r.level))
    return StepCost(ops=ops, layout=st.layout, pp=st.pp)


def step_time_s(model: Model, precision: Precision, hw: Hardware, tp, pp, dp, ep, batch: StepBatch, **kw) -> np.ndarray:
    """Latency of one step (all layers, all stages) for the given layouts and batches."""
    return forward_step(model, precision, hw, tp, pp, dp, ep, batch, **kw).time_s

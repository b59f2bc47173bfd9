"""Engine scheduler settings as data: token budget, policy, max running requests, CUDA-graph sizes.

The step-level simulation (:mod:`simfront.simulate`) runs each deployment's engine with these
settings. Defaults per engine and release family live in ``simfront/engines/scheduler.yaml`` with
the engine source each value comes from; a value the user or a result file gives overrides them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np


from . import yamlio
from .errors import SimfrontError
from .fusion import AllreduceNormFusion, parse_rules

SCHEDULER_FILE = Path(__file__).with_name("engines") / "scheduler.yaml"
POLICIES = ("mixed", "prefill_first")
ADMISSIONS = ("on_demand", "reserve")
DECODE_SLOT_AT = ("prefill", "transfer")
# How an engine's memory fraction turns into its KV-cache pool (ecosystem.md §9.3; simfront.memory.kv_budget_bytes):
#   free          TensorRT-LLM kv_cache_config.free_gpu_memory_fraction: a share of what is free after the weights
#                 and the runtime's own memory are in place
#   total         vLLM --gpu-memory-utilization: a share of the whole GPU for weights, runtime memory and KV cache
#   total_static  SGLang --mem-fraction-static: a share of the whole GPU for weights and the KV pool (the static
#                 allocations); activations and CUDA graphs live in the rest
KV_MEMORY_RULES = ("free", "total", "total_static")
ENGINE_ALIASES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm",
                  "trt-llm": "trtllm", "dynamo": "default", "default": "default"}


# The least step two-batch overlap splits, where an engine's family names no threshold (two_batch_overlap_split in
# simfront/engines/scheduler.yaml): (decode tokens above, prompt tokens above, decode requests at least) = two requests
# (SGLang splits a decode batch by requests) or two prompt tokens.
TWO_BATCH_OVERLAP_SPLIT = (1.0, 1.0, 2.0)


@dataclass(frozen=True)
class SchedulerSettings:
    engine: str
    token_budget: float  # tokens one step carries per attention-DP rank (decode + prompt chunk)
    policy: str  # mixed | prefill_first
    max_running: float  # requests one rank runs at once
    cuda_graph_max_bs: float  # largest decode batch captured in a CUDA graph
    admission: str  # on_demand (preempt + recompute) | reserve (prompt + max output reserved, never preempted)
    first_token_lag_steps: float  # steps between the last prefill step and the first streamed token
    version_family: str = ""  # the ``since`` release of the family the values came from
    adp_balance_timeout_iters: float = 0.0  # attention-DP balance: most iterations a new prompt waits for every rank to have one
    cpu_overlap: bool = False  # the CPU prepares the next step while the GPU runs this one (overlap scheduler)
    cpu_overlap_with_spec: bool = False  # the same with speculative decoding on
    decode_slot_at: str = "prefill"  # disaggregated: a request takes its decode slot before its prefill, or at KV transfer
    kv_memory_rule: str = "free"  # how the engine's own GPU memory fraction sizes its KV pool (KV_MEMORY_RULES)
    max_prefill_tokens: float = float("inf")  # prompt tokens one prefill step takes per rank, besides the budget
    dp_divides_token_budget: bool = False  # the engine splits its (whole-server) token budget over attention-DP ranks
    max_running_with_spec: float = float("inf")  # requests a server runs at once with drafts and no cap set (inf: max_running)
    dp_divides_max_running: bool = False  # the running-request cap is the whole server's, split over attention-DP ranks
    # two-batch overlap: the smallest step split in two (decode tokens above, prompt tokens above, decode requests at least)
    two_batch_overlap_split: tuple = TWO_BATCH_OVERLAP_SPLIT
    # where the engine runs the TP all-reduce, residual add and RMSNorm as one kernel (simfront.fusion)
    allreduce_norm_fusion: tuple[AllreduceNormFusion, ...] = ()
    # where the engine's MLA decode runs the platform's native kernel only at some KV heads per rank: ((platforms),
    # (heads per rank)), heads counted over attention TP x attention DP (SGLang's --tp-size); () for no such rule
    mla_native_heads: tuple = ()

    def running_cap(self, speculative: bool = False) -> float:
        """Requests one server runs at once when the run sets no cap: the engine's default, with drafts the lower of it
        and ``max_running_with_spec``."""
        return min(self.max_running, self.max_running_with_spec) if speculative else self.max_running

    def running_cap_per_rank(self, attention_dp=1, speculative: bool = False):
        """:meth:`running_cap` per attention-DP rank: over the ranks where the engine divides a server's cap."""
        cap = self.running_cap(speculative)
        dp = np.maximum(np.asarray(attention_dp, dtype=np.float64), 1.0)
        return np.maximum(np.floor(cap / dp), 1.0) if self.dp_divides_max_running else np.full(dp.shape, cap)

    def prefill_tokens_per_rank(self, attention_dp: float = 1) -> float:
        """Prompt tokens one prefill step of an attention-DP rank takes by default: the token budget (over the DP size
        where the engine divides it), at most ``max_prefill_tokens``."""
        budget = self.token_budget / max(float(attention_dp), 1.0) if self.dp_divides_token_budget else self.token_budget
        return min(budget, self.max_prefill_tokens)

    def with_overrides(self, **kw) -> "SchedulerSettings":
        """These settings with the given fields replaced (``None`` values are ignored)."""
        kw = {k: v for k, v in kw.items() if v is not None}
        bad = set(kw) - set(self.__dataclass_fields__)
        if bad:
            raise SimfrontError(f"unknown scheduler setting(s) {sorted(bad)}; valid: {sorted(self.__dataclass_fields__)}")
        out = replace(self, **kw)
        _check(out)
        return out


def _check(s: SchedulerSettings) -> None:
    if s.policy not in POLICIES:
        raise SimfrontError(f"scheduler policy {s.policy!r} unknown; valid: {', '.join(POLICIES)}")
    if s.decode_slot_at not in DECODE_SLOT_AT:
        raise SimfrontError(f"decode_slot_at {s.decode_slot_at!r} unknown; valid: {', '.join(DECODE_SLOT_AT)}")
    if s.admission not in ADMISSIONS:
        raise SimfrontError(f"scheduler admission {s.admission!r} unknown; valid: {', '.join(ADMISSIONS)}")
    if s.kv_memory_rule not in KV_MEMORY_RULES:
        raise SimfrontError(f"kv_memory_rule {s.kv_memory_rule!r} unknown; valid: {', '.join(KV_MEMORY_RULES)}")
    if not s.token_budget >= 1 or not s.max_running >= 1:
        raise SimfrontError(f"token budget ({s.token_budget}) and max running requests ({s.max_running}) must be at least 1")


@lru_cache(maxsize=1)
def _table() -> dict:
    return yamlio.loads(SCHEDULER_FILE.read_text())  # the C loader where PyYAML has it


def release_key(v: str) -> tuple:
    """Sortable (major, minor, patch, ...) of an engine release string, as the release families are ordered."""
    out = []
    for part in str(v).replace("-", ".").split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def engine_key(engine: str | None) -> str:
    """Canonical engine name of a spelling (``None`` -> default); an engine string that merely
    contains a known name (``Dynamo + SGLang [...]``) resolves to that engine."""
    if not engine:
        return "default"
    e = str(engine).strip().lower()
    if e in ENGINE_ALIASES:
        return ENGINE_ALIASES[e]
    for name in ("sglang", "vllm", "trtllm", "tensorrt-llm", "tensorrt_llm", "trt-llm"):
        if name in e:
            return ENGINE_ALIASES[name]
    raise SimfrontError(f"unknown engine {engine!r} for scheduler settings; valid: vllm, sglang, trtllm")


def settings_key(engine: str | None) -> str:
    """:func:`engine_key` of ``engine``, or the default engine's key for one the scheduler table does not know (its
    settings stand in for it)."""
    try:
        return engine_key(engine)
    except SimfrontError:
        return "default"


@lru_cache(maxsize=None)
def release_families(key: str) -> tuple:
    """Release families of engine ``key``, oldest first, each completed with what it inherits from the one before."""
    out, prev = [], {}
    for fam in sorted(_table()[key], key=lambda f: release_key(f["since"])):
        prev = {k: v for k, v in prev.items() if k != "released"} | fam  # a family states what changed
        out.append(prev)
    return tuple(out)


def release_note(engine: str | None, version: str | None) -> str | None:
    """A note where ``version`` of ``engine`` predates every release family simfront describes, so it is priced with
    the oldest family's scheduler settings (None otherwise: a release takes the newest family at or before it)."""
    if not engine or not version:
        return None
    key = engine_key(engine)
    oldest = release_families(key)[0]["since"]
    if release_key(version) >= release_key(oldest):
        return None
    return (f"{key} {version} predates the oldest {key} release simfront describes ({oldest}, "
            f"simfront/engines/scheduler.yaml): priced with that release family's scheduler settings")


def release_family(engine: str | None = None, version: str | None = None, measured_on: str | None = None) -> dict:
    """The scheduler family (``since`` and its values) of ``engine`` at release ``version``; without a release,
    the newest family out by the date ``measured_on`` (ISO ``YYYY-MM-DD``); without either, the newest family."""
    fams = release_families(engine_key(engine))
    if version:
        older = [f for f in fams if release_key(f["since"]) <= release_key(version)]
        return older[-1] if older else fams[0]
    if measured_on:
        out = [f for f in fams if str(f.get("released", "")) <= str(measured_on)[:10]]
        return out[-1] if out else fams[0]
    return fams[-1]


def _mla_native_heads(raw) -> tuple:
    """``mla_native_heads`` of a release family ({platforms, heads_per_rank}) as ((platforms), (heads per rank)); ()
    where the family has none."""
    if not raw:
        return ()
    return (tuple(str(x) for x in raw["platforms"]), tuple(int(x) for x in raw["heads_per_rank"]))


def scheduler_settings(engine: str | None = None, version: str | None = None, gpu_mem_gib: float | None = None,
                       measured_on: str | None = None) -> SchedulerSettings:
    """Default scheduler settings of ``engine`` at release ``version`` (or, without one, the release out on the
    date ``measured_on``; the newest family when neither is given) on a GPU with ``gpu_mem_gib`` of memory
    (engines whose default budget depends on it)."""
    key = engine_key(engine)
    fam = release_family(key, version, measured_on)
    budget = float(fam["token_budget"])
    if gpu_mem_gib is not None and fam.get("token_budget_by_gpu_mem_gib"):
        for bound, b in fam["token_budget_by_gpu_mem_gib"]:
            if gpu_mem_gib < bound:
                budget = float(b)
                break
    s = SchedulerSettings(key, budget, fam["policy"], float(fam["max_running"]), float(fam["cuda_graph_max_bs"]),
                          fam["admission"], float(fam["first_token_lag_steps"]), str(fam["since"]),
                          float(fam.get("adp_balance_timeout_iters", 0)), bool(fam.get("cpu_overlap", False)),
                          bool(fam.get("cpu_overlap_with_spec", False)), str(fam.get("decode_slot_at", "prefill")),
                          str(fam["kv_memory_rule"]), float(fam.get("max_prefill_tokens", float("inf"))),
                          bool(fam.get("dp_divides_token_budget", False)),
                          float(fam.get("max_running_with_spec", float("inf"))), bool(fam.get("dp_divides_max_running", False)),
                          tuple(float(x) for x in fam.get("two_batch_overlap_split", TWO_BATCH_OVERLAP_SPLIT)),
                          parse_rules(fam.get("allreduce_norm_fusion"), f"simfront/engines/scheduler.yaml {key} {fam['since']}"),
                          _mla_native_heads(fam.get("mla_native_heads")))
    _check(s)
    return s


__all__ = ["SchedulerSettings", "scheduler_settings", "release_family", "release_families", "engine_key", "POLICIES", "ADMISSIONS"]

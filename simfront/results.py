"""Typed results of the Python API: a frontier and its points, a memory verdict, a step breakdown, a
validation report, a capacity plan, comparisons.

Every result is a pydantic model, so notebooks get attributes, ``.to_frame()`` (pandas, imported only
when called) and validation of what the API returns, and the CLI's ``--json`` is the model's own
``model_dump(mode="json")``: the documented schema cannot drift from what is returned (a test compares
the README's field lists with these models). Results also read as mappings (``result["field"]``, ``keys()``,
``items()``, iteration over field names) for code written against the earlier dict API.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, PrivateAttr

# Frontier-point columns of the search (the order of the JSON and CSV outputs)
FRONTIER_FIELDS = ["mode", "tp", "pp", "ep", "attention_dp", "replicas", "batch", "concurrency", "precision", "kv_dtype", "spec",
                   "ttft_ms", "tpot_ms", "tok_s_user", "tok_s_gpu", "usd_per_mtok", "requests_s", "gpus_used",
                   "chunk_tokens", "prefill_tp", "prefill_ep", "prefill_attention_dp", "prefill_workers", "prefill_batch", "decode_workers",
                   "kv_headroom", "queue_ms", "quality"]
INT_FIELDS = {"tp", "pp", "ep", "attention_dp", "replicas", "batch", "concurrency", "gpus_used", "chunk_tokens", "prefill_tp", "prefill_ep",
              "prefill_attention_dp", "prefill_workers", "prefill_batch", "decode_workers"}
ROUND_DECIMALS = 4  # decimals of float fields in points (sub-permille of every metric's scale)


class Result(BaseModel):
    """Base of every API result: attribute access, ``result["field"]``, JSON and a DataFrame."""

    # schemas are built on first use: a command builds only the results it returns
    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True, defer_build=True)

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.keys()

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default) if key in self else default

    def keys(self) -> list[str]:
        return list(type(self).model_fields) + list(self.__pydantic_extra__ or {})

    # The read side of a mapping, as ``keys()`` and ``result["field"]`` promise: iterating a result gives its field
    # names (pydantic's own iteration gives (name, value) pairs, which broke ``{k: p[k] for k in p}``); ``dict(result)``
    # is the same either way (dict() reads a mapping through keys() and []).
    def __iter__(self):
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self.keys()]

    def to_json(self) -> dict:
        """The JSON document the CLI prints (non-finite floats become null)."""
        return _finite(self.model_dump(mode="python"))

    def _frame_rows(self) -> list[dict]:
        return [self.to_json()]

    def to_frame(self):
        """A pandas DataFrame of the result's rows (pandas is an optional extra: ``pip install pandas``)."""
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("to_frame() needs pandas: pip install pandas") from None
        return pd.DataFrame(self._frame_rows())


def _finite(o: Any) -> Any:
    """Replace NaN/inf by None and numpy scalars by Python ones, recursively."""
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if isinstance(o, np.ndarray):
        return _finite(o.tolist())
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        v = float(o)
        return v if math.isfinite(v) else None
    if isinstance(o, Result):
        return o.to_json()
    return o


class FrontierPoint(Result):
    """One configuration: a deployment and its predicted serving metrics (README, JSON output)."""

    mode: str
    tp: int
    pp: int
    ep: int
    attention_dp: int
    replicas: int
    batch: int
    concurrency: int
    precision: str
    kv_dtype: str
    spec: str
    ttft_ms: float | None
    tpot_ms: float | None
    tok_s_user: float | None
    tok_s_gpu: float | None
    usd_per_mtok: float | None
    requests_s: float | None
    gpus_used: int
    chunk_tokens: int
    prefill_tp: int
    prefill_ep: int
    prefill_attention_dp: int
    prefill_workers: int
    prefill_batch: int
    decode_workers: int
    kv_headroom: float | None = None
    queue_ms: float | None = None
    quality: float | None = None  # the user's quality score of the configuration (``--quality``), else null
    # with --tails / --sla-percentile: simulated percentiles (simfront.tails), else null
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    # with --tails / --sla-percentile and an SLA (--ttft / --tpot): requests/s whose own TTFT and TPOT meet it
    goodput_requests_s: float | None = None
    layout: str = ""
    # knobs of the point's workers outside the layouts of the measured runs the serving profiles were fitted on
    # (simfront.coverage), e.g. "PP 2 (measured 1-1)"; empty inside them. Such a point's band is widened.
    outside_calibration: list[str] = []


class Workload(Result):
    isl: int
    osl: int
    concurrency: int | None = None
    rate: float | None = None
    prefix_hit: float = 0.0
    prompts_per_client: float | None = None  # a benchmark run of this many prompts per client; None: steady state
    preset: dict | None = None  # the workload preset that set isl/osl/prefix_hit (--workload agentic-coding), with its knobs
    routing_alpha: float | None = None  # MoE routing skew: power-law exponent of tokens over experts; None = balanced
    random_range_ratio: float | None = None  # benchmark lengths uniform in [r L, L] (1: fixed); None: lengths that vary
    two_batch_overlap: bool = False  # the engine runs two-batch overlap (--two-batch-overlap): attention-DP + EP steps overlapped


class Sla(Result):
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    min_tok_s_user: float | None = None


class Frontier(Result):
    """``predict``: the frontier of every configuration of a model on a GPU set."""

    model: str
    gpus: str
    workload: Workload
    price_usd_per_gpu_hour: float
    fits: bool
    memory: dict
    n_configs_evaluated: int = 0
    n_feasible: int = 0
    frontier: list[FrontierPoint] = []
    knee: FrontierPoint | None = None
    best_under_sla: FrontierPoint | None = None
    sla: Sla = Sla()
    notes: list[str] = []
    search_time_s: float = 0.0
    uncertainty: dict | None = None  # {band, widening, note}: what the *_low / *_high fields of the points mean
    layouts: list[str] | None = None  # the layout classes searched (--layout: tp, tp+ep, dpa+ep), null: every class
    max_pp: int | None = None  # the most pipeline stages a worker could have (--max-pp), null: simfront's range
    provenance: dict | None = None  # which fitted parameters this GPU borrowed, which peaks are estimates
    launch: dict | None = None  # engine and benchmark commands of the chosen point (``--launch``)
    engine: dict | None = None  # {name, version, scheduler_family}: the engine profile and release family priced
    _points: dict | None = PrivateAttr(default=None)

    @property
    def points(self) -> dict | None:
        """Every feasible configuration of the search as column arrays (not in the JSON)."""
        return self._points

    def _frame_rows(self) -> list[dict]:
        return [p.to_json() for p in self.frontier]

    def all_points_frame(self):
        """Every feasible configuration (not only the frontier) as a DataFrame."""
        import pandas as pd

        return pd.DataFrame({k: np.asarray(v) for k, v in (self._points or {}).items()})


class MemoryVerdict(Result):
    """``memory``: does the model fit, and how much KV cache is left."""

    model: str
    gpus: str
    precision: str
    kv_dtype: str
    fits: bool
    layout: dict | None
    weights_bytes: float
    weights_bytes_per_gpu: float
    reserve_bytes_per_gpu: float
    kv_budget_bytes_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_state_bytes_per_seq: float
    kv_capacity_tokens: int | None
    max_concurrency: int
    context_tokens: int
    min_gpus: int | None
    reason: str | None = None
    alternatives: list[str] = []
    engine: str | None = None  # --engine: the engine whose memory fraction sized the KV pool (None: simfront's pool)
    memory_fraction: float | None = None  # that fraction under the chosen layout, in the engine's own terms
    kv_memory_rule: str | None = None  # free | total | total_static: how the fraction reads (README)
    notes: list[str] = []  # what the verdict rests on beyond the spec (an engine release older than simfront describes)
    # sliding-window / chunked layers: KV bytes each token adds up to their window (model-wide, one copy), and the window
    kv_windowed_bytes_per_token: float = 0.0
    kv_window_tokens: int | None = None


class ValidationReport(Result):
    """``validate``: error summary, one row per input row, and the input problems."""

    summary: dict
    rows: list[dict]
    problems: list[str]
    fidelity: dict | None = None  # with --frontier: {trends[...], frontiers{summary, points[], knees[]}}

    def _frame_rows(self) -> list[dict]:
        return list(self.rows)


class Plan(Result):
    """``plan``: the fewest GPUs of each type that serve a rate within an SLA, cheapest first."""

    model: str
    workload: dict
    sla: dict
    max_gpus: int
    engine: str | None
    rows: list[dict]
    search_time_s: float
    engine_version: str | None = None  # the engine release whose scheduler family was priced (None: the newest)
    notes: list[str] = []
    launch: dict | None = None
    search: dict = {}  # the knobs the plan was restricted to: precision, kv_dtype, spec, spec_k, acceptance, modes,
    # layout, max_pp (search.HELD_KNOBS) and the routing_alpha priced

    def _frame_rows(self) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "point"} for r in self.rows]


class StepBreakdown(Result):
    """``explain``: one step op by op and every term from the op sum to the serving step."""

    model: str
    gpus: str
    layout: str
    phase: str
    mode: str
    batch: int
    ctx: float
    isl: int | None
    osl: int | None
    random_range_ratio: float | None = None  # lengths uniform in [r ISL, ISL]: ctx is costed at their mean
    routing_alpha: float | None = None  # the MoE routing skew priced (--routing-skew; None: balanced)
    two_batch_overlap: bool = False  # the step priced as the engine's two-batch overlap runs it (--two-batch-overlap)
    precision: str
    kv_dtype: str
    spec: str
    engine: str
    profile: dict
    tokens: float
    ops: list[dict]
    raw_step_time_s: float
    terms: list[dict]
    engine_step_s: float
    mixed: dict | None
    step_time_s: float
    # prefill: the engine step of one prompt alone on the worker (one attention-DP rank), the idle-worker TTFT's step
    lone_prompt_step_s: float | None = None
    accepted_tokens_per_step: float
    tpot_s: float | None
    step_flops_per_gpu: float
    model_flops: float
    attention_flops: float
    weight_flops: float
    weight_flops_reference: float
    weight_flops_ratio: float | None
    provenance: dict | None = None
    engine_refuses: str | None = None  # why the engine priced would not start this worker (engine_rules), or None
    note: str = ""

    def _frame_rows(self) -> list[dict]:
        return list(self.ops)


def point_dict(points: dict, i: int) -> dict:
    """Row ``i`` of the search's column arrays as a frontier-point dict (ints, rounded floats, layout)."""
    d = {}
    for k in FRONTIER_FIELDS:
        if k not in points:  # optional columns (quality without --quality)
            d[k] = None
            continue
        v = points[k][i]
        if k in INT_FIELDS:
            d[k] = int(round(float(v)))
        elif isinstance(v, (str, np.str_)) or (hasattr(v, "dtype") and v.dtype == object):
            d[k] = str(v)
        else:
            fv = float(v)
            d[k] = round(fv, ROUND_DECIMALS) if math.isfinite(fv) else None
    d["layout"] = layout_label(d)
    return d


def layout_label(p) -> str:
    """``TP4 DPA2 EP8 x2`` (aggregated) or ``2P[TP4] + 1D[TP1 DPA8 EP8]`` (disaggregated)."""
    def one(tp, ep, dp, pp=1):
        s = f"TP{tp}"
        if dp > 1:
            s += f" DPA{dp}"
        if ep > 1:
            s += f" EP{ep}"
        if pp > 1:
            s += f" PP{pp}"
        return s
    if p["mode"] == "disagg":
        return (f"{p['prefill_workers']}P[{one(p['prefill_tp'], p['prefill_ep'], p['prefill_attention_dp'])}] + "
                f"{p['decode_workers']}D[{one(p['tp'], p['ep'], p['attention_dp'], p['pp'])}]")
    s = one(p["tp"], p["ep"], p["attention_dp"], p["pp"])
    return s + (f" x{p['replicas']}" if p["replicas"] > 1 else "")

"""The canonical measured-point record every ingested source is normalised into.

Units: milliseconds for latencies, tokens/s and requests/s for rates, tokens for lengths
(friendly units, because these are the units every benchmark tool reports; convert to SI at
the point of comparison with a prediction). ``None`` means the source did not carry the value.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

Format = Literal[
    "vllm_bench_serve",
    "sglang_bench_serving",
    "aiperf",
    "genai_perf",
    "guidellm",
    "genai_bench",
    "trtllm_bench",
    "serving_csv",
    "offline_csv",
    "inferencex_api",
]
FORMATS: tuple[str, ...] = get_args(Format)
# formats whose isl / osl are the lengths the client was configured with (with a random range ratio r < 1, the longest
# of lengths uniform in [r L, L]), not the mean tokens its requests carried
CONFIGURED_LENGTHS = frozenset({"offline_csv", "serving_csv", "inferencex_api"})

Mode = Literal["agg", "disagg"]
SpecDecoding = Literal["mtp", "eagle", "eagle3", "ngram"]

Count = Annotated[int, Field(ge=1)]  # a parallel size, worker count, GPU count or batch
Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]
# Accepted tokens per verification step counts the bonus token, so it is at least 1.
AcceptLength = Annotated[float, Field(ge=1)]


class MeasuredPoint(BaseModel):
    """One measured serving (or offline) point, as the source reported it plus what we derived.

    Parallel layout convention (that of aiconfigurator's serving set, calibration/README.md):
    ``tp`` is the attention tensor-parallel size inside one attention-DP rank, ``attention_dp``
    the attention data-parallel size, GPUs per worker = tp * pp * attention_dp; MoE layers
    split the same GPUs moe_tp * ep. Disagg ``*_gpus`` count all GPUs of that role (all workers).
    ``line`` is the 1-based line for line-based files (CSV, JSONL) and the record number for
    a JSON file holding several records (GuideLLM benchmarks).
    """

    model_config = ConfigDict(extra="forbid")

    # provenance
    source_file: str
    line: int
    format: Format
    row_id: str | None = None

    # what ran, where
    model: str | None = None
    gpu: str | None = None
    num_gpus: Count | None = None
    engine: str | None = None
    engine_version: str | None = None
    measured_on: str | None = None  # ISO date the run was measured (YYYY-MM-DD): the engine release out then, when no version is given

    # parallel layout
    mode: Mode | None = None
    tp: Count | None = None
    pp: Count | None = None
    ep: Count | None = None
    moe_tp: Count | None = None
    attention_dp: Count | None = None
    batch_size: Count | None = None
    prefill_workers: Count | None = None
    prefill_tp: Count | None = None
    prefill_pp: Count | None = None
    prefill_ep: Count | None = None
    prefill_moe_tp: Count | None = None
    prefill_attention_dp: Count | None = None
    prefill_gpus: Count | None = None
    prefill_batch: Count | None = None
    decode_workers: Count | None = None
    decode_tp: Count | None = None
    decode_pp: Count | None = None
    decode_ep: Count | None = None
    decode_moe_tp: Count | None = None
    decode_attention_dp: Count | None = None
    decode_gpus: Count | None = None
    decode_batch: Count | None = None

    # numeric formats (raw strings as written)
    precision: str | None = None
    precision_act: str | None = None
    kv_dtype: str | None = None
    gemm_quant_mode: str | None = None
    moe_quant_mode: str | None = None

    # workload and load point
    # input / output tokens per request: the mean a client result's token totals give, or, for the formats in
    # CONFIGURED_LENGTHS, the lengths the client was configured with (the longest of a random range ratio's range)
    isl: Positive | None = None
    osl: Positive | None = None
    dataset: str | None = None
    concurrency: Positive | None = None  # client cap on requests in flight
    request_rate: Positive | None = None  # req/s offered; inf = all requests at once
    token_budget: Count | None = None  # engine token budget per step per attention rank (chunked-prefill size)
    # the engine's GPU memory fraction as the engine reads it (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static,
    # TensorRT-LLM free_gpu_memory_fraction; simfront/engines/scheduler.yaml kv_memory_rule): sizes its KV pool;
    # "default": the run set none, so its engine release's own default (simfront.engine_memory); absent: not known,
    # priced with the pool simfront's launch lines give every engine
    gpu_memory_fraction: Annotated[float, Field(gt=0, le=1)] | Literal["default"] | None = None
    num_prompts: Count | None = None  # requests the benchmark client sent in all (its first `concurrency` at once)
    startup_wave_share: NonNegative | None = None  # share of requests in a synchronised start-up wave (0: steady state)
    # the client's lengths: uniform in [r L, L] (--random-range-ratio r); 1 = every request exactly ISL / OSL tokens
    random_range_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    # engine admission: SGLang --scheduler-recv-interval N (new requests taken in every N decode steps; 1 = every step)
    scheduler_recv_interval: Count | None = None
    # the engine ran two-batch overlap (SGLang --enable-two-batch-overlap, vLLM --enable-dbo; simfront's sidecar records it)
    two_batch_overlap: bool | None = None
    # how the MoE router's tokens spread over the experts in the run: a power-law exponent (a measured skew), or "balanced"
    # (e.g. an expert-parallel load balancer with redundant experts, TensorRT-LLM's load_balancer num_slots); None:
    # simfront's default skew (predict --routing-skew; simfront.step.routing_alpha_of checks the exponent's range)
    routing_skew: Annotated[float, Field(gt=0)] | Literal["balanced"] | None = None

    # speculative decoding
    spec_decoding: SpecDecoding | None = None
    spec_k: Count | None = None
    acceptance_length: AcceptLength | None = None
    # speculative decoding ran under the engine's overlap scheduler (SGLang's SGLANG_ENABLE_SPEC_V2=1 before 0.5.13
    # made it the default); None: what the engine release does by default (simfront/engines/scheduler.yaml)
    spec_overlap: bool | None = None

    # the statistic over requests that ttft_ms holds: "mean" (every reader's first choice, and the default when None) or
    # "median" (a source that records no mean: InferenceMAX's time-series rows, a client result with p50 only). A
    # benchmark's synchronised start-up wave moves the mean TTFT but not the median where the wave is under half the
    # requests, so the evaluator prices the median as a steady-state request's TTFT (simfront.measured)
    ttft_statistic: Literal["mean", "median"] | None = None

    # metrics
    ttft_ms: NonNegative | None = None
    tpot_ms: NonNegative | None = None  # per request (E2E - TTFT)/(OSL - 1), averaged
    itl_ms: NonNegative | None = None  # gaps between streamed chunks (vLLM ITL), not TPOT
    e2el_ms: NonNegative | None = None
    tok_s_per_user: NonNegative | None = None
    output_tok_s_total: NonNegative | None = None
    output_tok_s_per_gpu: NonNegative | None = None  # output tok/s over ALL GPUs (prefill + decode)
    total_tok_s: NonNegative | None = None  # input + output tok/s
    request_throughput: NonNegative | None = None

    # bookkeeping
    metric_definitions: dict[str, str] = Field(default_factory=dict)
    missing: list[str] = Field(default_factory=list)
    notes: dict[str, str] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class IngestResult(BaseModel):
    """Points in input order (file order, then line order) and one line per problem."""

    points: list[MeasuredPoint] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    # the rows behind ``problems`` that have a line: {source_file, line, message, duplicate_of}
    # (duplicate_of = {source_file, line} of the row a duplicate repeats, else None)
    skipped: list[dict[str, Any]] = Field(default_factory=list)


PROVENANCE_FIELDS = ("source_file", "line", "format", "row_id")
METRIC_FIELDS = (
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2el_ms",
    "tok_s_per_user",
    "output_tok_s_total",
    "output_tok_s_per_gpu",
    "total_tok_s",
    "request_throughput",
)
BOOKKEEPING_FIELDS = ("metric_definitions", "missing", "notes", "extra", "warnings")
# Fields a sidecar YAML or an override may set: the configuration, never a metric.
CONFIG_FIELDS = tuple(
    f for f in MeasuredPoint.model_fields if f not in PROVENANCE_FIELDS + METRIC_FIELDS + BOOKKEEPING_FIELDS
)
INT_FIELDS = frozenset(f for f, info in MeasuredPoint.model_fields.items() if "int" in str(info.annotation))
BOOL_FIELDS = frozenset(f for f, info in MeasuredPoint.model_fields.items() if "bool" in str(info.annotation))
# how a reader's note on a field it derived (num_gpus from one worker's layout ...) begins: the file did not give it
DERIVED_NOTE = "derived"
# the value a field typed "number or 'default'" takes for "the engine's own default" (gpu_memory_fraction)
ENGINE_DEFAULT = "default"
# the words a number field also takes, as its type names them (gpu_memory_fraction "default", routing_skew "balanced")
NUMBER_WORDS = {f: frozenset(re.findall(r"'([a-z_]+)'", str(info.annotation)))
                for f, info in MeasuredPoint.model_fields.items()
                if "float" in str(info.annotation) and "Literal" in str(info.annotation)}
FLOAT_FIELDS = frozenset(
    f for f, info in MeasuredPoint.model_fields.items() if "float" in str(info.annotation)
)

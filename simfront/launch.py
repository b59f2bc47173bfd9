"""Engine launch commands, client benchmark commands and the result sidecar for one deployment.

A :class:`Deployment` is one serving configuration simfront predicts. :func:`launch_commands` turns
it into the launch lines of vLLM, SGLang or TensorRT-LLM (plus the TRT-LLM YAML files),
:func:`benchmark_command` into the client command that measures the same point, and
:func:`sidecar_yaml` into the YAML that ``simfront validate`` reads next to the client's result
file. Flag spellings follow ecosystem.md §8 (shared/reference); anything not confirmed there
is flagged in ``LaunchPlan.notes``.

Layout convention (as simfront/layout.py, aiconfigurator): a worker has ``tp * pp * attention_dp``
GPUs; attention runs TP over ``tp`` inside each of ``attention_dp`` groups; MoE layers split the
same ``tp * attention_dp`` GPUs ``ep`` ways over experts. SGLang's ``--tp-size 8 --dp-size 8
--enable-dp-attention --ep-size 8`` is ``tp=1, attention_dp=8, ep=8`` here. ``max_batch`` and
``max_num_tokens`` are per worker (summed over its attention-DP ranks); each engine gets them in
its own unit (per DP rank or per server).
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import yamlio
from .errors import SimfrontError
from .engine_rules import why_not
from .precision import normalize_format

ENGINE_TABLES_DIR = Path(__file__).with_name("engines")  # <engine>.yaml: flag spellings per release

ENGINES = ("vllm", "sglang", "trtllm")
BENCH_TOOLS = ("vllm", "sglang", "aiperf")
MODES = ("agg", "disagg")
WEIGHT_PRECISIONS = ("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "w4a16")
KV_DTYPES = ("bf16", "fp8")
SPEC_METHODS = ("mtp", "eagle3", "ngram")

# Ports. FRONT_PORT is the vLLM / trtllm-serve default (ecosystem.md §2.1, §8.3); every engine's
# front end (agg server or disagg router) is put there so one benchmark URL fits all. The role
# ports are free ports simfront picks, not engine defaults.
FRONT_PORT = 8000
ROLE_PORTS = {"prefill": 8100, "decode": 8200}
SGLANG_DIST_INIT_PORT = 20000  # any free port on the head node for --dist-init-addr
VLLM_DP_RPC_PORT = 13345  # any free port on the head node for --data-parallel-rpc-port
VLLM_NIXL_SIDE_CHANNEL_BASE_PORT = 5600  # vLLM NixlConnector side-channel port; one per co-located instance (unverified)

# Client load: num_prompts = 10 x concurrency, as InferenceX runs it (ecosystem.md §5).
PROMPTS_PER_CONCURRENCY = 10

# Disaggregated serving. The vLLM connector is ecosystem.md §8.1; the front ends are not in
# ecosystem.md and are marked unverified in the notes.
VLLM_KV_TRANSFER = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
VLLM_PD_PROXY = "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"
SGLANG_ROUTER_MODULE = "sglang_router.launch_router"
SGLANG_TRANSFER_BACKEND = "mooncake"  # SGLang's default transfer backend (ecosystem.md §8.2: mooncake|nixl)
TRTLLM_CACHE_TRANSCEIVER_BACKEND = "DEFAULT"  # cache_transceiver_config.backend (ecosystem.md §8.3)

# Checkpoint naming when the wanted weight precision differs from the model's native one:
# (organisation or None for the model's own, suffix). Conventions of published repos, e.g.
# nvidia/DeepSeek-V3.2-NVFP4 (models/configs), Qwen/Qwen3-32B-FP8; assumptions, said in notes.
CHECKPOINT_SUFFIX = {
    "nvfp4": ("nvidia", "-NVFP4"),  # NVIDIA ModelOpt NVFP4 releases
    "fp8": ("nvidia", "-FP8"),  # NVIDIA ModelOpt per-tensor FP8 releases (used where no online FP8)
    "fp8_block": (None, "-FP8"),  # block-FP8 releases by the model authors (Qwen, DeepSeek style)
    "mxfp4": (None, "-MXFP4"),
    "w4a16": (None, "-AWQ"),
    "bf16": (None, "-BF16"),
}
_PRECISION_TAIL = re.compile(r"[-_](nvfp4|fp4|mxfp4|fp8|fp8[-_]dynamic|bf16|awq|gptq|int4)$", re.I)


@dataclass
class WorkerLayout:
    """Parallel layout and limits of one disaggregated role (prefill or decode workers)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: int = 1
    max_batch: int = 256  # max running requests per worker
    workers: int = 1  # workers of this role
    max_num_tokens: int | None = None  # per-worker token budget; None: the deployment's

    @property
    def gpus_per_worker(self) -> int:
        return self.tp * self.pp * self.attention_dp


@dataclass
class Deployment:
    """One serving configuration: model, parallel layout, limits, precision and the load point."""

    model_id: str  # Hugging Face id, e.g. "deepseek-ai/DeepSeek-R1"
    mode: str = "agg"  # "agg" | "disagg"
    tp: int = 1
    pp: int = 1
    ep: int = 1  # MoE expert-parallel size (1 = none)
    attention_dp: int = 1  # attention data-parallel size (1 = off)
    max_batch: int = 256  # max running requests per worker
    max_num_tokens: int = 8192  # per-worker token budget per step (chunked-prefill size)
    max_seq_len: int | None = None  # None: isl + osl
    kv_dtype: str = "bf16"  # "bf16" | "fp8"
    weight_precision: str = "bf16"  # one of WEIGHT_PRECISIONS
    spec_method: str | None = None  # None | "mtp" | "eagle3" | "ngram"
    spec_k: int = 0  # draft tokens per step
    replicas: int = 1  # agg workers of this layout
    gpus_per_node: int = 8
    num_gpus: int | None = None  # total GPUs; None: derived from the layout
    isl: int = 1024
    osl: int = 1024
    # the benchmark's lengths uniform in [r ISL, ISL] and [r OSL, OSL] (SGLang's --random-range-ratio spelling);
    # None: every request exactly ISL / OSL
    random_range_ratio: float | None = None
    concurrency: int = 64  # client concurrency over the whole deployment
    prompts_per_client: float | None = None  # requests the benchmark sends per client; None: PROMPTS_PER_CONCURRENCY
    gpu_memory_fraction: float | None = None  # None: the engine's fraction that gives the priced KV pool (_memory_fraction)
    prefill: WorkerLayout | None = None  # disagg only
    decode: WorkerLayout | None = None  # disagg only
    gpu: str | None = None  # hardware name for the sidecar, e.g. "h200_sxm"
    checkpoint: str | None = None  # exact checkpoint to serve; None: chosen from model_id + precision
    draft_model: str | None = None  # EAGLE3 draft checkpoint
    two_batch_overlap: bool = False  # priced with the engine's two-batch overlap (predict --two-batch-overlap)

    @property
    def seq_len(self) -> int:
        return self.max_seq_len if self.max_seq_len is not None else self.isl + self.osl

    def roles(self) -> dict[str, WorkerLayout]:
        """Worker kinds: {"server": layout} for agg, {"prefill": .., "decode": ..} for disagg."""
        if self.mode == "disagg":
            return {"prefill": self.prefill, "decode": self.decode}
        return {
            "server": WorkerLayout(
                self.tp, self.pp, self.ep, self.attention_dp, self.max_batch, self.replicas, self.max_num_tokens
            )
        }

    @property
    def total_gpus(self) -> int:
        return sum(r.workers * r.gpus_per_worker for r in self.roles().values())


@dataclass
class LaunchPlan:
    """Launch lines (one per worker kind, plus the disagg router), files they read, and caveats."""

    engine: str
    commands: list[str]
    roles: list[str]  # what each command is: "server", "prefill", "decode", "router"
    files: dict[str, str] = field(default_factory=dict)  # filename -> content
    notes: list[str] = field(default_factory=list)


class _Expand(str):
    """A shell word that must expand (``$VAR`` placeholders): rendered in double quotes."""


def _render(args: list, env: dict[str, str] | None = None) -> str:
    words = [f"{k}={shlex.quote(str(v))}" for k, v in (env or {}).items()]
    words += [f'"{a}"' if isinstance(a, _Expand) else shlex.quote(str(a)) for a in args]
    return " ".join(words)


# ---------------------------------------------------------------------------------------------
# Per-engine, per-release flag tables (simfront/engines/<engine>.yaml)


def _version_key(text: str) -> tuple:
    """Sortable (major, minor, patch, ...) of a release string like "0.5.23", "v1.1.0rc2", "0.10.1.post1"."""
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(text))
    if not m:
        raise SimfrontError(f"engine version {text!r} is not a release number like 0.5.23 or 1.1.0")
    return tuple(int(x) for x in m.group(1).split("."))


@lru_cache(maxsize=None)
def engine_table(engine: str) -> dict:
    """The parsed ``simfront/engines/<engine>.yaml`` (versions newest first, layout rules)."""
    eng = normalize_engine(engine)
    doc = dict(yamlio.load(ENGINE_TABLES_DIR / f"{eng}.yaml"))  # a copy: the parsed document is shared (yamlio's cache)
    by_since = {str(v["since"]): v for v in doc["versions"]}
    doc["versions"] = sorted((_inherited(v, by_since, eng) for v in doc["versions"]),
                             key=lambda v: _version_key(v["since"]), reverse=True)
    return doc


# entry keys that are mappings: an entry that ``inherits`` another states only the names that differ (null drops one)
_MERGED_KEYS = ("flags", "values", "env")


def _inherited(entry: dict, by_since: dict, eng: str, seen: tuple = ()) -> dict:
    """A version entry with what it ``inherits`` (the entry of another ``since``) filled in: the named entry's keys,
    its ``flags`` / ``values`` / ``env`` mappings updated by this entry's (a null value removes the name); ``checked``
    is never inherited (the release a parser checked is one entry's own claim)."""
    base_since = entry.get("inherits")
    if base_since is None:
        return entry
    base_since = str(base_since)
    if base_since not in by_since or base_since in seen:
        raise SimfrontError(f"simfront/engines/{eng}.yaml: entry {entry['since']} inherits {base_since!r}, which is "
                            f"{'a cycle' if base_since in seen else 'not an entry'}; valid: {', '.join(by_since)}")
    base = _inherited(by_since[base_since], by_since, eng, seen + (str(entry["since"]),))
    out = {k: v for k, v in base.items() if k not in _MERGED_KEYS} | {k: v for k, v in entry.items()
                                                                       if k not in _MERGED_KEYS + ("inherits",)}
    for key in _MERGED_KEYS:
        merged = dict(base.get(key) or {}) | dict(entry.get(key) or {})
        out[key] = {k: v for k, v in merged.items() if v is not None}
    out["checked"] = entry.get("checked")  # what was checked against a parser is this entry's own claim
    return out


@dataclass(frozen=True)
class EngineSpelling:
    """How one engine release spells its entry points, flags and values."""

    engine: str
    since: str  # oldest release this entry covers
    checked: str | None  # release the spellings were checked against (None: from ecosystem.md only)
    server: tuple[str, ...]
    model_positional: bool
    bench: tuple[str, ...] | None
    flags: dict
    values: dict
    attention_dp_style: str | None = None
    env: dict = field(default_factory=dict)  # environment settings per purpose (``moe_a2a``: {VAR: value})

    def flag(self, name: str) -> str:
        try:
            return self.flags[name]
        except KeyError:
            raise SimfrontError(f"{self.engine} {self.since}+ has no flag for {name!r} in "
                                f"{ENGINE_TABLES_DIR / (self.engine + '.yaml')}") from None


def engine_spelling(engine: str, engine_version: str | None = None) -> EngineSpelling:
    """Spellings of ``engine`` at ``engine_version`` (default: the newest release in its table).

    A release uses the newest table entry whose ``since`` is not after it; a release older than every
    entry is an error naming the oldest one covered.
    """
    eng = normalize_engine(engine)
    versions = engine_table(eng)["versions"]
    entry = versions[0]
    if engine_version is not None:
        want = _version_key(engine_version)
        fits = [v for v in versions if _version_key(v["since"]) <= want]
        if not fits:
            raise SimfrontError(f"{eng} {engine_version} is older than any release simfront has flag spellings "
                                f"for; valid: {versions[-1]['since']} or newer")
        entry = fits[0]
    return EngineSpelling(eng, str(entry["since"]), entry.get("checked"), tuple(entry["server"]),
                          bool(entry.get("model_positional")), tuple(entry["bench"]) if entry.get("bench") else None,
                          dict(entry["flags"]), dict(entry.get("values") or {}), entry.get("attention_dp_style"),
                          dict(entry.get("env") or {}))


def _role_layouts(point_or_deployment) -> dict[str, tuple[int, int, int, int, bool]]:
    """{role: (tp, pp, ep, attention_dp, drafts)} of a Deployment or a frontier/plan point dict (``drafts``: the role
    runs speculative decoding: an aggregated server or a decode worker with a draft method)."""
    if isinstance(point_or_deployment, Deployment):
        drafts = point_or_deployment.spec_method is not None
        return {r: (lay.tp, lay.pp, lay.ep, lay.attention_dp, drafts and r != "prefill")
                for r, lay in point_or_deployment.roles().items()}
    p = point_or_deployment
    if not hasattr(p, "get") or any(p.get(k) is None for k in ("tp", "ep", "attention_dp")):  # dicts and typed points
        raise SimfrontError("launchable() needs a Deployment or a frontier point with tp, ep and attention_dp")
    drafts = str(p.get("spec") or "none") != "none"
    main = (int(p["tp"]), int(p.get("pp") or 1), int(p["ep"]), int(p["attention_dp"]), drafts)
    if p.get("mode") == "disagg":
        pre = (int(p["prefill_tp"]), 1, int(p["prefill_ep"]), int(p["prefill_attention_dp"]), False)
        return {"prefill": pre, "decode": main}
    return {"server": main}


def launchable(point_or_deployment, engine: str, engine_version: str | None = None) -> tuple[bool, str]:
    """(True, "") when ``engine`` (at release ``engine_version``, None: the newest) can start every worker of the
    layout, else (False, the reason).

    Takes a :class:`Deployment` or a frontier / plan point (``tp``, ``pp``, ``ep``, ``attention_dp``, ``spec``,
    and ``prefill_*`` for disagg). The rules are ``layout_rules`` of the engine's table (:mod:`simfront.engine_rules`).
    """
    eng = normalize_engine(engine)
    if gpu := getattr(point_or_deployment, "gpu", None):  # a Deployment names its GPU: the engine must run there
        from .hardware import get_hardware
        from .inputs import engine_gpu_refusal

        if why := engine_gpu_refusal(eng, get_hardware(gpu), "engine"):
            return False, why
    for role, (tp, pp, ep, dp, drafts) in _role_layouts(point_or_deployment).items():
        group = tp * dp  # GPUs one MoE layer spans
        if group % ep:
            return False, f"{role}: ep={ep} does not divide tp*attention_dp={group}"
        why = why_not(eng, tp, pp, dp, ep, drafts, engine_version, disagg=role == "decode")
        if why:
            return False, f"{role}: {why}"
    return True, ""


def _yaml_dump(doc) -> str:
    """YAML text of a file the launch plan writes (PyYAML imported only when a plan is written)."""
    import yaml

    return yaml.safe_dump(doc, sort_keys=False)


def startable_note(points: list, what: str) -> str | None:
    """A note on points chosen for the all-engine average (frontier points, plan rows' deployments) that not every
    engine starts (:mod:`simfront.engine_rules`): how many each engine starts; None when every engine starts them all."""
    counts = {e: sum(launchable(p, e)[0] for p in points) for e in ENGINES}
    if not points or all(c == len(points) for c in counts.values()):
        return None
    starts = ", ".join(f"{e} {c}" for e, c in counts.items())
    return (f"not every engine starts every {what} (simfront/engines/*.yaml layout_rules): of the {len(points)}, {starts}; "
            f"--engine E keeps only what E starts")


# ---------------------------------------------------------------------------------------------
# Validation


def normalize_engine(engine: str) -> str:
    e = str(engine).strip().lower().replace("-", "").replace("_", "")
    e = {"tensorrtllm": "trtllm", "trt": "trtllm"}.get(e, e)
    if e not in ENGINES:
        raise SimfrontError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    return e


def _check_layout(name: str, lay: WorkerLayout, gpus_per_node: int) -> None:
    for k in ("tp", "pp", "ep", "attention_dp", "max_batch", "workers"):
        if int(getattr(lay, k)) < 1:
            raise SimfrontError(f"{name}.{k} must be >= 1, got {getattr(lay, k)}")
    if lay.max_num_tokens is not None and lay.max_num_tokens < 1:
        raise SimfrontError(f"{name}.max_num_tokens must be >= 1, got {lay.max_num_tokens}")
    group = lay.tp * lay.attention_dp  # GPUs one MoE layer spans (one pipeline stage)
    if group % lay.ep:
        raise SimfrontError(
            f"{name}: ep={lay.ep} must divide tp*attention_dp={group} "
            f"(tp is the attention TP inside each attention-DP group; GPUs per worker = tp*pp*attention_dp)"
        )
    if lay.max_batch < lay.attention_dp:
        raise SimfrontError(
            f"{name}: max_batch={lay.max_batch} is below attention_dp={lay.attention_dp} (one request per rank)"
        )
    g = lay.gpus_per_worker
    if g > gpus_per_node and g % gpus_per_node:
        raise SimfrontError(f"{name}: a {g}-GPU worker does not fill whole {gpus_per_node}-GPU nodes")


def check_deployment(dep: Deployment, engine: str | None = None, engine_version: str | None = None) -> None:
    """Raise SimfrontError when ``dep`` is inconsistent (or unsupported by ``engine`` at release ``engine_version``)."""
    if dep.mode not in MODES:
        raise SimfrontError(f"unknown mode {dep.mode!r}; valid: {', '.join(MODES)}")
    if dep.mode == "disagg" and (dep.prefill is None or dep.decode is None):
        raise SimfrontError("mode 'disagg' needs both prefill and decode WorkerLayouts")
    if dep.mode == "agg" and (dep.prefill is not None or dep.decode is not None):
        raise SimfrontError("prefill/decode layouts are only for mode 'disagg'")
    if normalize_format(dep.weight_precision) not in WEIGHT_PRECISIONS:
        raise SimfrontError(f"unknown weight precision {dep.weight_precision!r}; valid: {', '.join(WEIGHT_PRECISIONS)}")
    if normalize_format(dep.kv_dtype) not in KV_DTYPES:
        raise SimfrontError(f"unknown KV-cache dtype {dep.kv_dtype!r}; valid: {', '.join(KV_DTYPES)}")
    if dep.spec_method is not None:
        if dep.spec_method not in SPEC_METHODS:
            raise SimfrontError(f"unknown spec_method {dep.spec_method!r}; valid: None, {', '.join(SPEC_METHODS)}")
        if dep.spec_k < 1:
            raise SimfrontError(f"spec_method {dep.spec_method!r} needs spec_k >= 1, got {dep.spec_k}")
    for k in ("isl", "osl", "concurrency", "gpus_per_node", "max_num_tokens", "replicas"):
        if int(getattr(dep, k)) < 1:
            raise SimfrontError(f"{k} must be >= 1, got {getattr(dep, k)}")
    if dep.seq_len < dep.isl + dep.osl:
        raise SimfrontError(f"max_seq_len={dep.seq_len} is below isl+osl={dep.isl + dep.osl}: requests would be rejected")
    f = dep.gpu_memory_fraction
    if f is not None and not 0.0 < f <= 1.0:
        raise SimfrontError(f"gpu_memory_fraction must be in (0, 1], got {f}")
    if engine is not None and dep.gpu:
        from .hardware import get_hardware
        from .inputs import check_engine_gpu

        check_engine_gpu(engine, get_hardware(dep.gpu), "engine")
    for name, lay in dep.roles().items():
        _check_layout(name, lay, dep.gpus_per_node)
    if dep.num_gpus is not None and dep.num_gpus != dep.total_gpus:
        parts = " + ".join(f"{n}: {r.workers} x {r.tp}*{r.pp}*{r.attention_dp}" for n, r in dep.roles().items())
        raise SimfrontError(
            f"num_gpus={dep.num_gpus} but the layout uses {dep.total_gpus} GPUs ({parts}; workers x tp*pp*attention_dp)"
        )
    if engine is None:
        return
    ok, reason = launchable(dep, engine, engine_version)
    if not ok:
        raise SimfrontError(reason)


# ---------------------------------------------------------------------------------------------
# Checkpoint and precision


def _model_info(model_id: str):
    """(main weight format, MTP layers) from simfront's model catalog, or (None, None) if unknown."""
    from .models import get_model  # catalog lookup; unknown models are served as given

    try:
        m = get_model(model_id)
    except SimfrontError:
        return None, None
    p = m.precision
    return (p.experts if m.arch.is_moe else p.dense), m.arch.mtp_layers


def resolve_checkpoint(dep: Deployment, engine: str) -> tuple[str, str | None, list[str]]:
    """(checkpoint to serve, online ``--quantization`` value or None, notes) for ``dep`` on ``engine``."""
    want = normalize_format(dep.weight_precision)
    if dep.checkpoint:
        return dep.checkpoint, None, [f"serving checkpoint {dep.checkpoint} as given; assumed to hold {want} weights"]
    native, _ = _model_info(dep.model_id)
    if native is None:
        return dep.model_id, None, [
            f"{dep.model_id} is not in simfront's catalog: assumed it already holds {want} weights "
            "(engines auto-detect quantization from the checkpoint)"
        ]
    native = "bf16" if native == "fp16" else native
    fp8s = ("fp8", "fp8_block")
    if want == native:
        return dep.model_id, None, []
    if want in fp8s and native in fp8s:
        return dep.model_id, None, [f"{dep.model_id} ships {native} weights; served as is for {want}"]
    if want == "fp8" and native == "bf16" and engine in ("vllm", "sglang"):
        return dep.model_id, "fp8", ["online FP8 quantization of the BF16 checkpoint (--quantization fp8)"]
    org, _, name = dep.model_id.rpartition("/")
    name = _PRECISION_TAIL.sub("", name)
    new_org, suffix = CHECKPOINT_SUFFIX[want]
    ckpt = f"{new_org or org}/{name}{suffix}" if (new_org or org) else f"{name}{suffix}"
    return ckpt, None, [
        f"assumed checkpoint id {ckpt} for {want} weights ({dep.model_id} ships {native}); "
        "check it exists on the Hub or set Deployment.checkpoint"
    ]


# ---------------------------------------------------------------------------------------------
# Per-engine pieces


def _per_rank(value: int, ranks: int, what: str, notes: list[str]) -> int:
    """Split a per-worker limit over attention-DP ranks (floor), noting any remainder."""
    if value % ranks:
        notes.append(f"{what}={value} is not a multiple of attention_dp={ranks}: each rank gets {value // ranks}")
    return value // ranks


def _tokens(dep: Deployment, lay: WorkerLayout) -> int:
    """Per-worker token budget of a role."""
    return dep.max_num_tokens if lay.max_num_tokens is None else lay.max_num_tokens


# Memory fraction each engine gets when simfront cannot size the priced KV pool (a model or GPU it does not know):
# the engines' own defaults. The three mean different things (ecosystem.md §9.3).
FALLBACK_MEMORY_FRACTION = {
    "vllm": 0.90,  # --gpu-memory-utilization default (ecosystem.md §8.1)
    "sglang": 0.82,  # InferenceX dsr1_fp8_h200.sh recipe (ecosystem.md §5); SGLang's own default varies with GPU/TP (§8.2)
    "trtllm": 0.90,  # kv_cache_config.free_gpu_memory_fraction default (ecosystem.md §8.3)
}
MEMORY_FRACTION_DIGITS = 3  # engines take the fraction as a decimal; rounded down, never a larger pool than priced


@lru_cache(maxsize=256)
def _priced_memory_fraction(model_id: str, weights: str, kv: str, gpu: str, tp: int, pp: int, dp: int, ep: int,
                            engine: str) -> float | None:
    """``engine``'s own memory fraction that gives one GPU of a ``tp x pp x dp`` (EP ``ep``) worker the KV pool
    simfront prices (simfront.memory.plan_memory: KV_CACHE_FRACTION of the memory free after weights and runtime),
    read by the engine's rule (simfront/engines/scheduler.yaml ``kv_memory_rule``); None for a model or GPU simfront
    does not know."""
    from .hardware import get_hardware
    from .memory import memory_fraction_for_pool, plan_memory
    from .models import apply_precision, get_model
    from .scheduler import scheduler_settings

    try:
        m, hw = get_model(model_id), get_hardware(gpu)
        prec = apply_precision(m, weights, kv)
    except SimfrontError:
        return None
    mem = plan_memory(m, prec, hw, tp, pp, dp, ep, 1, 1)  # the search's verdict: weights, reserve and KV pool per GPU
    f = float(memory_fraction_for_pool(hw.hbm_bytes, mem.weights_bytes_per_gpu, mem.reserve_bytes_per_gpu,
                                       mem.kv_budget_bytes_per_gpu, scheduler_settings(engine).kv_memory_rule))
    scale = 10 ** MEMORY_FRACTION_DIGITS
    return math.floor(f * scale + 1e-9) / scale if 0.0 < f <= 1.0 else None  # 1e-9: 0.9 stays 0.9 (float error)


def _memory_fraction(dep: Deployment, engine: str, lay: "WorkerLayout | None" = None) -> float:
    """The deployment's memory fraction for ``engine``; else the fraction that gives a GPU of the role ``lay`` (the
    server, or the decode workers) the KV pool simfront priced, in the engine's own terms; else the engine's default."""
    if dep.gpu_memory_fraction is not None:
        return dep.gpu_memory_fraction
    roles = dep.roles()
    lay = lay or roles.get("server") or roles.get("decode")
    priced = None
    if lay is not None and dep.gpu:
        priced = _priced_memory_fraction(dep.model_id, normalize_format(dep.weight_precision), _kv(dep), dep.gpu,
                                         lay.tp, lay.pp, lay.attention_dp, lay.ep, engine)
    return FALLBACK_MEMORY_FRACTION[engine] if priced is None else priced


def _kv(dep: Deployment) -> str:
    return normalize_format(dep.kv_dtype)


def _nodes(lay: WorkerLayout, gpus_per_node: int) -> int:
    return max(1, lay.gpus_per_worker // gpus_per_node)


def _draft(dep: Deployment, notes: list[str]) -> str:
    if dep.draft_model:
        return dep.draft_model
    notes.append("EAGLE3 needs a draft checkpoint: replace <eagle3-draft-model> (or set Deployment.draft_model)")
    return "<eagle3-draft-model>"


# GPUs of one NVLink domain beyond which TensorRT-LLM's MoE all-to-all runs over multi-node NVLink (MNNVL, GB200 /
# GB300 NVL72) by itself; an 8-GPU HGX board is one node's domain
HGX_DOMAIN_GPUS = 8


def _moe_a2a(dep, role: str, lay, sp: EngineSpelling, notes: list[str]) -> tuple[list, dict, str]:
    """(flags, environment, library) that make an attention-DP + EP worker dispatch and combine its MoE tokens with an
    all-to-all, as simfront prices that traffic (``step``: ``ep.dispatch`` / ``ep.combine``), instead of the engines'
    default all-gather + reduce-scatter: DeepEP's, or on a GPU platform the release's table gives another library for
    (``moe_a2a_by_platform``: MoRI on AMD, vLLM and SGLang, its per-step token buffer raised where the table sizes one),
    that one; nothing for other layouts or where the engine picks MNNVL by itself. An environment value may differ by
    role (``{decode: ..., prefill: ...}``). A release with neither gets a note."""
    if lay.attention_dp <= 1 or lay.ep <= 1:
        return [], {}, ""
    hw = None
    if dep.gpu:
        from .hardware import get_hardware

        hw = get_hardware(dep.gpu)
    if sp.engine == "trtllm" and hw is not None and hw.scaleup.domain_gpus > HGX_DOMAIN_GPUS:
        return [], {}, ""
    kind = "prefill" if role == "prefill" else "decode"
    by_platform = sp.values.get("moe_a2a_by_platform") if hw is not None and hw.vendor != "nvidia" else None
    plat = None
    if by_platform is not None:
        from .kernels import platform_of

        plat = str(platform_of(hw))
        if plat in by_platform["values"] and "moe_a2a" in sp.flags:
            env = {}
            if "tokens_env" in by_platform:  # a buffer sized in tokens one rank sends per step
                tokens = _a2a_step_tokens(dep, role, lay)
                if tokens > by_platform["tokens_default"]:
                    env[by_platform["tokens_env"]] = str(tokens)
            return [sp.flags["moe_a2a"], by_platform["values"][plat]], env, by_platform["library"]
    if sp.engine == "sglang" and sp.values.get("deepep"):
        return (*_sglang_deepep(dep, role, lay, sp, notes), "DeepEP")
    if hw is not None and hw.vendor != "nvidia":
        if by_platform is None and ("moe_a2a" in sp.flags or sp.env.get("moe_a2a")):
            notes.append(f"{sp.engine} {sp.since}+ {role}: this release has no AMD all-to-all backend in "
                         f"simfront/engines/{sp.engine}.yaml, so the line asks for DeepEP's, which on {hw.id} needs a "
                         "ROCm DeepEP build in the image")
        elif by_platform is not None:
            notes.append(f"{sp.engine} {sp.since}+ {role}: {by_platform['library']} serves "
                         f"{', '.join(by_platform['values'])} only and DeepEP needs a ROCm build ({hw.id}: {plat}), so this "
                         "attention-DP + EP worker keeps the engine's all-gather + reduce-scatter, more traffic than "
                         "the all-to-all simfront priced")
            return [], {}, ""
    if "moe_a2a" in sp.flags:
        return [sp.flags["moe_a2a"], sp.values["moe_a2a"][kind]], {}, "DeepEP"
    env = {k: str(v[kind] if isinstance(v, dict) else v) for k, v in (sp.env.get("moe_a2a") or {}).items()}
    if not env:
        notes.append(f"{sp.engine} {sp.since}+ {role}: simfront/engines/{sp.engine}.yaml names no way to ask this "
                     "release for DeepEP's all-to-all, so the worker's attention-DP + EP MoE traffic takes the engine's "
                     "default path, not the all-to-all simfront priced")
    return [], env, "DeepEP"


def _a2a_step_tokens(dep, role: str, lay) -> int:
    """Most tokens one attention-DP rank sends through the MoE all-to-all in one step: a decode step's requests (the
    per-rank share of the worker's running requests, floor as :func:`_per_rank` splits it) x (1 + drafts verified), a
    prefill chunk's per-rank share of the worker's token budget (the engines split both over the DP ranks), and on an
    aggregated server the larger of the two."""
    decode = lay.max_batch // lay.attention_dp * (dep.spec_k + 1 if dep.spec_method else 1)
    prefill = _tokens(dep, lay) // lay.attention_dp
    return {"prefill": prefill, "decode": decode}.get(role, max(prefill, decode))


def _mla_fallback_note(dep, role: str, lay, sp: EngineSpelling, version: str | None) -> list[str]:
    """A note where the engine release's MLA decode leaves the platform's native kernel at this worker's KV heads per
    rank (``mla_native_heads``; :func:`simfront.step.mla_fallback_reason`, the rule that prices it too)."""
    if not dep.gpu:
        return []
    from .hardware import get_hardware
    from .models import get_model
    from .scheduler import scheduler_settings
    from .step import mla_fallback_reason

    try:
        att = get_model(dep.checkpoint or dep.model_id).arch.attention
    except SimfrontError:  # a model simfront does not know: nothing to say about its heads
        return []
    why = mla_fallback_reason(scheduler_settings(sp.engine, version).mla_native_heads, get_hardware(dep.gpu), att,
                              lay.tp, lay.attention_dp)
    return [f"{sp.engine} {role}: {why}, which simfront prices under --engine {sp.engine} (the average profile prices "
            "the native kernel); a TP (or TP x attention-DP) size giving one of those head counts runs the native one"] if why else []


def _rocm_kernels(dep, role: str, sp: EngineSpelling, notes: list[str]) -> dict:
    """Environment that makes the engine run the ROCm kernels simfront prices on an AMD GPU (``rocm_kernels`` and
    ``rocm_kernels_platforms`` in the engine's table: vLLM takes AITER's MLA and fused-MoE kernels only with
    VLLM_ROCM_USE_AITER=1, SGLang AITER's fused MoE only with SGLANG_USE_AITER=1); nothing elsewhere."""
    env = sp.env.get("rocm_kernels")
    if not env or not dep.gpu:
        return {}
    from .hardware import get_hardware
    from .kernels import platform_of

    hw = get_hardware(dep.gpu)
    if str(platform_of(hw)) not in sp.values.get("rocm_kernels_platforms", ()):
        return {}
    out = {k: str(v) for k, v in env.items()}
    notes.append(f"{sp.engine} {role}: {', '.join(f'{k}={v}' for k, v in out.items())} on {hw.id}, so that the engine "
                 "runs ROCm AITER's kernels (MLA, fused MoE), the ones simfront prices there (hardware/kernels.yaml), "
                 "not its Triton defaults")
    return out


def _standard_dispatcher(role: str, why: str, notes: list[str]) -> tuple[list, dict]:
    """No all-to-all flag for an attention-DP + EP worker the engine cannot give DeepEP, with the reason in a note."""
    notes.append(f"sglang {role}: {why}, so this attention-DP + EP worker keeps SGLang's standard dispatcher: its MoE "
                 "traffic is all-gather + reduce-scatter, more than the all-to-all simfront priced")
    return [], {}


def _sglang_deepep(dep, role: str, lay, sp: EngineSpelling, notes: list[str]) -> tuple[list, dict]:
    """(flags, environment) for DeepEP's all-to-all on an SGLang attention-DP + EP worker, where the release can run it
    (``deepep`` in simfront/engines/sglang.yaml): its DeepEP MoE layer runs only some expert runners, per expert format
    and role, on GPUs DeepGEMM serves; a runner SGLang would not pick itself is named. Decode steps take DeepEP's
    low-latency kernels, whose buffer holds a fixed number of tokens per rank: a larger decode step (batch per rank x
    tokens per request per step) raises it, and one beyond DeepEP's own ceiling runs the normal kernels. Anything else
    keeps the standard dispatcher, with a note."""
    rule = sp.values["deepep"]
    if dep.gpu:
        from .hardware import get_hardware

        hw = get_hardware(dep.gpu)
        if hw.vendor != "nvidia":
            why = (f"on ROCm SGLang {sp.since}+ runs DeepEP MoE only with a ROCm DeepEP build, which simfront's lines do "
                   f"not set up, and this release's MoRI entry does not cover {hw.id}")
            return _standard_dispatcher(role, why, notes)
        if str(hw.compute_capability) not in rule["compute_capabilities"]:
            why = (f"SGLang {sp.since}+ runs DeepEP MoE on DeepGEMM, which serves compute capability "
                   f"{', '.join(rule['compute_capabilities'])} only ({hw.id}: {hw.compute_capability})")
            return _standard_dispatcher(role, why, notes)
    fmt = normalize_format(dep.weight_precision)
    by_role = rule["runner"].get(fmt)
    runner = by_role.get(role) if isinstance(by_role, dict) else by_role
    if runner is None:
        where = f"only on {' and '.join(sorted(by_role))} workers" if isinstance(by_role, dict) else "on no worker"
        return _standard_dispatcher(role, f"SGLang {sp.since}+ runs {fmt} experts under DeepEP {where} "
                                    "(simfront/engines/sglang.yaml deepep.runner)", notes)
    if runner in rule.get("ep_equals_tp", ()) and lay.ep != lay.tp * lay.attention_dp:
        return _standard_dispatcher(role, f"SGLang's {runner} MoE runner needs --ep-size equal to --tp-size "
                                    f"({lay.ep} != {lay.tp * lay.attention_dp})", notes)
    args = [sp.flags["moe_a2a"], "deepep"]
    if runner != "auto":
        args += [sp.flags["moe_runner"], runner]
        notes.append(f"sglang {role}: {fmt} experts under DeepEP run {runner}'s MoE ({sp.flags['moe_runner']} "
                     f"{runner}); SGLang's own pick there does not take DeepEP's dispatch")
    env: dict = {}
    if role != "prefill":  # decode batches take the low-latency kernels (--deepep-mode auto); prefill the normal ones
        tokens = _a2a_step_tokens(dep, "decode", lay)  # tokens one rank sends through the MoE per decode step
        if tokens > rule["ll_tokens_max"]:
            if runner in rule.get("low_latency_only", ()):
                why = (f"{tokens} decode tokens per rank per step are more than DeepEP's low-latency kernels hold "
                       f"({rule['ll_tokens_max']}), the only ones SGLang's {runner} MoE runner takes")
                return _standard_dispatcher(role, why, notes)
            args += [sp.flags["deepep_mode"], "normal"]
            notes.append(f"sglang {role}: {tokens} decode tokens per rank per step are more than DeepEP's low-latency "
                         f"kernels hold ({rule['ll_tokens_max']}), so DeepEP runs its normal kernels; SGLang then "
                         "captures no CUDA graphs on this worker, which simfront's step price does not include")
        elif tokens > rule["ll_tokens_default"]:
            env[rule["ll_tokens_env"]] = str(tokens)
    return args, env


def _mxfp4_experts(dep: Deployment) -> bool:
    """Whether ``dep`` serves MXFP4 expert weights (a catalog MoE model, or a model simfront does not know, at mxfp4)."""
    if normalize_format(dep.weight_precision) != "mxfp4":
        return False
    from .models import get_model  # catalog lookup; unknown models are served as given

    try:
        return get_model(dep.checkpoint or dep.model_id).arch.is_moe
    except SimfrontError:
        return True


def _vllm_moe_activation(dep, role: str, sp: EngineSpelling, notes: list[str]) -> tuple[list, dict]:
    """(flags, environment) that make vLLM run MXFP4 experts with MXFP8 activations on a GPU where simfront prices them
    so (the fused trtllm-gen MXFP4 x MXFP8 MoE, ``moe_fused_mxfp4`` in hardware/kernels.yaml): vLLM's own default there
    is the BF16-activation kernel, which the calibration MoE rows (``w4a16_mxfp4``) time several times slower in
    decode. How a release asks for it is ``moe_mxfp4_activation`` in simfront/engines/vllm.yaml (an environment
    variable up to 0.23.x, ``--quantization-config`` from 0.24.0). Nothing for other formats or GPUs."""
    priced = _priced_mxfp4_moe_kernel(dep)
    if priced is None or priced[1] != "moe_fused_mxfp4":
        return [], {}
    hw_id, _, kernel = priced
    what = (f"vLLM {role}: MXFP4 experts on {hw_id} run with MXFP8 activations ({kernel.kernel}), the kernel simfront "
            "prices; vLLM's default there keeps BF16 activations (FlashInfer's W4A16 MXFP4 MoE, which the calibration "
            "MoE rows time at 1.2 ms for 128 tokens over 128 experts on one B200, against 0.46 ms for 3,072 tokens with "
            "MXFP8 activations), and vLLM warns that MXFP8 activations may cost some accuracy")
    if "quantization_config" in sp.flags:
        notes.append(what)
        return [sp.flags["quantization_config"], json.dumps(sp.values["moe_mxfp4_activation"], separators=(",", ":"))], {}
    env = {k: str(v) for k, v in (sp.env.get("moe_mxfp4_activation") or {}).items()}
    if env:
        notes.append(what)
    else:
        notes.append(f"vLLM {sp.since}+ {role}: simfront/engines/vllm.yaml names no way to ask this release for MXFP8 "
                     f"activations in its MXFP4 MoE, so the experts on {hw_id} run the engine's default kernel, not the "
                     f"{kernel.kernel} simfront priced")
    return [], env


def _fp8_block_backend(dep, role: str, sp: EngineSpelling, key: str) -> str | None:
    """The MoE backend a worker of ``role`` names for block-scaled FP8 experts (``key`` in the engine's
    simfront/engines/*.yaml values, by role), on a GPU where simfront prices their prefill with the calibrated kernel
    and their decode with the one engines serve there without per-expert groups (``served_without_group_setup`` in
    hardware/kernels.yaml: DeepGEMM's rows, trtllm-gen's FP8 block-scale MoE); None elsewhere or where the release's
    table names none for the role."""
    backend = (sp.values.get(key) or {}).get("prefill" if role == "prefill" else "decode")
    if not backend or not dep.gpu or normalize_format(dep.weight_precision) != "fp8_block":
        return None
    from .hardware import get_hardware
    from .kernels import served_without_group_setup

    return backend if served_without_group_setup("moe", "fp8_block", get_hardware(dep.gpu)) else None


def _vllm_moe_backend(dep, role: str, sp: EngineSpelling) -> list:
    """``--moe-backend`` by role for block-scaled FP8 experts (``moe_backend_fp8_block`` in simfront/engines/vllm.yaml,
    ``_fp8_block_backend``): a prefill worker asks for DeepGEMM; vLLM's own first pick from 0.17.0, FlashInfer's
    trtllm-gen MoE, is the decode pricing's. [] elsewhere."""
    backend = _fp8_block_backend(dep, role, sp, "moe_backend_fp8_block") if "moe_backend" in sp.flags else None
    return [sp.flags["moe_backend"], backend] if backend else []


def _sglang_moe_runner(dep, role: str, lay, sp: EngineSpelling, notes: list[str]) -> tuple[list, bool]:
    """(``--moe-runner-backend`` words, whether the worker must keep SGLang's standard dispatcher) for MXFP4 experts on a
    GPU where they run weight-only (Hopper) under expert parallelism: SGLang's own pick there (triton_kernels) serves EP 1
    only, and without a runner that reads MXFP4 it upcasts the experts to BF16 at load (four times the expert memory
    simfront sized, which need not fit, and BF16 expert GEMMs); the release's weight-only MXFP4 runner
    (``moe_runner_weight_only_ep`` in simfront/engines/sglang.yaml: Marlin, from 0.5.12) keeps them as priced. Marlin's
    runner takes the standard dispatcher only, so an attention-DP + EP worker then leaves DeepEP out (its MoE traffic
    runs all-gather + reduce-scatter, more than the all-to-all priced, said in a note). A release without the runner
    gets a note. Nothing for other formats, GPUs or EP 1."""
    priced = _priced_mxfp4_moe_kernel(dep)
    if priced is None or priced[1] != "moe_weight_only_grouped" or lay.ep <= 1:
        return [], False
    runner = sp.values.get("moe_runner_weight_only_ep")
    if not (runner and "moe_runner" in sp.flags):
        notes.append(f"SGLang {sp.since}+ {role}: no weight-only MXFP4 MoE runner with expert parallelism in this release "
                     f"(simfront/engines/sglang.yaml), so the MXFP4 experts on {priced[0]} are upcast to BF16 at load: four "
                     "times the expert memory simfront sized and BF16 expert GEMMs; use EP 1 or 0.5.12+")
        return [], False
    notes.append(f"SGLang {role}: MXFP4 experts with EP {lay.ep} on {priced[0]} run {runner}'s weight-only MXFP4 MoE "
                 f"({sp.flags['moe_runner']} {runner}); SGLang's own pick (triton_kernels) serves EP 1 only and would "
                 "upcast the experts to BF16 at load, four times the expert memory simfront sized")
    keep_standard = lay.attention_dp > 1
    if keep_standard:
        _standard_dispatcher(role, f"{runner}'s MoE runner takes the standard dispatcher only (layers/moe/moe_runner/"
                             f"{runner}.py registers ('none', '{runner}'))", notes)
    return [sp.flags["moe_runner"], runner], keep_standard


def _sglang_fp8_block_runner(dep, role: str, sp: EngineSpelling, all_to_all: bool) -> list:
    """``--moe-runner-backend`` by role for block-scaled FP8 experts on a worker whose line sets no all-to-all
    (``moe_runner_fp8_block`` in simfront/engines/sglang.yaml, ``_fp8_block_backend``): a prefill worker asks for
    DeepGEMM; SGLang's own pick there is trtllm-gen's MoE for DeepSeek-V3 models, Triton's otherwise. With DeepEP
    (``all_to_all``) SGLang picks DeepGEMM by itself; [] there and elsewhere."""
    if "moe_runner" not in sp.flags or all_to_all:
        return []
    backend = _fp8_block_backend(dep, role, sp, "moe_runner_fp8_block")
    return [sp.flags["moe_runner"], backend] if backend else []


def _two_batch_overlap(dep, role: str, lay, sp: EngineSpelling, notes: list[str]) -> list:
    """The engine flag of two-batch overlap for an attention-DP + EP worker of a point priced with it
    (``step.two_batch_overlap_step``; SGLang --enable-two-batch-overlap, vLLM --enable-dbo); nothing for other
    layouts, which the engines do not split. A release whose flag table names no such flag gets a note."""
    if not dep.two_batch_overlap or lay.attention_dp <= 1 or lay.ep <= 1:
        return []
    if sp.flags.get("two_batch_overlap"):
        return [sp.flags["two_batch_overlap"]]
    notes.append(f"{sp.engine} {sp.since}+ {role}: simfront/engines/{sp.engine}.yaml names no two-batch-overlap flag for "
                 "this release, so the worker runs without the overlap this point was priced with")
    return []


# Decode tokens per step vLLM captures in CUDA graphs when no capture size is given and the release has no flag for
# one (0.8.x: [1, 2, 4] + multiples of 8 up to 512, vllm/config.py CompilationConfig of those releases)
VLLM_DEFAULT_GRAPH_TOKENS = 512


def graph_capture_tokens(tokens: int, steps: dict) -> int:
    """The smallest capture size on the engine's grid that holds ``tokens`` decode tokens: 1, 2 or 4 below the first
    step, else a multiple of the grid step in force from each token count on (``steps``: {from tokens: step}, e.g.
    vLLM's {0: 8, 256: 16} for [1, 2, 4] + range(8, 256, 8) + range(256, N + 1, 16))."""
    n = max(int(tokens), 1)
    if n <= 4:
        return 1 << (n - 1).bit_length()  # 1, 2, 4
    for _ in range(len(steps) + 1):  # rounding up may cross into the next step's range: settle there
        step = int(steps[max(k for k in steps if int(k) <= n)])
        up = -(-n // step) * step
        if up == n:
            return n
        n = up
    return n


def _vllm_cuda_graph(dep, role, per_rank_batch, per_rank_tokens, notes, sp: EngineSpelling) -> list:
    """The flags that make vLLM capture a CUDA graph for the worker's whole decode step, as simfront prices it: from
    0.34.0 the largest request count of a decode graph (the rank's max requests) and, where that step holds more tokens
    than the default decode-graph budget, the budget; before, the largest capture size in tokens (max requests per rank x
    (1 + draft tokens), rounded up to vLLM's capture grid, at most the rank's token budget, where vLLM caps it).
    vLLM's defaults stop at 512 tokens (1024 on datacenter Blackwell in late releases; 0.34.0 off SM100: 512 / (1 +
    draft tokens) requests) and run larger decode steps eager (simfront/engines/vllm.yaml)."""
    q = 1 + (dep.spec_k if dep.spec_method else 0)  # tokens per request in a decode step
    per_rank = per_rank_batch * q
    if "cuda_graph_max_requests" in sp.flags:
        # decode graphs keyed by request counts (vLLM 0.34.0+): every count up to the rank's batch, each of at most the
        # decode-graph token budget, which the line raises where the step needs more than the default one
        out = [sp.flags["cuda_graph_max_requests"], per_rank_batch]
        if per_rank > int(sp.values["cuda_graph_decode_tokens_default"]):
            out += [sp.flags["cuda_graph_decode_tokens"], min(per_rank, max(per_rank_tokens, 1))]
        return out
    if "cuda_graph_max_tokens" not in sp.flags:
        if per_rank > VLLM_DEFAULT_GRAPH_TOKENS:
            notes.append(f"vLLM {sp.since}+ {role}: no flag for CUDA-graph capture sizes in simfront/engines/vllm.yaml; "
                         f"decode steps of more than {VLLM_DEFAULT_GRAPH_TOKENS} tokens (this worker's reach {per_rank}) "
                         "run eager, slower than priced")
        return []
    return [sp.flags["cuda_graph_max_tokens"],
            min(graph_capture_tokens(per_rank, sp.values["cuda_graph_token_steps"]), max(per_rank_tokens, 1))]


def _vllm_async_scheduling(dep, role, lay, notes, sp: EngineSpelling) -> list:
    """``--async-scheduling`` for a vLLM release where it is off by default (0.10.0-0.13.x) and the worker is one the
    release runs it on (``async_scheduling_refuses`` in simfront/engines/vllm.yaml: pipelines, some draft methods,
    workers over several nodes); otherwise a note. simfront prices every vLLM step with its CPU work overlapped
    (scheduler.yaml ``cpu_overlap``); from 0.14.0 vLLM does so by default wherever it can."""
    if "async_scheduling" not in sp.flags:
        return []
    refuses = sp.values.get("async_scheduling_refuses") or {}
    why = [w for w, hit in (("pipeline parallelism", refuses.get("pipeline") and lay.pp > 1),
                            (f"{dep.spec_method} drafts", dep.spec_method in (refuses.get("spec_methods") or ())),
                            ("a worker over several nodes", refuses.get("nodes") and _nodes(lay, dep.gpus_per_node) > 1)) if hit]
    if why:
        notes.append(f"vLLM {sp.since}+ {role}: no async scheduling with {' and '.join(why)} in this release, so each step's "
                     "CPU work runs between GPU steps, not beside them as simfront prices it")
        return []
    return [sp.flags["async_scheduling"]]


def _vllm_server(dep, role, lay, ckpt, quant, port, notes, files, sp: EngineSpelling) -> list:
    """``vllm serve`` words for one worker kind (spellings: simfront/engines/vllm.yaml)."""
    f = sp.flag
    tokens = _tokens(dep, lay)
    args = [*sp.server, ckpt, f("host"), "0.0.0.0", f("port"), port,
            f("tp"), lay.tp, f("pp"), lay.pp, f("dp"), lay.attention_dp]
    if lay.ep > 1:
        args.append(f("expert_parallel"))
    batch = _per_rank(lay.max_batch, lay.attention_dp, f"{role}.max_batch", notes)
    per_rank_tokens = _per_rank(tokens, lay.attention_dp, f"{role}.max_num_tokens", notes)
    args += [f("max_batch"), batch, f("max_num_tokens"), per_rank_tokens,
             f("context_length"), dep.seq_len,
             f("kv_cache_dtype"), sp.values["kv_cache_dtype"][_kv(dep)],
             f("memory_fraction"), _memory_fraction(dep, "vllm", lay)]
    if role != "prefill":
        args += _vllm_cuda_graph(dep, role, batch, per_rank_tokens, notes, sp)
    args += _vllm_async_scheduling(dep, role, lay, notes, sp)
    args += _two_batch_overlap(dep, role, lay, sp, notes)
    if quant:
        args += [f("quantization"), quant]
    if dep.spec_method:
        spec = {"method": sp.values["spec_method"][dep.spec_method]}
        if dep.spec_method == "eagle3":
            spec["model"] = _draft(dep, notes)
        spec["num_speculative_tokens"] = dep.spec_k
        if dep.spec_method == "ngram":
            notes.append("vLLM ngram: prompt_lookup_min/max left at vLLM's defaults (unverified)")
        args += [f("speculative_config"), json.dumps(spec, separators=(",", ":"))]
    if role in ROLE_PORTS:
        args += [f("kv_transfer_config"), json.dumps(VLLM_KV_TRANSFER, separators=(",", ":"))]
    nodes = _nodes(lay, dep.gpus_per_node)
    if nodes > 1:
        ranks_per_node = dep.gpus_per_node // (lay.tp * lay.pp)
        if lay.attention_dp > 1 and ranks_per_node >= 1 and lay.attention_dp % ranks_per_node == 0:
            args += [f("dp_size_local"), ranks_per_node,
                     f("dp_address"), _Expand("$HEAD_IP"), f("dp_rpc_port"), VLLM_DP_RPC_PORT]
            notes.append(
                f"vLLM {role}: {nodes} nodes; this line runs on the head node (HEAD_IP); on node i>0 add "
                f"--headless --data-parallel-start-rank {ranks_per_node}*i (unverified)"
            )
        elif "nnodes" in sp.flags:
            # the multiprocessing executor over the nodes: what simfront prices (vLLM's async scheduling, the overlap of
            # one step's CPU work with the last one's GPU work, runs on it and not under Ray)
            args += [f("nnodes"), nodes, f("node_rank"), _Expand("$NODE_RANK"), f("master_addr"), _Expand("$HEAD_IP")]
            notes.append(f"vLLM {role}: TP/PP spans {nodes} nodes: run the line on each with NODE_RANK=0..{nodes - 1} and "
                         f"HEAD_IP = node 0, adding {f('headless')} on nodes 1..{nodes - 1} (vLLM's multiprocessing executor; "
                         "Ray would run without the async scheduling simfront prices)")
        else:
            notes.append(f"vLLM {role}: TP/PP spans {nodes} nodes: start a Ray cluster over them and run "
                         f"this on the head node (unverified); vLLM {sp.since}+ has no multi-node multiprocessing executor, "
                         "and under Ray each step's CPU work is not overlapped with the GPU's as simfront prices it")
    return args


# A written --mem-fraction-static this much above SGLang's own default for the server is said in the notes
SGLANG_FRACTION_NOTE_MARGIN = 0.02


def _sglang_memory_note(dep, role: str, lay, fraction: float, version: str | None) -> str | None:
    """A note where the line's --mem-fraction-static leaves less memory outside the static pools than SGLang's own
    default would keep for activations and CUDA graphs (simfront.engine_memory), or None (unknown GPU or model too)."""
    from .engine_memory import engine_default
    from .hardware import get_hardware
    from .models import get_model
    from .units import GiB

    if not dep.gpu:
        return None
    try:
        hw, m = get_hardware(dep.gpu), get_model(dep.model_id)
    except SimfrontError:
        return None
    default = float(engine_default("sglang", version, speculative=bool(dep.spec_method), mla=m.arch.attention.kind == "mla")
                    .fractions(hw.hbm_bytes, lay.tp, lay.pp, lay.attention_dp))
    if fraction <= default + SGLANG_FRACTION_NOTE_MARGIN:
        return None
    keep, want = (1.0 - fraction) * hw.hbm_bytes / GiB, (1.0 - default) * hw.hbm_bytes / GiB
    return (f"SGLang {role}: --mem-fraction-static {fraction:g} gives the KV pool simfront priced and leaves {keep:.1f} GiB "
            f"per GPU for activations and CUDA graphs, where SGLang's own default ({default:.3f}) keeps {want:.1f}; if the "
            "server runs out of memory, lower it (the KV pool shrinks by the difference)")


def _sglang_server(dep, role, lay, ckpt, quant, port, notes, files, sp: EngineSpelling) -> list:
    """SGLang server words for one worker kind (spellings: simfront/engines/sglang.yaml)."""
    f = sp.flag
    tokens = _tokens(dep, lay)
    fraction = _memory_fraction(dep, "sglang", lay)
    args = [*sp.server, f("model"), ckpt, f("host"), "0.0.0.0", f("port"), port,
            f("tp"), lay.tp * lay.attention_dp]  # SGLang's TP size is the whole stage (§8.2)
    if lay.pp > 1:
        args += [f("pp"), lay.pp]
    if lay.attention_dp > 1:
        args += [f("attention_dp"), lay.attention_dp]
        if sp.attention_dp_style == "enable_dp_attention":
            args.append(f("enable_dp_attention"))
    if lay.ep > 1:
        args += [f("ep"), lay.ep]
    args += [f("max_batch"), lay.max_batch,  # whole server (split over DP ranks by SGLang)
             f("chunked_prefill_size"), tokens,  # global budget split across dp (ecosystem.md §8.2)
             f("max_prefill_tokens"), tokens,
             f("context_length"), dep.seq_len,
             f("kv_cache_dtype"), sp.values["kv_cache_dtype"][_kv(dep)],
             f("memory_fraction"), fraction]
    note = _sglang_memory_note(dep, role, lay, fraction, sp.since)
    if note:
        notes.append(note)
    if role != "prefill":
        args += [f("cuda_graph_max_bs"), _per_rank(lay.max_batch, lay.attention_dp, f"{role}.max_batch", notes)]
    args += _two_batch_overlap(dep, role, lay, sp, notes)
    if quant:
        args += [f("quantization"), quant]
    if dep.spec_method:
        args += [f("spec_algorithm"), sp.values["spec_method"][dep.spec_method]]
        if dep.spec_method == "eagle3":
            args += [f("spec_draft_model"), _draft(dep, notes)]
        if dep.spec_method != "ngram":
            # chain drafting: k steps, top-1, k+1 verified tokens (set all three, ecosystem.md §8.2)
            args += [f("spec_num_steps"), dep.spec_k, f("spec_topk"), 1]
        args += [f("spec_num_draft_tokens"), dep.spec_k + 1]
        if dep.spec_method == "ngram":
            notes.append("SGLang NGRAM: --speculative-num-draft-tokens k+1, other --speculative-ngram-* flags at "
                         "defaults (unverified)")
    if role in ROLE_PORTS:
        args += [f("disagg_mode"), role, f("disagg_transfer_backend"), SGLANG_TRANSFER_BACKEND]
    nodes = _nodes(lay, dep.gpus_per_node)
    if nodes > 1:
        args += [f("nnodes"), nodes, f("node_rank"), _Expand("$NODE_RANK"),
                 f("dist_init_addr"), _Expand(f"$HEAD_IP:{SGLANG_DIST_INIT_PORT}")]
        notes.append(f"SGLang {role}: run the line on each of {nodes} nodes with NODE_RANK=0..{nodes - 1} and HEAD_IP = node 0")
    return args


def _trtllm_yaml(dep, role, lay, per_rank_batch, per_rank_tokens, notes, sp: EngineSpelling) -> dict:
    """The extra_llm_api_options mapping (LlmArgs keys, ecosystem.md §8.3; unknown keys are errors)."""
    cfg: dict = {"enable_attention_dp": lay.attention_dp > 1}
    cfg["kv_cache_config"] = {"dtype": sp.values["kv_cache_dtype"][_kv(dep)],
                              "free_gpu_memory_fraction": _memory_fraction(dep, "trtllm", lay)}
    if role != "prefill":
        cfg["cuda_graph_config"] = {"enable_padding": True, "max_batch_size": per_rank_batch}
    if lay.attention_dp > 1 and role not in ROLE_PORTS:
        cfg.update(_trtllm_adp_balance(role, notes, sp))
    cfg.update(_trtllm_moe_backend(dep, role, lay, notes, sp))
    if dep.isl > per_rank_tokens and role != "decode":
        cfg["enable_chunked_prefill"] = True  # a prompt longer than the budget must be chunked
        notes.append(f"TRT-LLM {role}: isl {dep.isl} > max_num_tokens {per_rank_tokens}: enable_chunked_prefill set")
    decoding_type = sp.values["decoding_type"].get(dep.spec_method) if dep.spec_method else None
    if dep.spec_method == "mtp":
        cfg["speculative_config"] = {"decoding_type": decoding_type, "num_nextn_predict_layers": dep.spec_k}
    elif dep.spec_method == "eagle3":
        cfg["speculative_config"] = {"decoding_type": decoding_type, "max_draft_len": dep.spec_k,
                                     "speculative_model_dir": _draft(dep, notes)}
    elif dep.spec_method == "ngram":
        cfg["speculative_config"] = {"decoding_type": decoding_type, "max_draft_len": dep.spec_k}
        notes.append("TRT-LLM NGram: only decoding_type and max_draft_len set; other NGram keys left at defaults (unverified)")
    if role in ROLE_PORTS:
        cfg["cache_transceiver_config"] = {"backend": TRTLLM_CACHE_TRANSCEIVER_BACKEND}
        if role == "prefill":
            cfg["disable_overlap_scheduler"] = True
    return cfg


def _priced_mxfp4_moe_kernel(dep: Deployment) -> tuple[str, str, object] | None:
    """(GPU id, op, kernel: hardware/kernels.yaml NativeKernel) whose fitted values price ``dep``'s MXFP4 experts on its
    GPU: the fused MXFP4 MoE (``moe_fused_mxfp4``) where the GPU has one, else the weight-only grouped MoE
    (``moe_weight_only_grouped``) where MXFP4 runs weight-only; None for other formats, GPUs without either, or a
    deployment without a GPU."""
    if not dep.gpu or not _mxfp4_experts(dep):
        return None
    from .hardware import get_hardware
    from .kernels import native_kernel

    hw = get_hardware(dep.gpu)
    for op in ("moe_fused_mxfp4", "moe_weight_only_grouped"):
        kernel = native_kernel(op, hw)
        if kernel is not None:
            return hw.id, op, kernel
    return None


def _trtllm_moe_backend(dep, role, lay, notes, sp: EngineSpelling) -> dict:
    """``moe_config.backend`` naming the TensorRT-LLM MoE that runs the kernel simfront prices for the experts, which
    TensorRT-LLM runs only when asked (its default, CUTLASS, or AUTO's pick is another kernel): block-FP8 experts by role
    (:func:`_trtllm_fp8_block_backend`), NVFP4 experts by the kernel priced faster (:func:`_trtllm_fp4_backend`), MXFP4
    experts by platform (``moe_backend`` in simfront/engines/trtllm.yaml: trtllm-gen on datacenter Blackwell, Triton on
    Hopper). A backend that serves expert-parallel layouts only (``moe_backend_expert_parallel_only``) is asked for where
    the experts are not split by tensor parallelism; elsewhere a note says the layer runs another kernel. {} for other
    formats and GPUs."""
    by_format = _trtllm_fp8_block_backend(dep, role, sp) or _trtllm_fp4_backend(dep, role, lay, sp)
    if by_format:
        return by_format
    priced = _priced_mxfp4_moe_kernel(dep)
    if priced is None:
        return {}
    gpu, _, kernel = priced
    backend = (sp.values.get("moe_backend") or {}).get(kernel.kernel)
    if backend is None:
        return {}
    if backend in (sp.values.get("moe_backend_expert_parallel_only") or ()) and lay.ep != lay.tp * lay.attention_dp:
        notes.append(f"TRT-LLM {role}: its {backend} MoE (the {kernel.kernel} simfront prices MXFP4 experts with on "
                     f"{gpu}) runs expert-parallel layouts only; with the experts split by tensor parallelism "
                     f"(ep {lay.ep} of {lay.tp * lay.attention_dp} GPUs) TensorRT-LLM runs its CUTLASS MoE, which no "
                     "calibration row times")
        return {}
    return _moe_config(sp, backend)


def _moe_config(sp: EngineSpelling, backend: str | None) -> dict:
    """The TensorRT-LLM YAML entry naming MoE ``backend`` (``moe_backend_config`` in simfront/engines/trtllm.yaml); {}
    for none."""
    return {sp.values["moe_backend_config"]: {"backend": backend}} if backend else {}


def _trtllm_fp8_block_backend(dep, role, sp: EngineSpelling) -> dict:
    """``moe_config.backend`` by role for block-scaled FP8 experts (``moe_backend_fp8_block`` in
    simfront/engines/trtllm.yaml, ``_fp8_block_backend``): prefill workers the calibrated DeepGEMM, decode workers and
    aggregated servers trtllm-gen, the split of InferenceX's TensorRT-LLM B200 FP8 recipes. {} elsewhere."""
    return _moe_config(sp, _fp8_block_backend(dep, role, sp, "moe_backend_fp8_block"))


def _trtllm_fp4_backend(dep, role, lay, sp: EngineSpelling) -> dict:
    """``moe_config.backend`` for NVFP4 experts on a GPU with both priced MoE kernels (the fused trtllm-gen
    "min-latency" MoE beside CUTLASS's grouped one, ``simfront.moe.moe_path_costs``): simfront prices the faster of
    the two at each step, so the line names the one priced faster for this worker's step (its decode tokens per rank,
    a prefill worker's token budget), ``moe_backend_nvfp4`` in simfront/engines/trtllm.yaml (TensorRT-LLM runs the
    fused kernel only with backend TRTLLM). {} elsewhere."""
    by_path = sp.values.get("moe_backend_nvfp4")
    if not by_path or not dep.gpu or normalize_format(dep.weight_precision) != "nvfp4":
        return {}
    from .hardware import get_hardware
    from .models import get_model
    from .moe import has_fused_path, moe_path_costs
    from .step import DEFAULT_ROUTING_ALPHA

    try:
        arch = get_model(dep.checkpoint or dep.model_id).arch
    except SimfrontError:
        return {}
    hw = get_hardware(dep.gpu)
    moe = arch.moe
    if moe is None or not has_fused_path("nvfp4", hw, moe.gated, moe.n_experts):
        return {}
    dp = lay.attention_dp
    if role == "prefill":
        per_rank = float(_tokens(dep, lay)) / dp  # a prefill worker's step: its token budget per rank
    else:
        per_rank = lay.max_batch / dp * (1 + (dep.spec_k if dep.spec_method else 0))  # a full decode step per rank
    # tokens entering this GPU's experts, as the step prices them (simfront.step: every attention-DP rank's tokens)
    paths = moe_path_costs(per_rank * dp, moe.latent_dim or arch.hidden, moe.expert_inter, moe.top_k, moe.n_experts,
                           lay.tp * dp / lay.ep, lay.ep, "nvfp4", hw, alpha=DEFAULT_ROUTING_ALPHA, gated=moe.gated,
                           dispatched=dp > 1, routed_tokens=per_rank)
    faster = "fused" if float(paths["fused"].time_s) < float(paths["grouped"].time_s) else "grouped"
    return _moe_config(sp, by_path[faster])


def _trtllm_adp_balance(role, notes, sp: EngineSpelling) -> dict:
    """The attention-DP balance simfront prices for an aggregated TensorRT-LLM attention-DP server (a new prompt waits,
    at most ``adp_balance_timeout_iters`` iterations, until every rank has one: ``serving.adp_balance_wait_s``), which
    TensorRT-LLM runs only when asked (``attention_dp_config``); a release whose table names no key for it gets a note."""
    from .scheduler import scheduler_settings

    iters = int(scheduler_settings("trtllm", sp.since).adp_balance_timeout_iters)
    if iters <= 0:
        return {}
    key = sp.values.get("adp_balance_config")
    if key is None:
        notes.append(f"trtllm {sp.since}+ {role}: simfront/engines/trtllm.yaml names no key for the attention-DP balance "
                     f"simfront prices ({iters} iterations), so the server schedules prompts without it")
        return {}
    return {key: {"enable_balance": True, "timeout_iters": iters, "batching_wait_iters": 0}}


def _trtllm_server(dep, role, lay, ckpt, quant, port, notes, files, sp: EngineSpelling) -> list:
    """``trtllm-serve`` words for one worker kind; writes its YAML into ``files`` (simfront/engines/trtllm.yaml)."""
    f = sp.flag
    tokens = _tokens(dep, lay)
    batch = _per_rank(lay.max_batch, lay.attention_dp, f"{role}.max_batch", notes)
    per_rank_tokens = _per_rank(tokens, lay.attention_dp, f"{role}.max_num_tokens", notes)
    fname = "extra_llm_api_options.yaml" if role == "server" else f"extra_llm_api_options_{role}.yaml"
    files[fname] = _yaml_dump(_trtllm_yaml(dep, role, lay, batch, per_rank_tokens, notes, sp))
    args = [*sp.server, ckpt, f("host"), "0.0.0.0", f("port"), port, f("backend"), "pytorch",
            f("tp"), lay.tp * lay.attention_dp,  # the whole stage; the YAML turns on attention DP
            f("pp"), lay.pp, f("ep"), lay.ep,
            f("max_batch"), batch, f("max_num_tokens"), per_rank_tokens, f("context_length"), dep.seq_len,
            f("memory_fraction"), _memory_fraction(dep, "trtllm", lay),
            f("extra_options"), fname]
    nodes = _nodes(lay, dep.gpus_per_node)
    if nodes > 1:
        args += [f("gpus_per_node"), dep.gpus_per_node]
        notes.append(
            f"TRT-LLM {role}: {nodes} nodes: launch under MPI/Slurm with {lay.gpus_per_worker} ranks, "
            "e.g. srun ... trtllm-llmapi-launch trtllm-serve ... (unverified)"
        )
    return args


# ---------------------------------------------------------------------------------------------
# Disaggregated front ends


def _placement(dep: Deployment) -> dict[str, list[str]]:
    """Host of each disagg worker: localhost when one prefill + one decode fit on one node."""
    p, d = dep.prefill, dep.decode
    one_node = p.workers == 1 and d.workers == 1 and dep.total_gpus <= dep.gpus_per_node
    if one_node:
        return {"prefill": ["localhost"], "decode": ["localhost"]}
    return {r: [f"${r.upper()}_HOST_{i}" for i in range(lay.workers)] for r, lay in dep.roles().items()}


def _router(engine: str, dep: Deployment, hosts: dict[str, list[str]], files: dict, notes: list[str]) -> list:
    def url(h, role, scheme=""):
        s = f"{scheme}{h}:{ROLE_PORTS[role]}"
        return _Expand(s) if "$" in s else s

    def word(h):
        return _Expand(h) if "$" in h else h

    if engine == "vllm":
        notes.append(f"vLLM PD proxy: {VLLM_PD_PROXY} from a vLLM source checkout (path moves between releases; unverified)")
        return (["python", VLLM_PD_PROXY, "--host", "0.0.0.0", "--port", FRONT_PORT, "--prefiller-hosts"]
                + [word(h) for h in hosts["prefill"]] + ["--prefiller-ports"] + [ROLE_PORTS["prefill"]] * len(hosts["prefill"])
                + ["--decoder-hosts"] + [word(h) for h in hosts["decode"]]
                + ["--decoder-ports"] + [ROLE_PORTS["decode"]] * len(hosts["decode"]))
    if engine == "sglang":
        notes.append(f"SGLang PD router: python -m {SGLANG_ROUTER_MODULE} (sglang-router package; older releases ship "
                     "python -m sglang.srt.disaggregation.mini_lb with the same --prefill/--decode URLs) (unverified)")
        args = ["python", "-m", SGLANG_ROUTER_MODULE, "--pd-disaggregation"]
        for h in hosts["prefill"]:
            args += ["--prefill", url(h, "prefill", "http://")]
        for h in hosts["decode"]:
            args += ["--decode", url(h, "decode", "http://")]
        return args + ["--host", "0.0.0.0", "--port", FRONT_PORT]
    cfg = {"hostname": "0.0.0.0", "port": FRONT_PORT, "backend": "pytorch",
           "context_servers": {"num_instances": len(hosts["prefill"]),
                               "urls": [f"{h}:{ROLE_PORTS['prefill']}" for h in hosts["prefill"]]},
           "generation_servers": {"num_instances": len(hosts["decode"]),
                                  "urls": [f"{h}:{ROLE_PORTS['decode']}" for h in hosts["decode"]]}}
    files["disagg_config.yaml"] = _yaml_dump(cfg)
    notes.append("TRT-LLM disagg front end: trtllm-serve disaggregated -c disagg_config.yaml (not in ecosystem.md; unverified)")
    if any("$" in h for hs in hosts.values() for h in hs):
        notes.append("disagg_config.yaml holds $..._HOST_i placeholders: substitute them (e.g. envsubst) before starting")
    return ["trtllm-serve", "disaggregated", "-c", "disagg_config.yaml"]


# ---------------------------------------------------------------------------------------------
# Public API


def _engine_notes(dep: Deployment, eng: str) -> list[str]:
    """Caveats that depend only on the layout and the engine."""
    notes = []
    roles = dep.roles()
    if eng == "vllm" and any(lay.attention_dp > 1 for lay in roles.values()):
        notes.append("vLLM has no separate attention-DP flag: uses --data-parallel-size with --enable-expert-parallel; "
                     "--max-num-seqs and --max-num-batched-tokens are per DP rank "
                     "(max_batch/attention_dp, max_num_tokens/attention_dp)")
    if eng == "trtllm" and any(lay.attention_dp > 1 for lay in roles.values()):
        notes.append("TRT-LLM attention DP: --tp_size is tp*attention_dp; --max_batch_size/--max_num_tokens are per rank")
    for role, lay in roles.items():
        if role != "prefill" and lay.workers > 1 and dep.mode == "agg":
            notes.append(f"run {lay.workers} copies of the server line on separate GPUs (CUDA_VISIBLE_DEVICES, "
                         f"distinct --port) behind a load balancer; concurrency {dep.concurrency} is for all of them")
        # tokens one decode step of a full batch feeds the model (each request: 1 + k draft tokens)
        step_tokens = lay.max_batch * (1 + (dep.spec_k if dep.spec_method else 0))
        if role != "prefill" and _tokens(dep, lay) < step_tokens:
            notes.append(f"{role}: max_num_tokens={_tokens(dep, lay)} is below max_batch*(1+spec_k)={step_tokens}: a full "
                         "decode batch cannot run in one step (vLLM rejects max-num-batched-tokens < max-num-seqs)")
    fractions = ", ".join(f"{role} {_memory_fraction(dep, eng, lay)}" for role, lay in dep.roles().items())
    notes.append(f"memory fraction ({fractions}) is {eng}'s own quantity (ecosystem.md §9.3), not comparable across "
                 "engines; unless set, it is the one that gives each GPU the KV pool simfront priced")
    return notes


def _check_mtp(dep: Deployment, eng: str, notes: list[str]) -> None:
    _, mtp_layers = _model_info(dep.checkpoint or dep.model_id)
    if mtp_layers == 0:
        raise SimfrontError(f"{dep.model_id} has no MTP layers; use spec_method 'eagle3' or 'ngram'")


def launch_commands(dep: Deployment, engine: str, engine_version: str | None = None) -> LaunchPlan:
    """Engine launch lines (+ TRT-LLM YAML files and caveats) that serve ``dep`` on ``engine``.

    ``engine_version`` (e.g. "0.5.9"): spell flags as that release does (default: the newest release
    in ``simfront/engines/<engine>.yaml``). A layout the engine cannot start is a SimfrontError
    (see :func:`launchable`).
    """
    eng = normalize_engine(engine)
    sp = engine_spelling(eng, engine_version)
    check_deployment(dep, eng, engine_version)
    ckpt, quant, notes = resolve_checkpoint(dep, eng)
    if dep.spec_method == "mtp":
        _check_mtp(dep, eng, notes)
    notes.append(f"{eng} flags as spelled from release {sp.since} on "
                 + (f"(checked against {sp.checked})" if sp.checked else "(from ecosystem.md; not checked against a parser)"))
    server = {"vllm": _vllm_server, "sglang": _sglang_server, "trtllm": _trtllm_server}[eng]
    files: dict[str, str] = {}
    commands, roles = [], []
    hosts = _placement(dep) if dep.mode == "disagg" else None
    offset = 0  # first GPU of the next co-located worker
    for i, (role, lay) in enumerate(dep.roles().items()):
        env: dict[str, str] = {}
        if hosts and hosts[role] == ["localhost"]:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in range(offset, offset + lay.gpus_per_worker))
            offset += lay.gpus_per_worker
            if eng == "vllm":
                env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(VLLM_NIXL_SIDE_CHANNEL_BASE_PORT + i)
        args = server(dep, role, lay, ckpt, quant, ROLE_PORTS.get(role, FRONT_PORT), notes, files, sp)
        runner_args, keep_standard = _sglang_moe_runner(dep, role, lay, sp, notes) if eng == "sglang" else ([], False)
        a2a_args, a2a_env, a2a_lib = ([], {}, "") if keep_standard else _moe_a2a(dep, role, lay, sp, notes)
        if eng == "sglang" and not runner_args:
            runner_args = _sglang_fp8_block_runner(dep, role, sp, bool(a2a_args or a2a_env))
        args += runner_args
        args += a2a_args  # after every other word: the engines' parsers take flags in any order
        env.update(a2a_env)
        if eng == "vllm":
            act_args, act_env = _vllm_moe_activation(dep, role, sp, notes)
            args += act_args + _vllm_moe_backend(dep, role, sp)
            env.update(act_env)
        env.update(_rocm_kernels(dep, role, sp, notes))
        notes.extend(_mla_fallback_note(dep, role, lay, sp, engine_version))
        if lay.pp > 1 and dep.spec_method and role != "prefill" and sp.env.get("pp_drafts"):
            alg = sp.values["spec_method"][dep.spec_method]
            if alg not in sp.values.get("pp_spec_algorithms", ()):
                raise SimfrontError(f"{eng} {sp.since}+ runs speculative decoding on pipeline stages only with "
                                    f"{', '.join(sp.values.get('pp_spec_algorithms', ()))}, not {alg} ({dep.spec_method}); "
                                    "use pp=1 or another method")
            env.update(sp.env["pp_drafts"])  # the release drafts on a pipelined worker only when asked to
            notes.append(f"{eng} {role}: speculative decoding on {lay.pp} pipeline stages needs "
                         f"{', '.join(f'{k}={v}' for k, v in sp.env['pp_drafts'].items())} (the draft runs on the last stage)")
        if a2a_args or a2a_env:
            notes.append(f"{eng} {role}: attention-DP + EP MoE traffic set to {a2a_lib}'s all-to-all "
                         f"({' '.join(map(str, a2a_args)) or ', '.join(f'{k}={v}' for k, v in a2a_env.items())}), as "
                         f"simfront prices it; the engine image must ship {a2a_lib} (the default all-gather + "
                         "reduce-scatter moves every rank's tokens to every GPU)")
        commands.append(_render(args, env))
        roles.append(role)
    if hosts is not None:
        commands.append(_render(_router(eng, dep, hosts, files, notes)))
        roles.append("router")
        if hosts["prefill"] != ["localhost"]:
            notes.append("run the prefill/decode lines once per worker, on the head node given by "
                         "PREFILL_HOST_i / DECODE_HOST_i; export those variables before the router line")
    notes += _engine_notes(dep, eng)
    return LaunchPlan(engine=eng, commands=commands, roles=roles, files=files, notes=list(dict.fromkeys(notes)))


def _record(dep: Deployment, engine: str | None, engine_version: str | None = None) -> dict:
    """Flat description of ``dep`` in simfront's measured-point field names (simfront/ingest/schema.py),
    shared by the client's ``--metadata`` and the sidecar, so ``simfront validate`` reads both back as is.

    Agg: tp/pp/ep/attention_dp, ``batch_size`` (max running requests per attention-DP rank) and ``token_budget``
    (tokens per step per attention-DP rank, so that validate prices the chunked prefill the engine ran).
    Disagg: ``prefill_*``/``decode_*`` (workers, tp, pp, ep, attention_dp, gpus = all GPUs of the role; decode_batch
    per attention-DP rank, prefill_batch the prompts a prefill worker steps with, over all its ranks, as measured rows
    read them) and no top-level layout.
    """
    # the checkpoint the engine serves and the client names (benchmark_command's --model / -m)
    served = resolve_checkpoint(dep, engine)[0] if engine else dep.model_id
    rec: dict = {"model": served, "gpu": dep.gpu, "num_gpus": dep.total_gpus, "mode": dep.mode}
    if dep.mode == "disagg":
        for role in ("prefill", "decode"):
            lay = getattr(dep, role)
            rec.update({f"{role}_workers": lay.workers, f"{role}_tp": lay.tp, f"{role}_pp": lay.pp,
                        f"{role}_ep": lay.ep, f"{role}_attention_dp": lay.attention_dp,
                        f"{role}_gpus": lay.workers * lay.gpus_per_worker,
                        # decode: running requests per rank; prefill: prompts per worker step (simfront.measured)
                        f"{role}_batch": max(1, lay.max_batch // ((lay.attention_dp if role == "decode" else 1) * lay.pp))})
    else:
        lay = dep.roles()["server"]
        rec.update({"tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "attention_dp": lay.attention_dp,
                    "batch_size": max(1, lay.max_batch // (lay.attention_dp * lay.pp)),
                    # the token budget per step of one attention-DP rank that the launch lines give the engine
                    "token_budget": max(1, _tokens(dep, lay) // lay.attention_dp)})
    if engine:  # the memory fraction the launch lines give the engine: validate sizes the KV pool with it
        rec["gpu_memory_fraction"] = _memory_fraction(dep, engine)
    rec.update({"precision": normalize_format(dep.weight_precision), "kv_dtype": _kv(dep), "engine": engine,
                "engine_version": engine_version, "isl": dep.isl, "osl": dep.osl, "concurrency": dep.concurrency,
                "random_range_ratio": dep.random_range_ratio, "spec_decoding": dep.spec_method or "none"})
    if dep.spec_method:
        rec["spec_k"] = dep.spec_k
    if dep.two_batch_overlap:  # priced (and launched) with the engine's two-batch overlap: validate prices it so
        rec["two_batch_overlap"] = True
    return {k: v for k, v in rec.items() if v is not None}


def _range_ratio(dep: Deployment) -> float:
    """The benchmark's length range ratio r (lengths uniform in [r L, L]); 1.0 for fixed lengths."""
    return 1.0 if dep.random_range_ratio is None else float(dep.random_range_ratio)


def _centred_lengths(length: int, r: float) -> tuple[int, float]:
    """(centre L', half-width rho as a share of L') of lengths uniform in [r L, L]: L' = L (1 + r) / 2 and
    rho = (1 - r) / (1 + r); vLLM's random dataset samples in [L' (1 - rho), L' (1 + rho)], AIPerf takes L' as its mean."""
    return round(length * (1.0 + r) / 2.0), (1.0 - r) / (1.0 + r)


def sidecar_yaml(dep: Deployment, engine: str | None = None, engine_version: str | None = None) -> str:
    """YAML sidecar describing ``dep``; ``simfront validate`` reads it next to a client result file
    (``<result>.simfront.yaml``). Flat measured-point fields, agg and disagg alike (see :func:`_record`)."""
    check_deployment(dep)
    return _yaml_dump(_record(dep, normalize_engine(engine) if engine else None, engine_version))


def default_result_file(dep: Deployment, tool: str) -> str:
    """Result path for ``tool``: .json (vLLM), .jsonl (SGLang) or an artifact directory (AIPerf)."""
    name = re.sub(r"[^A-Za-z0-9.]+", "-", dep.model_id.split("/")[-1]).strip("-")
    stem = f"simfront_{tool}_{name}_isl{dep.isl}_osl{dep.osl}_c{dep.concurrency}"
    return stem + {"vllm": ".json", "sglang": ".jsonl", "aiperf": ""}[tool]


def benchmark_command(dep: Deployment, tool: str = "vllm", result_file: str | None = None, *,
                      engine: str | None = None, base_url: str | None = None,
                      engine_version: str | None = None) -> str:
    """Client command measuring ``dep`` at its ISL/OSL/concurrency; writes ``result_file``.

    ``engine`` (default: ``tool`` for vllm/sglang, else vllm) picks the served checkpoint name and is
    recorded with the layout: as ``--metadata`` pairs for vLLM's client (written into its result
    JSON); SGLang's and AIPerf's clients have no such option, so their run needs the sidecar
    (:func:`sidecar_yaml`). ``engine_version`` spells the client entry point of that release when
    the client ships with the engine (SGLang), else the newest.
    """
    if tool not in BENCH_TOOLS:
        raise SimfrontError(f"unknown benchmark tool {tool!r}; valid: {', '.join(BENCH_TOOLS)}")
    eng = normalize_engine(engine) if engine else (tool if tool in ENGINES else "vllm")
    check_deployment(dep)
    model, _, _ = resolve_checkpoint(dep, eng)
    url = base_url or f"http://localhost:{FRONT_PORT}"
    out = result_file or default_result_file(dep, tool)
    # requests in all: as many per client as the prediction's benchmark run had (predict --prompts-per-client)
    per_client = PROMPTS_PER_CONCURRENCY if dep.prompts_per_client is None else dep.prompts_per_client
    prompts = max(math.ceil(per_client * dep.concurrency), dep.concurrency)
    r = _range_ratio(dep)
    if tool == "vllm":
        meta = _record(dep, eng, engine_version if eng == "vllm" or engine else None)
        bench = engine_spelling("vllm", engine_version if eng == "vllm" else None).bench
        if r < 1.0:  # vLLM's range is symmetric about its length: centre it on [r L, L]
            (isl, rho), (osl, _) = _centred_lengths(dep.isl, r), _centred_lengths(dep.osl, r)
            lengths = ["--random-input-len", isl, "--random-output-len", osl, "--random-range-ratio", f"{rho:.4f}"]
        else:
            lengths = ["--random-input-len", dep.isl, "--random-output-len", dep.osl]
        args = [*bench, "--base-url", url, "--model", model, "--dataset-name", "random", *lengths,
                "--max-concurrency", dep.concurrency, "--num-prompts", prompts, "--ignore-eos",
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
                "--save-result", "--result-filename", out,
                "--metadata"] + [f"{k}={v}" for k, v in meta.items()]
    elif tool == "sglang":
        backend = {"sglang": "sglang", "vllm": "vllm", "trtllm": "sglang-oai"}[eng]
        bench = engine_spelling("sglang", engine_version if eng == "sglang" else None).bench
        args = [*bench, "--backend", backend, "--base-url", url, "--model", model,
                "--dataset-name", "random", "--random-input-len", dep.isl, "--random-output-len", dep.osl,
                "--random-range-ratio", f"{r:g}" if r < 1.0 else "1.0",  # SGLang samples in [ratio*len, len]: 1.0 fixes them
                "--max-concurrency", dep.concurrency, "--num-prompts", prompts, "--output-file", out]
    else:
        # AIPerf draws lengths from a normal law: the mean and standard deviation of uniform lengths in [r L, L]
        spread = [] if r >= 1.0 else ["--synthetic-input-tokens-stddev", f"{dep.isl * (1.0 - r) / math.sqrt(12.0):.1f}",
                                      "--output-tokens-stddev", f"{dep.osl * (1.0 - r) / math.sqrt(12.0):.1f}"]
        args = ["aiperf", "profile", "-m", model, "--url", url, "--endpoint-type", "chat", "--streaming",
                "--concurrency", dep.concurrency, "--synthetic-input-tokens-mean", _centred_lengths(dep.isl, r)[0],
                "--output-tokens-mean", _centred_lengths(dep.osl, r)[0], *spread, "--extra-inputs", "ignore_eos:true",
                "--request-count", prompts, "--artifact-dir", out]
    return _render(args)

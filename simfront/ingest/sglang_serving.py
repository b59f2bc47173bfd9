"""SGLang ``python -m sglang.bench_serving --output-file X.jsonl``: one JSON object per run.

Keys as in ecosystem.md §2.1: ``mean_e2e_latency_ms`` (vLLM's e2el), ``total_throughput``
(vLLM's total_token_throughput); TPOT/ITL defined as in vLLM. SGLang's ``concurrency`` key is
the ACHIEVED mean concurrency (sum of e2e / duration), not the client cap, so it stays in
``extra`` and the load point comes from ``max_concurrency``.

``server_info`` (the server's /get_server_info dict, newer versions) is read defensively for
the engine's own arguments (ServerArgs names: tp_size, dp_size, ep_size, enable_dp_attention,
kv_cache_dtype, speculative_algorithm, ...); its exact content is not pinned down in the
reference (unverified), so anything absent is simply left missing.
"""

from __future__ import annotations

from ..precision import normalize_format
from .client_keys import take_config_keys
from .common import Record, coerce, keep_extra, normalize_engine, set_spec, to_bool, to_float, to_int
from .vllm_serve import take_flat_latencies, take_mean_lengths

LATENCIES = {
    "ttft_ms": ("ttft", "time to first token"),
    "tpot_ms": ("tpot", "per-request (latency - ttft)/(output_len - 1) = TPOT"),
    "itl_ms": ("itl", "gaps between streamed chunks pooled over requests (chunk ITL, not TPOT)"),
    "e2el_ms": ("e2e_latency", "request latency"),
}
RATES = {
    "output_tok_s_total": ("output_throughput", "output tokens / benchmark duration"),
    "total_tok_s": ("total_throughput", "(input + output tokens) / benchmark duration"),
    "request_throughput": ("request_throughput", "completed requests / benchmark duration"),
}


def _take_server_info(rec: Record, info: dict) -> None:
    """Layout and formats from SGLang's ServerArgs as dumped in server_info."""
    rec.fields["model"] = rec.fields.get("model") or info.get("model_path")
    _, version = normalize_engine(f"v{info['version']}") if info.get("version") else (None, None)
    rec.fields["engine_version"] = version
    tp, dp = to_int(info.get("tp_size"), "tp_size"), to_int(info.get("dp_size"), "dp_size")
    pp = to_int(info.get("pp_size"), "pp_size") or 1
    attn_dp = to_int(info.get("attn_dp_size"), "attn_dp_size")
    if attn_dp is not None and tp:
        # 0.5.23+ (sglang/srt/arg_groups/fields/parallel.py): tp_size is the whole TP group, attn_dp_size the
        # attention-DP groups inside it (attention TP = tp_size/attn_dp_size), dp_size whole-model replicas.
        rec.fields["attention_dp"], rec.fields["tp"] = attn_dp, tp // attn_dp
        rec.notes["attention_dp"] = f"attn_dp_size={attn_dp} with tp_size={tp}: attention TP = {tp // attn_dp}"
        if dp and dp > 1:
            rec.fields["num_gpus"] = tp * pp * dp  # dp_size replicas of the tp*pp-GPU model
            rec.notes["num_gpus"] = f"tp_size x pp_size x dp_size (replicas) = {tp}x{pp}x{dp}"
    elif to_bool(info.get("enable_dp_attention"), "enable_dp_attention") and tp and dp:
        # Before 0.5.23: --dp-size N --enable-dp-attention, attention-TP size tp/dp (ecosystem.md §8.2).
        rec.fields["attention_dp"], rec.fields["tp"] = dp, tp // dp
        rec.notes["attention_dp"] = f"enable_dp_attention with tp_size={tp}, dp_size={dp}: attention TP = {tp // dp}"
    else:
        rec.fields["tp"] = tp
        if dp and dp > 1:
            rec.warnings.append(f"dp_size={dp} without DP attention (replicas?): num_gpus not derived from it")
    rec.fields["pp"] = to_int(info.get("pp_size"), "pp_size")
    rec.fields["ep"] = to_int(info.get("ep_size"), "ep_size")
    kv = coerce("kv_dtype", info.get("kv_cache_dtype"))
    if kv is not None:  # SGLang spells its KV formats fp8_e4m3 / fp8_e5m2 / auto: simfront's names, noted
        rec.fields["kv_dtype"] = normalize_format(kv)
        if rec.fields["kv_dtype"] != kv:
            rec.notes["kv_dtype"] = f"server_info kv_cache_dtype={kv}"
    rec.fields["precision"] = coerce("precision", info.get("quantization"))
    running = to_int(info.get("max_running_requests"), "max_running_requests")
    if running:  # the server-wide cap; SGLang splits it over attention-DP ranks, simfront's batch_size is per rank
        ranks = (rec.fields.get("attention_dp") or 1) * (rec.fields.get("pp") or 1)
        rec.fields["batch_size"] = max(1, running // ranks)
        if ranks > 1:
            rec.notes["batch_size"] = f"max_running_requests={running} over {ranks} attention-DP x PP ranks"
    frac = to_float(info.get("mem_fraction_static"), "mem_fraction_static")
    if frac:  # weights + KV pool share of the GPU: sizes the KV pool (simfront/engines/scheduler.yaml kv_memory_rule)
        rec.fields["gpu_memory_fraction"] = frac
    chunk = to_int(info.get("chunked_prefill_size"), "chunked_prefill_size")
    if chunk and chunk > 0:  # per attention-DP rank: the server arguments hold it after SGLang divided the
        rec.fields["token_budget"] = chunk  # launch value by the attention-DP size (server_args _handle_data_parallelism)
    set_spec(rec, info.get("speculative_algorithm"), "server_info.speculative_algorithm")
    if rec.fields.get("spec_decoding"):
        rec.fields["spec_k"] = to_int(info.get("speculative_num_steps"), "speculative_num_steps")


def parse_record(obj: dict, line: int) -> Record:
    rec, used = Record(line), set()
    engine, _ = normalize_engine(obj.get("backend"))
    rec.fields["engine"] = engine
    if engine:
        rec.notes["engine"] = f"from client backend {obj.get('backend')!r}"
    rec.fields["concurrency"] = to_float(obj.get("max_concurrency"), "max_concurrency")
    if obj.get("num_prompts") is not None:  # the client's request count: with --max-concurrency C its first C start at once
        rec.fields["num_prompts"] = to_int(obj.get("num_prompts"), "num_prompts")
        used.add("num_prompts")
    request_rate = obj.get("request_rate")
    rec.fields["request_rate"] = None if request_rate == "trace" else to_float(request_rate, "request_rate")
    used |= {"max_concurrency", "request_rate"}
    take_flat_latencies(rec, obj, used, "SGLang", LATENCIES)
    for canon, (key, meaning) in RATES.items():
        if obj.get(key) is not None:
            rec.set_metric(canon, obj[key], f"SGLang {key}: {meaning}")
            used.add(key)
    take_mean_lengths(rec, obj, used, "SGLang")
    if obj.get("accept_length") is not None:
        rec.fields["acceptance_length"] = to_float(obj["accept_length"], "accept_length")
        used.add("accept_length")
    dataset = obj.get("dataset_name")
    if dataset and dataset != "random":
        rec.fields["dataset"] = dataset
    elif dataset == "random" and obj.get("random_range_ratio") is not None:  # synthetic lengths in [r L, L]
        rec.fields["random_range_ratio"] = to_float(obj["random_range_ratio"], "random_range_ratio")
        used.add("random_range_ratio")
    info = obj.get("server_info")
    if isinstance(info, dict) and isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]  # PD router: the decode server's arguments (as bench_serving reads them)
        rec.notes["server_info"] = "server_info.decode[0] (PD router): decode server's arguments"
    if isinstance(info, dict):
        _take_server_info(rec, info)
        used.add("server_info")
    # SGLang's own "concurrency" key is the ACHIEVED mean concurrency: kept as extra achieved_concurrency
    # (under its own name, so no row shows it as the load point), never the load point
    if obj.get("concurrency") is not None:
        rec.extra["achieved_concurrency"] = obj["concurrency"]
        used.add("concurrency")
    take_config_keys(rec, {k: v for k, v in obj.items() if k != "concurrency"}, used)
    keep_extra(rec, obj, used)
    return rec

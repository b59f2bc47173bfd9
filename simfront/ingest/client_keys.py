"""Configuration keys that client result files may carry next to their metrics.

vLLM ``--metadata KEY=VALUE`` pairs land as top-level string keys, and ``vllm bench sweep``
adds the server override keys (``tensor_parallel_size``, ``max_num_seqs``...) to each run
(ecosystem.md §1.1, §1.4). Canonical field names are accepted as they are; the aliases
below are the engines' own spellings of the same knobs (ecosystem.md §8.4).
"""

from __future__ import annotations

from typing import Any

from .common import Record, coerce, set_spec
from .schema import CONFIG_FIELDS

ALIASES = {
    "tensor_parallel_size": "tp",
    "tp_size": "tp",
    "pipeline_parallel_size": "pp",
    "pp_size": "pp",
    "expert_parallel_size": "ep",
    "ep_size": "ep",
    "moe_expert_parallel_size": "ep",
    "moe_tensor_parallel_size": "moe_tp",
    "max_num_seqs": "batch_size",
    "max_batch_size": "batch_size",
    "max_running_requests": "batch_size",
    # per-step token budget of one engine core / attention-DP rank (SGLang's chunked_prefill_size is not here: it is
    # the server's whole budget, which SGLang divides over its attention-DP ranks)
    "max_num_batched_tokens": "token_budget",
    "max_num_tokens": "token_budget",
    # each engine's own memory fraction, read by that engine's KV memory rule (simfront/engines/scheduler.yaml)
    "gpu_memory_utilization": "gpu_memory_fraction",
    "mem_fraction_static": "gpu_memory_fraction",
    "free_gpu_memory_fraction": "gpu_memory_fraction",
    "kv_cache_dtype": "kv_dtype",
    "speculative_algorithm": "spec_decoding",
    "num_speculative_tokens": "spec_k",
    "hardware": "gpu",
}


def take_config_keys(rec: Record, source: dict[str, Any], used: set[str]) -> None:
    """Map canonical or aliased configuration keys of ``source`` into ``rec.fields``.

    Values the parser already took from the file's own fields (measured mean lengths, the client's
    model id) are kept; a recorded value that differs is noted. The engine is the exception: a
    recorded ``engine`` (what simfront's benchmark command writes with ``--metadata``) names the
    server, while the client's ``backend`` only names its request format (vLLM's default is
    ``openai``), so the recorded one wins. Every key read here is consumed: its string never reaches
    ``extra`` (so ``--json`` rows do not echo "128" next to 128).
    """
    for key, value in source.items():
        name = key if key in CONFIG_FIELDS else ALIASES.get(key)
        if name is None or value is None:
            continue
        used.add(key)
        have = rec.fields.get(name)
        if name == "spec_decoding":
            if have is None:
                set_spec(rec, value, key)
            continue
        new = coerce(name, value)
        if have is None or (name == "engine" and new is not None and new != have):
            if have is not None:
                rec.notes["engine"] = f"recorded engine={value!r} (client backend said {have!r})"
            rec.fields[name] = new
        elif new is not None and new != have:
            rec.notes[f"recorded {key}"] = f"{value} (the file's own value {have:g} kept)" if isinstance(have, float) \
                else f"{value} (the file's own value {have} kept)"
    if "data_parallel_size" in source and "attention_dp" not in rec.fields:
        rec.warnings.append(
            "data_parallel_size given but attention_dp not: DP replicas vs attention-DP is ambiguous, "
            "num_gpus not derived from it; set attention_dp or num_gpus"
        )

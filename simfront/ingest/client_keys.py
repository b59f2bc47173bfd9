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
    "kv_cache_dtype": "kv_dtype",
    "speculative_algorithm": "spec_decoding",
    "num_speculative_tokens": "spec_k",
    "hardware": "gpu",
}


def take_config_keys(rec: Record, source: dict[str, Any], used: set[str]) -> None:
    """Map canonical or aliased configuration keys of ``source`` into ``rec.fields``."""
    for key, value in source.items():
        name = key if key in CONFIG_FIELDS else ALIASES.get(key)
        if name is None or name in rec.fields or value is None:
            continue
        if name == "spec_decoding":
            set_spec(rec, value, key)
        else:
            rec.fields[name] = coerce(name, value)
        used.add(key)
    if "data_parallel_size" in source and "attention_dp" not in rec.fields:
        rec.warnings.append(
            "data_parallel_size given but attention_dp not: DP replicas vs attention-DP is ambiguous, "
            "num_gpus not derived from it; set attention_dp or num_gpus"
        )

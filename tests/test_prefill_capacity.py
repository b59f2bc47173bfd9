"""scripts/prefill_capacity.py: a disaggregated prefill worker's stated throughput against the one simfront prices."""

import importlib.util
from pathlib import Path

from simfront.ingest.schema import MeasuredPoint

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("prefill_capacity", ROOT / "scripts" / "prefill_capacity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _point(**kw):
    base = dict(model="deepseek-ai/DeepSeek-R1", gpu="B200", num_gpus=16, engine="trtllm", mode="disagg", precision="fp8",
                isl=8192, osl=1024, concurrency=256, prefill_workers=1, prefill_tp=1, prefill_attention_dp=8, prefill_ep=8,
                decode_workers=1, decode_tp=1, decode_attention_dp=8, decode_ep=8, ttft_ms=3000.0, tpot_ms=30.0,
                source_file="test.csv", line=1, format="offline_csv")
    return MeasuredPoint(**{**base, **kw})


def test_reads_the_stated_throughput_and_prices_the_same_worker():
    mod = _script()
    p = _point(notes={"stated_input_tput_per_prefill_gpu": "6520.5"})
    assert mod.stated_input_per_prefill_gpu(p) == 6520.5
    assert mod.stated_input_per_prefill_gpu(_point()) is None
    priced = mod.priced_input_per_prefill_gpu(p)
    assert 1e3 < priced < 1e5  # tokens/s per GPU of a busy 8-GPU DeepSeek-R1 FP8 prefill worker on B200
    # the same worker in NVFP4: half the expert bytes at twice the rate outweigh its checkpoint's BF16 attention projections
    assert mod.priced_input_per_prefill_gpu(_point(precision="fp4", model="nvidia/DeepSeek-R1-0528-FP4")) >= priced * 0.9

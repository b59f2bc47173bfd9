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


def test_requests_in_the_prefill_stage_per_slot_follow_littles_law_and_the_decode_caps():
    mod = _script()
    # 256 clients, TTFT 3 s and TPOT 30 ms over 1,024 output tokens: 256 x 3 / (3 + 30.72) = 22.8 clients before their
    # first token, over the 8 prompts a DPA8 worker steps at once (one 8k prompt per rank)
    q = mod.in_prefill_per_slot(_point())
    assert abs(q - 256 * 3.0 / (3.0 + 1024 * 0.030) / 8) < 0.05
    assert q >= mod.SATURATED_PER_SLOT  # queueing: the stated throughput is the prefill capacity
    # decode servers capped at 16 requests per rank (128 slots): the 128 clients beyond them wait for a decode slot,
    # not for a prefill step, so none of the 22.8 counts as prefill queueing
    assert mod.in_prefill_per_slot(_point(decode_batch=16)) == 0.0
    # a run with no TTFT says nothing
    assert mod.in_prefill_per_slot(_point(ttft_ms=None)) is None

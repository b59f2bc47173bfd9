"""A prefill server whose per-rank token budget is below a prompt prefills it in chunks (serving.prefill_chunks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simfront.hardware import get_hardware
from simfront.models import apply_precision, get_model
from simfront.serving import Workload, _prefill_step, prefill_chunks, prefill_raw
from simfront.step import forward_step


def test_chunk_counts():
    wl = Workload(isl=8192, osl=1024)
    assert prefill_chunks(wl, None) == (1.0, 1.0)
    assert prefill_chunks(wl, 8192) == (1.0, 1.0) and prefill_chunks(wl, 16384) == (1.0, 1.0)
    busy, lone = prefill_chunks(wl, 2048)
    assert busy == pytest.approx(4.0) and lone == 4.0
    busy, lone = prefill_chunks(Workload(isl=7000, osl=1), 2048)  # a busy server packs the next prompt into the tail
    assert busy == pytest.approx(7000 / 2048) and lone == 4.0


@pytest.mark.parametrize("model_id, gpu, tp", [("deepseek-r1", "h100_sxm", 16), ("llama-3.1-70b", "h100_sxm", 4)])
def test_chunk_steps_do_the_whole_prompts_work(model_id, gpu, tp):
    """The chunk steps' FLOPs add up to the whole prompt's (each chunk attends to the chunks before it), and
    chunking only adds time (every step pays its weight reads and fixed costs again)."""
    m = get_model(model_id)
    prec, hw = apply_precision(m, "native"), get_hardware(gpu)
    wl = Workload(isl=8192, osl=1024)
    whole = forward_step(m, prec, hw, tp, 1, 1, 1, _prefill_step(np.array(1.0), wl))
    n = 4.0
    chunk = forward_step(m, prec, hw, tp, 1, 1, 1, _prefill_step(np.array(1.0), wl, chunks=n))
    assert float(n * np.sum(chunk.flops)) == pytest.approx(float(np.sum(whole.flops)), rel=0.01)
    link = 50e9
    t_whole, _, slots, lone_whole = prefill_raw(m, prec, hw, tp, 1, 1, 1, 1.0, wl, link)
    t_chunk, _, slots_c, lone_chunk = prefill_raw(m, prec, hw, tp, 1, 1, 1, 1.0, wl, link, chunk_tokens=2048)
    assert float(np.sum(t_chunk)) > float(np.sum(t_whole)) and float(np.sum(lone_chunk)) > float(np.sum(lone_whole))
    assert float(np.sum(t_chunk)) < n * float(np.sum(t_whole))  # the fixed part repeats, not the work
    assert np.all(slots == slots_c) and np.all(np.isfinite(t_chunk))


def test_a_budget_above_the_prompt_changes_nothing():
    m = get_model("deepseek-r1")
    prec, hw = apply_precision(m, "fp8_block"), get_hardware("b200_sxm")
    wl = Workload(isl=1024, osl=1024)
    a = prefill_raw(m, prec, hw, 1, 1, 8, 8, 4.0, wl, 50e9)
    b = prefill_raw(m, prec, hw, 1, 1, 8, 8, 4.0, wl, 50e9, chunk_tokens=4096)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert math.isclose(prefill_chunks(wl, 4096)[0], 1.0)


def _row(engine, isl, pdp, **kw):
    base = {"model": "deepseek-r1", "gpu": "b200_sxm", "engine": engine, "mode": "disagg", "isl": isl, "osl": 1024,
            "concurrency": 64, "precision": "fp8", "prefill_workers": 1, "prefill_tp": 1 if pdp > 1 else 8,
            "prefill_ep": 8, "prefill_attention_dp": pdp, "decode_workers": 1, "decode_tp": 8, "decode_ep": 8,
            "decode_attention_dp": 1}
    base.update(kw)
    return base


def test_a_row_without_a_prefill_batch_fills_its_engines_default_budget():
    """TensorRT-LLM: max_num_tokens 8,192 per rank; SGLang on a B200: --max-prefill-tokens 16,384 and
    --chunked-prefill-size 16,384 over the attention-DP size; whole prompts, at least one per rank (a default budget
    does not chunk a prompt); a row's own prefill_batch or token_budget wins."""
    from simfront.measured import prefill_prompts, resolve
    from simfront.scheduler import scheduler_settings

    assert scheduler_settings("sglang", gpu_mem_gib=179).prefill_tokens_per_rank(8) == 2048
    assert scheduler_settings("trtllm", gpu_mem_gib=179).prefill_tokens_per_rank(8) == 8192
    rows = [_row("trtllm", 1024, 8), _row("sglang", 1024, 8), _row("sglang", 1024, 1), _row("sglang", 8192, 8),
            _row("sglang", 1024, 8, prefill_batch=48), _row("sglang", 1024, 8, token_budget=4096)]
    got = []
    for p in rows:
        r, why = resolve(p)
        assert why is None, why
        got.append(float(prefill_prompts([p], [0], r, [p["prefill_attention_dp"]])[0]))
    assert got == [64.0, 16.0, 16.0, 8.0, 48.0, 32.0]


def test_a_prefill_worker_batches_no_more_prompts_than_its_clients():
    """A recipe's prefill batch sized for a heavy load (160 prompts) cannot form under 16 clients on one prefill worker:
    the row is priced as if its engine took 16 (what can wait there), and a cap below the clients still binds."""
    from simfront.measured import build_groups, evaluate

    def ttft(**kw):
        p = _row("sglang", 1024, 1, concurrency=16, prefill_tp=8, **kw)
        groups, out = build_groups([p])
        rows = evaluate(groups, out)
        assert "reason" not in rows[0], rows[0]
        return rows[0]["predicted_ttft_ms"]

    assert ttft(prefill_batch=160) == pytest.approx(ttft(prefill_batch=16), rel=1e-9)
    assert ttft(prefill_batch=16) == pytest.approx(ttft(prefill_batch=64), rel=1e-9)
    assert ttft(prefill_batch=4) != pytest.approx(ttft(prefill_batch=16), rel=1e-3)

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

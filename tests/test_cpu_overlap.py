"""The engine's CPU work per step beside its GPU step: overlap schedulers (SGLang, TensorRT-LLM, vLLM's async
scheduling) take the longer of the two, SGLang's EAGLE / MTP decoding runs them one after the other
(simfront/engines/scheduler.yaml cpu_overlap, cpu_overlap_with_spec)."""

from __future__ import annotations

import numpy as np
import pytest

from simfront import api
from simfront.scheduler import scheduler_settings
from simfront.serving import _apply, cpu_overlapped, engine_constants, engine_profile, step_terms

GPU_S, FIXED_S = 0.010, 0.0  # a 10 ms GPU step (roofline part only)


def _prof(**kw):
    p = dict(engine_profile("trtllm"), kernel_overlap=0.0, step_scale=1.0, step_overhead_s=0.002, request_overhead_s=50e-6)
    p.update(kw)
    return p


def test_engine_table_says_which_engines_overlap_and_when():
    for e in ("vllm", "sglang", "trtllm"):
        assert scheduler_settings(e).cpu_overlap, e
    assert not scheduler_settings("sglang").cpu_overlap_with_spec  # server_args: EAGLE / NEXTN disable the overlap scheduler
    assert scheduler_settings("trtllm").cpu_overlap_with_spec and scheduler_settings("vllm").cpu_overlap_with_spec
    c = engine_constants("sglang")
    assert bool(cpu_overlapped(c, False)) and not bool(cpu_overlapped(c, True))


def test_overlapped_step_is_the_longer_part_and_serial_step_the_sum():
    split = np.array([GPU_S, FIXED_S])
    over = _prof(cpu_overlap=1.0, cpu_overlap_spec=0.0)
    # 2 ms + 40 x 50 us = 4 ms of CPU work: hidden behind the 10 ms GPU step
    assert _apply(split, over, 40) == pytest.approx(GPU_S)
    # 2 ms + 400 x 50 us = 22 ms of CPU work: the CPU sets the step
    assert _apply(split, over, 400) == pytest.approx(0.022)
    # the same engine with speculative decoding (cpu_overlap_spec 0): CPU and GPU one after the other
    assert _apply(split, over, 40, True) == pytest.approx(GPU_S + 0.004)
    serial = _prof(cpu_overlap=0.0, cpu_overlap_spec=0.0)
    assert _apply(split, serial, 40) == pytest.approx(GPU_S + 0.004)


@pytest.mark.parametrize("requests", [0.0, 8.0, 64.0, 512.0])
@pytest.mark.parametrize("spec", [False, True])
def test_overlap_never_slower_than_serial_nor_faster_than_either_part(requests, spec):
    split = np.array([GPU_S, 0.003])
    over = _prof(cpu_overlap=1.0, cpu_overlap_spec=1.0)
    serial = _prof(cpu_overlap=0.0, cpu_overlap_spec=0.0)
    t_over, t_serial = _apply(split, over, requests, spec), _apply(split, serial, requests, spec)
    terms = step_terms(split, over, requests, spec)
    gpu = float(split[0] + split[1])
    cpu = over["step_overhead_s"] + over["request_overhead_s"] * requests
    assert t_over <= t_serial + 1e-15 and t_over >= max(gpu, cpu) - 1e-15 and np.isfinite(t_over)
    # the terms add up to the step: GPU + CPU - what the overlap hides
    assert float(terms["engine_s"]) == pytest.approx(t_over)
    assert float(terms["roofline_s"] + terms["fixed_s"] - terms["hidden_s"] + terms["scale_s"] + terms["overhead_s"]
                 + terms["request_overhead_s"] - terms["cpu_hidden_s"]) == pytest.approx(t_over)


def test_explain_shows_what_the_overlap_scheduler_hides_and_adds_up():
    ex = api.explain("llama-3.1-8b", "1xH100", tp=1, batch=64, isl=1024, osl=1024, engine="trtllm")
    rows = {t["term"]: t["seconds"] for t in ex["terms"]}
    hidden = [v for k, v in rows.items() if k.startswith("CPU work the overlap scheduler")]
    assert hidden and hidden[0] < 0
    # an SGLang MTP step is not overlapped: no such term, the CPU work adds to the step
    ex_spec = api.explain("deepseek-r1", "8xH200", tp=8, batch=64, isl=1024, osl=1024, engine="sglang", spec="mtp")
    assert not any(t["term"].startswith("CPU work the overlap scheduler") for t in ex_spec["terms"])


def test_predict_says_when_speculative_points_run_without_the_overlap_scheduler():
    """SGLang's MTP points are priced as its measured releases ran them (no overlap): the prediction says so; an
    engine that overlaps speculative decoding, or a search without speculative points, carries no such note."""
    def notes(**kw):
        return [n for n in api.predict("deepseek-r1", "8xB200", **kw)["notes"] if "overlap scheduler" in n]

    assert len(notes(engine="sglang")) == 1 and "upper bound" in notes(engine="sglang")[0]
    assert notes(engine="trtllm") == [] and notes(engine="sglang", spec="none") == []
    assert api.cpu_overlap_note(None, True) is None and api.cpu_overlap_note("vllm", True) is None

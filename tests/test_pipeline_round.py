"""A pipelined worker's micro-batches go round at the pace of its busiest stage (serving.pipeline_round)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simfront import api
from simfront.hardware import get_hardware
from simfront.models import apply_precision, get_model
from simfront.search import make_spec
from simfront.serving import NO_SPEC, _draft_sums, _split
from simfront.step import StepBatch, forward_step


def _step(model_id, gpu, tp, pp, batch=2, q=1):
    m = get_model(model_id)
    return m, forward_step(m, apply_precision(m, "native"), get_hardware(gpu), tp, pp, 1, 1,
                           StepBatch(decode_reqs=batch, decode_ctx=1024, q_tokens=q))


@pytest.mark.parametrize("model_id, pp", [("deepseek-r1", 2), ("deepseek-r1", 3), ("llama-3.1-70b", 4), ("qwen3-32b", 2)])
def test_round_is_pp_times_the_busiest_stage(model_id, pp):
    """By hand: the last stage holds floor(n / pp) layers plus the LM head, sampling and drafts; the busiest other
    one ceil(n / pp) layers; the round is pp times the busier of the two, plus the sends."""
    m, st = _step(model_id, "h100_sxm", 8, pp, q=3)
    spec = make_spec("mtp", 2, None, m) if m.arch.mtp_layers else NO_SPEC
    whole = _split(st, m, spec, pipelined=False)
    round_ = _split(st, m, spec)
    _, _, layers, _ = _draft_sums(st)
    layers = np.array([float(layers[0]), float(layers[1])])
    sends = np.array([float(x) for x in st.op_parts("pp.send")])
    n = m.arch.n_layers
    tail = whole - layers - sends
    other = math.ceil(n / pp) / n * layers
    last = math.floor(n / pp) / n * layers + tail
    busiest = last if last.sum() >= other.sum() else other
    assert np.allclose(round_, pp * busiest + sends, rtol=1e-12)
    assert round_.sum() >= whole.sum()  # pp times the busiest stage is at least the sum of the stages


def test_one_stage_and_a_lone_prompt_are_the_plain_step():
    m, st = _step("deepseek-r1", "b200_sxm", 8, 1)
    assert np.allclose(_split(st, m, NO_SPEC), np.stack(st.split()), rtol=0)
    m, st = _step("deepseek-r1", "h100_sxm", 8, 2)
    assert np.allclose(_split(st, m, NO_SPEC, pipelined=False), np.stack(st.split()), rtol=0)


def test_drafts_weigh_on_the_last_stage():
    """MTP drafts run after the last stage: the more of them, the more the round exceeds the step."""
    m, st = _step("deepseek-r1", "h100_sxm", 8, 4, q=4)
    gaps = []
    for k in (1, 3):
        sp = make_spec("mtp", k, None, m)
        gaps.append(float(_split(st, m, sp).sum() - _split(st, m, sp, pipelined=False).sum()))
    assert 0 < gaps[0] < gaps[1]


def test_explain_names_the_pipeline_term_and_the_terms_add_up():
    e = api.explain("deepseek-r1", "16xH100", tp=8, pp=2, batch=2, isl=1024, osl=1024, spec="mtp", spec_k=3)
    names = [t["term"] for t in e["terms"]]
    assert any(n.startswith("pipeline: 2 micro-batches") for n in names)
    assert sum(t["seconds"] for t in e["terms"]) == pytest.approx(e["step_time_s"], rel=1e-9)
    plain = api.explain("deepseek-r1", "16xH100", tp=16, batch=2, isl=1024, osl=1024, spec="mtp", spec_k=3)
    assert not any(t["term"].startswith("pipeline") for t in plain["terms"])


def test_stage_sends_cross_the_nics_where_stages_sit_on_other_nodes():
    """A stage boundary between two scale-up domains is a send over the NICs; inside one domain over NVLink."""
    from simfront.comm import p2p_cost
    from simfront.step import ACT_BYTES

    hw = get_hardware("h100_sxm")  # 8 GPUs per NVLink domain
    m = get_model("llama-3.1-70b")
    batch, H = 2, m.arch.hidden
    msg = batch * H * ACT_BYTES  # one decode token per request crosses each boundary
    net, nvl = (float(p2p_cost(msg, hw, scope=s).time_s) for s in ("scaleout", "scaleup"))
    assert net > nvl
    for tp, pp, crossing in ((4, 2, 0), (8, 2, 1), (8, 4, 3), (2, 8, 1), (4, 4, 1)):
        st = forward_step(m, apply_precision(m, "native"), hw, tp, pp, 1, 1, StepBatch(decode_reqs=batch, decode_ctx=1024))
        sends = sum(float(x) for x in st.op_parts("pp.send"))
        assert sends == pytest.approx(crossing * net + (pp - 1 - crossing) * nvl, rel=1e-9), (tp, pp)


def test_a_round_pays_the_schedulers_cpu_work_once_per_micro_batch():
    """The engine's scheduler runs once per micro-batch, so a pipelined round of PP micro-batches pays the per-step and
    per-request CPU work PP times (serving.step_terms); where the CPU work is not overlapped it adds to the round."""
    from simfront.serving import Workload, decode_raw, engine_profile, finish_decode, step_terms

    prof = dict(engine_profile("vllm"), cpu_overlap=0.0, cpu_overlap_spec=0.0, step_overhead_s=2e-3, request_overhead_s=50e-6)
    split = np.array([10e-3, 1e-3])
    one = step_terms(split, prof, requests=8.0)
    two = step_terms(split, prof, requests=8.0, micro_batches=2.0)
    assert two["overhead_s"] == pytest.approx(2 * one["overhead_s"])
    assert two["request_overhead_s"] == pytest.approx(2 * one["request_overhead_s"])
    assert two["engine_s"] - one["engine_s"] == pytest.approx(2e-3 + 8 * 50e-6)  # not overlapped: the extra CPU adds
    # the evaluator's decode worker charges it by its PP (decode_raw's micro-batch count)
    m, hw, wl = get_model("llama-3.1-70b"), get_hardware("h100_sxm"), Workload(isl=1024, osl=256)
    prec = apply_precision(m, "native")
    for pp in (1, 2, 4):
        raw = decode_raw(m, prec, hw, 2, pp, 1, 1, 8.0, wl)
        assert float(raw[4]) == pp
        step = float(finish_decode(*raw, wl.mean_osl, prof).step_s)
        want = float(step_terms(raw[0], prof, 8.0, False, pp)["engine_s"])
        assert step == pytest.approx(want, rel=1e-12)

"""One deployment evaluator: predict's frontier obeys its own accounting, validates to itself, and
explain reproduces its step time."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simfront import api
from simfront.deployment import Layouts, evaluate_disagg, prefill_utilisation, running_batch
from simfront.export import measured_csv
from simfront.serving import DecodeResult, PrefillResult, md1_wait_s

# (model, GPU set, ISL, OSL, modes): dense, MoE and MLA models; 1 to 72 GPUs; long and short prompts
SEARCHES = [
    ("llama-3.1-8b", "1xH100", 1024, 1024, None),
    ("llama-3.1-8b", "2xL40S", 32768, 64, None),
    ("llama-3.1-70b", "8xH100", 1024, 1024, None),
    ("qwen3-30b-a3b", "4xH100", 2048, 256, None),
    ("deepseek-r1", "16xH200", 8192, 1024, None),
    ("deepseek-r1", "8xB200", 1024, 8192, None),
    ("gpt-oss-120b", "8xB200", 1024, 8192, None),
    ("qwen3-32b", "4xMI300X", 8192, 256, None),
    ("kimi-k3", "16xB300", 4096, 512, None),
    ("deepseek-r1", "72xGB200", 1024, 1024, None),
    ("glm-5.3", "8xB200", 16384, 128, ["disagg"]),
]


@pytest.fixture(scope="module")
def frontiers() -> list[tuple]:
    out = []
    for model, gpus, isl, osl, modes in SEARCHES:
        res = api.predict(model, gpus, isl=isl, osl=osl, modes=modes, engine="vllm")
        assert res["frontier"], (model, gpus)
        out.append((model, gpus, isl, osl, res["frontier"]))
    return out


def test_every_frontier_point_obeys_closed_loop_accounting(frontiers):
    """C = requests/s x (TTFT + (OSL - 1) x TPOT) and output tok/s = requests/s x OSL, every mode."""
    modes = set()
    for model, gpus, isl, osl, front in frontiers:
        n = int(gpus.split("x")[0])
        for p in front:
            modes.add(p["mode"])
            e2e_s = (p["ttft_ms"] + (osl - 1) * p["tpot_ms"]) / 1e3
            assert p["requests_s"] * e2e_s == pytest.approx(p["concurrency"], rel=0.01), (model, gpus, p["layout"])
            assert p["tok_s_gpu"] * n == pytest.approx(p["requests_s"] * osl, rel=0.01)
            assert p["gpus_used"] <= n and p["queue_ms"] >= -1e-6
    assert modes == {"agg", "disagg"}


def test_disaggregated_point_from_the_issue_is_honest():
    """One 32k-token prompt at a time on 1P1D L40S: one request per TTFT + decode, not 12 tok/s/GPU."""
    res = api.predict("llama-3.1-8b", "2xL40S", isl=32768, osl=64, modes=["disagg"])
    p = min(res["frontier"], key=lambda q: q["concurrency"])
    assert p["concurrency"] == 1
    e2e_s = (p["ttft_ms"] + 63 * p["tpot_ms"]) / 1e3
    assert p["tok_s_gpu"] == pytest.approx(64 / e2e_s / 2, rel=0.01)


def _spec_on_and_off(frontiers) -> set:
    return {p["spec"] != "none" for *_, f in frontiers for p in f}


def test_frontier_points_validate_to_themselves(frontiers, tmp_path):
    """Frontier points written as measured-point CSV rows, with their predictions as measurements,
    are predicted within 1% by validate (one evaluator for predict and validate)."""
    assert _spec_on_and_off(frontiers) == {True, False}
    checked = {"agg": 0, "disagg": 0}
    for model, gpus, isl, osl, front in frontiers:
        path = tmp_path / f"{model}_{gpus}.csv"
        path.write_text(measured_csv(front, model, gpus.split("x", 1)[1], isl, osl, "vllm"))
        rows = api.validate([str(path)])["serving"]["rows"]
        assert len(rows) == len(front)
        for p, row in zip(front, rows):
            assert "reason" not in row, (model, gpus, p["layout"], row.get("reason"))
            for meas, pred in (("ttft_ms", "predicted_ttft_ms"), ("tpot_ms", "predicted_tpot_ms"),
                               ("output_tok_s_per_gpu", "predicted_tok_s_per_gpu"), ("request_throughput", "predicted_request_throughput")):
                assert row[pred] == pytest.approx(row[meas], rel=0.01), (model, gpus, p["layout"], p["spec"], meas)
            checked[p["mode"]] += 1
    assert checked["agg"] >= 50 and checked["disagg"] >= 20


def test_explain_reproduces_the_step_of_frontier_points(frontiers):
    for model, gpus, isl, osl, front in frontiers[:6]:
        for p in front[:: max(1, len(front) // 4)]:
            spec = None if p["spec"] == "none" else p["spec"].split("-k")[0]
            k = None if spec is None else int(p["spec"].split("-k")[1].split("@")[0])
            e = api.explain(model, gpus, tp=p["tp"], pp=p["pp"], ep=p["ep"], attention_dp=p["attention_dp"], batch=p["batch"],
                            isl=isl, osl=osl, precision=p["precision"].split("+kv")[0], kv_dtype=p["kv_dtype"], spec=spec, spec_k=k,
                            engine="vllm", chunk_tokens=p["chunk_tokens"] or None, mode=p["mode"])
            assert e["tpot_s"] * 1e3 == pytest.approx(p["tpot_ms"], rel=1e-3), (model, gpus, p["layout"], p["mode"])
            # the printed terms add up from the op sum to the step time
            assert sum(t["seconds"] for t in e["terms"]) == pytest.approx(e["step_time_s"], rel=1e-9)


def test_explain_names_every_term_of_the_issue_example():
    """The example of the issue: explain's step time now carries the fitted overlap and overheads."""
    front = api.predict("llama-3.1-70b", "8xH100", isl=1024, osl=1024, precision=["fp8_block"], kv_dtype=["fp8"], modes=["agg"])["frontier"]
    p = next(q for q in front if q["tp"] == 8 and q["batch"] == 1)
    e = api.explain("llama-3.1-70b", "8xH100", tp=8, batch=1, isl=1024, osl=1024, precision="fp8_block", kv_dtype="fp8",
                    chunk_tokens=p["chunk_tokens"])
    assert e["tpot_s"] * 1e3 == pytest.approx(p["tpot_ms"], rel=1e-4)
    names = " ".join(t["term"] for t in e["terms"])
    for word in ("hidden by the engine", "step scale", "overhead", "mixed steps"):
        assert word in names
    # the engine hides part of the ops' fixed latencies (the fitted overlap), whatever the other terms add
    assert next(t["seconds"] for t in e["terms"] if t["term"].startswith("hidden by the engine")) < 0 < e["raw_step_time_s"]


def test_prefill_utilisation_solves_the_closed_loop():
    rng = np.random.default_rng(1)
    c = rng.uniform(1, 500, 200)
    base = rng.uniform(0.01, 2, 200)
    w = rng.uniform(0.01, 2, 200)
    dec = rng.uniform(0.1, 50, 200)
    cap = rng.uniform(0.1, 100, 200)
    u = prefill_utilisation(c, base, w, dec, cap)
    assert np.all((u > 0) & (u < 1))
    x = u * cap
    lhs = x * (base + w * u / (2 * (1 - u)) + dec)
    assert np.allclose(lhs, c, rtol=1e-9)
    assert np.allclose(md1_wait_s(w, u), w * u / (2 * (1 - u)))


def _pre(x_cap=1.0, shared_s=0.0):
    return PrefillResult(np.array(0.2), np.array(0.15), np.array(0.01), np.array(x_cap), 1.0, np.array(shared_s))


def test_prefill_capacity_caps_a_disaggregated_deployment():
    dec = DecodeResult(np.array(0.02), np.array(0.02), np.array(10.0))
    conc = np.array([1, 4, 16, 64, 256, 1024], float)
    m = evaluate_disagg(_pre(2.0), 1, dec, conc, conc, 1024, 16)
    assert np.all(m.requests_s < 2.0)  # never above one prefill worker's capacity
    assert np.all(np.diff(m.ttft_s) > 0) and np.all(np.diff(m.requests_s) > 0)
    more = evaluate_disagg(_pre(2.0), 2, dec, conc, conc, 1024, 16)
    assert np.all(more.ttft_s <= m.ttft_s) and np.all(more.requests_s >= m.requests_s)
    for r in (m, more):
        assert np.allclose(r.requests_s * r.e2e_s, conc)


def test_shared_step_latency_moves_with_the_prefill_utilisation():
    """A prompt that finds its prefill worker idle is prefilled alone; one that finds it busy shares a batch step,
    which on an attention-DP worker is longer: the deployment's TTFT starts at the lone prompt's and the extra enters
    as the worker fills. Little's law holds, and the two fixed-point passes sit at the fixed point."""
    dec = DecodeResult(np.array(0.02), np.array(0.02), np.array(10.0))
    conc = np.array([1, 4, 16, 64, 256], float)
    lone = evaluate_disagg(_pre(2.0), 1, dec, conc, conc, 1024, 16)
    shared = evaluate_disagg(_pre(2.0, shared_s=0.3), 1, dec, conc, conc, 1024, 16)
    assert np.all(shared.ttft_s >= lone.ttft_s) and np.all(shared.requests_s <= lone.requests_s)
    assert np.allclose(shared.requests_s * shared.e2e_s, conc)
    u = shared.requests_s / 2.0  # the prefill worker's utilisation
    extra = shared.ttft_s - lone.ttft_s
    assert extra[0] < 0.3 * u[0] + 0.02  # one client: the worker is mostly idle, the extra mostly absent
    assert np.all(np.diff(u) > 0)
    # the fixed point between the latency and the utilisation: base + u * extra with u from the final rate
    import simfront.deployment as dep
    many = dep.SHARED_STEP_PASSES
    try:
        dep.SHARED_STEP_PASSES = 50
        exact = evaluate_disagg(_pre(2.0, shared_s=0.3), 1, dec, conc, conc, 1024, 16)
    finally:
        dep.SHARED_STEP_PASSES = many
    assert np.allclose(shared.ttft_s, exact.ttft_s, rtol=5e-3)


def test_idle_prefill_worker_prefills_one_prompt_alone():
    """The idle-worker TTFT of an attention-DP prefill worker is one prompt's prefill on one rank (its experts see that
    prompt's tokens only), shorter than the step of the worker's whole batch of one prompt per rank; a plain TP
    worker of one prompt per step has no difference between the two."""
    from simfront.hardware import get_hardware
    from simfront.models import get_model
    from simfront.serving import Workload, engine_profile, finish_prefill, prefill_raw

    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    wl = Workload(isl=8192.0, osl=1024.0)
    prof = engine_profile("trtllm")
    dpa = finish_prefill(*prefill_raw(m, m.precision, hw, 1, 1, 8, 8, 1.0, wl, 100e9), prof)
    tp = finish_prefill(*prefill_raw(m, m.precision, hw, 8, 1, 1, 8, 1.0, wl, 100e9), prof)
    assert float(tp.shared_extra_s) == pytest.approx(0.0, abs=1e-12)
    assert float(dpa.shared_extra_s) > 0
    busy_ttft = float(dpa.ttft_base_s + dpa.shared_extra_s)  # what the idle TTFT was before: the batch step
    assert float(dpa.ttft_base_s) < 0.8 * busy_ttft
    # the prompt's own attention runs on one rank either way, so the lone DPA step is not cheaper than the TP one
    assert float(dpa.ttft_base_s) > float(tp.ttft_base_s)


def test_clients_beyond_the_slots_wait_in_ttft():
    dec = DecodeResult(np.array(0.02), np.array(0.02), np.array(10.0))
    slots = np.array(8.0)
    conc = np.array([8.0, 16.0, 64.0])
    m = evaluate_disagg(_pre(100.0), 4, dec, slots, conc, 1024, 16)
    assert np.allclose(m.requests_s, m.requests_s[0])  # the slots bound the rate
    assert np.all(np.diff(m.queue_s) > 0)
    assert np.allclose(m.requests_s * m.e2e_s, conc)


def test_decode_slot_taken_at_transfer_lets_prefill_run_outside_the_slots():
    """An engine that takes the decode slot when the KV arrives (TensorRT-LLM) serves slots / decode time once the
    clients exceed the slots, where one that holds the slot through the prefill (SGLang) serves less; at or below
    the slots both are the same closed loop; Little's law holds either way."""
    dec = DecodeResult(np.array(0.02), np.array(0.02), np.array(10.0))
    decode_s = 1023 * 0.02
    slots = np.array(8.0)
    conc = np.array([4.0, 8.0, 10.0, 16.0, 64.0])
    held = evaluate_disagg(_pre(100.0), 4, dec, slots, conc, 1024, 16)
    late = evaluate_disagg(_pre(100.0), 4, dec, slots, conc, 1024, 16, slot_at_transfer=True)
    assert np.allclose(late.requests_s[:2], held.requests_s[:2]) and np.allclose(late.ttft_s[:2], held.ttft_s[:2])
    assert np.all(late.requests_s >= held.requests_s - 1e-12) and np.all(late.ttft_s <= held.ttft_s + 1e-12)
    assert np.allclose(late.requests_s[2:], slots / decode_s)  # decode-bound beyond the slots
    assert np.allclose(late.ttft_s[2:], (conc[2:] / slots - 1.0) * decode_s)  # they wait after their prefill
    for m in (held, late):
        assert np.allclose(m.requests_s * m.e2e_s, conc) and np.all(np.isfinite(m.ttft_s))
    # a slow prefill side still binds: the rate is the lesser of the two
    slow = evaluate_disagg(_pre(0.2), 1, dec, slots, conc, 1024, 16, slot_at_transfer=True)
    assert np.all(slow.requests_s < 0.2 + 1e-9) and np.allclose(slow.requests_s * slow.e2e_s, conc)


def test_engines_say_when_a_disaggregated_request_takes_its_decode_slot():
    from simfront.scheduler import scheduler_settings
    from simfront.serving import engine_constants

    assert scheduler_settings("sglang").decode_slot_at == "prefill"
    assert scheduler_settings("trtllm").decode_slot_at == "transfer" == scheduler_settings("vllm").decode_slot_at
    assert engine_constants("trtllm")["decode_slot_at_transfer"] == 1.0 and engine_constants("sglang")["decode_slot_at_transfer"] == 0.0


def test_running_batch_and_layouts():
    lay = Layouts.of([1, 2], [1, 2], [8, 1], [8, 1])
    assert list(lay.gpus) == [8, 4] and list(lay.ranks) == [8, 2]
    assert list(running_batch([1, 64, 1000], 8, 64, [1e9, 1e9, 50])) == [1.0, 8.0, 50.0]
    assert math.isclose(float(running_batch(100, 4, np.inf)), 25.0)


def test_explain_reproduces_the_wave_form_of_a_fixed_length_benchmark():
    """--random-range-ratio 1 on SGLang: explain costs a frontier point's step as predict did (the prefill-first wave
    term instead of mixed steps), and its terms still add up to the step."""
    res = api.predict("qwen3-32b", "8xH100", isl=2048, osl=256, modes=["agg"], engine="sglang", random_range_ratio=1.0)
    pts = [p for p in res["frontier"] if p["batch"] >= 8] or res["frontier"]
    for p in pts[:: max(1, len(pts) // 3)]:
        e = api.explain("qwen3-32b", "8xH100", tp=p["tp"], pp=p["pp"], ep=p["ep"], attention_dp=p["attention_dp"], batch=p["batch"],
                        isl=2048, osl=256, precision=p["precision"].split("+kv")[0], kv_dtype=p["kv_dtype"], engine="sglang",
                        chunk_tokens=p["chunk_tokens"] or None, random_range_ratio=1.0)
        assert e["tpot_s"] * 1e3 == pytest.approx(p["tpot_ms"], rel=1e-3), p["layout"]
        assert any(t["term"].startswith("prefill-first waves") for t in e["terms"])
        assert sum(t["seconds"] for t in e["terms"]) == pytest.approx(e["step_time_s"], rel=1e-9)


def test_attention_dp_frontier_of_an_engine_with_balance_validates_to_itself(tmp_path):
    """The search's attention-DP points carry their ranks into the evaluator (TensorRT-LLM's balance wait and
    aligned prefill steps), as validate's rows do: with engine trtllm they validate to themselves too."""
    res = api.predict("deepseek-r1", "8xB200", isl=1024, osl=1024, modes=["agg"], engine="trtllm")
    pts = [p for p in res["frontier"] if p["attention_dp"] > 1]
    assert pts
    path = tmp_path / "dpa.csv"
    path.write_text(measured_csv(pts, "deepseek-r1", "B200", 1024, 1024, "trtllm"))
    rows = api.validate([str(path)])["serving"]["rows"]
    for p, row in zip(pts, rows):
        assert "reason" not in row, (p["layout"], row.get("reason"))
        assert row["predicted_ttft_ms"] == pytest.approx(row["ttft_ms"], rel=0.01), p["layout"]
        assert row["predicted_tpot_ms"] == pytest.approx(row["tpot_ms"], rel=0.01), p["layout"]


def test_explain_terms_add_up_when_the_token_budget_caps_the_running_batch():
    """128 requests of 8k-token prompts on a 2,048-token budget: the engine runs fewer than --batch at once, and
    the per-request CPU term counts the running batch, so the terms still sum to the step."""
    e = api.explain("deepseek-r1", "16xH200", tp=2, ep=8, attention_dp=4, batch=128, isl=8192, osl=1024, precision="fp8_block",
                    kv_dtype="fp8", spec="mtp", spec_k=2, engine="vllm", chunk_tokens=2048, mode="agg")
    assert sum(t["seconds"] for t in e["terms"]) == pytest.approx(e["step_time_s"], rel=1e-9)
    cpu = next(t for t in e["terms"] if t["term"].startswith("per-request CPU"))
    assert not cpu["term"].startswith("per-request CPU overhead (128 ")


def test_explain_prefill_charges_and_names_no_decode_requests():
    e = api.explain("llama-3.1-8b", "1xH100", batch=2, ctx=4096, phase="prefill")
    cpu = next(t for t in e["terms"] if t["term"].startswith("per-request CPU"))
    assert cpu["term"].startswith("per-request CPU overhead (0 decode requests") and cpu["seconds"] == 0.0
    assert sum(t["seconds"] for t in e["terms"]) == pytest.approx(e["step_time_s"], rel=1e-9)


def test_explain_prefill_shows_the_lone_prompt_step_the_idle_worker_ttft_uses():
    """explain --phase prefill reports the step of one prompt alone on the worker: the step finish_prefill's idle-worker
    TTFT is built on (one rank of an attention-DP worker), below the batch step there; the same step on a TP worker of
    one prompt; none for a decode step."""
    from simfront.hardware import get_hardware
    from simfront.models import get_model
    from simfront.serving import Workload, prefill_raw, step_terms

    e = api.explain("deepseek-r1", "8xB200", tp=1, attention_dp=8, ep=8, batch=1, ctx=8192, phase="prefill", mode="disagg",
                    engine="trtllm")
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    lone = prefill_raw(m, m.precision, hw, 1, 1, 8, 8, 1.0, Workload(isl=8192.0, osl=1.0), 1e30)[3]
    assert e["lone_prompt_step_s"] == pytest.approx(float(step_terms(lone, e["profile"])["engine_s"]), rel=1e-9)
    assert e["lone_prompt_step_s"] < 0.8 * e["step_time_s"]
    tp = api.explain("deepseek-r1", "8xB200", tp=8, ep=8, batch=1, ctx=8192, phase="prefill", mode="disagg", engine="trtllm")
    assert tp["lone_prompt_step_s"] == pytest.approx(tp["step_time_s"], rel=1e-9)
    assert api.explain("deepseek-r1", "8xB200", tp=8, batch=4, ctx=4096)["lone_prompt_step_s"] is None


def test_explain_costs_a_length_range_at_its_mean_lengths_as_predict_does():
    """--random-range-ratio 0.8: explain's decode step of a frontier point is the one predict priced (both at the mean
    lengths of lengths uniform in [0.8 L, L])."""
    res = api.predict("qwen3-32b", "8xH100", isl=2048, osl=256, modes=["agg"], engine="vllm", random_range_ratio=0.8)
    pts = res["frontier"]
    for p in pts[:: max(1, len(pts) // 3)]:
        e = api.explain("qwen3-32b", "8xH100", tp=p["tp"], pp=p["pp"], ep=p["ep"], attention_dp=p["attention_dp"], batch=p["batch"],
                        isl=2048, osl=256, precision=p["precision"].split("+kv")[0], kv_dtype=p["kv_dtype"], engine="vllm",
                        chunk_tokens=p["chunk_tokens"] or None, random_range_ratio=0.8)
        assert e["tpot_s"] * 1e3 == pytest.approx(p["tpot_ms"], rel=1e-3), p["layout"]
        assert e["random_range_ratio"] == 0.8 and e["ctx"] < 1843 + 230 / 2 + 1  # at most the mean context, busiest rank


@pytest.mark.parametrize("skew", ["balanced", "1.3"])
def test_explain_prices_a_routing_skew_as_predict_does(skew):
    """--routing-skew: explain's decode step of a frontier point of a search under that skew is the one predict priced,
    and with many tokens per rank (4,096 over 8 ranks) a skewed router makes the expert-parallel MoE op slower than a
    balanced one: the busiest rank sets it. (With few tokens a skew can be faster: fewer experts are touched, so
    fewer weights are streamed.)"""
    res = api.predict("deepseek-r1", "8xB200", isl=1024, osl=1024, modes=["agg"], spec="none", routing_skew=skew)
    pts = [p for p in res["frontier"] if p["ep"] > 1]
    assert pts
    for p in pts[:: max(1, len(pts) // 3)]:
        e = api.explain("deepseek-r1", "8xB200", tp=p["tp"], pp=p["pp"], ep=p["ep"], attention_dp=p["attention_dp"], batch=p["batch"],
                        isl=1024, osl=1024, precision=p["precision"].split("+kv")[0], kv_dtype=p["kv_dtype"],
                        chunk_tokens=p["chunk_tokens"] or None, routing_skew=skew)
        assert e["tpot_s"] * 1e3 == pytest.approx(p["tpot_ms"], rel=1e-3), p["layout"]
        assert e["routing_alpha"] == (None if skew == "balanced" else float(skew))

    def moe_s(s):
        e = api.explain("deepseek-r1", "8xB200", tp=1, attention_dp=8, ep=8, batch=512, ctx=2048, routing_skew=s)
        return sum(r["time_s"] for r in e["ops"] if r["op"] == "moe.experts")

    assert moe_s("balanced") < moe_s("1.3")

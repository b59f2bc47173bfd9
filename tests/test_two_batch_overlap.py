"""Two-batch overlap (SGLang --enable-two-batch-overlap, vLLM --enable-dbo): the step, the knob and the loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from cli_runner import run_cli
from simfront import api
from simfront.hardware import get_hardware
from simfront.launch import Deployment, WorkerLayout, launch_commands, sidecar_yaml
from simfront.models import apply_precision, get_model
from simfront.step import StepBatch, forward_step, two_batch_overlap_step

DATA = Path(__file__).resolve().parent / "data" / "ingest"

M = get_model("deepseek-r1")
HW = get_hardware("h800_sxm")
PREC = apply_precision(M, "fp8_block", "native")
A2A = ("ep.dispatch", "ep.combine")


def _pair(dp, ep, batch, ctx=4000.0, q=2.0, prefill=0.0):
    sb = StepBatch(decode_reqs=batch, decode_ctx=ctx, q_tokens=q, prefill_tokens=prefill, prefill_seqs=prefill / 1024.0)
    plain = forward_step(M, PREC, HW, 1, 1, dp, ep, sb, routing_alpha=None)
    tbo = forward_step(M, PREC, HW, 1, 1, dp, ep, sb, routing_alpha=None, two_batch_overlap=True)
    return plain, tbo


def _comm_s(st) -> np.ndarray:
    return sum(np.asarray(r.count) * r.cost.time_s for r in st.ops if r.name in A2A)


@pytest.mark.parametrize("batch", [1.0, 2.0, 8.0, 64.0, 256.0])
def test_overlap_never_changes_the_work(batch):
    """Two micro-batches of half the batch do the whole batch's FLOPs (the overlap moves time, not work)."""
    plain, tbo = _pair(32, 32, batch)
    assert np.allclose(tbo.flops, plain.flops, rtol=1e-9)
    assert np.allclose(tbo.model_flops(1, 32), plain.model_flops(1, 32), rtol=1e-9)


def test_a_step_without_all_to_all_or_without_two_requests_is_not_split():
    """No attention-DP (no all-to-all to hide), or a batch of one request: the engine runs the step as it is."""
    for dp, ep, batch in ((1, 8, 64.0), (32, 32, 1.0)):
        plain, tbo = _pair(dp, ep, batch)
        assert float(tbo.time_s) == pytest.approx(float(plain.time_s), rel=1e-12)


def test_a_dense_model_is_not_split_even_with_attention_dp():
    """A dense model's attention-DP step moves no tokens all-to-all, so the engine has nothing to overlap: the step as
    it is (before, it was priced as two micro-batches, each reading the weights)."""
    m = get_model("llama-3.1-70b")
    prec = apply_precision(m, "fp8", "native")
    sb = StepBatch(decode_reqs=64.0, decode_ctx=2000.0, q_tokens=1.0)
    plain = forward_step(m, prec, HW, 1, 1, 8, 1, sb, routing_alpha=None)
    tbo = forward_step(m, prec, HW, 1, 1, 8, 1, sb, routing_alpha=None, two_batch_overlap=True)
    assert float(tbo.time_s) == pytest.approx(float(plain.time_s), rel=1e-12)


def test_overlap_hides_at_most_the_all_to_all_and_pays_for_the_split():
    """Overlapped, a step is never shorter than its compute alone (the plain step less its all-to-all), nor than its
    longer stream; at a small batch the weights read twice make it slower, at a large one the hidden all-to-all faster."""
    for batch in (4.0, 16.0, 88.0, 256.0):
        plain, tbo = _pair(128, 128, batch)
        comm = float(_comm_s(plain))
        assert float(tbo.time_s) >= float(plain.time_s) - comm - 1e-12
        assert float(tbo.time_s) >= 2.0 * float(_comm_s(_pair(128, 128, batch / 2)[0])) * 0.999
    small, large = _pair(128, 128, 4.0), _pair(128, 128, 256.0)
    assert float(small[1].time_s) > float(small[0].time_s)
    assert float(large[1].time_s) < 0.8 * float(large[0].time_s)


def test_phases_follow_the_four_phase_schedule():
    """Exposed all-to-all of one layer group = the four phases (each the longer of one micro-batch's compute and the
    other's dispatch or combine) less both micro-batches' compute: recomputed here from the micro-batch's own ops."""
    sb = StepBatch(decode_reqs=88.0, decode_ctx=4000.0, q_tokens=2.0)
    half = forward_step(M, PREC, HW, 1, 1, 128, 128, StepBatch(decode_reqs=44.0, decode_ctx=4000.0, q_tokens=2.0),
                        routing_alpha=None)
    tbo = two_batch_overlap_step(M, PREC, HW, 1, 1, 128, 128, sb, routing_alpha=None)
    g = "full/moe"
    t = {k: 0.0 for k in "ADCES"}
    for r in half.ops:
        if r.group != g:
            continue
        k = ("D" if r.name == "ep.dispatch" else "C" if r.name == "ep.combine" else
             "S" if r.name.startswith("moe.shared") else "E" if r.name == "moe.experts" else "A")
        t[k] += float(np.asarray(r.count) * r.cost.time_s)
    a, d, c, e, s = (t[k] for k in "ADCES")
    phases = max(a, d) + max(e, d) + max(s + e, c) + max(s + a, c)
    got = sum(float(np.asarray(r.count) * r.cost.time_s) for r in tbo.ops if r.group == g)
    assert got == pytest.approx(max(phases, 2 * (a + e + s)), rel=1e-9)


def test_search_prices_the_overlap_only_where_asked_and_reports_it():
    off = api.predict("deepseek-r1", "16xH200", layout="dpa+ep", engine="sglang")
    on = api.predict("deepseek-r1", "16xH200", layout="dpa+ep", engine="sglang", two_batch_overlap=True)
    assert off.workload.two_batch_overlap is False and on.workload.two_batch_overlap is True
    best = lambda r: max(p["tok_s_gpu"] for p in r.frontier)  # noqa: E731
    assert best(on) != pytest.approx(best(off), rel=1e-6)
    tp_only = api.predict("llama-3.1-8b", "1xH100", two_batch_overlap=True)
    assert tp_only.frontier == api.predict("llama-3.1-8b", "1xH100").frontier  # nothing to split on a dense model


def test_engine_without_two_batch_overlap_is_a_one_line_error(capsys):
    code, out, err = run_cli(["predict", "--model", "deepseek-r1", "--gpus", "16xH200", "--engine", "trtllm",
                              "--two-batch-overlap"], capsys)
    assert code != 0 and "Traceback" not in err
    assert "trtllm has no two-batch overlap" in err and "sglang, vllm" in err and len(err.strip().splitlines()) == 1


def test_explain_and_json_say_the_step_is_overlapped(capsys):
    args = ["explain", "--model", "deepseek-r1", "--gpus", "128xH800", "--attention-dp", "128", "--ep", "128", "--batch",
            "88", "--isl", "3600", "--osl", "1000", "--mode", "disagg", "--precision", "fp8_block", "--routing-skew",
            "balanced"]
    code, out, _ = run_cli(args + ["--two-batch-overlap", "--json"], capsys)
    on = json.loads(out)
    code2, out2, _ = run_cli(args + ["--json"], capsys)
    off = json.loads(out2)
    assert code == code2 == 0 and on["two_batch_overlap"] is True and off["two_batch_overlap"] is False
    assert on["step_time_s"] < off["step_time_s"]
    code, text, _ = run_cli(args + ["--two-batch-overlap"], capsys)
    assert code == 0 and "two-batch overlap" in text.splitlines()[0]


@pytest.mark.parametrize("engine,flag", [("sglang", "--enable-two-batch-overlap"), ("vllm", "--enable-dbo")])
def test_launch_lines_switch_the_overlap_on_for_attention_dp_ep_workers_only(engine, flag):
    dpa = Deployment("deepseek-ai/DeepSeek-R1", tp=1, attention_dp=8, ep=8, weight_precision="fp8_block", gpu="h200_sxm",
                     two_batch_overlap=True)
    assert flag in launch_commands(dpa, engine).commands[0]
    tp = Deployment("deepseek-ai/DeepSeek-R1", tp=8, ep=8, weight_precision="fp8_block", gpu="h200_sxm", two_batch_overlap=True)
    assert flag not in launch_commands(tp, engine).commands[0]
    plain = Deployment("deepseek-ai/DeepSeek-R1", tp=1, attention_dp=8, ep=8, weight_precision="fp8_block", gpu="h200_sxm")
    assert flag not in launch_commands(plain, engine).commands[0]


def test_sidecar_records_the_overlap_and_validate_prices_it(tmp_path):
    """The loop keeps the fact: the sidecar of a point priced with the overlap says so, and validate prices the run
    with it at the engine release's own split, as the search does: vLLM splits decode steps of more than 32 tokens per
    rank (simfront/engines/scheduler.yaml two_batch_overlap_split), so 512 clients over the eight decode ranks (64
    each) get another predicted TPOT with it, and 256 (32 each) the same one."""
    from simfront.validation import validate_files

    src = json.loads((DATA / "vllm_0.33_openai_dsr1_disagg.json").read_text())
    bare = {k: v for k, v in src.items() if not k.startswith(("prefill_", "decode_")) and k not in
            ("mode", "num_gpus", "engine", "engine_version", "gpu", "precision", "kv_dtype", "model")}
    preds = {}
    for clients in (256, 512):
        for tbo in (False, True):
            d = tmp_path / f"{clients}-{tbo}"
            d.mkdir()
            (d / "run.json").write_text(json.dumps(bare | {"max_concurrency": clients, "max_concurrent_requests": clients}))
            dep = Deployment("deepseek-ai/DeepSeek-R1", mode="disagg", kv_dtype="fp8", weight_precision="fp8_block",
                             gpu="h200_sxm", prefill=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=16),
                             decode=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=768), isl=8192, osl=1024,
                             concurrency=clients, two_batch_overlap=tbo)
            side = sidecar_yaml(dep, "vllm")
            assert ("two_batch_overlap" in yaml.safe_load(side)) is tbo
            (d / "run.json.simfront.yaml").write_text(side)
            res = validate_files([str(d / "run.json")])
            assert res["problems"] == [] and "reason" not in res["serving"]["rows"][0]
            preds[clients, tbo] = res["serving"]["rows"][0]["predicted_tpot_ms"]
    assert preds[512, True] != pytest.approx(preds[512, False], rel=1e-6)
    assert preds[256, True] == pytest.approx(preds[256, False], rel=1e-9)


def test_each_engine_splits_from_its_own_threshold():
    """vLLM's --enable-dbo splits a decode step only above 32 tokens (dbo_decode_token_threshold); SGLang's two-batch
    overlap any step of two requests or more (simfront/engines/scheduler.yaml two_batch_overlap_split)."""
    def step(engine, batch, tbo):
        return api.explain("deepseek-r1", "16xH200", attention_dp=16, ep=16, batch=batch, ctx=2048, engine=engine,
                           two_batch_overlap=tbo).raw_step_time_s
    assert step("vllm", 16, True) == pytest.approx(step("vllm", 16, False), rel=1e-12)
    assert step("vllm", 64, True) != pytest.approx(step("vllm", 64, False), rel=1e-6)
    assert step("sglang", 16, True) != pytest.approx(step("sglang", 16, False), rel=1e-6)


def test_frontier_compare_takes_the_overlap_as_its_knob(capsys):
    res = api.frontier_compare("deepseek-r1", "16xH200", "two_batch_overlap", ["off", "on"], engine="sglang",
                               layout=["dpa+ep"], modes=["agg"])
    assert [s["value"] for s in res["sets"]] == ["off", "on"] and res["verdicts"][0]["verdict"]
    assert res["sets"][0]["frontier"] != res["sets"][1]["frontier"]
    code, _, err = run_cli(["frontier", "--model", "deepseek-r1", "--gpus", "16xH200", "--compare", "two_batch_overlap=off,maybe"],
                           capsys)
    assert code != 0 and "'maybe' is not a setting; valid: off, on" in err and "Traceback" not in err
    code, _, err = run_cli(["frontier", "--model", "deepseek-r1", "--gpus", "16xH200", "--compare", "two_batch_overlap=off,on",
                            "--two-batch-overlap"], capsys)
    assert code != 0 and "--two-batch-overlap cannot be given with --compare two_batch_overlap" in err


def test_tails_simulate_the_overlapped_steps():
    """--tails replays frontier points with step tables of the same overlapped steps the evaluator prices: finite
    tails with the overlap on, and the simulated mean TPOT of the same attention-DP point moves with it."""
    from simfront.hardware import parse_gpus
    from simfront.serving import Workload, engine_profile, engine_workload
    from simfront.tails import simulate_points

    kw = dict(layout="dpa+ep", engine="sglang", modes=["agg"], spec="none")
    on = api.predict("deepseek-r1", "16xH200", two_batch_overlap=True, tails=True, **kw)
    assert on.frontier and all(np.isfinite(p["tpot_p99_ms"]) and p["tpot_p99_ms"] >= p["tpot_p50_ms"] for p in on.frontier)
    res = api.predict("deepseek-r1", "16xH200", **kw)
    pts = res.points
    i = int(np.argmax(np.where(pts["attention_dp"] > 1, pts["tok_s_gpu"], -np.inf)))  # a busy attention-DP point
    sims = {}
    for tbo in (False, True):
        wl = Workload(isl=1024, osl=1024, two_batch_overlap=tbo, **engine_workload("sglang"))
        sims[tbo] = simulate_points(M, parse_gpus("16xH200"), wl, pts, [i], engine_profile("sglang"), "sglang")["tpot_mean_ms"][0]
    assert np.isfinite(sims[True]) and sims[True] != pytest.approx(sims[False], rel=1e-4)


def test_overlapped_prefill_computes_on_the_sms_deepeps_normal_kernels_leave(monkeypatch):
    """A step with prompt tokens moves its tokens with DeepEP's normal kernels, which hold DEEPEP_NORMAL_SMS of the SMs
    while they run: overlapped, its MoE layers compute slower than they would on every SM (a decode step's low-latency
    kernels take none), and never faster than the plain step's compute. On one B200 node (prompts of 2k tokens per
    rank) the overlap still pays; on four H100 nodes the all-to-all through the NICs hides the slower compute."""
    from simfront import step

    sb = StepBatch(prefill_tokens=2048.0, prefill_seqs=1.0)
    dec = StepBatch(decode_reqs=64.0, decode_ctx=2048.0)

    def times(gpu, dp, batch):
        hw = get_hardware(gpu)
        plain = forward_step(M, PREC, hw, 1, 1, dp, dp, batch, routing_alpha=None)
        tbo = float(forward_step(M, PREC, hw, 1, 1, dp, dp, batch, routing_alpha=None, two_batch_overlap=True).time_s)
        return float(plain.time_s), float(plain.time_s) - float(_comm_s(plain)), tbo

    b200, h100, b200_dec = times("b200_sxm", 8, sb), times("h100_sxm", 32, sb), times("b200_sxm", 8, dec)
    monkeypatch.setattr(step, "DEEPEP_NORMAL_SMS", 0.0)
    b200_all, h100_all, b200_dec_all = times("b200_sxm", 8, sb), times("h100_sxm", 32, sb), times("b200_sxm", 8, dec)
    assert b200[1] <= b200[2] < b200[0] and b200[2] > 1.05 * b200_all[2]
    assert h100[1] <= h100[2] < h100[0] and h100[2] >= h100_all[2]
    assert b200_dec[2] == pytest.approx(b200_dec_all[2], rel=1e-12)


def test_the_flag_says_when_it_changed_nothing():
    """Nothing the user gave is silently dropped: --two-batch-overlap on a dense model (or a frontier without an
    attention-DP + EP worker) says it changed no point; on one that has such points it says nothing of the kind."""
    dense = api.predict("llama-3.1-8b", "1xH100", two_batch_overlap=True)
    assert any("--two-batch-overlap changed no frontier point: llama-3.1-8b is dense" in n for n in dense.notes)
    tp = api.predict("deepseek-r1", "8xH200", layout="tp", two_batch_overlap=True)
    assert any("no frontier point has an attention-DP + EP worker" in n for n in tp.notes)
    dpa = api.predict("deepseek-r1", "16xH200", layout="dpa+ep", two_batch_overlap=True)
    assert not any("--two-batch-overlap changed no frontier point" in n for n in dpa.notes)


def test_plan_says_when_the_overlap_changed_no_chosen_deployment():
    res = api.plan("llama-3.1-8b", 5.0, hardware=["h100"], two_batch_overlap=True)
    assert res["search"]["two_batch_overlap"] is True
    assert any("--two-batch-overlap changed no chosen deployment: llama-3.1-8b is dense" in n for n in res["notes"])

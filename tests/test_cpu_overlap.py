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
    # server_args: EAGLE / NEXTN disable the overlap scheduler up to 0.5.12; spec V2 (overlapped) is the default from 0.5.13
    assert not scheduler_settings("sglang", "0.5.12.post1").cpu_overlap_with_spec
    assert scheduler_settings("sglang", "0.5.13").cpu_overlap_with_spec and scheduler_settings("sglang").cpu_overlap_with_spec
    assert scheduler_settings("trtllm").cpu_overlap_with_spec and scheduler_settings("vllm").cpu_overlap_with_spec
    old, new = engine_constants("sglang", "0.5.9"), engine_constants("sglang")
    assert bool(cpu_overlapped(old, False)) and not bool(cpu_overlapped(old, True))
    assert bool(cpu_overlapped(new, False)) and bool(cpu_overlapped(new, True))


def test_release_family_by_version_then_date_then_newest():
    """A row's release picks its family; a row without one takes the release out on its measurement date (the
    InferenceMAX / aiconfigurator rows, all measured by 2026-06-11 on SGLang <= 0.5.12); neither: the newest."""
    assert scheduler_settings("sglang", "v0.5.8-cu130").version_family == "0.5.8"
    assert scheduler_settings("sglang", "0.5.9").version_family == "0.5.8"
    assert scheduler_settings("sglang", "0.5.1.post1").version_family == "0.4.8"
    assert scheduler_settings("sglang", "0.6.0").version_family == "0.5.20"
    assert scheduler_settings("sglang", measured_on="2026-06-11").version_family == "0.5.12"
    assert scheduler_settings("sglang", measured_on="2025-11-10").version_family == "0.5.5"
    assert scheduler_settings("sglang", measured_on="2025-10-10").version_family == "0.5.3"
    assert scheduler_settings("sglang", measured_on="2026-09-01").version_family == "0.5.16"
    assert scheduler_settings("sglang", "0.5.11", measured_on="2026-09-01").version_family == "0.5.10"  # the release wins
    # a family states what changed; the rest is inherited from the family before it
    a, b = scheduler_settings("sglang", "0.5.12"), scheduler_settings("sglang", "0.5.13")
    assert (a.policy, a.token_budget, a.max_running, a.first_token_lag_steps) == (b.policy, b.token_budget, b.max_running,
                                                                                  b.first_token_lag_steps)


def test_measured_rows_are_priced_with_their_own_release():
    """Validation prices a row with the scheduler family of the release it ran: the same SGLang MTP deployment
    measured on 0.5.12 and on 0.5.13 differs by the CPU work the newer overlap scheduler hides."""
    from simfront.ingest.schema import MeasuredPoint
    from simfront.measured import predict_points

    row = dict(source_file="x.csv", line=1, format="offline_csv", model="deepseek-r1", gpu="B200", num_gpus=8, tp=8,
               engine="sglang", mode="agg", precision="fp8", isl=1024, osl=1024, concurrency=64, spec_decoding="mtp")
    old, new, dated_old, dated_new = predict_points([
        MeasuredPoint(**row, engine_version="0.5.12"), MeasuredPoint(**row, engine_version="0.5.13"),
        MeasuredPoint(**row, measured_on="2026-05-20"), MeasuredPoint(**row, measured_on="2026-08-01")])
    assert new["predicted_tpot_ms"] < old["predicted_tpot_ms"]
    assert dated_old["predicted_tpot_ms"] == pytest.approx(old["predicted_tpot_ms"])
    assert dated_new["predicted_tpot_ms"] == pytest.approx(new["predicted_tpot_ms"])


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
    # an SGLang MTP step of a release before 0.5.13 is not overlapped: no such term, the CPU work adds to the step
    kw = dict(tp=8, batch=64, isl=1024, osl=1024, engine="sglang", spec="mtp")
    ex_old = api.explain("deepseek-r1", "8xH200", engine_version="0.5.12", **kw)
    assert not any(t["term"].startswith("CPU work the overlap scheduler") for t in ex_old["terms"])
    ex_new = api.explain("deepseek-r1", "8xH200", **kw)  # the newest release overlaps it
    assert any(t["term"].startswith("CPU work the overlap scheduler") for t in ex_new["terms"])
    assert ex_new["step_time_s"] < ex_old["step_time_s"]


def test_predict_says_which_release_family_its_speculative_points_are_priced_with():
    """SGLang's MTP points: priced with the newest release's overlap scheduler by default, as releases before 0.5.13
    ran them with --engine-version 0.5.12; the note and the ``engine`` field say which. An engine whose releases all
    overlap speculative decoding, or a search without speculative points, carries no such note."""
    def run(**kw):
        res = api.predict("deepseek-r1", "8xB200", modes=["agg"], **kw)
        return res, [n for n in res["notes"] if "overlap scheduler" in n]

    new, new_notes = run(engine="sglang")
    old, old_notes = run(engine="sglang", engine_version="0.5.12")
    assert len(new_notes) == 1 and "priced with the overlap scheduler" in new_notes[0]
    assert len(old_notes) == 1 and "without the overlap scheduler" in old_notes[0]
    assert new["engine"] == {"name": "sglang", "version": None, "scheduler_family": "0.5.20"}
    assert old["engine"]["scheduler_family"] == "0.5.12"
    assert run(engine="trtllm")[1] == [] and run(engine="sglang", spec="none")[1] == []
    assert api.cpu_overlap_note(None, True) is None and api.cpu_overlap_note("vllm", True) is None
    # the same MTP deployment is no slower on the release that overlaps it
    best = lambda r: max(p.tok_s_gpu for p in r.frontier if p.spec != "none")  # noqa: E731
    assert best(new) >= best(old)


def test_cli_engine_version_prices_the_release_or_says_why_not(capsys):
    """--engine-version names the release of --engine (priced) and of --launch (spelled); naming neither engine is
    a one-line error, a malformed release too; with --launch of another engine the profile keeps its newest family."""
    import json

    from cli_runner import run_cli

    base = ["predict", "-m", "deepseek-r1", "-g", "8xB200", "--mode", "agg", "--engine", "sglang", "--json"]
    code, out, _ = run_cli(base + ["--engine-version", "0.5.12"], capsys)
    assert code == 0 and json.loads(out)["engine"]["scheduler_family"] == "0.5.12"
    code, out, err = run_cli(["predict", "-m", "deepseek-r1", "-g", "8xB200", "--engine-version", "0.5.12"], capsys)
    assert code == 2 and err.startswith("error: --engine-version 0.5.12") and "Traceback" not in err
    code, _, err = run_cli(base + ["--engine-version", "latest"], capsys)
    assert code == 2 and "release number" in err
    code, out, _ = run_cli(base + ["--engine-version", "0.12.0", "--launch", "vllm"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["engine"]["scheduler_family"] == "0.5.20" and doc["launch"]["engine_version"] == "0.12.0"
    assert any("spells --launch vllm's flags" in n for n in doc["notes"])


def test_a_release_older_than_every_known_family_is_said_not_dropped():
    """A release before the oldest family of simfront/engines/scheduler.yaml is priced with that family, and the
    prediction says so; releases inside the table, and no release, add no such note."""
    from simfront.scheduler import release_families, release_note

    oldest = release_families("vllm")[0]["since"]
    assert release_note("vllm", "0.1") and oldest in release_note("vllm", "0.1")
    assert release_note("vllm", oldest) is None and release_note("vllm", None) is None and release_note(None, "0.1") is None
    res = api.predict("llama-3.1-8b", "1xH100", engine="vllm", engine_version="0.1", modes=["agg"])
    assert any("vllm 0.1 predates" in n for n in res.notes) and res.engine["scheduler_family"] == oldest
    assert not any("predates" in n for n in api.predict("llama-3.1-8b", "1xH100", engine="vllm", modes=["agg"]).notes)
    planned = api.plan("llama-3.1-8b", 5.0, engine="sglang", engine_version="0.2", hardware=["h100"], max_gpus=8)
    assert any("sglang 0.2 predates" in n for n in planned.notes)

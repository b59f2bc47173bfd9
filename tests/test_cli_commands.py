"""Human output and --json of explain, plan, compare, predict --launch (the other commands have their own files)."""

import json
import subprocess
import sys

import pytest


def run(*args, ok=True):
    p = subprocess.run([sys.executable, "-m", "simfront.cli", *args], capture_output=True, text=True, timeout=600)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


@pytest.mark.parametrize("model,gpus,extra", [
    ("kimi-k3", "8xB300", ["--tp", "8", "--ep", "8"]), ("deepseek-r1", "8xH200", ["--tp", "8", "--ep", "8"]),
    ("glm-5.3", "8xB200", ["--tp", "8", "--ep", "8"]), ("qwen3-235b-a22b", "8xH200", ["--tp", "8", "--ep", "8"]),
    ("gpt-oss-120b", "4xH100", ["--tp", "4", "--ep", "4"]), ("llama-3.1-70b", "8xH100", ["--tp", "8"]),
    ("mixtral-8x7b", "2xH100", ["--tp", "2", "--ep", "2"]),
])
def test_explain_json_flops_match_active_params(model, gpus, extra):
    res = json.loads(run("explain", "--model", model, "--gpus", gpus, *extra, "--batch", "8", "--ctx", "2048", "--json").stdout)
    assert abs(res["weight_flops_ratio"] - 1) < 0.05
    assert res["step_time_s"] > 0 and {r["bound"] for r in res["ops"]} <= {"compute", "memory", "communication"}
    assert all(r["time_s"] >= 0 for r in res["ops"])


def test_explain_names_the_moe_kernel_where_there_is_a_choice():
    from simfront import api
    from simfront.moe import KERNEL_LABELS, moe_path_costs
    from simfront.hardware import get_hardware

    res = api.explain("deepseek-r1", "8xB200", tp=8, ep=8, batch=64, ctx=2048, precision="nvfp4")
    moe_rows = [r for r in res["ops"] if r["op"] == "moe.experts"]
    assert moe_rows and all(r["kernel"] in KERNEL_LABELS.values() for r in moe_rows)
    # the label is the faster kernel for this step's tokens (64 decode tokens per rank, EP8 over 8 GPUs)
    paths = moe_path_costs(64.0, 7168, 2048, 8, 256, 1, 8, "nvfp4", get_hardware("b200_sxm"))
    faster = min(paths, key=lambda k: float(paths[k].time_s))
    assert moe_rows[0]["kernel"] == KERNEL_LABELS[faster]
    # one kernel only (Hopper, FP8 block): no label, and nothing else gets one
    hop = api.explain("deepseek-r1", "8xH200", tp=8, ep=8, batch=64, ctx=2048)
    assert all(r["kernel"] is None for r in hop["ops"])
    out = run("explain", "--model", "deepseek-r1", "--gpus", "8xB200", "--tp", "8", "--ep", "8", "--batch", "64", "--ctx", "2048",
              "--precision", "nvfp4").stdout
    assert f"moe.experts [{moe_rows[0]['kernel']}]" in out


def test_explain_human_and_errors():
    out = run("explain", "--model", "deepseek-r1", "--gpus", "8xH200", "--tp", "8", "--ep", "8", "--batch", "64", "--ctx", "4096",
              "--phase", "prefill").stdout
    assert "moe.experts" in out and "step time" in out and "compute" in out
    bad = run("explain", "--model", "deepseek-r1", "--gpus", "8xH200", "--tp", "8", "--ep", "3", "--batch", "1", "--ctx", "1", ok=False)
    assert bad.returncode == 2 and "impossible parallelism" in bad.stderr
    bad = run("explain", "--model", "deepseek-r1", "--gpus", "8xH200", "--tp", "8", "--batch", "1", "--ctx", "1", "--phase", "train", ok=False)
    assert bad.returncode == 2 and "--phase" in bad.stderr
    # a worker size that does not divide the GPU count: the error lists the sizes that do
    bad = run("explain", "--model", "llama-3.1-70b", "--gpus", "8xH100", "--tp", "3", "--batch", "8", "--ctx", "1000", ok=False)
    assert bad.returncode == 2 and "= 3 does not divide 8 GPUs (worker sizes that do: 1, 2, 4, 8)" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_plan_json_and_human():
    res = json.loads(run("plan", "--model", "llama-3.1-70b", "--rate", "5", "--isl", "2048", "--osl", "256", "--tpot", "40",
                         "--hardware", "h100,b200", "--json").stdout)
    rows = res["rows"]
    assert {r["gpu"] for r in rows} == {"h100_sxm", "b200_sxm"}
    for r in rows:
        if r.get("feasible", True) and "num_gpus" in r:
            assert {"gpu", "num_gpus", "layout", "mode", "usd_per_hour", "usd_per_mtok", "ttft_ms", "tpot_ms", "headroom"} <= set(r)
            assert r["tpot_ms"] <= 40 and r["headroom"] >= 1
    costs = [r["usd_per_hour"] for r in rows if "usd_per_hour" in r]
    assert costs == sorted(costs)
    p = run("plan", "--model", "llama-3.1-70b", "--rate", "5", "--isl", "2048", "--osl", "256", "--tpot", "40", "--hardware", "h100",
            "--price", "h100=1.0", "--launch", "vllm")
    assert "vllm serve" in p.stdout and "vllm bench serve" in p.stdout
    assert p.stdout.splitlines()[0].endswith("SLA: TPOT <= 40 ms")  # the SLA in words, not a dict
    assert p.stderr == ""  # progress goes to a terminal only (tests/test_conventions.py runs one)
    q = run("plan", "--model", "llama-3.1-70b", "--rate", "5", "--hardware", "h100", "--quiet")
    assert q.stderr == ""
    bad = run("plan", "--model", "llama-3.1-70b", "--rate", "5", "--price", "h100", ok=False)
    assert bad.returncode == 2 and "--price" in bad.stderr


def test_plan_says_what_its_rows_rest_on_and_which_prices_it_did_not_use():
    out = run("plan", "--model", "llama-3.1-8b", "--rate", "5", "--hardware", "h100,mi355x", "--precision", "nvfp4,mxfp4,fp8",
              "--price", "b200=5").stdout
    assert "note: --price b200_sxm: not among the GPU types planned (h100_sxm, mi355x), so not used" in out
    # each chosen deployment's provenance notes, once each and named by GPU: borrowed parameters on MI355X
    assert "note: mi355x (cdna4, no calibration data)" in out and "note: mi355x: uncertainty band widened" in out
    notes = [ln for ln in out.splitlines() if ln.startswith("note: ")]
    assert len(notes) == len(set(notes))


def test_compare_json_and_human(tmp_path):
    res = json.loads(run("compare", "--model", "llama-3.1-70b", "--gpus", "8xH100", "--gpus", "8xB200", "--json").stdout)
    assert len(res["sets"]) == 2 and res["table"]
    page = tmp_path / "cmp.html"
    out = run("compare", "--model", "llama-3.1-70b", "--gpus", "8xH100,8xB200", "--html", str(page)).stdout
    assert "tok/s per $/h" in out and page.exists()
    bad = run("compare", "--model", "llama-3.1-70b", "--gpus", "8xH100", ok=False)
    assert bad.returncode == 2 and "two" in bad.stderr
    # each set's notes are printed once: MI300X's borrowed parameters are said, not only carried in the JSON
    out = run("compare", "--model", "llama-3.1-70b", "--gpus", "8xH100,8xMI300X").stdout
    assert "note: mi300x (cdna3, no calibration data)" in out and "note: 8xmi300x: uncertainty band widened" in out
    notes = [ln for ln in out.splitlines() if ln.startswith("note: ")]
    assert len(notes) == len(set(notes))


def test_compare_searches_what_predict_would_and_shows_each_sets_best_under_the_sla():
    """compare takes predict's search knobs (--spec, --mode, --precision, --engine ...) and SLA: every set is the
    frontier predict gives with the same arguments, and each set's best point under the SLA is printed."""
    from simfront import api

    args = ["--model", "deepseek-r1", "--gpus", "8xH200,8xB200", "--spec", "none", "--mode", "agg", "--tpot", "20",
            "--routing-skew", "balanced"]
    res = json.loads(run("compare", *args, "--json").stdout)
    assert res["sla"]["tpot_ms"] == 20
    assert res["search"] == {"precision": None, "kv_dtype": None, "spec": "none", "spec_k": None, "acceptance": None,
                             "modes": ["agg"], "layout": None, "max_pp": None, "routing_alpha": None,
                             "two_batch_overlap": False}
    for s in res["sets"]:
        alone = api.predict("deepseek-r1", s["gpus"], spec="none", modes=["agg"], tpot_ms=20, routing_skew="balanced")
        assert s["frontier"] == json.loads(json.dumps(alone.to_json()["frontier"]))
        b = s["best_under_sla"]
        assert b["spec"] == "none" and b["mode"] == "agg" and b["tpot_ms"] <= 20
        assert all(p["spec"] == "none" and p["mode"] == "agg" for p in s["frontier"])
    out = run("compare", *args).stdout
    assert out.splitlines()[0] == "deepseek-r1: ISL 1024 / OSL 1024; every set with --spec none, --mode agg, --routing-skew balanced"
    assert "best under SLA (TPOT <= 20 ms):" in out
    assert sum(line.startswith(("  8xh200_sxm: ", "  8xb200_sxm: ")) for line in out.splitlines()) == 2
    bad = run("compare", "--model", "deepseek-r1", "--gpus", "8xH200,8xB200", "--mode", "both", ok=False)
    assert bad.returncode == 2 and "--mode" in bad.stderr


def test_frontier_compare_holds_the_other_knobs_and_refuses_to_hold_the_compared_one():
    """frontier --compare precision=... --spec none --mode agg: every frontier searched without drafts, aggregated (as
    predict gives them), the held knobs in the JSON and the header; holding the compared knob itself is an error, and
    --spec-k applies to the drafting values of --compare spec=... only."""
    from simfront import api

    args = ["--model", "deepseek-r1", "--gpus", "8xB200", "--compare", "precision=fp8_block,nvfp4", "--spec", "none", "--mode", "agg"]
    res = json.loads(run("frontier", *args, "--json").stdout)
    assert res["search"] == {"precision": None, "kv_dtype": None, "spec": "none", "spec_k": None, "acceptance": None,
                             "modes": ["agg"], "layout": None, "max_pp": None, "routing_alpha": 1.01,
                             "two_batch_overlap": False}
    for s in res["sets"]:
        alone = api.predict("deepseek-r1", "8xB200", precision=[s["value"]], spec="none", modes=["agg"])
        assert s["frontier"] == json.loads(json.dumps(alone.to_json()["frontier"]))
    assert run("frontier", *args).stdout.splitlines()[0].endswith("; every frontier with --spec none, --mode agg")
    for flag, value, knob in (("--spec", "mtp", "spec=none,mtp"), ("--mode", "agg", "mode=agg,disagg"),
                              ("--kv-dtype", "fp8", "kv=bf16,fp8"), ("--precision", "nvfp4", "precision=fp8_block,nvfp4")):
        bad = run("frontier", "--model", "deepseek-r1", "--gpus", "8xB200", "--compare", knob, flag, value, ok=False)
        assert bad.returncode == 2 and f"{flag} cannot be given with --compare" in bad.stderr
    res = json.loads(run("frontier", "--model", "deepseek-r1", "--gpus", "8xB200", "--compare", "spec=none,mtp",
                         "--spec-k", "2", "--mode", "agg", "--json").stdout)
    assert {p["spec"] for p in res["sets"][0]["frontier"]} == {"none"}
    assert {p["spec"].split("@")[0] for p in res["sets"][1]["frontier"]} == {"mtp-k2"}
    res = json.loads(run("frontier", "--model", "deepseek-r1", "--gpus", "8xB200", "--compare", "precision=fp8_block,nvfp4",
                         "--mode", "agg", "--routing-skew", "balanced", "--json").stdout)
    assert res["search"]["routing_alpha"] is None
    alone = api.predict("deepseek-r1", "8xB200", precision=["nvfp4"], modes=["agg"], routing_skew="balanced")
    assert res["sets"][1]["frontier"] == json.loads(json.dumps(alone.to_json()["frontier"]))


def test_predict_launch_commands():
    out = run("predict", "--model", "llama-3.1-70b", "--gpus", "8xH100", "--tpot", "30", "--launch", "trtllm").stdout
    assert "trtllm-serve" in out and "--tp_size" in out
    res = json.loads(run("predict", "--model", "llama-3.1-70b", "--gpus", "8xH100", "--tpot", "30", "--launch", "sglang", "--json").stdout)
    best = res["best_under_sla"]
    cmd = " ".join(res["launch"]["commands"])
    assert f"--tp-size {best['tp']}" in cmd


def test_validate_human_output(tmp_path):
    f = tmp_path / "h100_sxm__gemm.csv"
    f.write_text("gpu,dtype,m,n,k,latency_us\nh100_sxm,bfloat16,1024,4096,4096,30.0\nh100_sxm,fp8,1,4096,4096,9.0\n")
    out = run("validate", str(f)).stdout
    assert "kernels: measured vs predicted latency" in out and "gemm" in out and "MAPE %" in out
    bad = run("validate", ok=False)
    assert bad.returncode == 2 and "--builtin" in bad.stderr
    missing = run("validate", str(tmp_path / "nope.csv"), ok=False)
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_frontier_compare_human_output():
    out = run("frontier", "--model", "llama-3.1-70b", "--gpus", "8xB200", "--compare", "kv_dtype=bf16,fp8").stdout
    assert "baseline bf16" in out and "fp8 vs bf16:" in out
    # what one value's numbers rest on is said under that value: NVFP4 runs weight-only on an H100
    out = run("frontier", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--compare", "precision=fp8,nvfp4").stdout
    assert "note: [nvfp4] h100_sxm: no nvfp4 tensor cores" in out and "[fp8]" not in out


def test_disaggregation_on_too_few_gpus_says_so():
    """A model that fits one GPU set but not two workers of it: the error names disaggregation, not memory."""
    bad = run("predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--mode", "disagg", ok=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "disaggregated" in bad.stderr and "2xh100_sxm" in bad.stderr and "--mode agg" in bad.stderr
    bad = run("predict", "--model", "deepseek-r1", "--gpus", "16xH100", "--mode", "disagg", ok=False)
    assert bad.returncode == 2 and "16xh100_sxm each" in bad.stderr and "32xh100_sxm" in bad.stderr


def test_frontier_compare_says_why_a_value_has_no_frontier():
    from simfront import api

    res = api.frontier_compare("llama-3.1-8b", "1xH100", "mode", ["agg", "disagg"])
    agg, disagg = res["sets"]
    assert agg["frontier"] and agg["reason"] is None
    assert not disagg["frontier"] and "disaggregat" in disagg["reason"] and "2xh100_sxm" in disagg["reason"]
    assert res["verdicts"][0]["verdict"] == "unknown" and "disagg has no frontier" in res["verdicts"][0]["reason"]
    out = run("frontier", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--compare", "mode=agg,disagg").stdout
    assert "disagg: no frontier (no configuration fits as disaggregated" in out and "None" not in out


def test_frontier_compare_counts_points_outside_the_measured_layouts(capsys):
    """The compare summary says how many of a set's frontier points no measured run covers (~ in predict)."""
    from simfront.report import print_compare

    pt = {"tok_s_gpu": 100.0, "tok_s_user": 50.0, "outside_calibration": []}
    res = {"model": "m", "knob": "spec", "baseline": "none", "verdicts": [],
           "sets": [{"value": "none", "frontier": [pt, pt]},
                    {"value": "mtp", "frontier": [pt, dict(pt, outside_calibration=["PP 2 (measured 1-1)"])]}]}
    print_compare(res)
    lines = capsys.readouterr().out.splitlines()
    assert "2 frontier points, best" in lines[1] and "outside" not in lines[1]
    assert "2 frontier points (1 ~ outside the measured layouts), best" in lines[2]


def test_calibrate_human_output(tmp_path):
    src = (__import__("pathlib").Path(__file__).resolve().parent.parent / "measurements" / "measured_serving.csv").read_text().splitlines()
    rows = [src[0]] + [l for l in src[1:] if ",agg," in l and "Qwen3-32B" in l][:80]
    f = tmp_path / "s.csv"
    f.write_text("\n".join(rows) + "\n")
    out = run("calibrate", str(f), "-o", str(tmp_path / "p.yaml"), "--folds", "2").stdout
    assert "MAPE before %" in out and "k-fold" in out and "--calibration" in out
    bad = run("calibrate", str(f), "-o", str(tmp_path / "p.yaml"), "--folds", "1", ok=False)
    assert bad.returncode == 2 and "--folds" in bad.stderr


def test_predict_names_the_mean_lengths_of_a_length_range():
    """--random-range-ratio 0.8: ISL / OSL are the longest lengths; the header and --json give the means costed."""
    args = ("predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--isl", "2048", "--osl", "256", "--random-range-ratio", "0.8")
    assert "ISL 2048 / OSL 256 (lengths in [0.8 L, L]: mean 1,843 / 230)" in run(*args).stdout.splitlines()[0]
    wl = json.loads(run(*args, "--json").stdout)["workload"]
    assert (wl["isl"], wl["osl"], wl["mean_isl"], wl["mean_osl"]) == (2048, 256, 1843.0, 230.0)
    plain = json.loads(run(*args[:-2], "--json").stdout)["workload"]
    assert (plain["mean_isl"], plain["mean_osl"], plain["random_range_ratio"]) == (2048, 256, None)


def test_explain_prints_what_its_numbers_borrow():
    """explain's text ends with the provenance notes its JSON carries (parameters borrowed from another GPU family,
    estimated peaks, and a drafter's acceptance lengths borrowed from another model), as predict's does."""
    res = json.loads(run("explain", "--model", "qwen3-32b", "--gpus", "1xL40S", "--precision", "fp8_block", "--batch", "8",
                         "--ctx", "2048", "--json").stdout)
    notes = res["provenance"]["notes"]
    assert any(n.startswith("l40s (ada, no calibration data)") for n in notes)
    out = run("explain", "--model", "qwen3-32b", "--gpus", "1xL40S", "--precision", "fp8_block", "--batch", "8", "--ctx", "2048").stdout
    assert all(f"note: {n}" in out for n in notes)
    out = run("explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "8", "--isl", "1024", "--osl", "1024",
              "--spec", "eagle").stdout
    assert "note: speculative decoding: llama-3.1-8b has no measured acceptance lengths of its own" in out
    out = run("explain", "--model", "deepseek-r1", "--gpus", "8xB200", "--tp", "8", "--batch", "8", "--isl", "1024", "--osl", "1024",
              "--spec", "mtp").stdout
    assert "acceptance lengths of its own" not in out


def test_layout_classes_restrict_every_worker_and_compare_as_a_knob():
    """--layout keeps only the layout classes named (tp: EP 1 and attention-DP 1; tp+ep: EP > 1, attention-DP 1;
    dpa+ep: attention-DP > 1), for aggregated, prefill and decode workers alike; frontier --compare layout=... gives
    one frontier per class, each the one predict --layout gives; a class the model or the GPU count rules out is a
    one-line error naming the classes there are."""
    from simfront import api
    from simfront.layout import layout_class_mask

    res = json.loads(run("predict", "--model", "deepseek-r1", "--gpus", "16xH200", "--layout", "ep,tp", "--json").stdout)
    assert res["layouts"] == ["tp", "tp+ep"] and res["frontier"]
    for p in res["frontier"]:
        assert p["attention_dp"] == 1 and (p["mode"] == "agg" or p["prefill_attention_dp"] == 1)
    full = api.predict("deepseek-r1", "16xH200")
    assert full.layouts is None
    pts = full.points  # the unrestricted search holds every class, so the restriction removed some points
    assert not layout_class_mask(("tp", "tp+ep"), pts["attention_dp"], pts["ep"]).all()
    dpa = api.predict("deepseek-r1", "16xH200", layout="dpa")
    assert dpa.frontier and all(p["attention_dp"] > 1 for p in dpa.frontier)
    assert all(p["prefill_attention_dp"] > 1 for p in dpa.frontier if p["mode"] == "disagg")
    assert "layouts tp,tp+ep" in run("predict", "--model", "deepseek-r1", "--gpus", "16xH200", "--layout", "tp,tp+ep").stdout.splitlines()[0]

    cmp = json.loads(run("frontier", "--model", "deepseek-r1", "--gpus", "16xH200", "--compare", "layout=tp,dpa+ep", "--mode", "agg",
                         "--json").stdout)
    assert [s["value"] for s in cmp["sets"]] == ["tp", "dpa+ep"] and cmp["search"]["layout"] is None
    alone = api.predict("deepseek-r1", "16xH200", layout=["dpa+ep"], modes=["agg"])
    assert cmp["sets"][1]["frontier"] == json.loads(json.dumps(alone.to_json()["frontier"]))
    assert cmp["verdicts"][0]["verdict"]

    for args, says in ((["predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--layout", "tp+ep"], "is dense"),
                       (["predict", "--model", "qwen3-30b-a3b", "--gpus", "1xH100", "--layout", "dpa+ep"], "layout classes there: tp"),
                       (["predict", "--model", "deepseek-r1", "--gpus", "16xH200", "--layout", "pp"], "valid layout classes are tp, tp+ep, dpa+ep"),
                       (["plan", "--model", "llama-3.1-70b", "--rate", "5", "--layout", "ep", "-q"], "is dense"),
                       (["frontier", "--model", "deepseek-r1", "--gpus", "16xH200", "--compare", "layout=tp,dpa", "--layout", "tp"],
                        "--layout cannot be given with --compare")):
        bad = run(*args, ok=False)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_plan_and_compare_take_the_layout_classes():
    res = json.loads(run("plan", "--model", "deepseek-r1", "--rate", "5", "--hardware", "h200,b200", "--layout", "ep", "--json", "-q").stdout)
    assert res["search"]["layout"] == ["tp+ep"]
    rows = [r for r in res["rows"] if r.get("feasible", True) and r.get("point")]
    assert rows and all(r["point"]["ep"] > 1 and r["point"]["attention_dp"] == 1 for r in rows)
    res = json.loads(run("compare", "--model", "deepseek-r1", "--gpus", "16xH200", "--gpus", "8xB200", "--layout", "dpa",
                         "--json", "-q").stdout)
    assert res["search"]["layout"] == ["dpa+ep"]
    assert all(p["attention_dp"] > 1 for s in res["sets"] for p in s["frontier"])


def test_max_pp_bounds_the_pipeline_stages_of_every_worker():
    """--max-pp 1 searches no pipeline parallelism (kimi-k3 on 16 B200s, whose default frontier is all PP 2, then
    runs one 16-GPU worker); the JSON and header record it; where no layout within it fits, the error says to widen it."""
    from simfront import api

    full = api.predict("kimi-k3", "16xB200")
    assert any(p["pp"] > 1 for p in full.frontier) and full.max_pp is None
    res = json.loads(run("predict", "--model", "kimi-k3", "--gpus", "16xB200", "--max-pp", "1", "--json").stdout)
    assert res["max_pp"] == 1 and res["frontier"] and all(p["pp"] == 1 for p in res["frontier"])
    assert "at most PP1" in run("predict", "--model", "kimi-k3", "--gpus", "16xB200", "--max-pp", "1").stdout.splitlines()[0]
    plan = json.loads(run("plan", "--model", "qwen3-32b", "--rate", "2", "--hardware", "h100", "--max-pp", "1", "--json", "-q").stdout)
    assert plan["search"]["max_pp"] == 1 and all(r["point"]["pp"] == 1 for r in plan["rows"] if r.get("point"))
    # llama-3.1-405b (bf16, ~810 GB) on 16 H100s holds only with stages across the two nodes' TP8 groups
    bad = run("predict", "--model", "llama-3.1-405b", "--gpus", "16xH100", "--precision", "bf16", "--max-pp", "1", ok=False)
    assert bad.returncode == 2 and "within --max-pp 1" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    bad = run("predict", "--model", "qwen3-32b", "--gpus", "1xH100", "--max-pp", "0", ok=False)
    assert bad.returncode == 2 and "--max-pp 0 must be at least 1" in bad.stderr

"""Generated hostile input (hypothesis): CLI arguments, layouts, calibration profiles and result files.

Every generated command runs in-process through ``simfront.cli.main``. The outcome is either one
``error:`` line with exit status 2, or success whose output passes the physical invariants: the
frontier is non-dominated, holds no NaN / null where a number belongs, and tok/s/user x TPOT = 1000.
No traceback, no hang (searches are kept small: llama-3.1-8b / qwen3-8b on 1-8 GPUs, --mode agg).
At least 300 generated cases run in total (sum of max_examples below: 390).
"""

from __future__ import annotations

import csv
import json
import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cli_runner import run_cli

ROOT = Path(__file__).resolve().parent.parent
SERVING_CSV = ROOT / "measurements" / "measured_serving.csv"
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
                derandomize=True)  # the same cases on every CI run: a failure reproduces




def strict_json(text: str):
    def no_constant(name):
        raise AssertionError(f"non-standard JSON token {name}")

    return json.loads(text, parse_constant=no_constant)


def check_outcome(code: int, err: str) -> bool:
    """True when the command succeeded; else it must be exactly one error line with status 2."""
    assert "Traceback" not in err
    event("outcome: " + ("success" if code == 0 else "error line"))
    if code == 0:
        return True
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) > len("error: "), err
    return False


def assert_frontier_physical(points: list[dict]) -> None:
    for p in points:
        for k in ("ttft_ms", "tpot_ms", "tok_s_user", "tok_s_gpu", "usd_per_mtok"):
            assert isinstance(p[k], (int, float)) and math.isfinite(p[k]) and p[k] >= 0, (k, p[k])
        assert p["tpot_ms"] > 0 and math.isclose(p["tok_s_user"] * p["tpot_ms"], 1000.0, rel_tol=1e-3), p
    for a in points:  # non-dominated: no point is at least as good on both axes and better on one
        for b in points:
            assert not (b["tok_s_user"] >= a["tok_s_user"] and b["tok_s_gpu"] >= a["tok_s_gpu"]
                        and (b["tok_s_user"] > a["tok_s_user"] or b["tok_s_gpu"] > a["tok_s_gpu"])), (a, b)


# ---------------------------------------------------------------------------------------------
# Strategies: mostly sensible arguments, with (about half the time) one of them made hostile, so
# both outcomes are exercised: the search on valid input and the one-line error on the bad value.

def _odd_floats():
    return st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.sampled_from([0.0, -1.0, 1e-9, 1e30]))


GPU_NAMES = st.sampled_from(["H100", "h200", "B200", "h100_sxm", "H100 80GB HBM3"])
BAD_GPU_SPECS = st.one_of(
    st.builds("{}x{}".format, st.sampled_from([0, -1, 2049, 10**6, 10**20]), GPU_NAMES),
    st.builds("{}x{}".format, st.sampled_from([1, 8]), st.sampled_from(["FOO", "", "x", "H100 40GB"])),
    st.sampled_from(["H100", "x8", "8x", "8xx H100", "", "eightxH100", "8,H100"]), st.text(max_size=8))
LENGTHS = st.integers(1, 4096)
BAD_LENGTHS = st.one_of(st.integers(-10, 0), st.sampled_from([131073, 200000, 10**12]))
SLA = st.floats(1.0, 5000.0)


def _with_one_hostile(draw, valid: dict, hostile: dict) -> dict:
    """``valid`` option values (each present or not); about half the time one replaced by a hostile value."""
    opts = {k: draw(st.one_of(st.none(), v)) for k, v in valid.items()}
    if draw(st.booleans()):
        k = draw(st.sampled_from(sorted(hostile)))
        opts[k] = draw(hostile[k])
    return opts


def _argv(opts: dict) -> list[str]:
    return [a for k, v in opts.items() if v is not None for a in (k, str(v))]


@st.composite
def predict_argv(draw):
    n = draw(st.sampled_from([1, 2, 4, 8]))
    model = draw(st.sampled_from(["llama-3.1-8b", "qwen3-8b"]))
    opts = {"--gpus": f"{n}x{draw(GPU_NAMES)}"}
    spec = draw(st.sampled_from([None, "none", "eagle", "ngram", "eagle,ngram"]))
    drafting = spec not in (None, "none")
    opts.update(_with_one_hostile(draw, {
        "--isl": LENGTHS, "--osl": LENGTHS, "--rate": st.floats(0.1, 50.0), "--concurrency": st.integers(1, 256),
        "--ttft": SLA, "--tpot": SLA, "--min-tok-s-user": st.floats(1.0, 300.0), "--price": st.floats(0.0, 10.0),
        "--prefix-hit": st.floats(0.0, 0.95), "--precision": st.sampled_from(["bf16", "fp8", "fp8,bf16", "native"]),
        "--kv-dtype": st.sampled_from(["bf16", "fp8", "native"]), "--engine": st.sampled_from(["vllm", "sglang", "trtllm", "TensorRT-LLM"]),
        **({"--spec-k": st.integers(1, 6), "--acceptance": st.floats(0.0, 1.0)} if drafting else {}),
    }, {
        "--gpus": BAD_GPU_SPECS, "--isl": BAD_LENGTHS, "--osl": BAD_LENGTHS, "--rate": _odd_floats(),
        "--concurrency": st.integers(-2, 0), "--ttft": _odd_floats(), "--tpot": _odd_floats(), "--min-tok-s-user": _odd_floats(),
        "--price": _odd_floats(), "--prefix-hit": _odd_floats(), "--precision": st.sampled_from(["fp3", "fp8,", ",", "", "nvfp4"]),
        "--kv-dtype": st.sampled_from(["fp4", "int3", ""]), "--engine": st.sampled_from(["foo", "", "tgi"]),
        "--spec-k": st.one_of(st.integers(-2, 0), st.sampled_from([3, 17, 1000])),
        "--acceptance": st.one_of(_odd_floats(), st.sampled_from([0.5, 1.5])),
        "--spec": st.sampled_from(["medusa", "mtp", "", "eagle,"]),
    }))
    if drafting and opts.get("--spec") is None:
        opts["--spec"] = spec
    return ["predict", "--model", model, "--mode", "agg", "--json", *_argv(opts)]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def layout_argv(draw):
    cmd = draw(st.sampled_from(["memory", "explain"]))
    model = draw(st.sampled_from(["llama-3.1-8b", "qwen3-8b", "qwen3-30b-a3b", "mixtral-8x7b"]))
    n = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from(_divisors(n)))
    dp = draw(st.sampled_from(_divisors(n // pp)))
    tp = n // (pp * dp)
    ep = draw(st.sampled_from(_divisors(tp * dp))) if model in ("qwen3-30b-a3b", "mixtral-8x7b") else 1
    layout = {"--tp": st.just(tp), "--pp": st.just(pp), "--attention-dp": st.just(dp), "--ep": st.just(ep)}
    given_layout = draw(st.booleans()) or cmd == "explain"
    valid = dict(layout if given_layout else {})
    valid["--precision"] = st.sampled_from(["native", "fp8", "bf16"])
    hostile = {"--gpus": BAD_GPU_SPECS, "--tp": st.sampled_from([-1, 0, 3, 16]), "--pp": st.sampled_from([0, 3, 64]),
               "--ep": st.sampled_from([0, 3, 64]), "--attention-dp": st.sampled_from([0, 5]), "--precision": st.sampled_from(["bogus", ""])}
    if cmd == "explain":
        valid.update({"--batch": st.integers(1, 64), "--ctx": st.integers(1, 8192), "--phase": st.sampled_from(["decode", "prefill"])})
        hostile.update({"--batch": st.sampled_from([-1, 0, 10**6]), "--ctx": st.sampled_from([-1, 0, 10**8]),
                        "--phase": st.sampled_from(["train", ""])})
    else:
        valid.update({"--isl": LENGTHS, "--osl": LENGTHS})
        hostile.update({"--isl": BAD_LENGTHS, "--osl": BAD_LENGTHS})
    opts = {"--gpus": f"{n}x{draw(GPU_NAMES)}", **_with_one_hostile(draw, valid, hostile)}
    if given_layout:  # a layout is given whole or not at all (each part drawn above may be None)
        for k, v in layout.items():
            if opts.get(k) is None:
                opts[k] = tp if k == "--tp" else draw(v)
    if cmd == "explain":  # --batch and --ctx are required
        for k, default in (("--batch", 8), ("--ctx", 1024)):
            if opts.get(k) is None:
                opts[k] = default
    return [cmd, "--model", model, "--json", *_argv(opts)]


# ---------------------------------------------------------------------------------------------
# Properties


@settings(FUZZ, max_examples=140)
@given(argv=predict_argv())
def test_generated_predict_arguments(argv, capsys):
    code, out, err = run_cli(argv, capsys)
    if not check_outcome(code, err):
        return
    res = strict_json(out)
    assert res["n_feasible"] <= res["n_configs_evaluated"]
    if res["fits"]:
        assert_frontier_physical(res["frontier"])
    for key in ("knee", "best_under_sla"):
        if res.get(key):
            assert_frontier_physical([res[key]])


@settings(FUZZ, max_examples=100)
@given(argv=layout_argv())
def test_generated_layouts(argv, capsys):
    code, out, err = run_cli(argv, capsys)
    if not check_outcome(code, err):
        return
    res = strict_json(out)
    if argv[0] == "memory":
        assert res["weights_bytes"] > 0 and res["weights_bytes_per_gpu"] > 0 and res["kv_bytes_per_token"] > 0
        assert isinstance(res["fits"], bool)
    else:
        assert res["step_time_s"] > 0 and math.isfinite(res["step_time_s"])
        assert all(op["time_s"] >= 0 and op["bound"] in ("compute", "memory", "communication") for op in res["ops"])


PROFILE_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10), st.text(max_size=5),
                           st.booleans(), st.none(), st.lists(st.integers(), max_size=2))


@st.composite
def profiles(draw):
    """A serving profile as `simfront calibrate` writes it (values inside the fit's bounds), about half
    the time with one part broken: unknown kind / engine / parameter, a value out of range or not a number,
    or the wrong shape."""
    from simfront.calibration import PARAMS

    blocks = {}
    for engine in draw(st.lists(st.sampled_from(["default", "vllm", "sglang", "trtllm"]), min_size=1, max_size=3, unique=True)):
        names = draw(st.lists(st.sampled_from(sorted(PARAMS)), min_size=1, max_size=4, unique=True))
        blocks[engine] = {k: draw(st.floats(PARAMS[k][1], PARAMS[k][2])) for k in names}
    prof = {"simfront_profile": 1, "efficiency": {"serving": blocks}}
    fault = draw(st.sampled_from(["none", "none", "none", "value", "range", "param", "engine", "kind", "shape", "missing"]))
    engine = next(iter(blocks))
    name = next(iter(blocks[engine]))
    if fault == "value":
        blocks[engine][name] = draw(PROFILE_VALUES)
    elif fault == "range":
        blocks[engine][name] = PARAMS[name][2] + draw(st.floats(1e-3, 1e6))
    elif fault == "param":
        blocks[engine][draw(st.sampled_from(["stepscale", "eta_quant", "nope"]))] = 1.0
    elif fault == "engine":
        blocks[draw(st.sampled_from(["tgi", "hopper", ""]))] = {name: PARAMS[name][0]}
    elif fault == "kind":
        prof["efficiency"][draw(st.sampled_from(["bogus", "servings"]))] = blocks
    elif fault == "shape":
        prof["efficiency"] = draw(st.one_of(PROFILE_VALUES, st.just({"serving": 5})))
    elif fault == "missing":
        del prof["efficiency"]
    return prof


@settings(FUZZ, max_examples=60)
@given(profile=profiles())
def test_generated_calibration_profiles(profile, capsys):
    import yaml

    from simfront import efficiency

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "profile.yaml"
        path.write_text(yaml.safe_dump(profile))
        try:
            code, out, err = run_cli(["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "4", "--ctx", "512",
                                      "--calibration", path, "--json"], capsys)
        finally:
            efficiency.set_override(None)  # a profile that passed stays installed for the process otherwise
    if check_outcome(code, err):
        res = strict_json(out)
        assert res["step_time_s"] > 0 and math.isfinite(res["step_time_s"])


# result files: rows of the measured-point CSV with cells replaced by random or malformed values
_BASE_ROWS = [r for r in csv.DictReader(SERVING_CSV.open()) if r["mode"] == "agg" and r["system"] == "h100_sxm"
              and r["model_path"] in ("Qwen/Qwen3-32B", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B")][:40]
_COLUMNS = list(_BASE_ROWS[0])
CELL = st.one_of(st.sampled_from(["", "nan", "NaN", "inf", "-inf", "-1", "0", "1e308", "abc", "8.5", "true", "None", "\u00e9",
                                  "H100", "bf16", "disagg", "999999999999"]),
                 st.text(max_size=6), st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr))


RAW_FILES = st.one_of(st.binary(max_size=64), st.text(max_size=64).map(str.encode),
                     st.sampled_from([b"", b"{", b"[]", b'{"benchmarks": 5}', b'{"mean_ttft_ms": NaN, "total_token_throughput": 1}',
                                      b"\xff\xfe\x00garbage", b"a,b\n1,2\n", b"latency_us\n1\n"]))


@st.composite
def result_files(draw):
    if draw(st.integers(0, 4)) == 0:  # a fifth of the files are not result files at all
        return None, draw(RAW_FILES)
    rows = [dict(r) for r in draw(st.lists(st.sampled_from(_BASE_ROWS), min_size=1, max_size=4))]
    for r in rows:
        for col in draw(st.lists(st.sampled_from(_COLUMNS), max_size=4, unique=True)):
            r[col] = draw(CELL)
    drop = draw(st.lists(st.sampled_from(_COLUMNS), max_size=2, unique=True)) if draw(st.booleans()) else []
    cols = [c for c in _COLUMNS if c not in drop]
    return cols, rows


@settings(FUZZ, max_examples=90)
@given(spec=result_files())
def test_generated_result_files(spec, capsys):
    cols, rows = spec
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "results.csv"
        if cols is None:
            path.write_bytes(rows)
        else:
            with path.open("w", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
                w.writeheader()
                w.writerows(rows)
        code, out, err = run_cli(["validate", path, "--json"], capsys)
    if not check_outcome(code, err):
        return
    res = strict_json(out)
    assert res["summary"]["rows"] == len(res["rows"]) >= 1
    for r in res["rows"]:
        preds = {k: v for k, v in r.items() if k.startswith("predicted_")}
        assert all(v is None or (math.isfinite(v) and v > 0) for v in preds.values()), preds
        if "reason" not in r:  # a predicted row predicts every metric it measured
            assert any(v is not None for v in preds.values()), r

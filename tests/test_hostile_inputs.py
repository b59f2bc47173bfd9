"""Issue 15 repros (items 1, 2, 3, 6, 7, 8, 9): every hostile CLI input gets one `error:` line and exit 2.

Commands run in-process through ``simfront.cli.main`` (the console entry point), so each case costs
milliseconds; broken pipes and Ctrl-C also run once as real processes.
"""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simfront import cli
from cli_runner import read_terminal, run_cli

ROOT = Path(__file__).resolve().parent.parent
SERVING_CSV = ROOT / "measurements" / "measured_serving.csv"
SMALL = ["--model", "llama-3.1-8b", "--gpus", "1xH100", "--mode", "agg"]




def assert_one_error(code: int, err: str, fragment: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Broken result files and profiles, and one good aggregated measured-point file."""
    d = tmp_path_factory.mktemp("hostile")
    (d / "empty.csv").write_text("")
    header = SERVING_CSV.read_text().splitlines()[0]
    (d / "header.csv").write_text(header + "\n")
    (d / "folder").mkdir()
    (d / "notes.txt").write_text("these are my benchmark notes\n")
    (d / "list.json").write_text("[1, 2, 3]\n")
    (d / "other.json").write_text('{"hello": "world"}\n')
    # a text file with commas on some lines (a CSV reader sees rows of the wrong width), and JSON that does not parse
    (d / "ragged.txt").write_text("root:x:0:0:root\nlp,x,4,7,lp\nnews:x:9\n")
    (d / "broken.json").write_text('{"a":\n{bad\n')
    rows = list(csv.DictReader(SERVING_CSV.open()))
    agg = [r for r in rows if r["mode"] == "agg" and r["model_path"] == "Qwen/Qwen3-32B" and r["system"] == "h100_sxm"][:2]
    assert len(agg) == 2
    with (d / "agg.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(agg[0]))
        w.writeheader()
        w.writerows(agg)
    nan_rows = [dict(agg[0], silicon_tpot_ms="nan"), dict(agg[1])]
    with (d / "nan.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(agg[0]))
        w.writeheader()
        w.writerows(nan_rows)
    (d / "eff5.yaml").write_text("efficiency: 5\n")
    (d / "eff_range.yaml").write_text("efficiency:\n  serving:\n    vllm:\n      step_scale: 50\n")
    (d / "eff_nan.yaml").write_text("efficiency:\n  serving:\n    default:\n      ttft_scale: .nan\n")
    (d / "eff_name.yaml").write_text("efficiency:\n  serving:\n    vllm:\n      stepscale: 1.0\n")
    (d / "eff_engine.yaml").write_text("efficiency:\n  serving:\n    tgi:\n      step_scale: 1.0\n")
    return {p.name: p for p in d.iterdir()}


# (argv, fragment of the one error line); "{name}" is replaced by the path of files[name]
CASES = [
    # item 1: output into a missing directory is refused before any search
    (["predict", *SMALL, "--html", "/nonexistent/dir/x.html"], "directory '/nonexistent/dir' does not exist"),
    (["predict", *SMALL, "--csv", "/nonexistent/dir/x.csv"], "--csv '/nonexistent/dir/x.csv'"),
    (["calibrate", "{agg.csv}", "-o", "/nonexistent/dir/p.yaml"], "--output"),
    (["compare", "--model", "llama-3.1-8b", "--gpus", "1xH100,1xH200", "--html", "/nonexistent/d/c.html"], "does not exist"),
    (["validate", "{agg.csv}", "--html", "{folder}"], "is a directory"),
    # item 3 and 6: GPU counts
    (["predict", "--model", "llama-3.1-8b", "--gpus", "1000000xH100"], "above the largest set simfront searches, 2,048"),
    (["predict", "--model", "llama-3.1-8b", "--gpus", "99999999999999999999xH100"], "above the largest set"),
    (["memory", "--model", "llama-3.1-8b", "--gpus", "4096xH100"], "2,048"),
    (["plan", "--model", "llama-3.1-8b", "--rate", "1", "--max-gpus", "1000000"], "--max-gpus 1000000"),
    # item 6: prices, rates, empty comparisons, calibration profiles
    (["predict", *SMALL, "--price", "nan"], "--price nan"),
    (["predict", *SMALL, "--price", "-3"], "--price -3.0 must be zero or positive"),
    (["plan", "--model", "llama-3.1-8b", "--rate", "1", "--price", "h100=nan"], "'h100=nan'"),
    (["plan", "--model", "llama-3.1-8b", "--rate", "1", "--price", "h100=-1"], "non-negative"),
    (["predict", *SMALL, "--rate", "inf"], "--rate inf"),
    (["predict", *SMALL, "--rate", "nan"], "--rate nan"),
    (["predict", *SMALL, "--rate", "0"], "--rate 0.0 must be positive"),
    (["frontier", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--compare", "precision="], "at least two non-empty"),
    (["frontier", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--compare", "precision=fp8,"], "at least two non-empty"),
    (["frontier", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--compare", "precision=fp8"], "at least two"),
    (["predict", *SMALL, "--calibration", "{eff5.yaml}"], "efficiency = 5 is not a mapping"),
    (["predict", *SMALL, "--calibration", "{eff_range.yaml}"], "step_scale = 50 is outside the range the fit allows, [0.5, 2]"),
    (["predict", *SMALL, "--calibration", "{eff_nan.yaml}"], "ttft_scale = nan is not a finite number"),
    (["predict", *SMALL, "--calibration", "{eff_name.yaml}"], "stepscale: unknown parameter"),
    (["predict", *SMALL, "--calibration", "{eff_engine.yaml}"], "tgi: unknown engine"),
    (["predict", *SMALL, "--calibration", "{folder}"], "is a directory"),
    # item 8: validate reads nothing, or is given a GPU that does not exist
    (["validate", "{empty.csv}"], "nothing could be read"),
    (["validate", "{header.csv}"], "no data rows"),
    (["validate", "{folder}"], "is a directory"),
    (["validate", "{notes.txt}"], "unknown format"),
    (["validate", "{list.json}"], "unknown format"),
    (["validate", "{other.json}"], "unknown format"),
    (["validate", "{ragged.txt}"], "unknown format"),  # its ragged lines are not rows of a known format to skip
    (["validate", "{broken.json}"], "no record could be read (line 1: truncated JSON"),
    (["calibrate", "{ragged.txt}", "-o", "{folder}/p.yaml"], "nothing to calibrate"),
    (["validate", "{agg.csv}", "--gpu", "FOO"], "unknown GPU 'FOO'"),
    (["validate", "{agg.csv}", "--model", "not-a-model"], "unknown model"),
    # item 9: SLAs, engine, lengths, speculative options, layouts
    (["predict", *SMALL, "--ttft", "0"], "--ttft 0.0 must be positive"),
    (["predict", *SMALL, "--tpot", "-5"], "--tpot -5.0 must be positive"),
    (["predict", *SMALL, "--min-tok-s-user", "nan"], "--min-tok-s-user nan"),
    (["predict", *SMALL, "--ttft", "inf"], "--ttft inf"),
    (["plan", "--model", "llama-3.1-8b", "--rate", "1", "--tpot", "nan"], "--tpot nan"),
    (["predict", *SMALL, "--engine", "foo"], "unknown engine 'foo'; valid: vllm, sglang, trtllm"),
    (["frontier", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--compare", "kv_dtype=bf16,fp8", "--engine", "foo"], "unknown engine"),
    (["predict", *SMALL, "--launch", "foo"], "unknown engine 'foo'"),
    (["predict", *SMALL, "--isl", "0"], "--isl 0 is invalid"),
    (["predict", *SMALL, "--osl", "0"], "--osl 0 is invalid"),
    (["predict", *SMALL, "--osl", "1"], "--osl 1: a request of one output token never decodes"),
    (["predict", *SMALL, "--sla-percentile", "99"], "--sla-percentile 99 judges --ttft and --tpot"),
    (["predict", *SMALL, "--quality", "bf16=1,bogus=0.9"], "--quality bogus: unknown key; valid: weight formats"),
    (["plan", "--model", "llama-3.1-8b", "--rate", "5", "--osl", "1"], "give --osl 2 or more"),
    (["plan", "--model", "llama-3.1-8b", "--rate", "5", "--isl", "200000"], "exceed llama-3.1-8b's context window"),
    (["predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--mode", "disagg"], "disaggregation needs 2xh100_sxm or more"),
    (["memory", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--isl", "0"], "--isl 0"),
    (["predict", *SMALL, "--isl", "200000"], "exceed llama-3.1-8b's context window of 131,072 tokens"),
    (["predict", "--model", "llama-2-70b", "--gpus", "8xH100", "--isl", "4000", "--osl", "200"], "context window of 4,096"),
    (["memory", "--model", "qwen3-8b", "--gpus", "1xH100", "--isl", "40000", "--osl", "1000"], "max_position_embeddings"),
    (["predict", *SMALL, "--spec-k", "3"], "--spec-k 3 needs a speculative method"),
    (["predict", *SMALL, "--acceptance", "0.5"], "--acceptance 0.5 needs a speculative method"),
    (["predict", *SMALL, "--spec", "none", "--spec-k", "2"], "--spec none drafts nothing"),
    (["predict", *SMALL, "--spec", "eagle", "--spec-k", "0"], "--spec-k 0 must be at least 1"),
    (["predict", *SMALL, "--spec", "eagle", "--spec-k", "1000"], "--spec-k 1000 is above"),
    (["predict", *SMALL, "--spec", "eagle", "--acceptance", "1.5"], "between 0 and 1"),
    (["predict", *SMALL, "--spec", "eagle", "--acceptance", "nan"], "--acceptance nan"),
    (["predict", *SMALL, "--spec", "medusa"], "unknown speculative method"),
    (["predict", *SMALL, "--precision", "fp8,"], "empty value in the comma list"),
    (["predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--mode", ""], "empty value"),
    (["memory", "--model", "llama-3.1-8b", "--gpus", "8xH100", "--ep", "8"], "--ep 8 without --tp"),
    (["memory", "--model", "llama-3.1-8b", "--gpus", "8xH100", "--pp", "2"], "--pp 2 without --tp"),
    (["explain", "--model", "llama-3.1-70b", "--gpus", "1xH100", "--batch", "1", "--ctx", "100"], "does not fit on 1xh100_sxm"),
    (["explain", "--model", "deepseek-r1", "--gpus", "8xB200", "--batch", "1", "--ctx", "100"], "needs one of at least 4: give --tp 4"),
    (["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "8", "--isl", "1024", "--osl", "1024", "--phase", "prefill"], "--phase prefill prices --batch prompts of --ctx tokens"),
    (["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "8", "--ctx", "2048", "--isl", "1024", "--osl", "1024"], "not both: --ctx 2048 with --isl 1024"),
    (["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "8", "--ctx", "2048", "--random-range-ratio", "0.8"], "--random-range-ratio shapes the step of a serving point"),
    (["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "8", "--ctx", "2048", "--chunk-tokens", "4096"], "--chunk-tokens shapes the step of a serving point"),
    (["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "8", "--ctx", "2048", "--spec-k", "3"], "--spec-k 3 needs a speculative method"),
    (["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "100000", "--ctx", "100000"], "KV tokens per attention rank"),
    (["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "1", "--ctx", "0"], "--ctx 0 must be at least 1"),
    (["explain", "--model", "llama-3.1-8b", "--gpus", "1xH100", "--batch", "1", "--ctx", "10000000"], "context window"),
    (["calibrate", "/nonexistent/results.csv", "-o", "{folder}/p.yaml"], "file not found: /nonexistent/results.csv"),
    (["calibrate", "{folder}", "-o", "/tmp/p.yaml"], "is a directory"),
    (["calibrate", "{agg.csv}", "-o", "/tmp/p.yaml", "--gpu", "FOO"], "unknown GPU 'FOO'"),
]


@pytest.mark.parametrize("argv,fragment", CASES, ids=[" ".join(a[:1] + [x for x in a[1:] if x not in SMALL])[:60] for a, _ in CASES])
def test_hostile_input_is_one_error_line(argv, fragment, files, capsys):
    argv = [re.sub(r"\{([^}]+)\}", lambda m: str(files[m.group(1)]), a) for a in argv]
    code, out, err = run_cli(argv, capsys)
    assert_one_error(code, err, fragment)


def test_unexpected_exception_is_one_line_not_a_second_traceback(monkeypatch, capsys):
    """Item 1: the last-resort handler (typer's public API only) prints one line naming the exception."""
    def boom(*a, **k):
        raise AttributeError("'NoneType' object has no attribute 'frontier'")

    monkeypatch.setattr(cli.api, "predict", boom)
    code, out, err = run_cli(["predict", *SMALL], capsys)
    assert_one_error(code, err, "unexpected AttributeError: 'NoneType' object has no attribute 'frontier'")
    assert "report" in err and "SIMFRONT_TRACEBACK=1" in err
    monkeypatch.setenv("SIMFRONT_TRACEBACK", "1")
    with pytest.raises(AttributeError):
        cli.main(["predict", *SMALL])


def test_unwritable_output_after_the_search_is_one_line(monkeypatch, tmp_path, capsys):
    """An OSError while writing (here: a disk-full error) names the file, in one line."""
    def full(*a, **k):
        raise OSError(28, "No space left on device", str(tmp_path / "x.html"))

    monkeypatch.setattr(cli.report, "write_frontier_html", full)
    code, out, err = run_cli(["predict", *SMALL, "--html", tmp_path / "x.html"], capsys)
    assert_one_error(code, err, "x.html: No space left on device")


def test_ctrl_c_in_process_exits_130(monkeypatch, capsys):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.api, "predict", interrupted)
    code, out, err = run_cli(["predict", *SMALL], capsys)
    assert code == 130 and err.strip() == "error: interrupted"


def test_ctrl_c_real_process_exits_130():
    """Item 2: SIGINT during a long plan (its progress bar, on a terminal stderr, shows it has started)."""
    import os
    import pty

    master, slave = pty.openpty()  # progress is drawn on a terminal only
    p = subprocess.Popen([sys.executable, "-m", "simfront.cli", "plan", "--model", "deepseek-r1", "--rate", "20", "--isl", "8192"],
                         stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = b""
    while b"planning" not in seen:  # the bar's first frame: the search runs
        seen += os.read(master, 4096)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    rest = read_terminal(master)
    p.communicate(timeout=120)
    if p.returncode == 0:
        pytest.skip("the plan finished before the signal arrived")
    assert p.returncode == 130
    text = rest.decode("utf-8", "replace")
    assert "Traceback" not in text and text.strip().splitlines()[-1].endswith("error: interrupted")


def test_broken_pipe_exits_quietly():
    """Item 2: `simfront validate --builtin --rows | head -1`."""
    p = subprocess.run(f"{sys.executable} -m simfront.cli validate --builtin --rows | head -1; exit ${{PIPESTATUS[0]}}",
                       shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=300)
    assert p.stdout.startswith("serving:") and len(p.stdout.splitlines()) == 1
    assert p.stderr == "" and p.returncode == 0


def test_help_and_bare_command_are_not_errors(capsys):
    code, out, err = run_cli([], capsys)
    assert code == 0 and "Usage" in out and err == ""
    code, out, err = run_cli(["predict", "--help"], capsys)
    assert code == 0 and "--gpus" in out
    code, out, err = run_cli(["predict", "--bogus"], capsys)
    assert_one_error(code, err, "No such option: --bogus")


def _strict_json(text: str):
    def no_constant(name):
        raise ValueError(f"non-standard JSON token {name}")

    return json.loads(text, parse_constant=no_constant)


def test_json_never_emits_nan_tokens(capsys):
    """Item 7: non-finite values become null; the document is standard JSON."""
    cli._emit_json({"a": float("nan"), "b": [float("inf"), 1.5], "c": {"d": -float("inf")}, "e": __import__("numpy").float64("nan")})
    doc = _strict_json(capsys.readouterr().out)
    assert doc == {"a": None, "b": [None, 1.5], "c": {"d": None}, "e": None}


def test_validate_json_with_nan_cells_is_standard_and_warns(files, capsys):
    """Items 7 and 9: a NaN measurement comes back as a warning on its row, and the JSON has no NaN token."""
    code, out, err = run_cli(["validate", files["nan.csv"], "--json"], capsys)
    assert code == 0, err
    doc = _strict_json(out)
    first, second = doc["rows"]
    assert first["tpot_ms"] is None and any("silicon_tpot_ms = NaN in the file" in w for w in first["warnings"])
    assert first["predicted_ttft_ms"] is not None  # the rest of the row is still predicted
    assert not any("NaN" in w for w in second["warnings"]) and second["tpot_ms"] is not None


def test_validate_gpu_fills_only_rows_without_one(files, tmp_path, capsys):
    """Item 8: --gpu must not override a row's own GPU; it fills rows that have none."""
    code, out, err = run_cli(["validate", files["agg.csv"], "--gpu", "B200", "--json"], capsys)
    assert code == 0, err
    rows = _strict_json(out)["rows"]
    assert [r["gpu"] for r in rows] == ["h100_sxm", "h100_sxm"]
    assert not any("gpu" in w for r in rows for w in r["warnings"])
    # the same rows without a GPU column value: --gpu fills them and the rows are predicted
    src = list(csv.DictReader(files["agg.csv"].open()))
    for r in src:
        r["system"] = ""
    blank = tmp_path / "nogpu.csv"
    with blank.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(src[0]))
        w.writeheader()
        w.writerows(src)
    code, out, err = run_cli(["validate", blank, "--json"], capsys)
    assert code == 0 and all("gpu" in r["missing"] for r in _strict_json(out)["rows"])
    code, out, err = run_cli(["validate", blank, "--gpu", "H100", "--json"], capsys)
    rows = _strict_json(out)["rows"]
    assert code == 0 and [r["gpu"] for r in rows] == ["H100", "H100"]
    assert all("gpu" not in r["missing"] and r.get("predicted_tpot_ms") for r in rows)


def test_predict_engine_aliases_resolve(capsys):
    code, out, err = run_cli(["predict", *SMALL, "--engine", "TensorRT-LLM", "--json"], capsys)
    assert code == 0, err
    assert _strict_json(out)["fits"] is True


def test_every_command_checks_lengths_by_one_rule():
    """predict, plan, memory and explain refuse a float length, even a whole one, with the same line, and take numpy
    integers (errors.check_lengths, which inputs.check_lengths applies before the context window)."""
    import numpy as np

    from simfront import api
    from simfront.errors import SimfrontError

    calls = {"predict": lambda **kw: api.predict("llama-3.1-8b", "1xH100", **kw),
             "plan": lambda **kw: api.plan("llama-3.1-8b", 2.0, hardware=["h100"], **kw),
             "memory": lambda **kw: api.memory("llama-3.1-8b", "1xH100", **kw),
             "explain": lambda **kw: api.explain("llama-3.1-8b", "1xH100", batch=4, **kw)}
    for name, call in calls.items():
        with pytest.raises(SimfrontError, match=r"^--isl 1024\.0 must be an integer number of tokens$"):
            call(isl=1024.0, osl=256)
        assert call(isl=np.int64(1024), osl=np.int64(256)) is not None, name
    with pytest.raises(SimfrontError, match=r"^--isl 130000 \+ --osl 2000 = 132,000 tokens exceed llama-3.1-8b's context window"):
        api.explain("llama-3.1-8b", "1xH100", batch=1, isl=130_000, osl=2_000)  # named as given, not as their --ctx

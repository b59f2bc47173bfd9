"""simfront predict: the frontier, its invariants, SLA, outputs (table, JSON, CSV, HTML)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from simfront import api, report
from simfront.hardware import get_hardware
from simfront.memory import weight_bytes
from simfront.models import get_model
from simfront.pareto import pareto_mask
from simfront.precision import FORMATS

from test_plot import _screenshot, needs_chromium
from pngcheck import is_blank


@pytest.fixture(scope="module")
def r1_h200():
    return api.predict("deepseek-r1", "8xH200", isl=1024, osl=1024)


def test_kimi_k3_8xb200_explains_what_would_fit():
    res = api.predict("kimi-k3", "8xB200")
    assert res["fits"] is False and res["frontier"] == []
    assert res["memory"]["min_gpus"] == 16 and "8xb300_sxm" in res["memory"]["alternatives"]
    p = subprocess.run([sys.executable, "-m", "simfront.cli", "predict", "--model", "kimi-k3", "--gpus", "8xB200"],
                       capture_output=True, text=True, timeout=300)
    # a model that fits nowhere on the set is bad input: one error line naming the set, why, and what would fit
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --gpus 8xB200: kimi-k3") and "16xb200_sxm" in err[0] and "8xb300_sxm" in err[0]
    p = subprocess.run([sys.executable, "-m", "simfront.cli", "predict", "--model", "kimi-k3", "--gpus", "8xB200", "--json"],
                       capture_output=True, text=True, timeout=300)
    doc = json.loads(p.stdout)  # the JSON document still says why, for scripts
    assert p.returncode == 2 and doc["fits"] is False and doc["memory"]["min_gpus"] == 16 and p.stderr.startswith("error: ")


@pytest.mark.parametrize("gpus", ["8xB300", "72xGB200"])
def test_kimi_k3_frontiers(gpus):
    res = api.predict("kimi-k3", gpus)
    assert res["fits"] and len(res["frontier"]) >= 3


def test_frontier_is_non_dominated(r1_h200):
    pts = r1_h200.points
    x, y = pts["tok_s_user"], pts["tok_s_gpu"]
    for p in r1_h200["frontier"]:
        dominated = np.any((x > p["tok_s_user"] * (1 + 1e-6)) & (y > p["tok_s_gpu"] * (1 + 1e-6)))  # JSON values are rounded
        assert not dominated, p
    assert pareto_mask(x, y).sum() == len(r1_h200["frontier"])
    xs = [p["tok_s_user"] for p in r1_h200["frontier"]]
    assert xs == sorted(xs)


def test_tok_s_user_times_tpot_is_1000(r1_h200):
    for p in r1_h200["frontier"]:
        assert p["tok_s_user"] * p["tpot_ms"] == pytest.approx(1000, rel=1e-3)


def test_no_point_beats_the_hbm_bound(r1_h200):
    """Every step reads at least the non-expert weights once: TPOT >= those bytes / (worker HBM bandwidth) / tokens per step."""
    m = get_model("deepseek-r1")
    hw = get_hardware("h200")
    pc = m.params
    for p in r1_h200["frontier"]:
        prec = m.native
        dense_bytes = weight_bytes(m, prec) - pc.experts * FORMATS[prec.experts].bytes_per_element
        worker_gpus = p["tp"] * p["attention_dp"] * p["pp"]
        al = 2.0 if p["spec"].startswith("mtp") else 1.0  # at most k+1 = 2 tokens per verify step with MTP k=1
        bound_ms = 1e3 * dense_bytes / (worker_gpus * hw.hbm_bandwidth_bytes_per_s) / al
        assert p["tpot_ms"] >= bound_ms * 0.999, p


def test_sla_best_point_meets_sla():
    res = api.predict("llama-3.1-70b", "8xH100", isl=2048, osl=512, ttft_ms=1000, tpot_ms=40)
    b = res["best_under_sla"]
    assert b and b["ttft_ms"] <= 1000 and b["tpot_ms"] <= 40
    strict = api.predict("llama-3.1-70b", "8xH100", tpot_ms=0.01)
    assert strict["best_under_sla"] is None and any("SLA" in n for n in strict["notes"])


def test_sla_lines_name_the_sla_once(capsys):
    """The table's SLA line spells the SLA (not a dict), and a miss is said once (not again as a note)."""
    report.print_predict(api.predict("llama-3.1-70b", "8xH100", ttft_ms=1000, tpot_ms=40))
    out = capsys.readouterr().out
    assert "best under SLA (TTFT <= 1000 ms, TPOT <= 40 ms):" in out and "{" not in out
    report.print_predict(api.predict("llama-3.1-70b", "8xH100", tpot_ms=0.01))
    out = capsys.readouterr().out
    assert out.count("meets the SLA") == 1 and "no configuration meets the SLA (TPOT <= 0.01 ms)" in out


def test_sla_on_a_percentile_says_so_and_shows_the_percentiles(capsys):
    """--sla-percentile 99 judges the SLA on the points' p99: the line names the percentile, shows the chosen point's
    p99 beside its means, and the JSON's sla records it (a mean SLA records null)."""
    res = api.predict("llama-3.1-70b", "8xH100", modes=["agg"], ttft_ms=2000, tpot_ms=40, sla_percentile=99)
    assert res["sla"]["percentile"] == 99
    report.print_predict(res)
    out = capsys.readouterr().out
    b = res["best_under_sla"]
    assert b is not None
    assert (f"best under SLA (p99 TTFT <= 2000 ms, p99 TPOT <= 40 ms):" in out
            and f"(p99 {b['ttft_p99_ms']:.0f} ms, {b['tpot_p99_ms']:.1f} ms)" in out)
    assert api.predict("llama-3.1-70b", "8xH100", modes=["agg"], tpot_ms=40)["sla"]["percentile"] is None


@pytest.mark.parametrize("pct", [50, 90])
def test_the_table_shows_the_percentile_the_sla_is_judged_at(capsys, pct):
    """With --sla-percentile 50 or 90 the table's tail columns are that percentile (the one the SLA judges), not p99."""
    res = api.predict("llama-3.1-8b", "1xH100", modes=["agg"], ttft_ms=2000, tpot_ms=40, sla_percentile=pct)
    report.print_predict(res)
    head = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("layout"))
    assert f"TTFT p{pct}" in head and f"TPOT p{pct}" in head and "p99" not in head
    report.print_predict(api.predict("llama-3.1-8b", "1xH100", modes=["agg"], tails=True))
    head = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("layout"))
    assert "TTFT p99" in head and "TPOT p99" in head  # --tails alone: p99


def test_json_schema_and_cli_outputs(tmp_path):
    csv_path = tmp_path / "f.csv"
    p = subprocess.run([sys.executable, "-m", "simfront.cli", "predict", "--model", "gpt-oss-120b", "--gpus", "2xH100",
                        "--json", "--csv", str(csv_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["fits"] and res["n_configs_evaluated"] > 0 and res["frontier"]
    keys = {"mode", "tp", "pp", "ep", "attention_dp", "batch", "precision", "ttft_ms", "tpot_ms", "tok_s_user", "tok_s_gpu", "usd_per_mtok"}
    assert keys <= set(res["frontier"][0])
    assert csv_path.read_text().splitlines()[0].startswith("mode,")
    human = subprocess.run([sys.executable, "-m", "simfront.cli", "predict", "--model", "gpt-oss-120b", "--gpus", "2xH100"],
                           capture_output=True, text=True, timeout=300).stdout
    assert "tok/s/GPU" in human and "knee" in human
    rows = [l for l in human.splitlines() if "TP" in l and ("agg" in l or "disagg" in l)]
    assert 3 <= len(rows) <= 15
    assert sum(l.startswith("*") for l in rows) == 1  # the knee is always one of the rows shown


def test_prefix_hit_and_precision_push_out():
    base = api.predict("deepseek-r1", "8xB200", isl=8192, osl=1024, precision=["fp8_block"], spec="none", modes=["agg"])
    hit = api.predict("deepseek-r1", "8xB200", isl=8192, osl=1024, precision=["fp8_block"], spec="none", modes=["agg"], prefix_hit=0.8)
    assert max(p["tok_s_gpu"] for p in hit["frontier"]) > max(p["tok_s_gpu"] for p in base["frontier"])
    fp4 = api.predict("deepseek-r1", "8xB200", isl=8192, osl=1024, precision=["nvfp4"], spec="none", modes=["agg"])
    assert max(p["tok_s_gpu"] for p in fp4["frontier"]) > max(p["tok_s_gpu"] for p in base["frontier"])


def test_default_search_serves_a_16bit_checkpoint_in_both_fp8_formats():
    from simfront.hardware import parse_gpus
    from simfront.search import SearchSpace, precision_options

    def weights(model, gpus):
        return {p.dense for p in precision_options(get_model(model), parse_gpus(gpus), SearchSpace())}

    # a BF16 checkpoint on FP8 tensor cores: per-tensor FP8 (what vLLM / SGLang --quantization fp8 make of it) and
    # block-scaled FP8, beside the native format; no FP8 tensor cores, no FP8 formats; an FP8 checkpoint stays as shipped
    assert weights("llama-3.1-70b", "8xH100") == {"bf16", "fp8", "fp8_block"}
    assert weights("llama-3.1-70b", "8xA100") == {"bf16"}
    assert weights("deepseek-r1", "8xH200") == {"fp8_block"}
    both = api.predict("llama-3.1-70b", "8xH100", isl=1024, osl=1024, spec="none")
    block = api.predict("llama-3.1-70b", "8xH100", isl=1024, osl=1024, spec="none", precision=["bf16", "fp8_block"])
    # the wider search never loses frontier, and per-tensor FP8 (no block scales to apply) wins points on it
    fb = np.array([[p["tok_s_user"], p["tok_s_gpu"]] for p in block["frontier"]])
    for p in both["frontier"]:
        assert p["tok_s_gpu"] >= np.max(fb[fb[:, 0] >= p["tok_s_user"] - 1e-9, 1], initial=0.0) - 1e-9
    assert any(p["precision"].split("+")[0] == "fp8" for p in both["frontier"])


def test_bad_predict_input():
    for args, needle in [(("--prefix-hit", "1.5"), "prefix-hit"), (("--mode", "both"), "--mode"), (("--spec", "medusa"), "speculative"),
                         (("--concurrency", "0"), "concurrency")]:
        p = subprocess.run([sys.executable, "-m", "simfront.cli", "predict", "--model", "llama-3.1-8b", "--gpus", "1xH100", *args],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr


@needs_chromium
def test_predict_html_renders_offline(tmp_path):
    page = tmp_path / "frontier.html"
    p = subprocess.run([sys.executable, "-m", "simfront.cli", "predict", "--model", "llama-3.1-70b", "--gpus", "8xH100",
                        "--html", str(page)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    assert "<script src=\"http" not in html
    img = _screenshot(page, tmp_path)
    assert not is_blank(img)


def test_knee_row_survives_thinning(capsys, monkeypatch):
    from simfront import pareto

    res = api.predict("gpt-oss-120b", "2xH100")
    k = res["frontier"].index(res["knee"])
    # thinning that drops the knee (as it does on some frontiers, e.g. kimi-k3 on 8xB300)
    monkeypatch.setattr(pareto, "thin_frontier", lambda x, n: [i for i in range(0, len(x), 3) if i != k])
    report.print_predict(res)
    lines = capsys.readouterr().out.splitlines()
    assert sum(l.startswith("*") for l in lines) == 1

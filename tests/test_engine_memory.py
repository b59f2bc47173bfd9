"""The GPU memory fraction each engine release takes when a run sets none (simfront.engine_memory, the
``memory_default`` of simfront/engines/scheduler.yaml), and how a measured row asks for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simfront.engine_memory import default_memory_fraction, engine_default, piecewise_graph_sizes
from simfront.scheduler import release_family, release_families
from simfront.units import GiB, MiB
from simfront.validation import validate_files
from cli_runner import run_cli

H100_MEM = 81559 * MiB  # what nvidia-smi reports for an H100 SXM 80GB, the figure SGLang divides by
ROOT = Path(__file__).resolve().parent.parent


def _sglang(version, gpu_mem=H100_MEM, gpus=1, pp=1, dp=1, budget=8192, spec=False, mla=False):
    return float(default_memory_fraction(release_family("sglang", version)["memory_default"], gpu_mem, gpus, pp, dp,
                                         budget, spec, mla))


def test_sglang_default_matches_what_a_user_saw_on_an_h100():
    """sgl-project/sglang#29092 (2026-06): SGLang chose 0.828 for Qwen3-32B on one H100. The heuristic of that time
    (chunk 8192, CUDA graphs to 256, piecewise graphs up to 8192 tokens) gives 0.830; without the piecewise graphs
    (before v0.5.10) 0.835."""
    assert _sglang("0.5.12") == pytest.approx(0.828, abs=0.003)
    assert _sglang("0.5.8") == pytest.approx(0.835, abs=0.001)
    assert piecewise_graph_sizes(8192) == 58 and piecewise_graph_sizes(2048) == 42


def test_sglang_families_follow_its_source_history():
    fams = {f["since"]: f["memory_default"]["kind"] for f in release_families("sglang")}
    assert fams["0.4"] == "by_parallel" and fams["0.4.8"] == "reserve_by_gpu_mem" and fams["0.5.3"] == "reserve_by_activation"
    # the same function picks the chunked-prefill size by GPU memory, 4,096 on 35-60 GiB parts from 0.5.3
    from simfront.scheduler import scheduler_settings
    assert [scheduler_settings("sglang", v, gpu_mem_gib=48).token_budget for v in ("0.5.1", "0.5.8")] == [8192, 4096]
    # before June 2025: by the server's GPU count alone
    assert [_sglang("0.4.6", gpus=g) for g in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]
    # June - September 2025 on an 80 GB part: (9.5 + 0.5 x GPUs) GiB reserved, 2 GiB more for drafts, 4 for attention DP
    assert _sglang("0.5.1", gpus=8) == pytest.approx(round(1 - 13.5 * 1024 / 81559, 3))
    assert _sglang("0.5.1", gpus=8, spec=True, dp=8) == pytest.approx(round(1 - 19.5 * 1024 / 81559, 3))


def test_sglang_reserve_grows_with_what_it_reserves_for():
    """More drafts, attention-DP ranks, GPUs per server or a larger chunk never leave a larger static share (the
    June 2025 heuristic reserves a flat 32 GiB on parts above 160 GiB, whatever the server's size)."""
    for v in ("0.5.1", "0.5.8", "0.5.12"):
        base = _sglang(v, gpu_mem=180 * GiB, gpus=8, budget=16384)
        assert _sglang(v, gpu_mem=180 * GiB, gpus=8, budget=16384, spec=True) < base
        assert _sglang(v, gpu_mem=180 * GiB, gpus=8, budget=16384, dp=8) < base
        assert _sglang(v, gpu_mem=180 * GiB, gpus=16, budget=16384) <= base
        assert _sglang(v, gpus=16) < _sglang(v, gpus=8)
    assert _sglang("0.5.8", gpu_mem=180 * GiB, budget=32768) < _sglang("0.5.8", gpu_mem=180 * GiB, budget=16384)


def test_fractions_are_fractions_on_every_catalog_gpu_and_layout():
    from simfront.hardware import catalog

    """Servers of 1-64 GPUs, with and without attention DP, at each release's own chunked-prefill size for the GPU's
    memory (as EngineFraction.fractions prices them: SGLang picks 2,048 tokens below 35 GiB, and its reserve grows
    with the chunk): finite and below 1 everywhere, and above 0 on servers of up to 16 GPUs. On larger servers of
    small GPUs a release's own heuristic may reserve more than the GPU holds (SGLang 0.4.8 reserves 9.5 + 0.5 GiB per
    GPU below 90 GiB: 41.5 GiB on a 64-GPU server of 40 GiB A100s), as the engine would; such a layout holds no KV
    cache, and the memory plan says it does not fit."""
    from simfront.memory import plan_memory
    from simfront.models import apply_precision, get_model

    m = get_model("deepseek-r1")
    prec = apply_precision(m, "native", "native")
    gpus = np.array([1, 2, 4, 8, 16, 32, 64])
    for hw in catalog().values():
        for engine in ("vllm", "sglang", "trtllm", "default"):
            for fam in release_families(engine):
                for dp in (1, 8):
                    tp = gpus[gpus >= dp] // dp  # attention TP per rank: servers of tp x dp GPUs
                    f = engine_default(engine, fam["since"], speculative=True, mla=True).fractions(hw.hbm_bytes, tp, 1, dp)
                    assert np.all(np.isfinite(f)) and np.all(f < 1.0), (hw.id, engine, fam["since"], f)
                    assert np.all(f[tp * dp <= 16] > 0.0), (hw.id, engine, fam["since"], f)
                    if (f <= 0).any():
                        gone = plan_memory(m, prec, hw, tp[f <= 0], 1, dp, 8, 1, 2048, f[f <= 0], "total_static")
                        assert not gone.fits.any() and np.all(gone.max_concurrency == 0)


def test_vllm_and_trtllm_defaults_are_their_constants():
    for engine in ("vllm", "trtllm"):
        d = engine_default(engine)
        assert np.all(d.fractions(80 * GiB, np.array([1, 8]), 1, 1) == 0.9)


def _qwen_row(tmp_path, sidecar: str | None, *cli):
    """Qwen3-32B BF16 on one H100 with SGLang 0.5.8.post1, 2,048 / 512 tokens at 16 users (measured_serving.csv):
    the KV pool binds, so the pool the run was given decides how long prompts queue."""
    src = (ROOT / "measurements" / "measured_serving.csv").read_text().splitlines()
    row = next(line for line in src if "Qwen/Qwen3-32B" in line and ",sglang,0.5.8.post1," in line
               and ",2048,512," in line)
    (tmp_path / "run.csv").write_text(src[0] + "\n" + row + "\n")
    side = tmp_path / "run.csv.simfront.yaml"
    if sidecar is None:
        side.unlink(missing_ok=True)
    else:
        side.write_text(sidecar)
    return validate_files([str(tmp_path / "run.csv")], *cli)["serving"]["rows"][0]


def test_a_row_that_says_default_gets_its_engine_releases_pool(tmp_path):
    unknown = _qwen_row(tmp_path, None)
    default = _qwen_row(tmp_path, "gpu_memory_fraction: default\n")
    fixed = _qwen_row(tmp_path, "gpu_memory_fraction: 0.835\n")  # the 0.5.8 default for this server, written out
    assert default["gpu_memory_fraction"] == "default" and unknown.get("gpu_memory_fraction") is None
    # SGLang's own default keeps ~13 GB for activations and graphs: a smaller pool than simfront's launch lines give
    assert default["predicted_ttft_ms"] > 2 * unknown["predicted_ttft_ms"]
    assert default["predicted_ttft_ms"] == pytest.approx(fixed["predicted_ttft_ms"], rel=0.05)
    filled = _qwen_row(tmp_path, None, {"gpu_memory_fraction": "default"})  # --gpu-memory-fraction default
    assert filled["predicted_ttft_ms"] == pytest.approx(default["predicted_ttft_ms"])


def test_gpu_memory_fraction_option_errors_in_one_line(capsys):
    for bad in ("1.5", "0", "lots"):
        code, out, err = run_cli(["validate", ROOT / "measurements" / "measured_serving.csv", "--gpu-memory-fraction", bad], capsys)
        assert code != 0 and "Traceback" not in out + err
        assert "not a memory fraction" in err and "'default'" in err and len(err.strip().splitlines()) == 1


def test_memory_sizes_the_pool_as_the_named_engine_does():
    """`simfront memory --engine E`: the KV pool engine E allocates with its release's default fraction (or the fraction
    given in its own terms), instead of the pool simfront's launch lines write; the verdict says which."""
    from simfront import api

    kw = dict(precision="bf16", isl=2048, osl=512)
    ours = api.memory("qwen3-32b", "1xH100", **kw)
    sglang = api.memory("qwen3-32b", "1xH100", engine="sglang", **kw)
    older = api.memory("qwen3-32b", "1xH100", engine="sglang", engine_version="0.5.1", **kw)
    vllm = api.memory("qwen3-32b", "1xH100", engine="vllm", gpu_memory_fraction=0.95, **kw)
    assert (ours.engine, ours.kv_memory_rule, ours.memory_fraction) == (None, "free", 0.9)
    assert (sglang.engine, sglang.kv_memory_rule) == ("sglang", "total_static") and sglang.memory_fraction == pytest.approx(0.830, abs=0.001)
    # SGLang keeps ~13 GiB for activations and graphs: the pool is what 0.83 x 80 GiB leaves beside the weights
    assert sglang.kv_budget_bytes_per_gpu == pytest.approx(0.830 * 80 * GiB - sglang.weights_bytes_per_gpu, rel=1e-3)
    assert sglang.max_concurrency < older.max_concurrency < ours.max_concurrency
    assert vllm.memory_fraction == 0.95 and vllm.kv_budget_bytes_per_gpu == pytest.approx(
        0.95 * 80 * GiB - vllm.weights_bytes_per_gpu - vllm.reserve_bytes_per_gpu, rel=1e-6)
    assert api.memory("qwen3-32b", "1xH100", engine="sglang", gpu_memory_fraction="default", **kw) == sglang
    assert set(("engine", "memory_fraction", "kv_memory_rule")) <= set(sglang.to_json())
    # the GPUs it would fit on are judged by the engine's default on each of them (SGLang reserves more on a B200)
    assert not api.memory("deepseek-r1", "4xB200", engine="sglang").fits
    alts = api.memory("deepseek-r1", "8xH100", engine="sglang").alternatives
    assert "8xb200_sxm" in alts and "4xb200_sxm" not in alts


def test_memory_engine_options_error_in_one_line(capsys):
    base = ["memory", "-m", "qwen3-32b", "-g", "1xH100"]
    for extra, says in ((["--gpu-memory-fraction", "0.8"], "needs --engine"), (["--engine-version", "0.5.8"], "needs --engine"),
                        (["--engine", "foo"], "unknown engine"), (["--engine", "vllm", "--gpu-memory-fraction", "2"], "not a memory fraction")):
        code, out, err = run_cli(base + extra, capsys)
        assert code != 0 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    code, out, _ = run_cli(base + ["--engine", "sglang"], capsys)
    assert code == 0 and "(sglang: 0.8" in out


def test_a_prediction_that_rests_on_an_unrecorded_fraction_says_so(tmp_path):
    """Where the KV pool binds and the row gives no fraction, simfront's pool and the engine's default hold different
    numbers of requests: the row's prediction rests on the missing fact, and its ``assumptions`` say so; a row that
    records its fraction (or says it used the default) carries no such note, nor one whose pool does not bind."""
    unknown = _qwen_row(tmp_path, None)
    (note,) = unknown["assumptions"]
    assert "binds" in note and "gpu_memory_fraction" in note and "sglang's default" in note
    for side in ("gpu_memory_fraction: default\n", "gpu_memory_fraction: 0.9\n"):
        assert "assumptions" not in _qwen_row(tmp_path, side)
    src = (ROOT / "measurements" / "measured_serving.csv").read_text().splitlines()
    light = next(line for line in src if line.startswith("qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_sglang_agg_1024x128_c16_tp4"))
    (tmp_path / "light.csv").write_text(src[0] + "\n" + light + "\n")
    assert "assumptions" not in validate_files([str(tmp_path / "light.csv")])["serving"]["rows"][0]


def test_sglang_with_drafts_runs_48_requests_a_server_unless_told_otherwise():
    from simfront.scheduler import scheduler_settings

    sglang = scheduler_settings("sglang", "0.5.12")
    assert sglang.running_cap_per_rank(1, True) == 48 and sglang.running_cap_per_rank(8, True) == 6  # split over DP ranks
    assert sglang.running_cap_per_rank(1, False) == sglang.max_running
    assert scheduler_settings("vllm").running_cap_per_rank(1, True) == scheduler_settings("vllm").max_running


def _sglang_mtp_row(tmp_path, batch, notes="spec_decoding=mtp"):
    header = ("source,model,gpu,num_gpus,tp,pp,ep,dp_attention,disagg,engine,engine_version,precision_weights,precision_act,"
              "precision_kv,isl,osl,concurrency,batch_size,metric_tpot_ms,metric_ttft_ms,notes")
    path = tmp_path / f"mtp{batch}{len(notes)}.csv"
    path.write_text(header + f"\ntest,deepseek-ai/DeepSeek-R1-0528,B200,8,8,1,1,,,sglang,0.5.12,fp8,,fp8,1024,1024,256,{batch},"
                    f"40.0,2500.0,{notes}\n")
    return validate_files([str(path)])["serving"]["rows"][0]


def test_a_row_above_its_engines_default_running_cap_says_so(tmp_path):
    """SGLang DeepSeek-R1 MTP on 8xB200 at 256 users with no --max-running-requests recorded: SGLang's own default would
    run 48 and queue the rest; the prediction runs all 256 (as the recipes that set 256-512 did) and says what it rests
    on. A recorded cap, or no drafts (a 1,024 default), leaves no such note."""
    (note,) = _sglang_mtp_row(tmp_path, "")["assumptions"]
    assert "records no cap" in note and "at most 48 a server with drafts" in note
    assert "assumptions" not in _sglang_mtp_row(tmp_path, 256)
    assert "assumptions" not in _sglang_mtp_row(tmp_path, "", notes="")


def test_a_disaggregated_decode_server_without_a_recorded_cap_says_so_too():
    """The InferenceMAX SGLang MTP disaggregated row whose decode cap the recipes do not give: its decode servers run
    more requests per rank than SGLang's 48-a-server default with drafts, split over 8 attention-DP ranks."""
    rows = validate_files([str(ROOT / "measurements" / "inferencemax_b200_h100.csv")])["serving"]["rows"]
    noted = [r for r in rows if r.get("mode") == "disagg" and r.get("assumptions")]
    assert noted and all(r.get("decode_batch") is None and r.get("spec_decoding") == "mtp" for r in noted)
    assert all("records no cap (decode_batch)" in r["assumptions"][0] and "(6 per rank)" in r["assumptions"][0] for r in noted)


def test_memory_and_explain_say_when_an_engine_release_predates_every_family():
    """--engine-version older than every release simfront describes is priced with the oldest family's settings, and
    memory and explain say so (as predict and plan do); a known release adds no note."""
    from simfront import api, report

    old = api.memory("llama-3.1-8b", "1xH100", engine="sglang", engine_version="0.1")
    assert len(old["notes"]) == 1 and old["notes"][0].startswith("sglang 0.1 predates the oldest sglang release")
    assert api.memory("llama-3.1-8b", "1xH100", engine="sglang", engine_version="0.5.12")["notes"] == []
    assert api.memory("llama-3.1-8b", "1xH100")["notes"] == []
    e = api.explain("llama-3.1-8b", "1xH100", batch=4, ctx=1024, engine="sglang", engine_version="0.1")
    assert any(n.startswith("sglang 0.1 predates") for n in e["provenance"]["notes"])
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        report.print_memory(old)
    assert buf.getvalue().splitlines()[-1] == f"note: {old['notes'][0]}"

"""Launch and benchmark command generation (simfront/launch.py)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest
import yaml

from simfront.errors import SimfrontError
from simfront.launch import (
    BENCH_TOOLS,
    ENGINES,
    Deployment,
    WorkerLayout,
    benchmark_command,
    check_deployment,
    launch_commands,
    sidecar_yaml,
)

SIDECAR_KEYS = {"gpu", "num_gpus", "tp", "pp", "ep", "attention_dp", "mode", "precision", "kv_dtype", "engine",
                "isl", "osl", "concurrency", "spec_decoding"}


def dsr1_adp(**kw) -> Deployment:
    """DeepSeek-R1 on 8 GPUs: engine 'TP8 EP8 attention-DP' = tp 1 x attention_dp 8, ep 8."""
    base = dict(model_id="deepseek-ai/DeepSeek-R1", tp=1, ep=8, attention_dp=8, max_batch=512,
                max_num_tokens=16384, kv_dtype="fp8", weight_precision="fp8_block", num_gpus=8,
                isl=1024, osl=1024, concurrency=256, gpu="h200_sxm")
    base.update(kw)
    return Deployment(**base)


def llama_tp4() -> Deployment:
    return Deployment("meta-llama/Llama-3.1-70B-Instruct", tp=4, max_batch=128, max_num_tokens=8192,
                      kv_dtype="fp8", weight_precision="bf16", num_gpus=4, isl=2048, osl=512, concurrency=32)


def disagg_1p1d() -> Deployment:
    return Deployment("deepseek-ai/DeepSeek-R1", mode="disagg", kv_dtype="fp8", weight_precision="fp8_block",
                      prefill=WorkerLayout(tp=4, max_batch=16, max_num_tokens=16384),
                      decode=WorkerLayout(tp=1, attention_dp=4, ep=4, max_batch=256, max_num_tokens=4096),
                      num_gpus=8, isl=4096, osl=1024, concurrency=128)


def tokens(cmd: str) -> list[str]:
    return shlex.split(cmd)


def value(cmd: str, flag: str) -> str:
    t = tokens(cmd)
    assert flag in t, f"{flag} missing from: {cmd}"
    return t[t.index(flag) + 1]


def flags(cmd: str) -> set[str]:
    return {t for t in tokens(cmd) if t.startswith("-")}


# --- agg DeepSeek-R1 TP8 EP8 attention-DP ------------------------------------------------------


def test_vllm_attention_dp_maps_to_data_parallel_with_expert_parallel():
    plan = launch_commands(dsr1_adp(), "vllm")
    [cmd] = plan.commands
    assert tokens(cmd)[:3] == ["vllm", "serve", "deepseek-ai/DeepSeek-R1"]
    assert value(cmd, "--tensor-parallel-size") == "1"
    assert value(cmd, "--data-parallel-size") == "8"
    assert "--enable-expert-parallel" in tokens(cmd)
    assert value(cmd, "--max-num-seqs") == "64"  # 512 per worker / 8 DP ranks
    assert value(cmd, "--max-num-batched-tokens") == "2048"
    assert value(cmd, "--max-model-len") == "2048"
    assert value(cmd, "--kv-cache-dtype") == "fp8"
    # vLLM's own fraction (weights + runtime + KV pool over the GPU) that gives the KV pool simfront priced
    assert float(value(cmd, "--gpu-memory-utilization")) == yaml.safe_load(sidecar_yaml(dsr1_adp(), "vllm"))["gpu_memory_fraction"]
    assert 0.9 < float(value(cmd, "--gpu-memory-utilization")) < 1.0
    assert not flags(cmd) & {"--tp-size", "--tp_size", "--quantization", "--ep-size"}
    assert any("no separate attention-DP flag" in n for n in plan.notes)


def test_sglang_attention_dp_flags():
    [cmd] = launch_commands(dsr1_adp(), "sglang").commands
    assert tokens(cmd)[:3] == ["sglang", "serve", "--model-path"]  # 0.5.23: launch_server deprecated
    assert value(cmd, "--tp-size") == "8" and value(cmd, "--attn-dp-size") == "8" and value(cmd, "--ep-size") == "8"
    assert not flags(cmd) & {"--enable-dp-attention", "--dp-size", "--cuda-graph-max-bs"}
    assert value(cmd, "--max-running-requests") == "512"  # SGLang splits it over DP ranks itself
    assert value(cmd, "--chunked-prefill-size") == "16384"
    assert value(cmd, "--kv-cache-dtype") == "fp8_e4m3"
    # SGLang's own fraction (weights + KV pool over the GPU) that gives the KV pool simfront priced
    assert float(value(cmd, "--mem-fraction-static")) == yaml.safe_load(sidecar_yaml(dsr1_adp(), "sglang"))["gpu_memory_fraction"]
    assert 0.82 < float(value(cmd, "--mem-fraction-static")) < 1.0
    assert value(cmd, "--cuda-graph-max-bs-decode") == "64"  # per DP rank
    assert not flags(cmd) & {"--tensor-parallel-size", "--tp", "--dp"}


def test_sglang_older_release_keeps_old_spellings():
    [cmd] = launch_commands(dsr1_adp(), "sglang", engine_version="0.5.9").commands
    assert tokens(cmd)[:4] == ["python", "-m", "sglang.launch_server", "--model-path"]
    assert value(cmd, "--dp-size") == "8" and "--enable-dp-attention" in tokens(cmd)
    assert value(cmd, "--cuda-graph-max-bs") == "64" and "--attn-dp-size" not in tokens(cmd)
    assert tokens(benchmark_command(dsr1_adp(), "sglang", engine_version="0.5.9"))[:3] == \
        ["python", "-m", "sglang.bench_serving"]


def test_vllm_lines_capture_the_whole_decode_step_per_release():
    """vLLM runs a decode step of more tokens than its largest CUDA graph eagerly, and its default stops at 512 tokens;
    simfront prices every step graphed, so its lines ask for a capture size that holds the worker's whole step (max
    requests per rank x (1 + drafts), on vLLM's capture grid), each release in its own spelling: from 0.34.0 the
    largest request count of a decode graph (and its token budget where the step needs more than SM100's default
    8,192), before it the largest capture size in tokens."""
    dep = dsr1_adp(spec_method="mtp", spec_k=2)  # 64 requests per rank x 3 tokens = 192 tokens a step
    [new] = launch_commands(dep, "vllm").commands
    assert value(new, "--compilation-config.max_decode_cudagraph_capture_requests") == "64"
    assert not {"--max-cudagraph-capture-size", "--cuda-graph-sizes",
                "--compilation-config.max_decode_cudagraph_capture_tokens"} & set(tokens(new))
    assert value(new, "--all2all-backend") == "deepep_low_latency"
    wide = dsr1_adp(max_batch=8 * 4096, spec_method="mtp", spec_k=2, max_num_tokens=8 * 16384)  # 12,288 tokens a step
    [w] = launch_commands(wide, "vllm").commands
    assert value(w, "--compilation-config.max_decode_cudagraph_capture_requests") == "4096"
    assert value(w, "--compilation-config.max_decode_cudagraph_capture_tokens") == "12288"
    # 0.14.0-0.33.x: one capture size in tokens on vLLM's grid
    [v033] = launch_commands(dep, "vllm", engine_version="0.33.0").commands
    assert value(v033, "--max-cudagraph-capture-size") == "192" and "--cuda-graph-sizes" not in tokens(v033)
    assert "--compilation-config.max_decode_cudagraph_capture_requests" not in tokens(v033)
    big = dsr1_adp(max_batch=8 * 200, spec_method="mtp", spec_k=2, max_num_tokens=8 * 8192)  # 600 tokens: above 512
    assert value(launch_commands(big, "vllm", engine_version="0.33.0").commands[0],
                 "--max-cudagraph-capture-size") == "608"  # 256 + 16 k above 256 (vllm/config/vllm.py)
    # 0.11.0: the capture size through --cuda-graph-sizes, the all-to-all through VLLM_ALL2ALL_BACKEND
    [v110] = launch_commands(dep, "vllm", engine_version="0.11.0").commands
    assert value(v110, "--cuda-graph-sizes") == "192" and "--max-cudagraph-capture-size" not in tokens(v110)
    assert "VLLM_ALL2ALL_BACKEND=deepep_low_latency" in tokens(v110) and "--all2all-backend" not in tokens(v110)
    # 0.9.x: --cuda-graph-sizes, and no DeepEP backend to ask for (a note says the MoE traffic is not what was priced)
    plan = launch_commands(dep, "vllm", engine_version="0.9.2")
    assert value(plan.commands[0], "--cuda-graph-sizes") == "192"
    assert not any(t.startswith("VLLM_ALL2ALL_BACKEND") for t in tokens(plan.commands[0]))
    assert any("DeepEP's all-to-all" in n and "not the all-to-all simfront priced" in n for n in plan.notes)
    # 0.8.x: no capture-size flag; a step beyond the 512-token default is said to run eager
    old = launch_commands(big, "vllm", engine_version="0.8.5")
    assert "--cuda-graph-sizes" not in tokens(old.commands[0]) and "--max-cudagraph-capture-size" not in tokens(old.commands[0])
    assert any("run eager" in n and "600" in n for n in old.notes)
    assert not any("run eager" in n for n in launch_commands(dep, "vllm", engine_version="0.8.5").notes)


def test_vllm_lines_ask_for_async_scheduling_where_it_is_off_by_default():
    """simfront prices vLLM's CPU work overlapped with the GPU's; vLLM does so by default from 0.14.0, and before that only
    when asked (--async-scheduling, 0.10.0 on), which 0.11.1-0.13 refuse with pipelines or n-gram drafts and 0.10-0.11.0
    with any drafts, pipelines or a worker over nodes: there a note says the CPU work is not overlapped."""
    dep = dsr1_adp(spec_method="mtp", spec_k=2)
    assert "--async-scheduling" not in tokens(launch_commands(dep, "vllm").commands[0])  # 0.14+: on by default
    assert "--async-scheduling" in tokens(launch_commands(dep, "vllm", engine_version="0.13.0").commands[0])
    old = launch_commands(dep, "vllm", engine_version="0.11.0")  # drafts: refused there
    assert "--async-scheduling" not in tokens(old.commands[0]) and any("no async scheduling with mtp drafts" in n for n in old.notes)
    assert "--async-scheduling" in tokens(launch_commands(dsr1_adp(), "vllm", engine_version="0.10.0").commands[0])
    pp = launch_commands(VARIED["l405-tp8-pp2-2node"], "vllm", engine_version="0.12.0")
    assert "--async-scheduling" not in tokens(pp.commands[0]) and any("pipeline parallelism" in n for n in pp.notes)
    assert not any("async" in n for n in launch_commands(dsr1_adp(), "vllm", engine_version="0.9.2").notes)  # no such flag


def test_vllm_lines_ask_for_mxfp8_activations_where_the_fused_mxfp4_moe_is_priced():
    """simfront prices MXFP4 experts on SM100 as the fused trtllm-gen MXFP4 x MXFP8 MoE (hardware/kernels.yaml); vLLM
    runs BF16 activations there unless asked: --quantization-config from 0.24.0, an environment variable in 0.10.1-0.23.x.
    Hopper (weight-only experts), other formats and lines without a GPU get neither."""
    oss = Deployment("openai/gpt-oss-120b", tp=2, weight_precision="mxfp4", max_batch=128, gpu="b200_sxm")
    plan = launch_commands(oss, "vllm")
    words = tokens(plan.commands[0])
    i = words.index("--quantization-config")
    assert json.loads(words[i + 1]) == {"moe": {"activation": "mxfp8"}}
    assert any("MXFP8 activations" in n and "b200_sxm" in n for n in plan.notes)
    for release in ("0.23.0", "0.18.0", "0.10.1"):
        old = launch_commands(oss, "vllm", engine_version=release).commands[0]
        assert old.startswith("VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 ") and "--quantization-config" not in old, release
    assert "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8" not in launch_commands(oss, "vllm", engine_version="0.24.0").commands[0]
    assert "--quantization-config" in tokens(launch_commands(replace(oss, gpu="gb200"), "vllm").commands[0])
    for other in (replace(oss, gpu="h100_sxm"), replace(oss, gpu=None),
                  dsr1_adp(weight_precision="fp8_block", gpu="b200_sxm")):
        line = launch_commands(other, "vllm", engine_version="0.18.0").commands[0]
        assert "MXFP8" not in line and "--quantization-config" not in tokens(launch_commands(other, "vllm").commands[0])
    old = launch_commands(oss, "vllm", engine_version="0.9.2")  # no way to ask: said so
    assert "MXFP4_MXFP8" not in old.commands[0] and any("no way to ask this release for MXFP8" in n for n in old.notes)
    for engine in ("sglang", "trtllm"):  # their lines are untouched (SGLang's SM100 MXFP4 path is MXFP8 already)
        assert "mxfp8" not in launch_commands(oss, engine).commands[0].lower()


def test_trtllm_lines_name_the_moe_backend_simfront_prices_for_mxfp4_experts():
    """TensorRT-LLM ran CUTLASS's MoE unless told otherwise before its AUTO backend; the lines name the backend of the
    kernel simfront prices (trtllm-gen on datacenter Blackwell, Triton on Hopper, the latter for expert-parallel
    layouts only, with a note elsewhere), and nothing for other formats."""
    def moe_config(dep):
        plan = launch_commands(dep, "trtllm")
        cfg = yaml.safe_load(plan.files["extra_llm_api_options.yaml"])
        return cfg.get("moe_config"), plan.notes

    oss = Deployment("openai/gpt-oss-120b", tp=8, weight_precision="mxfp4", max_batch=64, gpu="b200_sxm")
    assert moe_config(oss)[0] == {"backend": "TRTLLM"}
    assert moe_config(replace(oss, attention_dp=8, tp=1, ep=8))[0] == {"backend": "TRTLLM"}
    assert moe_config(replace(oss, gpu="h100_sxm", ep=8))[0] == {"backend": "TRITON"}
    cfg, notes = moe_config(replace(oss, gpu="h100_sxm"))  # MoE tensor parallelism: Triton's MoE does not serve it
    assert cfg is None and any("expert-parallel layouts only" in n for n in notes)
    assert moe_config(replace(oss, gpu=None))[0] is None
    assert moe_config(dsr1_adp(weight_precision="fp8_block", gpu="h100_sxm"))[0] is None  # Hopper's CUTLASS: the default


def test_sglang_lines_keep_mxfp4_experts_weight_only_under_expert_parallelism():
    """SGLang's own MoE pick for MXFP4 experts on Hopper (triton_kernels) serves EP 1 only and otherwise upcasts the
    experts to BF16 at load; an EP line asks for Marlin's weight-only MXFP4 MoE (0.5.12 on), without DeepEP under
    attention DP (Marlin takes the standard dispatcher only, said in a note); an older release gets a note; EP 1,
    Blackwell and other formats get neither."""
    oss = Deployment("openai/gpt-oss-120b", tp=8, ep=8, weight_precision="mxfp4", max_batch=128, gpu="h100_sxm")
    plan = launch_commands(oss, "sglang")
    assert value(plan.commands[0], "--moe-runner-backend") == "marlin"
    assert any("upcast the experts to BF16" in n for n in plan.notes)
    assert value(launch_commands(oss, "sglang", engine_version="0.5.12").commands[0], "--moe-runner-backend") == "marlin"
    old = launch_commands(oss, "sglang", engine_version="0.5.10")
    assert "--moe-runner-backend" not in old.commands[0] and any("no weight-only MXFP4 MoE runner" in n for n in old.notes)
    # attention DP + EP: Marlin takes the standard dispatcher only, so the line leaves DeepEP out and says so
    dpa = launch_commands(replace(oss, tp=1, attention_dp=8), "sglang")
    assert value(dpa.commands[0], "--moe-runner-backend") == "marlin" and "--moe-a2a-backend" not in dpa.commands[0]
    assert any("standard dispatcher only" in n and "all-gather" in n for n in dpa.notes)
    # on Blackwell SGLang's MXFP4 pick (flashinfer_mxfp4) has no DeepEP path either (test below)
    b200 = launch_commands(replace(oss, tp=1, attention_dp=8, gpu="b200_sxm"), "sglang")
    assert "--moe-a2a-backend" not in b200.commands[0] and any("runs mxfp4 experts under DeepEP on no worker" in n for n in b200.notes)
    for other in (replace(oss, ep=1), replace(oss, gpu="b200_sxm"), replace(oss, gpu=None),
                  dsr1_adp(tp=8, attention_dp=1, weight_precision="fp8_block", gpu="h100_sxm")):
        assert "--moe-runner-backend" not in launch_commands(other, "sglang").commands[0]


def test_vllm_prefill_workers_ask_for_deepgemm_block_fp8_experts_on_blackwell():
    """vLLM's FP8 MoE oracle (0.17.0 on) picks FlashInfer's trtllm-gen block-scale MoE on SM100, the kernel simfront's
    decode pricing assumes there; a prefill worker, priced with the calibrated DeepGEMM rows, asks for
    --moe-backend deep_gemm. Decode workers, aggregated servers, Hopper, other formats and releases before the flag
    (0.16.0) get nothing."""
    dis = replace(VARIED["r1-disagg-multinode"], gpu="b200_sxm")
    plan = launch_commands(dis, "vllm")
    prefill = [c for c in plan.commands if "--moe-backend" in tokens(c)]
    assert len(prefill) >= 1
    for c in prefill:
        words = tokens(c)
        assert words[words.index("--moe-backend") + 1] == "deep_gemm"
    assert len(prefill) < len(plan.commands)  # the decode workers run vLLM's own pick
    assert not any("--moe-backend" in tokens(c) for c in launch_commands(dis, "vllm", engine_version="0.16.0").commands)
    assert not any("--moe-backend" in tokens(c) for c in launch_commands(replace(dis, gpu="h100_sxm"), "vllm").commands)
    assert not any("--moe-backend" in tokens(c)
                   for c in launch_commands(replace(dis, weight_precision="nvfp4"), "vllm").commands)
    agg = dsr1_adp(tp=8, attention_dp=1, weight_precision="fp8_block", gpu="b200_sxm", max_batch=64)
    assert "--moe-backend" not in tokens(launch_commands(agg, "vllm").commands[0])


def test_sglang_prefill_workers_ask_for_deepgemm_block_fp8_experts_on_blackwell():
    """SGLang (0.5.5 on) runs trtllm-gen's MoE by itself for DeepSeek-V3 block-FP8 experts on sm100 without an
    all-to-all, the kernel simfront's decode pricing assumes there; a prefill worker, priced with the calibrated DeepGEMM
    rows, asks for --moe-runner-backend deep_gemm. Where the line sets DeepEP SGLang picks DeepGEMM by itself;
    decode workers, Hopper, other formats and releases before the pick (0.5.3) get nothing."""
    dis = VARIED["r1-disagg-b200-fp8"]

    def runners(plan):
        out = []
        for c in plan.commands:
            words = tokens(c)
            out.append(words[words.index("--moe-runner-backend") + 1] if "--moe-runner-backend" in words else None)
        return out

    plan = launch_commands(dis, "sglang")
    assert [r for r, role in zip(runners(plan), plan.roles) if role == "prefill"] == ["deep_gemm"]
    assert all(r is None for r, role in zip(runners(plan), plan.roles) if role != "prefill")
    assert runners(launch_commands(dis, "sglang", engine_version="0.5.5"))[plan.roles.index("prefill")] == "deep_gemm"
    assert not any(runners(launch_commands(dis, "sglang", engine_version="0.5.3")))
    dpa = replace(dis, prefill=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=16, max_num_tokens=16384))
    assert not any(runners(launch_commands(dpa, "sglang")))
    # a release whose table names no way to ask for DeepEP leaves that worker without an all-to-all: it asks
    assert runners(launch_commands(dpa, "sglang", engine_version="0.5.12"))[plan.roles.index("prefill")] == "deep_gemm"
    assert not any(runners(launch_commands(replace(dis, gpu="h100_sxm"), "sglang")))
    fp4 = launch_commands(replace(dis, weight_precision="nvfp4"), "sglang")  # only DeepEP's NVFP4 runner, on decode
    assert [r for r, role in zip(runners(fp4), fp4.roles) if r] == ["flashinfer_cutedsl"]
    assert fp4.roles[runners(fp4).index("flashinfer_cutedsl")] == "decode"


def test_trtllm_lines_name_the_block_fp8_moe_backend_by_role_on_blackwell():
    """Block-FP8 experts on datacenter Blackwell are priced with the calibrated DeepGEMM kernel in prefill and, in
    decode, as trtllm-gen's FP8 block-scale MoE serves them (no per-expert groups): prefill workers ask for DEEPGEMM,
    decode workers and aggregated servers for TRTLLM (TensorRT-LLM's own default, CUTLASS, is timed by no row there);
    Hopper (its CUTLASS kernel is the calibrated one) and other formats get nothing."""
    def moe(plan, name="extra_llm_api_options.yaml"):
        return yaml.safe_load(plan.files[name]).get("moe_config")

    agg = dsr1_adp(tp=8, attention_dp=1, weight_precision="fp8_block", gpu="b200_sxm", max_batch=64)
    assert moe(launch_commands(agg, "trtllm")) == {"backend": "TRTLLM"}
    dis = launch_commands(replace(VARIED["r1-disagg-multinode"], gpu="b200_sxm"), "trtllm")
    assert moe(dis, "extra_llm_api_options_prefill.yaml") == {"backend": "DEEPGEMM"}
    assert moe(dis, "extra_llm_api_options_decode.yaml") == {"backend": "TRTLLM"}
    assert moe(launch_commands(replace(agg, gpu="h100_sxm"), "trtllm")) is None
    # NVFP4: the backend of the kernel priced faster at the worker's step (simfront.moe.moe_path_costs), here the fused
    # trtllm-gen one; a model beyond its router's expert limit has no fused path and gets none
    from simfront.hardware import get_hardware
    from simfront.moe import moe_path_costs

    paths = moe_path_costs(64, 7168, 2048, 8, 256, 1, 8, "nvfp4", get_hardware("b200_sxm"), alpha=1.01)
    faster = "TRTLLM" if float(paths["fused"].time_s) < float(paths["grouped"].time_s) else "CUTLASS"
    assert moe(launch_commands(replace(agg, weight_precision="nvfp4"), "trtllm")) == {"backend": faster}
    kimi = Deployment("moonshotai/Kimi-K2-Instruct", tp=8, ep=8, weight_precision="nvfp4", max_batch=64, gpu="b200_sxm")
    assert moe(launch_commands(kimi, "trtllm")) is None


def test_engine_table_inheritance_states_only_what_differs():
    from simfront.launch import engine_table, graph_capture_tokens

    v = {e["since"]: e for e in engine_table("vllm")["versions"]}
    assert v["0.11.0"]["server"] == v["0.14.0"]["server"] and "moe_a2a" not in v["0.11.0"]["flags"]
    assert v["0.9.0"]["flags"]["dp_size_local"] == "--data-parallel-size-local"
    assert "dp_size_local" not in v["0.8.0"]["flags"] and v["0.10.0"]["flags"]["cuda_graph_max_tokens"] == "--cuda-graph-sizes"
    assert v["0.11.0"]["checked"] != v["0.14.0"]["checked"]  # a parser check is never inherited
    assert "async_scheduling" not in v["0.14.0"]["flags"] and v["0.11.1"]["flags"]["async_scheduling"] == "--async-scheduling"
    grid = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 2049, 16))
    for n in range(1, 2049):
        size = graph_capture_tokens(n, {0: 8, 256: 16})
        assert size >= n and size in grid and not any(n <= g < size for g in grid)  # the smallest grid size holding n


def test_engine_version_errors():
    with pytest.raises(SimfrontError, match="older than any release.*0.4.0"):
        launch_commands(dsr1_adp(), "sglang", engine_version="0.1.0")
    with pytest.raises(SimfrontError, match="not a release number"):
        launch_commands(dsr1_adp(), "vllm", engine_version="latest-ish")


def test_trtllm_attention_dp_cli_and_yaml():
    plan = launch_commands(dsr1_adp(), "trtllm")
    [cmd] = plan.commands
    # attention DP + EP on an HGX board: DeepEP's all-to-all asked for, as simfront prices the MoE traffic
    assert tokens(cmd)[:3] == ["TRTLLM_CAN_USE_DEEP_EP=1", "trtllm-serve", "deepseek-ai/DeepSeek-R1"]
    assert value(cmd, "--backend") == "pytorch"
    assert value(cmd, "--tp_size") == "8" and value(cmd, "--ep_size") == "8" and value(cmd, "--pp_size") == "1"
    assert value(cmd, "--max_batch_size") == "64" and value(cmd, "--max_num_tokens") == "2048"
    assert value(cmd, "--max_seq_len") == "2048"
    assert value(cmd, "--kv_cache_free_gpu_memory_fraction") == "0.9"
    assert "--kv_cache_free_gpu_mem_fraction" not in tokens(cmd)  # that is trtllm-bench's spelling
    assert not any(f.startswith("--") and "-" in f[2:] for f in flags(cmd))  # snake_case only
    fname = value(cmd, "--extra_llm_api_options")
    cfg = yaml.safe_load(plan.files[fname])
    assert cfg["enable_attention_dp"] is True
    assert cfg["kv_cache_config"] == {"dtype": "fp8", "free_gpu_memory_fraction": 0.9}
    assert cfg["cuda_graph_config"] == {"enable_padding": True, "max_batch_size": 64}
    assert "speculative_config" not in cfg and "cache_transceiver_config" not in cfg
    # the attention-DP balance simfront prices (serving.adp_balance_wait_s, scheduler.yaml adp_balance_timeout_iters)
    assert cfg["attention_dp_config"] == {"enable_balance": True, "timeout_iters": 60, "batching_wait_iters": 0}
    old = launch_commands(dsr1_adp(), "trtllm", engine_version="0.21.0")  # no key for it in that release's table
    assert "attention_dp_config" not in yaml.safe_load(old.files["extra_llm_api_options.yaml"])
    assert any("attention-DP balance" in n for n in old.notes)
    tp_only = yaml.safe_load(launch_commands(llama_tp4(), "trtllm").files["extra_llm_api_options.yaml"])
    assert "attention_dp_config" not in tp_only  # no attention DP: nothing to balance


def test_memory_fraction_override_reaches_every_engine():
    dep = dsr1_adp(gpu_memory_fraction=0.75)
    assert value(launch_commands(dep, "vllm").commands[0], "--gpu-memory-utilization") == "0.75"
    assert value(launch_commands(dep, "sglang").commands[0], "--mem-fraction-static") == "0.75"
    plan = launch_commands(dep, "trtllm")
    assert value(plan.commands[0], "--kv_cache_free_gpu_memory_fraction") == "0.75"
    assert yaml.safe_load(plan.files["extra_llm_api_options.yaml"])["kv_cache_config"]["free_gpu_memory_fraction"] == 0.75


def test_an_sglang_fraction_above_sglangs_own_default_says_what_it_leaves_outside_the_pools():
    """Qwen3-32B FP8 on one H100: the line writes the fraction that gives simfront's KV pool (0.89), which keeps less
    for activations and CUDA graphs than SGLang's own default (0.83, ~13.6 GiB); the note says so and how to back
    off. A fraction at or below the default (here set by hand) carries no such note; vLLM lines never do."""
    dep = Deployment("Qwen/Qwen3-32B", tp=1, max_batch=24, max_num_tokens=8192, kv_dtype="fp8", weight_precision="fp8_block",
                     num_gpus=1, isl=1024, osl=1024, concurrency=24, gpu="h100_sxm")
    note = [n for n in launch_commands(dep, "sglang").notes if "SGLang's own default" in n]
    assert len(note) == 1 and "--mem-fraction-static 0.89" in note[0] and "lower it" in note[0]
    low = Deployment(**{**dep.__dict__, "gpu_memory_fraction": 0.8})
    assert not [n for n in launch_commands(low, "sglang").notes if "SGLang's own default" in n]
    assert not [n for n in launch_commands(dep, "vllm").notes if "own default" in n]


# --- MTP ------------------------------------------------------------------------------------


def test_mtp_per_engine():
    dep = dsr1_adp(spec_method="mtp", spec_k=3)
    v = launch_commands(dep, "vllm").commands[0]
    assert json.loads(value(v, "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 3}
    s = launch_commands(dep, "sglang").commands[0]
    assert value(s, "--speculative-algorithm") == "NEXTN"
    assert value(s, "--speculative-num-steps") == "3"
    assert value(s, "--speculative-eagle-topk") == "1"
    assert value(s, "--speculative-num-draft-tokens") == "4"
    plan = launch_commands(dep, "trtllm")
    cfg = yaml.safe_load(plan.files["extra_llm_api_options.yaml"])
    assert cfg["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 3}


def test_mtp_rejected_for_model_without_mtp_layers():
    dep = llama_tp4()
    dep.spec_method, dep.spec_k = "mtp", 2
    with pytest.raises(SimfrontError, match="no MTP layers"):
        launch_commands(dep, "sglang")


def test_eagle3_uses_draft_model():
    dep = llama_tp4()
    dep.spec_method, dep.spec_k, dep.draft_model = "eagle3", 3, "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B"
    v = launch_commands(dep, "vllm").commands[0]
    assert json.loads(value(v, "--speculative-config"))["model"] == dep.draft_model
    s = launch_commands(dep, "sglang").commands[0]
    assert value(s, "--speculative-algorithm") == "EAGLE3"
    assert value(s, "--speculative-draft-model-path") == dep.draft_model
    cfg = yaml.safe_load(launch_commands(dep, "trtllm").files["extra_llm_api_options.yaml"])
    assert cfg["speculative_config"]["speculative_model_dir"] == dep.draft_model


# --- dense Llama TP4, FP8 KV ----------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_dense_tp4_fp8_kv(engine):
    plan = launch_commands(llama_tp4(), engine)
    [cmd] = plan.commands
    tp_flag = {"vllm": "--tensor-parallel-size", "sglang": "--tp-size", "trtllm": "--tp_size"}[engine]
    assert value(cmd, tp_flag) == "4"
    assert not flags(cmd) & {"--enable-expert-parallel", "--enable-dp-attention", "--ep-size", "--dp-size"}
    if engine == "vllm":
        assert value(cmd, "--kv-cache-dtype") == "fp8"
        assert value(cmd, "--max-num-seqs") == "128" and value(cmd, "--max-num-batched-tokens") == "8192"
    elif engine == "sglang":
        assert value(cmd, "--kv-cache-dtype") == "fp8_e4m3"
        assert "fp8" not in [a for f, a in zip(tokens(cmd), tokens(cmd)[1:]) if f == "--kv-cache-dtype"]
    else:
        cfg = yaml.safe_load(plan.files[value(cmd, "--extra_llm_api_options")])
        assert cfg["kv_cache_config"]["dtype"] == "fp8" and cfg["enable_attention_dp"] is False


@pytest.mark.parametrize("engine", ENGINES)
def test_bf16_kv_is_auto(engine):
    dep = llama_tp4()
    dep.kv_dtype = "bf16"
    plan = launch_commands(dep, engine)
    if engine == "trtllm":
        assert yaml.safe_load(plan.files["extra_llm_api_options.yaml"])["kv_cache_config"]["dtype"] == "auto"
    else:
        assert value(plan.commands[0], "--kv-cache-dtype") == "auto"


def test_fp8_weights_of_bf16_checkpoint():
    dep = llama_tp4()
    dep.weight_precision = "fp8"
    for engine in ("vllm", "sglang"):  # online quantisation of the BF16 checkpoint
        cmd = launch_commands(dep, engine).commands[0]
        assert value(cmd, "--quantization") == "fp8"
        assert "meta-llama/Llama-3.1-70B-Instruct" in tokens(cmd)
    plan = launch_commands(dep, "trtllm")  # no online FP8: a pre-quantised checkpoint
    assert tokens(plan.commands[0])[1] == "nvidia/Llama-3.1-70B-Instruct-FP8"
    assert "--quantization" not in tokens(plan.commands[0])
    assert any("assumed checkpoint id" in n for n in plan.notes)


def test_nvfp4_picks_nvidia_checkpoint():
    plan = launch_commands(dsr1_adp(weight_precision="nvfp4"), "sglang")
    assert value(plan.commands[0], "--model-path") == "nvidia/DeepSeek-R1-NVFP4"
    assert "--quantization" not in tokens(plan.commands[0])
    assert any("nvidia/DeepSeek-R1-NVFP4" in n and "assumed" in n for n in plan.notes)


def test_native_precision_served_as_is_and_unknown_model_noted():
    plan = launch_commands(dsr1_adp(), "vllm")
    assert not any("checkpoint" in n for n in plan.notes)
    plan = launch_commands(Deployment("acme/Unknown-7B", tp=1, num_gpus=1), "vllm")
    assert tokens(plan.commands[0])[2] == "acme/Unknown-7B"
    assert any("not in simfront's catalog" in n for n in plan.notes)


def test_explicit_checkpoint_wins():
    dep = dsr1_adp(weight_precision="nvfp4", checkpoint="nvidia/DeepSeek-R1-0528-FP4-v2")
    assert tokens(launch_commands(dep, "trtllm").commands[0])[2] == "nvidia/DeepSeek-R1-0528-FP4-v2"  # after the env word


# --- disagg 1P1D ----------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_disagg_1p1d_roles_ports_and_gpus(engine):
    plan = launch_commands(disagg_1p1d(), engine)
    assert plan.roles == ["prefill", "decode", "router"]
    pre, dec, router = plan.commands
    assert value(pre, "--port") == "8100" and value(dec, "--port") == "8200"
    assert tokens(pre)[0] == "CUDA_VISIBLE_DEVICES=0,1,2,3" and tokens(dec)[0] == "CUDA_VISIBLE_DEVICES=4,5,6,7"
    if engine == "vllm":
        for c in (pre, dec):
            assert json.loads(value(c, "--kv-transfer-config")) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        assert value(router, "--prefiller-ports") == "8100" and value(router, "--decoder-ports") == "8200"
        assert value(router, "--port") == "8000"
    elif engine == "sglang":
        assert value(pre, "--disaggregation-mode") == "prefill" and value(dec, "--disaggregation-mode") == "decode"
        assert value(dec, "--attn-dp-size") == "4" and "--attn-dp-size" not in tokens(pre)
        assert value(router, "--prefill") == "http://localhost:8100"
        assert value(router, "--decode") == "http://localhost:8200"
        assert "--pd-disaggregation" in tokens(router)
    else:
        p_cfg = yaml.safe_load(plan.files[value(pre, "--extra_llm_api_options")])
        d_cfg = yaml.safe_load(plan.files[value(dec, "--extra_llm_api_options")])
        for cfg in (p_cfg, d_cfg):
            assert cfg["cache_transceiver_config"]["backend"] == "DEFAULT"
        assert p_cfg["enable_attention_dp"] is False and d_cfg["enable_attention_dp"] is True
        assert "cuda_graph_config" not in p_cfg and d_cfg["cuda_graph_config"]["max_batch_size"] == 64
        assert tokens(router)[:2] == ["trtllm-serve", "disaggregated"]
        front = yaml.safe_load(plan.files[value(router, "-c")])
        assert front["context_servers"]["urls"] == ["localhost:8100"]
        assert front["generation_servers"]["urls"] == ["localhost:8200"]
        assert front["port"] == 8000
        assert any("unverified" in n for n in plan.notes)


def test_disagg_across_nodes_uses_host_placeholders():
    dep = disagg_1p1d()
    dep.prefill = WorkerLayout(tp=8, max_batch=16, workers=2)
    dep.decode = WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=512)
    dep.num_gpus = 24
    plan = launch_commands(dep, "sglang")
    router = tokens(plan.commands[-1])
    assert [router[i + 1] for i, t in enumerate(router) if t == "--prefill"] == [
        "http://$PREFILL_HOST_0:8100", "http://$PREFILL_HOST_1:8100"]
    assert '"http://$PREFILL_HOST_0:8100"' in plan.commands[-1]  # double-quoted so the shell expands it
    assert not tokens(plan.commands[0])[0].startswith("CUDA_VISIBLE_DEVICES")


# --- multi-node -----------------------------------------------------------------------------


def test_multinode_worker_flags():
    dep = Deployment("deepseek-ai/DeepSeek-R1", tp=16, ep=16, weight_precision="fp8_block", max_batch=256,
                     num_gpus=16, gpus_per_node=8)
    s = launch_commands(dep, "sglang")
    cmd = s.commands[0]
    assert value(cmd, "--nnodes") == "2" and value(cmd, "--node-rank") == "$NODE_RANK"
    assert value(cmd, "--dist-init-addr").startswith("$HEAD_IP:")
    t = launch_commands(dep, "trtllm")
    assert value(t.commands[0], "--gpus_per_node") == "8"
    assert any("nodes" in n for n in t.notes)
    # vLLM (0.11.1 on): its multiprocessing executor over the nodes, where async scheduling runs as priced (not Ray)
    v = launch_commands(dep, "vllm")
    assert value(v.commands[0], "--nnodes") == "2" and value(v.commands[0], "--node-rank") == "$NODE_RANK"
    assert value(v.commands[0], "--master-addr") == "$HEAD_IP" and "--headless" not in tokens(v.commands[0])
    assert any("--headless on nodes 1..1" in n for n in v.notes)
    old = launch_commands(dep, "vllm", engine_version="0.11.0")  # no --nnodes before 0.11.1: Ray, said to be unoverlapped
    assert "--nnodes" not in tokens(old.commands[0]) and any("Ray" in n and "not overlapped" in n for n in old.notes)
    single = launch_commands(dsr1_adp(), "sglang").commands[0]
    assert "--nnodes" not in tokens(single)


def test_worker_must_fill_whole_nodes():
    with pytest.raises(SimfrontError, match="whole"):
        check_deployment(Deployment("deepseek-ai/DeepSeek-R1", tp=12, num_gpus=12, gpus_per_node=8))


# --- validation -----------------------------------------------------------------------------


def test_unknown_engine_lists_valid():
    with pytest.raises(SimfrontError, match="vllm, sglang, trtllm"):
        launch_commands(dsr1_adp(), "tgi")


def test_engine_aliases():
    assert launch_commands(dsr1_adp(), "TensorRT-LLM").engine == "trtllm"


def test_gpu_count_must_match_layout():
    with pytest.raises(SimfrontError, match="num_gpus=8"):  # engine TP8 with attention DP 8 is tp=1 here
        launch_commands(dsr1_adp(tp=8), "sglang")
    with pytest.raises(SimfrontError, match="num_gpus"):
        launch_commands(Deployment("meta-llama/Llama-3.1-70B-Instruct", tp=4, replicas=2, num_gpus=4), "vllm")
    dep = disagg_1p1d()
    dep.num_gpus = 12
    with pytest.raises(SimfrontError, match="uses 8 GPUs"):
        check_deployment(dep)


def test_ep_must_divide_attention_group():
    with pytest.raises(SimfrontError, match="ep=3"):
        check_deployment(dsr1_adp(ep=3))


def test_engine_specific_layout_limits():
    partial_ep = dsr1_adp(ep=4)  # MoE-TP 2 x EP 4: fine for SGLang, impossible in vLLM
    launch_commands(partial_ep, "sglang")
    with pytest.raises(SimfrontError, match="vLLM"):
        launch_commands(partial_ep, "vllm")
    mixed = dsr1_adp(tp=2, attention_dp=4)  # attention TP 2 inside 4 DP groups: TRT-LLM cannot
    launch_commands(mixed, "sglang")
    with pytest.raises(SimfrontError, match="TensorRT-LLM"):
        launch_commands(mixed, "trtllm")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"mode": "both"}, "mode"),
        ({"kv_dtype": "int4"}, "KV-cache dtype"),
        ({"weight_precision": "fp2"}, "weight precision"),
        ({"spec_method": "medusa", "spec_k": 2}, "spec_method"),
        ({"spec_method": "mtp", "spec_k": 0}, "spec_k"),
        ({"max_seq_len": 1000}, "max_seq_len"),
        ({"gpu_memory_fraction": 1.5}, "gpu_memory_fraction"),
        ({"max_batch": 4}, "max_batch"),
    ],
)
def test_bad_inputs(kw, match):
    with pytest.raises(SimfrontError, match=match):
        check_deployment(dsr1_adp(**kw))


def test_disagg_needs_both_roles():
    with pytest.raises(SimfrontError, match="prefill and decode"):
        check_deployment(Deployment("deepseek-ai/DeepSeek-R1", mode="disagg", prefill=WorkerLayout(tp=8)))


# --- shell parsing, benchmark commands, sidecar ---------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dep", [dsr1_adp(), dsr1_adp(spec_method="mtp", spec_k=2), llama_tp4(), disagg_1p1d()])
def test_commands_are_shell_parseable(engine, dep):
    plan = launch_commands(dep, engine)
    assert len(plan.commands) == len(plan.roles)
    for cmd in plan.commands:
        assert len(tokens(cmd)) > 3 and "\n" not in cmd
    for content in plan.files.values():
        assert isinstance(yaml.safe_load(content), dict)


@pytest.mark.parametrize("tool", BENCH_TOOLS)
def test_benchmark_carries_load_point_and_result_file(tool):
    dep = dsr1_adp(isl=8192, osl=1024, concurrency=96)
    out = {"vllm": "res/r1.json", "sglang": "res/r1.jsonl", "aiperf": "res/r1_aiperf"}[tool]
    cmd = benchmark_command(dep, tool, result_file=out)
    t = tokens(cmd)
    if tool == "vllm":
        assert t[:3] == ["vllm", "bench", "serve"]
        assert value(cmd, "--random-input-len") == "8192" and value(cmd, "--random-output-len") == "1024"
        assert value(cmd, "--max-concurrency") == "96" and value(cmd, "--num-prompts") == "960"
        assert value(cmd, "--result-filename") == out
        assert "--ignore-eos" in t and "--save-result" in t
        assert value(cmd, "--percentile-metrics") == "ttft,tpot,itl,e2el"
        meta = t[t.index("--metadata") + 1:]
        assert {"tp=1", "ep=8", "attention_dp=8", "isl=8192", "osl=1024", "concurrency=96", "engine=vllm"} <= set(meta)
    elif tool == "sglang":
        assert t[:3] == ["python", "-m", "sglang.benchmark.serving"]  # 0.5.23: bench_serving deprecated
        assert value(cmd, "--random-input-len") == "8192" and value(cmd, "--random-output-len") == "1024"
        assert value(cmd, "--random-range-ratio") == "1.0"
        assert value(cmd, "--max-concurrency") == "96" and value(cmd, "--num-prompts") == "960"
        assert value(cmd, "--output-file") == out
        assert value(cmd, "--backend") == "sglang"
    else:
        assert t[:2] == ["aiperf", "profile"]
        assert value(cmd, "--synthetic-input-tokens-mean") == "8192" and value(cmd, "--output-tokens-mean") == "1024"
        assert value(cmd, "--concurrency") == "96" and value(cmd, "--request-count") == "960"
        assert value(cmd, "--artifact-dir") == out
        assert value(cmd, "--endpoint-type") == "chat" and "--streaming" in t


def test_benchmark_of_a_length_range_sends_the_lengths_predict_priced(tmp_path):
    """A point predicted for lengths uniform in [0.8 L, L] is measured with them: SGLang's client spells the range as
    simfront does; vLLM's samples [L' (1 - rho), L' (1 + rho)], so it is centred on L' = 0.9 L; AIPerf's normal law
    gets the range's mean and standard deviation. The sidecar and vLLM's metadata record the ratio, and the client's
    served mean lengths read back as that range's longest (not discounted twice)."""
    import json as _json
    from pathlib import Path

    from simfront.ingest import load_measurements
    from simfront.measured import resolve

    dep = llama_tp4()
    dep = Deployment(**{**dep.__dict__, "isl": 2048, "osl": 256, "random_range_ratio": 0.8})
    sg = benchmark_command(dep, "sglang")
    assert (value(sg, "--random-input-len"), value(sg, "--random-output-len"), value(sg, "--random-range-ratio")) == ("2048", "256", "0.8")
    vl = benchmark_command(dep, "vllm")
    assert (value(vl, "--random-input-len"), value(vl, "--random-output-len"), value(vl, "--random-range-ratio")) == ("1843", "230", "0.1111")
    meta = dict(m.split("=", 1) for m in tokens(vl)[tokens(vl).index("--metadata") + 1:])
    assert (meta["isl"], meta["osl"], meta["random_range_ratio"]) == ("2048", "256", "0.8")
    ap = benchmark_command(dep, "aiperf")
    assert (value(ap, "--synthetic-input-tokens-mean"), value(ap, "--synthetic-input-tokens-stddev")) == ("1843", "118.2")
    assert (value(ap, "--output-tokens-mean"), value(ap, "--output-tokens-stddev")) == ("230", "14.8")
    assert yaml.safe_load(sidecar_yaml(dep, "vllm"))["random_range_ratio"] == 0.8
    # a benchmark run of K prompts per client (predict --prompts-per-client K) sends K x concurrency, at least one each
    for tool in BENCH_TOOLS:
        flag = {"vllm": "--num-prompts", "sglang": "--num-prompts", "aiperf": "--request-count"}[tool]
        assert value(benchmark_command(Deployment(**{**dep.__dict__, "prompts_per_client": 2.5}), tool), flag) == "80"
        assert value(benchmark_command(dep, tool), flag) == "320"  # the default: 10 per client, as InferenceX runs
    # without a range: fixed lengths, as before (no ratio recorded)
    fixed = benchmark_command(llama_tp4(), "vllm")
    assert "--random-range-ratio" not in tokens(fixed) and "random_range_ratio" not in fixed
    # the round trip: vLLM's result file (served token totals over 100 requests) with that metadata
    real = _json.loads((Path(__file__).parent / "data" / "ingest" / "vllm_0.33_openai_dsr1_disagg.json").read_text())
    result = {k: v for k, v in real.items() if k not in _json.loads(_json.dumps(meta)) and not k.startswith(("prefill_", "decode_"))}
    e2e_s = 0.1 + 229 * 0.02  # 100 ms to the first token, then 229 at 20 ms: Little's law sets the rates
    rps = dep.concurrency / e2e_s
    result = {k: v for k, v in result.items() if not k.endswith("_ms")}
    result.update(model_id=dep.model_id, max_concurrency=dep.concurrency, num_prompts=100, completed=100, failed=0,
                  total_input_tokens=184300, total_output_tokens=23000, mean_ttft_ms=100.0, mean_tpot_ms=20.0,
                  mean_e2el_ms=e2e_s * 1e3, request_throughput=rps, output_throughput=rps * 230,
                  total_token_throughput=rps * (1843 + 230), duration=100 / rps, **meta)
    path = tmp_path / "r.json"
    path.write_text(_json.dumps(result))
    p = load_measurements([str(path)]).points[0]
    assert (p.isl, p.osl, p.random_range_ratio) == (1843, 230, 0.8)
    r, why = resolve(p)
    assert why is None and abs(r.isl - 2047.8) < 0.1 and abs(r.osl - 255.6) < 0.1


def test_benchmark_model_matches_served_checkpoint():
    dep = llama_tp4()
    dep.weight_precision = "fp8"
    assert value(benchmark_command(dep, "aiperf", engine="trtllm"), "-m") == "nvidia/Llama-3.1-70B-Instruct-FP8"
    assert value(benchmark_command(dep, "vllm"), "--model") == "meta-llama/Llama-3.1-70B-Instruct"
    assert value(benchmark_command(dep, "sglang", engine="trtllm"), "--backend") == "sglang-oai"


def test_benchmark_default_file_and_bad_tool():
    cmd = benchmark_command(llama_tp4(), "sglang")
    assert value(cmd, "--output-file").endswith("_isl2048_osl512_c32.jsonl")
    with pytest.raises(SimfrontError, match="vllm, sglang, aiperf"):
        benchmark_command(llama_tp4(), "genai-perf")


def test_sidecar_agg():
    side = yaml.safe_load(sidecar_yaml(dsr1_adp(spec_method="mtp", spec_k=3), engine="sglang"))
    assert SIDECAR_KEYS <= set(side)
    assert side["gpu"] == "h200_sxm" and side["num_gpus"] == 8
    assert (side["tp"], side["ep"], side["attention_dp"]) == (1, 8, 8)
    assert side["engine"] == "sglang" and side["spec_decoding"] == "mtp" and side["spec_k"] == 3
    assert side["precision"] == "fp8_block" and side["kv_dtype"] == "fp8"


def test_sidecar_disagg():
    side = yaml.safe_load(sidecar_yaml(disagg_1p1d()))
    assert SIDECAR_KEYS - {"tp", "pp", "ep", "attention_dp", "gpu", "engine"} <= set(side)  # None: left out
    assert side["mode"] == "disagg" and side["num_gpus"] == 8 and side["spec_decoding"] == "none"
    assert side["prefill_tp"] == 4 and side["prefill_gpus"] == 4 and side["prefill_workers"] == 1
    assert side["decode_attention_dp"] == 4 and side["decode_ep"] == 4 and side["decode_batch"] == 64
    assert "tp" not in side  # no ambiguous top-level layout
    # a prefill worker's batch is the prompts the whole worker steps with (the measured rows' reading), a decode
    # worker's the running requests per attention-DP rank
    dpa = replace(disagg_1p1d(), prefill=WorkerLayout(tp=1, attention_dp=4, ep=4, max_batch=16, max_num_tokens=65536))
    side = yaml.safe_load(sidecar_yaml(dpa))
    assert side["prefill_batch"] == 16 and side["decode_batch"] == 64


def test_sidecars_are_measured_point_fields():
    from simfront.ingest.schema import CONFIG_FIELDS

    for dep in (dsr1_adp(spec_method="mtp", spec_k=2), disagg_1p1d(), llama_tp4()):
        assert set(yaml.safe_load(sidecar_yaml(dep, "vllm", "0.33.0"))) <= set(CONFIG_FIELDS)


def test_small_token_budget_is_noted():
    dep = dsr1_adp(max_num_tokens=256)  # 512 running requests cannot decode in a 256-token step
    assert any("max_num_tokens=256" in n for n in launch_commands(dep, "sglang").notes)
    assert not any("max_num_tokens=" in n for n in launch_commands(dsr1_adp(), "sglang").notes)


def test_agg_replicas_noted():
    dep = Deployment("meta-llama/Llama-3.1-70B-Instruct", tp=4, replicas=2, num_gpus=8)
    plan = launch_commands(dep, "vllm")
    assert len(plan.commands) == 1 and any("2 copies" in n for n in plan.notes)


def test_vllm_multinode_data_parallel():
    dep = dsr1_adp(attention_dp=16, ep=16, max_batch=1024, num_gpus=16)
    cmd = launch_commands(dep, "vllm").commands[0]
    assert value(cmd, "--data-parallel-size") == "16" and value(cmd, "--data-parallel-size-local") == "8"
    assert value(cmd, "--data-parallel-address") == "$HEAD_IP"


@pytest.mark.parametrize("engine", ENGINES)
def test_ngram_per_engine(engine):
    dep = llama_tp4()
    dep.spec_method, dep.spec_k = "ngram", 4
    plan = launch_commands(dep, engine)
    cmd = plan.commands[0]
    if engine == "vllm":
        assert json.loads(value(cmd, "--speculative-config")) == {"method": "ngram", "num_speculative_tokens": 4}
    elif engine == "sglang":
        assert value(cmd, "--speculative-algorithm") == "NGRAM" and "--speculative-eagle-topk" not in tokens(cmd)
    else:
        spec = yaml.safe_load(plan.files["extra_llm_api_options.yaml"])["speculative_config"]
        assert spec == {"decoding_type": "NGram", "max_draft_len": 4}
    assert any("unverified" in n for n in plan.notes)


# --- every generated line parses with the engine's own parser ---------------------------------
#
# The engines' real argument parsers are used where the engine is importable: vLLM's `vllm serve`
# parser (vllm.entrypoints.common.cli_args.make_arg_parser) and `vllm bench serve` parser, SGLang's
# ServerArgs.add_cli_args (sglang.srt.server_args), TRT-LLM's click command (tensorrt_llm.commands.serve).
# .ci/run installs the vLLM 0.34.0 and SGLang 0.5.23 wheels without their CUDA dependencies (CPU torch,
# triton and the few pure-Python modules the parser modules import) in a separate virtualenv and runs
# these tests with SIMFRONT_REQUIRE_ENGINE_PARSERS=1, so there a parser that does not import fails
# instead of skipping. TRT-LLM is not installable there (CUDA-only wheel on pypi.nvidia.com, several
# GB): its test skips and its lines are checked against simfront/engines/trtllm.yaml only. Whatever
# the environment, every flag must be one the engine's table (simfront/engines/<engine>.yaml) spells.

import importlib  # noqa: E402
import importlib.metadata  # noqa: E402
import os  # noqa: E402

# .ci/run sets it in the engine-parser virtualenv: an engine parser that is missing or does not import fails
REQUIRE_PARSERS = os.environ.get("SIMFRONT_REQUIRE_ENGINE_PARSERS") == "1"


def _engine_module(dist: str, module: str, absent: str, in_ci: bool = True):
    """The engine's parser module, or an honest skip: not installed, or installed but not importable."""
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        msg = f"{dist} not installed ({absent})"
        pytest.fail(msg) if REQUIRE_PARSERS and in_ci else pytest.skip(msg)
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # installed without a dependency its parser module imports
        msg = f"{dist} {version} is installed but {module} does not import: {exc}"
        pytest.fail(msg) if REQUIRE_PARSERS else pytest.skip(msg)


@pytest.fixture
def vllm_cpu_platform(monkeypatch):
    """vLLM resolves its platform while building the parser (vllm/config/device.py); with no GPU it has to be
    told to use its CPU platform (vllm/platforms/__init__.py, cpu_platform_plugin). A GPU machine keeps its own."""
    if os.environ.get("VLLM_TARGET_DEVICE") is None:
        try:
            import torch

            if not torch.cuda.is_available():
                monkeypatch.setenv("VLLM_TARGET_DEVICE", "cpu")
        except ImportError:
            pass


VLLM_ABSENT = "needs torch; .ci/run installs the wheel without CUDA in its engine-parser virtualenv"
SGLANG_ABSENT = VLLM_ABSENT
TRTLLM_ABSENT = ("CUDA-only wheel on pypi.nvidia.com, several GB, not installed in CI; "
                 "its lines are checked against simfront/engines/trtllm.yaml")

from simfront.launch import engine_spelling, engine_table, launchable  # noqa: E402

R1, L70, L8 = "deepseek-ai/DeepSeek-R1", "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"


def _r1(**kw):
    return dsr1_adp(**{"num_gpus": None, **kw})


VARIED = {
    "r1-dpa8-ep8": _r1(),
    "r1-dpa8-ep8-mtp2": _r1(spec_method="mtp", spec_k=2),
    "r1-dpa8-ep8-two-batch-overlap": _r1(two_batch_overlap=True),
    "r1-tp8-ep8": _r1(tp=8, attention_dp=1, max_batch=256),
    "r1-tp8-moe-tp": _r1(tp=8, attention_dp=1, ep=1, max_batch=256),
    "r1-tp2-dpa4-ep8": _r1(tp=2, attention_dp=4),
    "r1-tp8-dpa2-ep8-16gpu": _r1(tp=8, attention_dp=2, ep=8),
    "r1-dpa16-ep16-2node": _r1(attention_dp=16, ep=16, max_batch=1024),
    "r1-nvfp4-tp4-ep4": _r1(tp=4, attention_dp=1, ep=4, weight_precision="nvfp4", max_batch=128),
    "l70-tp4-fp8kv": llama_tp4(),
    "l70-tp4-length-range": Deployment(L70, tp=4, max_batch=64, kv_dtype="fp8", random_range_ratio=0.8),
    "l70-tp2-pp2": Deployment(L70, tp=2, pp=2, max_batch=64, kv_dtype="fp8"),
    "l70-tp8-online-fp8": Deployment(L70, tp=8, weight_precision="fp8", max_batch=256),
    "l8-eagle3": Deployment(L8, spec_method="eagle3", spec_k=3, draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
    "l8-ngram": Deployment(L8, spec_method="ngram", spec_k=4, max_batch=32),
    "l70-nvfp4-tp4": Deployment(L70, tp=4, weight_precision="nvfp4", kv_dtype="fp8", max_batch=128),
    "l405-tp8-pp2-2node": Deployment("meta-llama/Llama-3.1-405B-Instruct", tp=8, pp=2, weight_precision="fp8",
                                     max_batch=128),
    "r1-tp8-pp2-mtp-2node": _r1(tp=8, attention_dp=1, ep=1, pp=2, spec_method="mtp", spec_k=2, max_batch=64),
    "r1-disagg-1p1d": disagg_1p1d(),
    "r1-disagg-multinode": Deployment(R1, mode="disagg", kv_dtype="fp8", weight_precision="fp8_block",
                                      prefill=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=16, workers=2,
                                                           max_num_tokens=32768),
                                      decode=WorkerLayout(tp=1, attention_dp=16, ep=16, max_batch=1024,
                                                          max_num_tokens=4096),
                                      isl=8192, osl=1024, concurrency=512),
    "r1-disagg-b200-fp8": Deployment(R1, mode="disagg", kv_dtype="fp8", weight_precision="fp8_block", gpu="b200_sxm",
                                     prefill=WorkerLayout(tp=8, ep=8, max_batch=16, max_num_tokens=16384),
                                     decode=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=256, max_num_tokens=2048),
                                     isl=8192, osl=1024, concurrency=256),
    "r1-disagg-mtp": Deployment(R1, mode="disagg", kv_dtype="fp8", weight_precision="fp8_block",
                                spec_method="mtp", spec_k=3,
                                prefill=WorkerLayout(tp=8, ep=8, max_batch=8, max_num_tokens=16384),
                                decode=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=256, max_num_tokens=2048),
                                isl=4096, osl=1024, concurrency=128),
    "l70-disagg-2p1d": Deployment(L70, mode="disagg", prefill=WorkerLayout(tp=2, workers=2, max_batch=4),
                                  decode=WorkerLayout(tp=4, max_batch=128), isl=8192, osl=512, concurrency=64),
    "qwen3-235b-tp4-ep4-fp8": Deployment("Qwen/Qwen3-235B-A22B", tp=4, ep=4, weight_precision="fp8_block",
                                         kv_dtype="fp8", max_batch=128),
    "gpt-oss-120b-mxfp4-tp2": Deployment("openai/gpt-oss-120b", tp=2, weight_precision="mxfp4", max_batch=128),
    "gpt-oss-120b-mxfp4-b200-dpa4-ep4": Deployment("openai/gpt-oss-120b", attention_dp=4, ep=4, weight_precision="mxfp4",
                                                   max_batch=256, gpu="b200_sxm"),
    "gpt-oss-120b-mxfp4-h100-tp8-ep8": Deployment("openai/gpt-oss-120b", tp=8, ep=8, weight_precision="mxfp4", max_batch=128,
                                                  gpu="h100_sxm"),
    # SGLang's DeepEP runner per expert format (--moe-runner-backend deep_gemm / flashinfer_cutedsl) and its
    # low-latency buffer (SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK, --deepep-mode normal)
    "qwen3-30b-bf16-dpa8-ep8": Deployment("Qwen/Qwen3-30B-A3B", attention_dp=8, ep=8, weight_precision="bf16",
                                          max_batch=512, gpu="h100_sxm"),
    "r1-nvfp4-disagg-b200": Deployment(R1, mode="disagg", kv_dtype="fp8", weight_precision="nvfp4", gpu="b200_sxm",
                                       prefill=WorkerLayout(tp=1, attention_dp=4, ep=4, max_batch=16, max_num_tokens=16384),
                                       decode=WorkerLayout(tp=1, attention_dp=8, ep=8, max_batch=2048, max_num_tokens=2048),
                                       isl=8192, osl=1024, concurrency=1024),
    "r1-dpa8-ep8-mtp2-4096": _r1(spec_method="mtp", spec_k=2, max_batch=4096),
    # an AMD GPU: vLLM's MoRI all-to-all and ROCm AITER kernels (VLLM_ROCM_USE_AITER=1), SGLang's standard dispatcher
    "r1-mi355x-dpa8-ep8": _r1(gpu="mi355x", max_batch=256),
}
# The layouts an engine cannot start, and why (launchable() says so; launch_commands refuses them).
NOT_LAUNCHABLE = {("vllm", "r1-tp8-dpa2-ep8-16gpu"): "ep must be 1 or 16",
                  ("trtllm", "r1-tp2-dpa4-ep8"): "use tp=1, attention_dp=8",
                  ("trtllm", "r1-tp8-dpa2-ep8-16gpu"): "use tp=1, attention_dp=16",
                  ("trtllm", "r1-tp8-pp2-mtp-2node"): "PP2 with speculative decoding",
                  ("trtllm", "r1-mi355x-dpa8-ep8"): "NVIDIA GPUs only"}
PLACEHOLDERS = {"$HEAD_IP": "10.0.0.1", "$NODE_RANK": "0"}


def _server_argv(cmd: str, engine: str) -> list[str]:
    """The argument words after the entry point, env assignments dropped, $placeholders filled."""
    words = [w for w in tokens(cmd) if not (w.split("=", 1)[0].isupper() and "=" in w and not w.startswith("-"))]
    words = [next((w.replace(k, v) for k, v in PLACEHOLDERS.items() if k in w), w) for w in words]
    entry = engine_spelling(engine).server
    assert tuple(words[:len(entry)]) == entry, words[:4]
    return words[len(entry):]


def _plans(engine):
    for name, dep in VARIED.items():
        ok, reason = launchable(dep, engine)
        if (engine, name) in NOT_LAUNCHABLE:
            assert not ok and NOT_LAUNCHABLE[engine, name] in reason
            with pytest.raises(SimfrontError):
                launch_commands(dep, engine)
            continue
        assert ok, (name, reason)
        yield name, launch_commands(dep, engine)


def test_varied_deployments_cover_the_brief():
    deps = list(VARIED.values())
    assert len(deps) >= 20
    assert {d.mode for d in deps} == {"agg", "disagg"}
    assert {d.spec_method for d in deps} >= {None, "mtp", "eagle3", "ngram"}
    assert {d.weight_precision for d in deps} >= {"fp8", "nvfp4", "bf16", "mxfp4"}
    assert any(d.pp > 1 for d in deps) and any(d.attention_dp > 1 for d in deps) and any(d.ep > 1 for d in deps)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_flag_is_in_the_engine_table(engine):
    spelled = set(engine_spelling(engine).flags.values())
    for name, plan in _plans(engine):
        for cmd, role in zip(plan.commands, plan.roles):
            if role == "router":
                continue
            unknown = {w for w in _server_argv(cmd, engine) if w.startswith("--")} - spelled
            assert not unknown, (name, unknown)


def test_launchable_on_frontier_points():
    agg = {"mode": "agg", "tp": 8, "pp": 1, "ep": 8, "attention_dp": 2}
    assert launchable(agg, "sglang") == (True, "")
    assert not launchable(agg, "vllm")[0] and not launchable(agg, "trtllm")[0]
    dis = {"mode": "disagg", "tp": 1, "pp": 1, "ep": 8, "attention_dp": 8,
           "prefill_tp": 1, "prefill_ep": 2, "prefill_attention_dp": 8}
    ok, why = launchable(dis, "vllm")
    assert not ok and why.startswith("prefill:")
    with pytest.raises(SimfrontError, match="tp, ep and attention_dp"):
        launchable({"mode": "agg"}, "vllm")


def test_trtllm_eagle3_decoding_type_per_release():
    dep = VARIED["l8-eagle3"]
    new = yaml.safe_load(launch_commands(dep, "trtllm").files["extra_llm_api_options.yaml"])
    old = yaml.safe_load(launch_commands(dep, "trtllm", "1.0.0").files["extra_llm_api_options.yaml"])
    assert new["speculative_config"]["decoding_type"] == "Eagle3"
    assert old["speculative_config"]["decoding_type"] == "Eagle"
    assert engine_table("trtllm")["versions"][0]["since"] == "1.1.0"


def test_sglang_lines_parse_with_sglang_server_args():
    server_args = _engine_module("sglang", "sglang.srt.server_args", SGLANG_ABSENT)
    import argparse

    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    n = 0
    for name, plan in _plans("sglang"):
        for cmd, role in zip(plan.commands, plan.roles):
            if role == "router":
                continue
            args = parser.parse_args(_server_argv(cmd, "sglang"))  # exits on an unknown/ambiguous flag
            dep = VARIED[name]
            lay = dep.roles()[role]
            assert args.tp_size == lay.tp * lay.attention_dp and args.attn_dp_size == lay.attention_dp, name
            assert args.ep_size == lay.ep and args.pp_size == lay.pp
            n += 1
    assert n >= 20


def test_sglang_pipelined_draft_lines_parse_and_pass_sglang_pipeline_checks(monkeypatch):
    """SGLang's own pipeline-parallel check (arg_groups/validation_hook.check_pipeline_parallel_compat) takes the
    pipelined MTP line simfront writes (with SGLANG_ENABLE_PP_SPEC=1) and refuses it with attention DP, as
    simfront.engine_rules says. Two resolutions SGLang makes later at start-up (from the model config) are applied
    by hand: PP turns the overlap scheduler off (overrides._pipeline_parallel_overlap_disable) and NEXTN is EAGLE."""
    _engine_module("sglang", "sglang.srt.server_args", SGLANG_ABSENT)
    from sglang.srt.arg_groups.overrides import resolving_view
    from sglang.srt.arg_groups.validation_hook import check_pipeline_parallel_compat
    from sglang.srt.server_args import prepare_server_args

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    plan = launch_commands(VARIED["r1-tp8-pp2-mtp-2node"], "sglang")
    words = tokens(plan.commands[0])
    env = dict(w.split("=", 1) for w in words if "=" in w and w.split("=", 1)[0].isupper() and not w.startswith("-"))
    assert env.get("SGLANG_ENABLE_PP_SPEC") == "1"
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    argv = _server_argv(plan.commands[0], "sglang")

    def check(extra):
        args = prepare_server_args(argv + extra)
        args.disable_overlap_schedule = True
        args.speculative_algorithm = "EAGLE"
        check_pipeline_parallel_compat(resolving_view(args))

    check([])  # the line simfront writes starts
    assert not launchable({"mode": "agg", "tp": 8, "pp": 2, "ep": 8, "attention_dp": 2, "spec": "mtp-k2@AL2.27"}, "sglang")[0]
    with pytest.raises(AssertionError, match="attention DP"):
        check(["--attn-dp-size", "2"])  # and SGLang refuses what simfront refuses


def test_vllm_pipelined_mtp_lines_parse_for_a_drafter_vllm_runs_on_stages(vllm_cpu_platform):
    """The vLLM release the lines are checked against gives DeepSeek's MTP drafter the pipeline interface (#46994), so
    simfront's vLLM rules let drafts run on pipeline stages there (the `before` bound of no_pp_with_drafts is older)."""
    mtp = _engine_module("vllm", "vllm.model_executor.models.deepseek_mtp", VLLM_ABSENT)
    from vllm.model_executor.models.interfaces import supports_pp

    from simfront.engine_rules import layout_rules

    checked = engine_spelling("vllm").checked
    assert importlib.metadata.version("vllm") == checked
    assert supports_pp(mtp.DeepSeekMTP)
    assert "no_pp_with_drafts" not in layout_rules("vllm", checked)
    assert launchable(VARIED["r1-tp8-pp2-mtp-2node"], "vllm", checked) == (True, "")


def test_vllm_lines_parse_with_vllm_serve_parser(vllm_cpu_platform):
    cli_args = _engine_module("vllm", "vllm.entrypoints.common.cli_args", VLLM_ABSENT)
    from typing import get_args

    from vllm.config.speculative import SpeculativeMethod
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = cli_args.make_arg_parser(FlexibleArgumentParser())
    n = 0
    for name, plan in _plans("vllm"):
        for cmd, role in zip(plan.commands, plan.roles):
            if role == "router":
                continue
            args = parser.parse_args(_server_argv(cmd, "vllm"))
            lay = VARIED[name].roles()[role]
            assert (args.tensor_parallel_size, args.data_parallel_size) == (lay.tp, lay.attention_dp), name
            assert args.enable_expert_parallel == (lay.ep > 1)
            if args.speculative_config:
                assert args.speculative_config["method"] in get_args(SpeculativeMethod)
            if args.quantization_config is not None:  # MXFP8 activations for MXFP4 experts, as vLLM resolves the argument
                from vllm.config.quantization import QUANT_KEY_NAMES, resolve_quantization_config

                q = resolve_quantization_config(args.quantization, args.quantization_config)
                assert q.moe.activation == QUANT_KEY_NAMES["mxfp8"], name
            if args.nnodes > 1:  # vLLM's own check: the nodes divide the world evenly (vllm/engine/arg_utils.py)
                assert (lay.tp * lay.pp * lay.attention_dp) % args.nnodes == 0 and args.node_rank < args.nnodes, name
            if role != "prefill":  # the whole decode step is captured (vllm/config/vllm.py, vllm/config/compilation.py)
                q = 1 + (args.speculative_config or {}).get("num_speculative_tokens", 0)
                if args.max_cudagraph_capture_size is None:  # 0.34.0+: decode graphs keyed by request counts
                    cc = args.compilation_config
                    cc = cc if isinstance(cc, dict) else cc.model_dump() if hasattr(cc, "model_dump") else vars(cc)
                    assert cc["max_decode_cudagraph_capture_requests"] == args.max_num_seqs, name
                    assert args.max_num_seqs * q <= max(8192, cc.get("max_decode_cudagraph_capture_tokens") or 0), name
                else:  # up to 0.33.x: one capture size in tokens, on vLLM's capture grid
                    size = args.max_cudagraph_capture_size
                    assert args.max_num_seqs * q <= size or size == args.max_num_batched_tokens, name
                    assert size in [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, size + 1, 16)), (name, size)
            n += 1
    assert n >= 20


def test_benchmark_lines_parse_with_the_clients(vllm_cpu_platform):
    serve = _engine_module("vllm", "vllm.benchmarks.serve", VLLM_ABSENT)
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    for dep in VARIED.values():
        words = tokens(benchmark_command(dep, "vllm"))
        assert tuple(words[:3]) == engine_spelling("vllm").bench
        args = parser.parse_args(words[3:])
        assert args.max_concurrency == dep.concurrency and all("=" in m for m in args.metadata)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_predict_launch_never_errors_on_a_point_the_search_offered(engine):
    """--launch picks a point the engine can start (the knee when it can, else the nearest launchable one)."""
    from simfront import api

    res = api.predict("deepseek-r1", "16xH200", isl=1024, osl=1024)
    target, why = api.launch_target(res, engine)
    assert target is not None
    assert launchable(target, engine)[0]
    out = api.launch_for(target, "deepseek-r1", "16xH200", engine, 1024, 1024)
    assert out["commands"]
    if why:
        assert engine in why and "instead" in why


def test_launch_says_when_the_benchmark_cannot_reproduce_the_prefix_hits_priced():
    from simfront import api

    res = api.predict("llama-3.1-8b", "1xH100", modes=["agg"], prefix_hit=0.5)
    hit = api.launch_for(res.knee, "llama-3.1-8b", "1xH100", "vllm", 1024, 1024, prefix_hit=0.5)
    assert any("50% of each prompt cached" in n for n in hit["notes"])
    assert not any("prefix-cache" in n for n in api.launch_for(res.knee, "llama-3.1-8b", "1xH100", "vllm", 1024, 1024)["notes"])


def test_launch_says_when_the_point_was_priced_with_another_engine_profile():
    from simfront import api

    res = api.predict("llama-3.1-8b", "1xH100", modes=["agg"], engine="sglang")
    other = api.launch_for(res.knee, "llama-3.1-8b", "1xH100", "vllm", 1024, 1024, priced_engine="sglang")
    assert any("priced with the sglang profile" in n and "--engine vllm" in n for n in other["notes"])
    avg = api.launch_for(res.knee, "llama-3.1-8b", "1xH100", "vllm", 1024, 1024, priced_engine="default")
    assert any("all-engine average profile" in n for n in avg["notes"])
    same = api.launch_for(res.knee, "llama-3.1-8b", "1xH100", "sglang", 1024, 1024, priced_engine="sglang")
    assert not any("priced with" in n for n in same["notes"])


def test_engine_version_reaches_the_printed_launch_lines():
    """--engine-version spells the flags of that release; without it, the newest release in the tables."""
    from simfront import api

    res = api.predict("llama-3.1-8b", "1xH100", modes=["agg"])
    old = api.launch_for(res.knee, "llama-3.1-8b", "1xH100", "sglang", 1024, 1024, engine_version="0.4.9")
    new = api.launch_for(res.knee, "llama-3.1-8b", "1xH100", "sglang", 1024, 1024)
    assert old["commands"][0].startswith("python -m sglang.launch_server") and old["engine_version"] == "0.4.9"
    assert new["commands"][0].startswith("sglang serve")


def test_trtllm_lines_parse_with_trtllm_serve():
    """trtllm-serve's click command (tensorrt_llm/commands/serve.py) and LlmArgs field names for the YAML."""
    serve = _engine_module("tensorrt-llm", "tensorrt_llm.commands.serve", TRTLLM_ABSENT, in_ci=False)
    from tensorrt_llm.llmapi.llm_args import KvCacheConfig, MoeConfig, TorchLlmArgs

    n = 0
    for name, plan in _plans("trtllm"):
        for cmd, role in zip(plan.commands, plan.roles):
            if role == "router":
                continue
            argv = _server_argv(cmd, "trtllm")
            ctx = serve.serve.make_context("trtllm-serve", argv)  # raises click.UsageError on a bad flag
            lay = VARIED[name].roles()[role]
            assert ctx.params["tp_size"] == lay.tp * lay.attention_dp, name
            cfg = yaml.safe_load(plan.files[value(cmd, "--extra_llm_api_options")])
            assert set(cfg) <= set(TorchLlmArgs.model_fields), (name, set(cfg) - set(TorchLlmArgs.model_fields))
            assert set(cfg["kv_cache_config"]) <= set(KvCacheConfig.model_fields)
            if "moe_config" in cfg:  # a backend the release's MoeConfig names
                assert MoeConfig(**cfg["moe_config"]).backend == cfg["moe_config"]["backend"], name
            n += 1
    assert n >= 20


def test_attention_dp_ep_workers_ask_for_the_all_to_all_simfront_prices():
    """A DPA + EP worker is priced with DeepEP's all-to-all (step.py ep.dispatch / ep.combine), so its launch line asks
    for it: vLLM --all2all-backend, SGLang --moe-a2a-backend, TensorRT-LLM TRTLLM_CAN_USE_DEEP_EP=1 (HGX); plain TP
    or EP lines do not, and on an NVL72 domain TensorRT-LLM picks MNNVL itself."""
    from simfront.launch import Deployment, launch_commands

    dpa = Deployment("deepseek-r1", tp=1, attention_dp=8, ep=8, weight_precision="fp8_block", kv_dtype="fp8", gpu="b200_sxm")
    tp_ep = Deployment("deepseek-r1", tp=8, ep=8, weight_precision="fp8_block", kv_dtype="fp8", gpu="b200_sxm")
    assert "--all2all-backend deepep_low_latency" in launch_commands(dpa, "vllm").commands[0]
    assert "--moe-a2a-backend deepep" in launch_commands(dpa, "sglang").commands[0]
    assert launch_commands(dpa, "trtllm").commands[0].startswith("TRTLLM_CAN_USE_DEEP_EP=1 ")
    for eng in ("vllm", "sglang", "trtllm"):
        line = launch_commands(tp_ep, eng).commands[0]
        assert "deepep" not in line.lower() and "DEEP_EP" not in line
    nvl = Deployment("deepseek-r1", tp=1, attention_dp=8, ep=8, weight_precision="fp8_block", kv_dtype="fp8", gpu="gb200")
    assert "DEEP_EP" not in launch_commands(nvl, "trtllm").commands[0]
    disagg = Deployment("deepseek-r1", mode="disagg", weight_precision="fp8_block", kv_dtype="fp8", gpu="b200_sxm",
                        prefill=WorkerLayout(attention_dp=8, ep=8), decode=WorkerLayout(attention_dp=8, ep=8))
    lines = launch_commands(disagg, "vllm").commands
    assert any("deepep_high_throughput" in l for l in lines) and any("deepep_low_latency" in l for l in lines)


def test_vllm_lines_on_amd_gpus_run_the_kernels_and_all_to_all_simfront_prices():
    """On MI300X / MI355X simfront prices ROCm AITER's MLA and fused-MoE kernels (hardware/kernels.yaml), which vLLM runs
    only with VLLM_ROCM_USE_AITER=1 (default off; from 0.9.0), and the dispatch / combine all-to-all, which vLLM serves
    there with MoRI (--all2all-backend mori, from 0.15.0; its DeepEP backends need a ROCm DeepEP build). NVIDIA GPUs
    keep DeepEP and no ROCm variable; a release before MoRI asks for DeepEP and says what the image then needs."""
    def plan(gpu, version=None, **kw):
        base = dict(tp=1, attention_dp=8, ep=8, max_batch=256, weight_precision="fp8_block", kv_dtype="fp8", gpu=gpu)
        base.update(kw)
        return launch_commands(Deployment("deepseek-r1", **base), "vllm", engine_version=version)

    for gpu in ("mi355x", "mi300x"):
        p = plan(gpu)
        assert tokens(p.commands[0])[0] == "VLLM_ROCM_USE_AITER=1"
        assert value(p.commands[0], "--all2all-backend") == "mori"
        assert any("MoRI's all-to-all" in n for n in p.notes) and any("AITER" in n for n in p.notes)
    old = plan("mi300x", "0.14.0")  # no MoRI backend yet
    assert value(old.commands[0], "--all2all-backend") == "deepep_low_latency"
    assert any("ROCm DeepEP build" in n for n in old.notes)
    assert "VLLM_ROCM_USE_AITER" not in plan("mi300x", "0.8.5").commands[0]  # the variable arrived in 0.9.0
    tp_only = plan("mi300x", tp=8, attention_dp=1, ep=1)
    assert tp_only.commands[0].startswith("VLLM_ROCM_USE_AITER=1 ") and "--all2all-backend" not in tp_only.commands[0]
    nvidia = plan("b200_sxm")
    assert "VLLM_ROCM_USE_AITER" not in nvidia.commands[0]
    assert value(nvidia.commands[0], "--all2all-backend") == "deepep_low_latency"
    disagg = Deployment("deepseek-r1", mode="disagg", weight_precision="fp8_block", kv_dtype="fp8", gpu="mi355x",
                        prefill=WorkerLayout(attention_dp=8, ep=8), decode=WorkerLayout(attention_dp=8, ep=8))
    assert all(value(c, "--all2all-backend") == "mori" for c in launch_commands(disagg, "vllm").commands[:2])
    # SGLang runs AITER's fused MoE there only with SGLANG_USE_AITER=1 (from the 0.5.5 entry on), and (0.5.23) the
    # attention-DP + EP traffic through MoRI, whose buffer (4,096 tokens a rank sends per step by default) is raised
    # for a prefill chunk of 65,536 / 8 = 8,192 tokens per rank
    sg = Deployment("deepseek-r1", tp=8, weight_precision="fp8_block", kv_dtype="fp8", gpu="mi300x", max_batch=64)
    assert launch_commands(sg, "sglang").commands[0].startswith("SGLANG_USE_AITER=1 ")
    assert "SGLANG_USE_AITER" not in launch_commands(replace(sg, gpu="h100_sxm"), "sglang").commands[0]
    # SGLang's aiter MLA backend takes 16 or 128 KV heads per --tp-size rank: DeepSeek's 128 heads over TP 4 run Triton's
    assert not any("Triton's MLA" in n for n in launch_commands(sg, "sglang").notes)
    assert any("Triton's MLA" in n and "32 (128 over 4)" in n for n in launch_commands(replace(sg, tp=4), "sglang").notes)
    sg_dis = launch_commands(replace(disagg, prefill=WorkerLayout(attention_dp=8, ep=8, max_num_tokens=65536)), "sglang")
    prefill, decode = sg_dis.commands[:2]
    assert value(prefill, "--moe-a2a-backend") == "mori" and value(decode, "--moe-a2a-backend") == "mori"
    assert tokens(prefill)[0] == "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK=8192"
    assert "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK" not in decode and "--moe-runner-backend" not in decode


def test_engines_refuse_gpus_they_are_not_built_for():
    """TensorRT-LLM runs on NVIDIA GPUs only: predict, explain and --launch refuse it on an AMD GPU with one line naming
    the engines that run there; plan keeps the AMD GPU types as infeasible rows that say why."""
    from simfront import api

    with pytest.raises(SimfrontError, match=r"--engine trtllm runs on NVIDIA GPUs only.*mi355x.*vllm, sglang"):
        api.predict("deepseek-r1", "8xMI355X", engine="trtllm")
    with pytest.raises(SimfrontError, match="NVIDIA GPUs only"):
        api.explain("deepseek-r1", "8xMI300X", tp=8, ctx=1024, engine="trtllm")
    with pytest.raises(SimfrontError, match="NVIDIA GPUs only"):
        api.memory("deepseek-r1", "8xMI300X", engine="trtllm")
    dep = Deployment("deepseek-r1", tp=8, weight_precision="fp8_block", gpu="mi300x")
    ok, why = launchable(dep, "trtllm")
    assert not ok and "NVIDIA GPUs only" in why
    with pytest.raises(SimfrontError, match="NVIDIA GPUs only"):
        launch_commands(dep, "trtllm")
    assert launchable(dep, "vllm")[0] and launchable(dep, "sglang")[0]
    res = api.plan("deepseek-r1", 2.0, engine="trtllm", hardware=["b200_sxm", "mi355x"])
    amd = next(r for r in res["rows"] if r["gpu"] == "mi355x")
    assert not amd["feasible"] and "NVIDIA GPUs only" in amd["reason"]
    assert next(r for r in res["rows"] if r["gpu"] == "b200_sxm")["feasible"]


def test_engine_tables_name_known_vendors_and_platforms():
    """Each engine table's ``vendors`` are vendors of the hardware catalog, and the ROCm platform lists of the vLLM
    table (MoRI's all-to-all, the AITER kernels) are gfx targets of catalog GPUs."""
    from simfront.hardware import catalog
    from simfront.inputs import engine_vendors

    vendors = {hw.vendor for hw in catalog().values()}
    gfx = {hw.gfx_target for hw in catalog().values() if hw.gfx_target}
    for eng in ENGINES:
        assert set(engine_vendors(eng)) <= vendors and engine_vendors(eng), eng
    for eng in ("vllm", "sglang"):
        values = engine_spelling(eng).values
        assert set(values["moe_a2a_by_platform"]["values"]) <= gfx
        assert set(values["rocm_kernels_platforms"]) <= gfx


def test_sglang_deepep_table_names_known_formats_roles_and_gpus():
    """The ``deepep`` rule of simfront/engines/sglang.yaml speaks simfront's own vocabulary: expert formats the
    precision module knows (or fp16), the roles a worker can have, compute capabilities of catalog GPUs, and a runner
    value for every format (a name, ``auto``, or one per role)."""
    from simfront.hardware import catalog
    from simfront.precision import normalize_format

    rule = engine_spelling("sglang").values["deepep"]
    for fmt, runner in rule["runner"].items():
        assert normalize_format(fmt) == fmt, fmt
        runners = runner.values() if isinstance(runner, dict) else [runner]
        if isinstance(runner, dict):
            assert set(runner) <= {"server", "prefill", "decode"}, runner
        assert all(isinstance(r, str) and r for r in runners), fmt
    caps = {str(hw.compute_capability) for hw in catalog().values()}
    assert set(rule["compute_capabilities"]) <= caps
    assert rule["ll_tokens_default"] <= rule["ll_tokens_max"]
    assert set(rule.get("ep_equals_tp", ())) | set(rule.get("low_latency_only", ())) <= {
        r for v in rule["runner"].values() for r in (v.values() if isinstance(v, dict) else [v])}


def test_sglang_asks_for_deepep_only_where_its_deepep_moe_layer_runs_the_experts():
    """SGLang 0.5.23's DeepEP MoE layer (layers/moe/ep_moe/layer.py) runs FP8 experts on DeepGEMM (its own pick under
    DeepEP), BF16 experts only with an explicit deep_gemm runner, NVFP4 experts only with flashinfer_cutedsl on
    low-latency dispatch (a decode worker), and asserts for every other runner; DeepGEMM needs sm 90 / 100. So each
    line asks for DeepEP with the runner that takes it, or keeps the standard dispatcher and says why; a decode step
    past DeepEP's low-latency buffer (128 tokens per rank by default, 1024 at most) raises the buffer or runs the normal
    kernels."""
    def line(**kw):
        base = dict(tp=1, attention_dp=8, ep=8, max_batch=256, kv_dtype="fp8")
        base.update(kw)
        model = base.pop("model", "deepseek-r1")
        return launch_commands(Deployment(model, **base), "sglang")

    fp8 = line(weight_precision="fp8_block", gpu="h100_sxm").commands[0]
    assert value(fp8, "--moe-a2a-backend") == "deepep" and "--moe-runner-backend" not in fp8
    bf16 = line(model="qwen3-30b-a3b", weight_precision="bf16", gpu="h100_sxm").commands[0]
    assert value(bf16, "--moe-a2a-backend") == "deepep" and value(bf16, "--moe-runner-backend") == "deep_gemm"
    for kw in (dict(model="qwen3-30b-a3b", weight_precision="bf16", gpu="a100_sxm"),  # no DeepGEMM on sm 80
               dict(weight_precision="nvfp4", gpu="b200_sxm")):  # an aggregated worker prefills: no CuteDSL path
        plan = line(**kw)
        assert "--moe-a2a-backend" not in plan.commands[0], kw
        assert any("standard dispatcher" in n and "all-gather" in n for n in plan.notes), kw
    disagg = launch_commands(Deployment("deepseek-r1", mode="disagg", weight_precision="nvfp4", kv_dtype="fp8",
                                        gpu="b200_sxm", prefill=WorkerLayout(attention_dp=4, ep=4),
                                        decode=WorkerLayout(attention_dp=8, ep=8, max_batch=256)), "sglang")
    prefill, decode = disagg.commands[:2]
    assert "--moe-a2a-backend" not in prefill
    assert value(decode, "--moe-a2a-backend") == "deepep" and value(decode, "--moe-runner-backend") == "flashinfer_cutedsl"
    # the low-latency buffer: 32 tokens per rank fit the default, 256 raise it, 1536 (MTP k=2) run the normal kernels
    assert "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK" not in fp8
    big = line(weight_precision="fp8_block", gpu="b200_sxm", max_batch=2048).commands[0]
    assert big.startswith("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=256 ") and "--deepep-mode" not in big
    mtp = line(weight_precision="fp8_block", gpu="b200_sxm", max_batch=4096, spec_method="mtp", spec_k=2)
    assert value(mtp.commands[0], "--deepep-mode") == "normal" and any("no CUDA graphs" in n for n in mtp.notes)
    assert "--deepep-mode" not in line(weight_precision="fp8_block", gpu="b200_sxm", max_batch=2048,
                                       spec_method="mtp", spec_k=2).commands[0]  # 768 tokens: the buffer, raised


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("tp", [4, 8])
def test_launched_memory_fraction_gives_the_priced_kv_pool(engine, tp):
    """Each engine gets its own fraction, the one that gives each GPU the KV pool simfront priced; the sidecar records
    it, and read back by the engine's rule it is that pool (DeepSeek-R1 FP8 at TP4 on B200: weights alone are more
    than SGLang's 0.82 recipe value of the GPU, so a fixed fraction would not even load)."""
    from simfront.hardware import get_hardware
    from simfront.memory import kv_budget_bytes, runtime_reserve_bytes, weight_bytes_per_gpu
    from simfront.models import apply_precision, get_model
    from simfront.scheduler import scheduler_settings

    dep = Deployment("deepseek-ai/DeepSeek-R1", tp=tp, ep=tp, max_batch=32, kv_dtype="fp8", weight_precision="fp8_block",
                     gpu="b200_sxm", isl=8192, osl=1024, concurrency=32)
    rec = yaml.safe_load(sidecar_yaml(dep, engine))
    m, hw = get_model("deepseek-r1"), get_hardware("b200_sxm")
    prec = apply_precision(m, "fp8_block", "fp8")
    w, r = float(weight_bytes_per_gpu(m, prec, tp, 1, 1, tp)), float(runtime_reserve_bytes(m, tp, 1, 1, tp))
    priced = float(kv_budget_bytes(hw.hbm_bytes, w, r))
    got = float(kv_budget_bytes(hw.hbm_bytes, w, r, rec["gpu_memory_fraction"], scheduler_settings(engine).kv_memory_rule))
    assert got == pytest.approx(priced, rel=0.01) and got <= priced  # rounded down to the engine's three decimals
    if engine == "sglang" and tp == 4:
        assert rec["gpu_memory_fraction"] > 0.82
    words = " ".join(launch_commands(dep, engine).commands) + json.dumps(launch_commands(dep, engine).files)
    assert str(rec["gpu_memory_fraction"]) in words


def test_sglang_drafts_on_pipeline_stages_ask_for_its_pipelined_drafter():
    plan = launch_commands(VARIED["r1-tp8-pp2-mtp-2node"], "sglang")
    assert tokens(plan.commands[0])[0] == "SGLANG_ENABLE_PP_SPEC=1"
    assert any("SGLANG_ENABLE_PP_SPEC=1" in n and "last stage" in n for n in plan.notes)
    assert "SGLANG_ENABLE_PP_SPEC" not in launch_commands(_r1(tp=8, attention_dp=1, ep=1, pp=2, max_batch=64), "sglang").commands[0]
    with pytest.raises(SimfrontError, match="only with NEXTN, EAGLE, not EAGLE3"):
        launch_commands(Deployment("meta-llama/Llama-3.1-70B-Instruct", tp=4, pp=2, spec_method="eagle3", spec_k=3,
                                   draft_model="yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"), "sglang")

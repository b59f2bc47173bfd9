"""Regenerate tests/data/ingest/captured/: result files written by the real benchmark clients.

Each client is run against tests/stub_server.py (an OpenAI-compatible streaming stub with deterministic
token timing) with a small byte-level BPE tokenizer trained here (no Hugging Face hub access needed). The
commands are simfront's own `benchmark_command` lines (base URL and tokenizer added) where simfront prints
one (vLLM `bench serve`, SGLang `bench_serving`, AIPerf), so the metadata they record round-trips; GuideLLM
and genai-bench have no simfront command and get a sidecar (`<result>.simfront.yaml`, `sidecar_yaml`).
The SGLang stub answers /server_info with the arguments SGLang's own ServerArgs parser reads from simfront's
`sglang serve` line for the same deployment (what a real server reports).

Every client lives in its own virtualenv (their pins conflict); give the executables of those you have:

    .venv-ci/engines/bin/python scripts/make_client_fixtures.py \\
        --vllm .venv-ci/engines/bin/vllm --sglang-python .venv-ci/engines/bin/python \\
        --aiperf VENV/bin/aiperf --guidellm VENV/bin/guidellm --genai-bench VENV/bin/genai-bench

(.ci/run engine-parsers builds .venv-ci/engines: vLLM 0.34.0, SGLang 0.5.23, CPU torch, aiohttp, tokenizers; the
clients' entry points import a few more: `pip install uvicorn watchfiles datasets torchvision sentencepiece
compressed-tensors gguf` there. AIPerf, GuideLLM and genai-bench: `pip install aiperf==0.13.0` etc., one
virtualenv each.)
The script runs with a Python that has simfront, aiohttp and tokenizers. Clients not given are left as they
are. Timings are the stub's, not an engine's: these files test readers, never the cost model.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront.launch import Deployment, benchmark_command, launch_commands, sidecar_yaml  # noqa: E402

TOKENIZER_DIR = "stub-tokenizer"  # relative to the run directory, so no machine path lands in a result file
SHAREGPT = "sharegpt-stub.json"  # SGLang's `random` dataset samples ShareGPT text; a local file in its format
BPE_VOCAB = 4096  # upper bound on the trained vocabulary: 256 bytes + merges (the stub's words need ~1400)
WORD_REPEATS = 8  # times each stub output word appears in the training text (so its merges outrank English)


def _load_stub():
    """tests/stub_server.py as a module: its output words are what the tokenizer must keep whole."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("stub_server", ROOT / "tests" / "stub_server.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


STUB = _load_stub()
OUTPUT_WORDS = [STUB.output_word(i) for i in range(STUB.OUTPUT_VOCAB)]  # " waa" .. " wzz"


def build_sharegpt(path: Path, n: int = 200, words: int = 120) -> None:
    """Conversations of the stub's output words in ShareGPT's layout (two turns each), deterministic: each
    word is one token, so a prompt cut at a token boundary re-tokenizes to the same length."""
    k = len(OUTPUT_WORDS)
    convs = [{"id": str(i), "conversations": [
        {"from": "human", "value": "".join(OUTPUT_WORDS[(i * 7919 + j * 31) % k] for j in range(words)).lstrip()},
        {"from": "gpt", "value": "".join(OUTPUT_WORDS[(i * 104729 + j * 17) % k] for j in range(words)).lstrip()}]}
        for i in range(n)]
    path.write_text(json.dumps(convs))


def build_tokenizer(directory: Path) -> None:
    """A byte-level BPE tokenizer (GPT-2's byte alphabet, so any text encodes and decodes back) trained on this
    script's own text and the stub's output words, saved as a directory transformers' AutoTokenizer loads.
    Each output word is one token (checked), with or without its leading space."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<s>", "</s>"]
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    words = "".join(OUTPUT_WORDS)
    corpus = [Path(__file__).read_text()] + [words, words.lstrip() + "\n", *(w.lstrip() for w in OUTPUT_WORDS)] * WORD_REPEATS
    tok.train_from_iterator(corpus, trainer=trainer)
    whole = [w for w in OUTPUT_WORDS for form in (w, w.lstrip()) if len(tok.encode(form).ids) != 1]
    if whole:
        raise RuntimeError(f"stub words not one token each: {whole[:5]} (raise BPE_VOCAB or WORD_REPEATS)")
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>",
        "model_max_length": 8192, "clean_up_tokenization_spaces": False, "add_prefix_space": False,
        "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}"}, indent=1))
    (directory / "special_tokens_map.json").write_text(json.dumps(
        {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}))
    (directory / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": tok.get_vocab_size(),
                                                       "max_position_embeddings": 8192}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StubServer:
    def __init__(self, workdir: Path, python: str, server_info: dict | None = None, model: str = "stub-model"):
        self.port = free_port()
        args = [python, str(ROOT / "tests" / "stub_server.py"), "--port", str(self.port), "--model", model,
                "--tokenizer", TOKENIZER_DIR]
        if server_info is not None:
            (workdir / "server_info.json").write_text(json.dumps(server_info, default=str))
            args += ["--server-info", "server_info.json"]
        self.proc = subprocess.Popen(args, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        if "listening" not in line:
            self.proc.kill()
            raise RuntimeError(f"stub server did not start: {line}{self.proc.stdout.read()}")
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: int = 600) -> None:
    print("$", shlex.join(cmd), flush=True)
    res = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if res.returncode:
        raise RuntimeError(f"{cmd[0]} exited {res.returncode}:\n{res.stdout[-4000:]}")


def tool_version(python_or_exe: str, dist: str) -> str:
    exe = Path(python_or_exe)
    python = exe if exe.name.startswith("python") else exe.parent / "python"
    out = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def scrub(out: Path, replace: dict[str, str]) -> None:
    """Machine paths the clients record (their run directory, their executable) become placeholders."""
    for f in out.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".jsonl", ".yaml", ".csv"):
            text = f.read_text()
            new = text
            for old, placeholder in replace.items():
                new = new.replace(old, placeholder)
            if new != text:
                f.write_text(new)


def public(cmd: list[str], url: str) -> str:
    """The command as recorded in the README: the stub's port as $STUB."""
    return shlex.join(cmd).replace(url, "$STUB")


# --- the deployments each fixture records ------------------------------------------------------------

def llama8b_vllm() -> Deployment:
    return Deployment("meta-llama/Llama-3.1-8B-Instruct", tp=1, max_batch=64, num_gpus=1, isl=64, osl=16,
                      concurrency=4, gpu="h100_sxm")


def dsr1_attn_dp8() -> Deployment:
    return Deployment("deepseek-ai/DeepSeek-R1", tp=1, ep=8, attention_dp=8, max_batch=256, max_num_tokens=8192,
                      kv_dtype="fp8", weight_precision="fp8_block", num_gpus=8, isl=64, osl=16, concurrency=8,
                      gpu="h200_sxm")


def llama70b_trtllm() -> Deployment:
    return Deployment("meta-llama/Llama-3.1-70B-Instruct", tp=4, max_batch=64, max_num_tokens=4096, kv_dtype="fp8",
                      weight_precision="fp8", num_gpus=4, isl=64, osl=16, concurrency=4, gpu="h100_sxm")


def qwen3_32b_sglang() -> Deployment:
    return Deployment("Qwen/Qwen3-32B", tp=2, max_batch=64, num_gpus=2, isl=64, osl=16, concurrency=4,
                      gpu="h200_sxm")


# --- clients -----------------------------------------------------------------------------------------

def vllm_bench(exe: str, work: Path, out: Path, stub_python: str) -> dict:
    dep, name = llama8b_vllm(), "vllm_bench_serve_llama8b_tp1.json"
    with StubServer(work, stub_python) as stub:
        cmd = shlex.split(benchmark_command(dep, "vllm", name, base_url=stub.url))
        cmd[0] = exe
        cmd += ["--tokenizer", TOKENIZER_DIR]
        run(cmd, work, env={"VLLM_TARGET_DEVICE": "cpu"})
    shutil.copy(work / name, out / name)
    return {"file": name, "tool": "vllm bench serve", "version": tool_version(exe, "vllm"),
            "command": public(cmd, stub.url), "layout": "agg TP1, engine vllm (--metadata)"}


def sglang_server_info(dep: Deployment, python: str) -> dict:
    """What an SGLang server started with simfront's launch line reports: its ServerArgs, parsed by SGLang."""
    [cmd] = launch_commands(dep, "sglang").commands
    argv = shlex.split(cmd)[2:]  # after `sglang serve`
    code = ("import argparse, json, sys\nfrom sglang.srt.server_args import ServerArgs\n"
            "p = argparse.ArgumentParser(); ServerArgs.add_cli_args(p)\n"
            "print(json.dumps(vars(p.parse_args(sys.argv[1:])), default=str))")
    res = subprocess.run([python, "-c", code, *argv], capture_output=True, text=True, check=True)
    info = json.loads(res.stdout.strip().splitlines()[-1])
    info["version"] = tool_version(python, "sglang")
    return info


def sglang_bench(python: str, work: Path, out: Path, stub_python: str) -> list[dict]:
    rows = []
    for dep, name in ((dsr1_attn_dp8(), "sglang_bench_serving_dsr1_attn_dp8.jsonl"),
                      (qwen3_32b_sglang(), "sglang_bench_serving_qwen3_32b_tp2.jsonl")):
        info = sglang_server_info(dep, python)
        with StubServer(work, stub_python, server_info=info) as stub:
            cmd = shlex.split(benchmark_command(dep, "sglang", name, base_url=stub.url))
            cmd[0] = python
            cmd += ["--tokenizer", TOKENIZER_DIR, "--dataset-path", SHAREGPT]
            run(cmd, work)
        shutil.copy(work / name, out / name)
        (out / f"{name}.simfront.yaml").write_text(sidecar_yaml(dep, "sglang"))  # the client records no GPU
        rows.append({"file": name, "tool": "sglang bench_serving", "version": tool_version(python, "sglang"),
                     "command": public(cmd, stub.url),
                     "layout": f"server_info (SGLang's ServerArgs parser of simfront's launch line: TP{dep.tp} "
                               f"attention-DP{dep.attention_dp} EP{dep.ep}) + {name}.simfront.yaml (gpu, precision)"})
    return rows


def aiperf(exe: str, work: Path, out: Path, stub_python: str) -> dict:
    dep, name = llama70b_trtllm(), "aiperf_llama70b_trtllm_tp4"
    with StubServer(work, stub_python) as stub:
        cmd = shlex.split(benchmark_command(dep, "aiperf", name, engine="trtllm", base_url=stub.url))
        cmd[0] = exe
        cmd += ["--tokenizer", TOKENIZER_DIR, "--ui-type", "none"]
        run(cmd, work)
    dest = out / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    for f in sorted((work / name).rglob("*")):  # the small summary exports; per-request records and logs stay out
        if f.is_file() and f.name.startswith("profile_export_aiperf") and f.suffix in (".json", ".csv"):
            shutil.copy(f, dest / f.name)
    (out / f"{name}.simfront.yaml").write_text(sidecar_yaml(dep, "trtllm"))
    return {"file": name + "/", "tool": "aiperf profile", "version": tool_version(exe, "aiperf"),
            "command": public(cmd, stub.url), "layout": f"{name}.simfront.yaml (sidecar_yaml, engine trtllm)"}


def guidellm(exe: str, work: Path, out: Path, stub_python: str) -> dict:
    dep = qwen3_32b_sglang()
    name = "guidellm_qwen3_32b_tp2"
    with StubServer(work, stub_python) as stub:
        cmd = [exe, "run", "--backend", f"kind=openai_http,target={stub.url},model={dep.model_id}",
               "--profile", f"kind=concurrent,streams={dep.concurrency}",
               "--constraint", f"kind=max_requests,count={10 * dep.concurrency}",
               "--tokenizer", f"kind=huggingface_auto,model={TOKENIZER_DIR}",
               "--data", f"kind=synthetic_text,prompt_tokens={dep.isl},output_tokens={dep.osl}",
               "--metrics", "kind=generative,sample_size=4",  # full data (prompt, output) of 4 requests: small files
               "--output", f"kind=json,path={name}/benchmarks.json", "--output", f"kind=yaml,path={name}/benchmarks.yaml",
               "--disable-console-interactive"]
        run(cmd, work)
    for f in sorted((work / name).iterdir()):
        if f.suffix in (".json", ".yaml"):
            dest = out / f"{name}_{f.name}"
            shutil.copy(f, dest)
            (out / f"{dest.name}.simfront.yaml").write_text(sidecar_yaml(dep, "sglang"))
    return {"file": f"{name}_*.json / .yaml", "tool": "guidellm run", "version": tool_version(exe, "guidellm"),
            "command": public(cmd, stub.url), "layout": "sidecars (sidecar_yaml, engine sglang)"}


def genai_bench(exe: str, work: Path, out: Path, stub_python: str) -> dict:
    dep = llama8b_vllm()
    name = "genai_bench_llama8b_tp1"
    with StubServer(work, stub_python) as stub:
        cmd = [exe, "benchmark", "--api-backend", "openai", "--api-base", stub.url, "--api-key", "stub",
               "--api-model-name", dep.model_id, "--model", dep.model_id, "--model-tokenizer", TOKENIZER_DIR, "--task", "text-to-text",
               "--traffic-scenario", f"D({dep.isl},{dep.osl})", "--num-concurrency", str(dep.concurrency),
               "--max-requests-per-run", str(10 * dep.concurrency), "--max-time-per-run", "1",
               "--server-engine", "vLLM", "--server-gpu-type", "H100", "--server-gpu-count", str(dep.num_gpus),
               "--experiment-base-dir", "genai", "--experiment-folder-name", name]
        run(cmd, work)
    dest = out / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    for f in sorted((work / "genai" / name).rglob("*.json")):
        shutil.copy(f, dest / f.name)
    (out / f"{name}.simfront.yaml").write_text(sidecar_yaml(dep, "vllm"))
    return {"file": name + "/", "tool": "genai-bench benchmark", "version": tool_version(exe, "genai-bench"),
            "command": public(cmd, stub.url), "layout": f"{name}.simfront.yaml (sidecar_yaml, engine vllm)"}


README_HEAD = """# Result files written by the real benchmark clients

Regenerated by `scripts/make_client_fixtures.py` (read it for the setup). Each client ran against
`tests/stub_server.py`, an OpenAI-compatible streaming stub with deterministic token timing (TTFT 20 ms +
0.05 ms per prompt token, 4 ms between tokens, requests independent), with a byte-level BPE tokenizer trained
by the script (`stub-tokenizer`: GPT-2's byte alphabet, merges learnt from the script's own text and the stub's
output words, each of which is one token). Absolute paths the clients record are replaced: their temporary run
directory by `$RUN`, the directory of their executable by nothing. The timings are the stub's: these files test
simfront's readers and the metadata round trip (`tests/test_ingest_captured.py`), never the cost model. `$STUB`
is the stub's URL.

Any text encodes and decodes back with this tokenizer, so every client's prompts are real text of the asked
length: GuideLLM's synthetic prompts (cut from English text) record 64 prompt tokens per request, as counted by
the stub. Prompt lengths the clients re-count may differ from the nominal 64 by a token on some requests (vLLM's
random prompts are random token ids decoded and re-encoded; genai-bench records the stub's count). GuideLLM keeps
the full data (prompt, output) of 4 requests (`--metrics kind=generative,sample_size=4`) to keep its files small.

| file | client | version | layout recorded by | command |
|---|---|---|---|---|
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "tests" / "data" / "ingest" / "captured"))
    p.add_argument("--stub-python", default=sys.executable, help="Python with aiohttp and tokenizers for the stub")
    p.add_argument("--vllm", help="the `vllm` executable (vLLM's bench serve client)")
    p.add_argument("--sglang-python", help="a Python with sglang installed (python -m sglang.benchmark.serving)")
    p.add_argument("--aiperf", help="the `aiperf` executable")
    p.add_argument("--guidellm", help="the `guidellm` executable")
    p.add_argument("--genai-bench", help="the `genai-bench` executable")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.json"
    rows = {r["file"]: r for r in (json.loads(index.read_text()) if index.exists() else [])}
    failed = []
    with tempfile.TemporaryDirectory(prefix="simfront-clients-") as tmp:
        work = Path(tmp)
        build_tokenizer(work / TOKENIZER_DIR)
        build_sharegpt(work / SHAREGPT)
        jobs = [(a.vllm, vllm_bench), (a.sglang_python, sglang_bench), (a.aiperf, aiperf), (a.guidellm, guidellm),
                (a.genai_bench, genai_bench)]
        for exe, job in jobs:
            if not exe:
                continue
            try:
                got = job(str(Path(exe).absolute()) if os.sep in exe else exe, work, out, a.stub_python)
            except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
                failed.append(f"{job.__name__}: {exc}")
                continue
            for r in got if isinstance(got, list) else [got]:
                r["command"] = r["command"].replace(str(Path(exe).absolute()), Path(exe).name)
                rows[r["file"]] = r
        scrub(out, {str(work): "$RUN", **{str(Path(exe).absolute().parent) + os.sep: "" for exe, _ in jobs if exe}})
    index.write_text(json.dumps(sorted(rows.values(), key=lambda r: r["file"]), indent=1) + "\n")
    table = "".join(f"| `{r['file']}` | {r['tool']} | {r['version']} | {r['layout']} | `{r['command']}` |\n"
                    for r in sorted(rows.values(), key=lambda r: r["file"]))
    (out / "README.md").write_text(README_HEAD + table)
    for f in failed:
        print("failed:", f, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

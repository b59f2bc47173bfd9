"""A tiny OpenAI-compatible streaming server with deterministic token timing, for running the real benchmark
clients (vLLM `bench serve`, SGLang `bench_serving`, AIPerf, GuideLLM, genai-bench) without a GPU.

Endpoints: POST /v1/completions, /v1/chat/completions (SSE streaming with a final usage chunk, or one JSON
response), POST /generate (SGLang's native API: cumulative text and meta_info), GET /v1/models, /health,
/health_generate, /server_info and /get_server_info (the JSON given with --server-info, else 404), /metrics
(empty Prometheus text).

Every request gets exactly max_tokens output tokens (the clients ask for ignore_eos), the first after
TTFT = --ttft-base-ms + prompt tokens x --prefill-ms-per-token, the next every --itl-ms. Requests do not
slow each other down: this server measures the clients' bookkeeping, not an engine. Output words are
`output_word(i)` (" w" and two letters), one token each in the byte-level BPE tokenizer that
scripts/make_client_fixtures.py trains on them.

    python tests/stub_server.py --port 8000 --tokenizer DIR [--server-info server_info.json]

prints "listening on http://HOST:PORT" once it accepts connections. Needs aiohttp (and the `tokenizers`
package when --tokenizer is given: prompt tokens are counted with it, else by whitespace).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path

from aiohttp import web

OUTPUT_VOCAB = 26 * 26  # output words cycle over " waa" .. " wzz", each one token of the fixture tokenizer


def output_word(i: int) -> str:
    """The i-th output token's text: a space and a letters-only word (the byte-level pre-tokenizer keeps
    letters together, so the trained BPE has each as one token)."""
    i %= OUTPUT_VOCAB
    return " w" + chr(ord("a") + i // 26) + chr(ord("a") + i % 26)


class Stub:
    def __init__(self, args):
        self.ttft_base_s = args.ttft_base_ms / 1e3  # fixed part of the time to first token
        self.prefill_s_per_token = args.prefill_ms_per_token / 1e3  # prompt-length part of it
        self.itl_s = args.itl_ms / 1e3  # time between output tokens
        self.model = args.model
        self.max_model_len = args.max_model_len
        self.server_info = json.loads(Path(args.server_info).read_text()) if args.server_info else None
        self.tokenizer = None
        if args.tokenizer:
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_file(str(Path(args.tokenizer) / "tokenizer.json"))

    # --- token bookkeeping -------------------------------------------------------------------------

    def count(self, prompt) -> int:
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            return len(prompt)  # token ids
        if isinstance(prompt, list):
            return sum(self.count(p) for p in prompt)
        text = str(prompt)
        if self.tokenizer is not None:
            return len(self.tokenizer.encode(text, add_special_tokens=False).ids)
        return len(text.split())

    def chat_prompt(self, messages) -> str:
        parts = []
        for m in messages or []:
            content = m.get("content")
            if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
                content = " ".join(c.get("text", "") for c in content if isinstance(c, dict))
            parts.append(str(content or ""))
        return " ".join(parts)

    @staticmethod
    def word(i: int) -> str:
        return output_word(i)

    async def tokens(self, n_prompt: int, n_out: int):
        """Yield output token indices at the stub's deterministic times."""
        start = time.perf_counter()
        for i in range(n_out):
            due = start + self.ttft_base_s + n_prompt * self.prefill_s_per_token + i * self.itl_s
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            yield i

    # --- handlers ------------------------------------------------------------------------------------

    @staticmethod
    async def sse(request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        return resp

    @staticmethod
    async def send(resp, obj) -> None:
        data = obj if isinstance(obj, str) else json.dumps(obj)
        await resp.write(f"data: {data}\n\n".encode())

    def usage(self, n_prompt, n_out) -> dict:
        return {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out}

    @staticmethod
    def out_len(body: dict) -> int:
        for key in ("max_completion_tokens", "max_tokens"):
            if body.get(key) is not None:
                return int(body[key])
        return 16

    async def completions(self, request):
        body = await request.json()
        return await self._openai(request, body, self.count(body.get("prompt", "")), chat=False)

    async def chat(self, request):
        body = await request.json()
        return await self._openai(request, body, self.count(self.chat_prompt(body.get("messages"))), chat=True)

    async def _openai(self, request, body, n_prompt, chat):
        n_out = self.out_len(body)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        obj = "chat.completion" if chat else "text_completion"
        model = body.get("model") or self.model
        created = int(time.time())
        if not body.get("stream"):
            text = ""
            async for i in self.tokens(n_prompt, n_out):
                text += self.word(i)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"})
            return web.json_response({"id": rid, "object": obj, "created": created, "model": model,
                                      "choices": [choice], "usage": self.usage(n_prompt, n_out)})
        resp = await self.sse(request)
        chunk_obj = obj + ".chunk" if chat else obj
        if chat:
            await self.send(resp, {"id": rid, "object": chunk_obj, "created": created, "model": model,
                                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                "finish_reason": None}]})
        async for i in self.tokens(n_prompt, n_out):
            last = i == n_out - 1
            finish = "length" if last else None
            choice = ({"index": 0, "delta": {"content": self.word(i)}, "finish_reason": finish} if chat
                      else {"index": 0, "text": self.word(i), "logprobs": None, "finish_reason": finish})
            chunk = {"id": rid, "object": chunk_obj, "created": created, "model": model, "choices": [choice]}
            if (body.get("stream_options") or {}).get("continuous_usage_stats"):  # vLLM: usage in every chunk
                chunk["usage"] = self.usage(n_prompt, i + 1)
            await self.send(resp, chunk)
        if (body.get("stream_options") or {}).get("include_usage", True):
            await self.send(resp, {"id": rid, "object": chunk_obj, "created": created, "model": model,
                                   "choices": [], "usage": self.usage(n_prompt, n_out)})
        await self.send(resp, "[DONE]")
        await resp.write_eof()
        return resp

    async def generate(self, request):
        """SGLang's native /generate: each streamed chunk carries the whole text so far and meta_info."""
        body = await request.json()
        prompt = body.get("input_ids") if body.get("input_ids") is not None else body.get("text", "")
        n_prompt = self.count(prompt)
        n_out = int((body.get("sampling_params") or {}).get("max_new_tokens") or 16)
        rid = uuid.uuid4().hex

        def record(text, n, done):
            return {"text": text, "meta_info": {"id": rid, "prompt_tokens": n_prompt, "completion_tokens": n,
                                                "cached_tokens": 0,
                                                "finish_reason": {"type": "length", "length": n} if done else None}}

        if not body.get("stream"):
            text = ""
            async for i in self.tokens(n_prompt, n_out):
                text += self.word(i)
            return web.json_response(record(text, n_out, True))
        resp = await self.sse(request)
        text = ""
        async for i in self.tokens(n_prompt, n_out):
            text += self.word(i)
            await self.send(resp, record(text, i + 1, i == n_out - 1))
        await self.send(resp, "[DONE]")
        await resp.write_eof()
        return resp

    async def models(self, request):
        return web.json_response({"object": "list", "data": [
            {"id": self.model, "object": "model", "created": 0, "owned_by": "simfront-stub", "root": self.model,
             "max_model_len": self.max_model_len}]})

    async def health(self, request):
        return web.Response(text="")

    async def info(self, request):
        if self.server_info is None:
            raise web.HTTPNotFound()
        return web.json_response(self.server_info)

    async def metrics(self, request):
        return web.Response(text="", content_type="text/plain")


def app_for(args) -> web.Application:
    stub = Stub(args)
    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_post("/v1/completions", stub.completions)
    app.router.add_post("/v1/chat/completions", stub.chat)
    app.router.add_post("/generate", stub.generate)
    app.router.add_get("/v1/models", stub.models)
    for path in ("/health", "/health_generate", "/v1/health", "/ping"):
        app.router.add_get(path, stub.health)
    app.router.add_get("/server_info", stub.info)
    app.router.add_get("/get_server_info", stub.info)
    app.router.add_get("/metrics", stub.metrics)
    return app


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", default="stub-model", help="model id /v1/models reports")
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--tokenizer", help="directory with tokenizer.json: prompt tokens are counted with it")
    p.add_argument("--server-info", help="JSON file served at /server_info and /get_server_info")
    p.add_argument("--ttft-base-ms", type=float, default=20.0)
    p.add_argument("--prefill-ms-per-token", type=float, default=0.05)
    p.add_argument("--itl-ms", type=float, default=4.0)
    return p.parse_args(argv)


async def _serve(args):
    runner = web.AppRunner(app_for(args), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    print(f"listening on http://{args.host}:{args.port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_serve(parse_args()))

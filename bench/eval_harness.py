"""How fast is the eval harness itself? 2,000 single-turn rollouts against a stub server.

The stub (an aiohttp.web app answering every chat request with a fixed short reply, no model)
runs in its own process on 127.0.0.1, so the numbers are the harness's: rollouts/s and the client
process's CPU ms per rollout (everything: HTTP, JSON, environment, rubric, results.jsonl, progress).

    python bench/eval_harness.py                         # the shipped client (raw aiohttp)
    python bench/eval_harness.py --transport openai-sdk  # openai SDK on its default httpx transport
    python bench/eval_harness.py --transport openai-sdk-aiohttp   # SDK on DefaultAioHttpClient
    python bench/eval_harness.py --latency-ms 200        # a server that takes 200 ms per reply
    python bench/eval_harness.py --profile               # pyinstrument profile of the client side

Goal on a 2-core machine: >= 500 rollouts/s at -c 256 (one server process, one client process).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPLY = {
    "id": "cmpl-bench",
    "object": "chat.completion",
    "model": "stub",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "<reversed_text>olleh</reversed_text>"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 30, "completion_tokens": 8},
}


def serve(port: int, latency_ms: float) -> None:
    """The stub: fixed reply, optional fixed latency; prints PORT when listening."""
    import json

    from aiohttp import web

    body = json.dumps(REPLY).encode()

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        if latency_ms:
            await asyncio.sleep(latency_ms / 1000)
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
        await site.start()
        print(f"PORT {site._server.sockets[0].getsockname()[1]}", flush=True)  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(main())


class SDKClient:
    """The openai SDK as a ModelClient, only to compare transports here."""

    def __init__(self, base_url: str, use_aiohttp: bool):
        from openai import AsyncOpenAI, DefaultAioHttpClient

        kwargs: dict[str, Any] = {"http_client": DefaultAioHttpClient()} if use_aiohttp else {}
        self.client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=3, **kwargs)
        self.model = "stub"
        self.base_url = base_url

    async def chat(self, messages, sampling, tools=None):  # noqa: ANN001, ANN201
        from evalkit.types import Completion, Usage

        response = await self.client.chat.completions.create(model=self.model, messages=messages,
                                                             max_tokens=sampling.max_tokens or 16)
        usage = response.usage
        return Completion(text=response.choices[0].message.content or "",
                          usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage())

    async def aclose(self) -> None:
        await self.client.close()


def run_bench(base_url: str, args: argparse.Namespace) -> tuple[float, float, int]:
    from evalkit.clients.openai_client import OpenAIClient
    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import arun_eval
    from evalkit.registry import load_environment

    r = 4
    n = args.rollouts // r
    env = load_environment("reverse-text", {"num_eval_examples": n})
    with tempfile.TemporaryDirectory() as out:
        config = EvalConfig(env_id="reverse-text", env_args={"num_eval_examples": n}, model="stub", base_url=base_url,
                            num_examples=n, rollouts_per_example=r, max_concurrent=args.concurrency,
                            output_dir=out, sampling={"max_tokens": 16})

        async def go() -> Any:
            if args.transport == "aiohttp":
                client: Any = OpenAIClient("stub", base_url, None)
            else:
                client = SDKClient(base_url, args.transport == "openai-sdk-aiohttp")
            try:
                await client.chat([{"role": "user", "content": "warm up"}], __import__("evalkit.types").types.SamplingArgs())
                cpu0, wall0 = time.process_time(), time.perf_counter()
                result = await arun_eval(config, client=client, env=env)
                return result, time.process_time() - cpu0, time.perf_counter() - wall0
            finally:
                await client.aclose()

        if args.profile:
            from pyinstrument import Profiler

            profiler = Profiler(async_mode="enabled")
            profiler.start()
            result, cpu, wall = asyncio.run(go())
            profiler.stop()
            print(profiler.output_text(unicode=True, color=False, show_all=False))
        else:
            result, cpu, wall = asyncio.run(go())
        return wall, cpu, result.summary["num_errors"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--concurrency", "-c", type=int, default=256)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--transport", choices=["aiohttp", "openai-sdk", "openai-sdk-aiohttp"], default="aiohttp")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.latency_ms)
        return
    server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", "0",
                               "--latency-ms", str(args.latency_ms)], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        if not line.startswith("PORT "):
            raise SystemExit(f"stub server failed to start: {line!r}")
        base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"
        wall, cpu, errors = run_bench(base_url, args)
    finally:
        server.terminate()
        server.wait(timeout=10)
    n = args.rollouts // 4 * 4
    print(f"transport={args.transport} rollouts={n} concurrency={args.concurrency} latency={args.latency_ms:g} ms")
    print(f"  {n / wall:,.0f} rollouts/s  ({wall:.2f} s wall)")
    print(f"  harness CPU {cpu * 1000 / n:.3f} ms per rollout (client process)")
    print(f"  errors: {errors}")


if __name__ == "__main__":
    main()

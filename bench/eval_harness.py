"""How fast is the eval harness itself, beside a raw aiohttp client? Rollouts against a stub server.

The stub (an aiohttp.web app answering every chat request with a fixed short reply, no model) runs in
its own process on 127.0.0.1, so the numbers are the harness's: rollouts/s and the client process's CPU
ms per rollout (everything: HTTP, JSON, environment, rubric, results.jsonl, progress).

    python bench/eval_harness.py                  # the suite, one run: every row below, with ratios
    python bench/eval_harness.py --only native    # one row: raw | native | legacy | v1 | startup
    python bench/eval_harness.py --only native --transport openai-sdk          # SDK on httpx
    python bench/eval_harness.py --only native --transport openai-sdk-aiohttp  # SDK on DefaultAioHttpClient
    python bench/eval_harness.py --only native --latency-ms 200
    python bench/eval_harness.py --only native --profile                       # pyinstrument
    python bench/eval_harness.py --stub protocol  # a cheaper stub server: the client alone is the bottleneck

The suite's rows: the raw client (a bare aiohttp loop: post a request body, read, ``json.loads``; the
ceiling, in-process) and a native environment (built-in reverse-text), each at 0 ms and at 200 ms of
server latency, where the limit is ``concurrency / latency`` ("- raw": CPU ms above the raw client's
at the same latency); a wrapped legacy verifiers environment
(``environments/digit_sums_vf``, single-turn) at 0 ms when verifiers 0.3 is installed; a v1 taskset
(``environments/digit_sums``) at 0 ms when verifiers has v1; start-up: ``prime eval run`` of 10
rollouts as a fresh process, wall clock, native and wrapped. Each rate row is the best of ``--repeat``
runs, interleaved, because the machine is shared and noisy. Every timed run starts with ``concurrency``
connections open (a warm-up request on each): opening 256 connections to the stub takes ~0.3 s here,
as long as the 2,000 rollouts themselves at 0 ms, and a long eval pays it once. The 200 ms row runs
``--slow-rollouts`` (a multiple of the concurrency, so the last wave is full).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPLY = {
    "id": "cmpl-bench",
    "object": "chat.completion",
    "model": "stub",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "<reversed_text>olleh</reversed_text> 7"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 30, "completion_tokens": 8},
}
RAW_MESSAGES = [{"role": "system", "content": "Reverse the given text character by character."},
                {"role": "user", "content": "hello"}]


def serve(port: int, latency_ms: float) -> None:
    """The stub: fixed reply, optional fixed latency; prints PORT when listening."""
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


def serve_protocol(port: int, latency_ms: float) -> None:
    """A cheaper stub: HTTP/1.1 keep-alive on a bare ``asyncio.Protocol``, the same fixed reply (``--stub
    protocol``). The aiohttp stub costs about as much CPU per request as the client, so on two cores it
    shares the bottleneck; this one leaves the client the bottleneck (a stricter ruler)."""
    body = json.dumps(REPLY).encode()
    response = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    class Reply(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport, self.buffer = transport, b""

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
                head = self.buffer[:end].lower()
                at = head.find(b"content-length:")
                size = int(head[at + 15:].split(b"\r\n", 1)[0]) if at >= 0 else 0
                if len(self.buffer) < end + 4 + size:
                    return
                self.buffer = self.buffer[end + 4 + size:]
                if latency_ms:
                    asyncio.get_running_loop().call_later(latency_ms / 1000, self.send)
                else:
                    self.send()

        def send(self) -> None:
            if not self.transport.is_closing():
                self.transport.write(response)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Reply, "127.0.0.1", port, backlog=4096)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Stub:
    """A stub server process with a fixed latency; ``url`` is its OpenAI base URL."""

    kind = "aiohttp"
    """``aiohttp`` (an aiohttp.web app, the default) or ``protocol`` (:func:`serve_protocol`)."""

    def __init__(self, latency_ms: float):
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", "0",
                                      "--latency-ms", str(latency_ms), "--stub", self.kind],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            self.close()
            raise SystemExit(f"stub server failed to start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@dataclass
class Measured:
    """One timed run: rollouts (or requests), wall seconds, client-process CPU seconds, errors."""

    n: int
    wall: float
    cpu: float
    errors: int = 0

    @property
    def rate(self) -> float:
        return self.n / self.wall

    @property
    def cpu_ms(self) -> float:
        return self.cpu * 1000 / self.n


# ----- the raw client ---------------------------------------------------------------------------

async def _raw(url: str, n: int, concurrency: int) -> Measured:
    """n chat requests through one aiohttp session, ``concurrency`` at a time: the harness's ceiling."""
    import aiohttp

    semaphore = asyncio.Semaphore(concurrency)
    body = {"model": "stub", "messages": RAW_MESSAGES, "max_tokens": 16}
    errors = 0

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1024)) as session:
        async def one() -> None:
            nonlocal errors
            async with semaphore:
                async with session.post(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                        headers={"Content-Type": "application/json"}) as response:
                    data = json.loads(await response.read())
                    errors += not data.get("choices")

        await asyncio.gather(*(one() for _ in range(concurrency)))  # warm up: every connection open
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return Measured(n, time.perf_counter() - wall0, time.process_time() - cpu0, errors)


def run_raw(url: str, n: int, concurrency: int) -> Measured:
    return asyncio.run(_raw(url, n, concurrency))


# ----- the harness ------------------------------------------------------------------------------

class SDKClient:
    """The openai SDK as a ModelClient, only to compare transports here."""

    def __init__(self, base_url: str, use_aiohttp: bool):
        from openai import AsyncOpenAI, DefaultAioHttpClient

        kwargs: dict[str, Any] = {"http_client": DefaultAioHttpClient()} if use_aiohttp else {}
        self.client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=3, **kwargs)
        self.model = "stub"
        self.base_url = base_url

    async def chat(self, messages, sampling, tools=None):  # noqa: ANN001, ANN201
        from evalkit.core.types import Completion, Usage

        response = await self.client.chat.completions.create(model=self.model, messages=messages,
                                                             max_tokens=sampling.max_tokens or 16)
        usage = response.usage
        return Completion(text=response.choices[0].message.content or "",
                          usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage())

    async def aclose(self) -> None:
        await self.client.close()


def _client(url: str, transport: str) -> Any:
    if transport == "aiohttp":
        from evalkit.clients.openai_client import OpenAIClient

        return OpenAIClient("stub", url, None)
    return SDKClient(url, transport == "openai-sdk-aiohttp")


def run_harness(url: str, env_id: str, n: int, concurrency: int, transport: str = "aiohttp",
                profile: bool = False) -> Measured:
    """``n`` rollouts (4 per example) of ``env_id`` through :func:`arun_eval`, results.jsonl included."""
    from evalkit.core.types import SamplingArgs
    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import arun_eval
    from evalkit.loading.resolve import load_environment

    r = 4
    examples = n // r
    env_args = _ENV_ARGS[env_id](examples)
    if env_id == KIND_ENV["v1"] and V1_RUNTIME is not None:
        env_args["runtime"] = {"type": V1_RUNTIME}
    env = load_environment(env_id, env_args, environments_dir=ROOT / "environments")
    with tempfile.TemporaryDirectory() as out:
        config = EvalConfig(env_id=env_id, env_args=env_args, model="stub", base_url=url, num_examples=examples,
                            rollouts_per_example=r, max_concurrent=concurrency, output_dir=out,
                            sampling={"max_tokens": 16})

        async def go() -> Measured:
            client = _client(url, transport)
            try:
                warm_up = [{"role": "user", "content": "warm up"}]  # every connection open, as for the raw client
                await asyncio.gather(*(client.chat(warm_up, SamplingArgs()) for _ in range(concurrency)))
                cpu0, wall0 = time.process_time(), time.perf_counter()
                result = await arun_eval(config, client=client, env=env)
                return Measured(len(result.states), time.perf_counter() - wall0, time.process_time() - cpu0,
                                result.summary["num_errors"])
            finally:
                await client.aclose()

        if not profile:
            return asyncio.run(go())
        from pyinstrument import Profiler

        profiler = Profiler(async_mode="enabled")
        profiler.start()
        measured = asyncio.run(go())
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False, show_all=False))
        return measured


_ENV_ARGS: dict[str, Callable[[int], dict[str, Any]]] = {
    "reverse-text": lambda n: {"num_eval_examples": n},
    "digit-sums-vf": lambda n: {"num_examples": n},
    "digit-sums": lambda n: {"num_tasks": n},
}
V1_RUNTIME: str | None = None
"""``--runtime``: the v1 row's ``[env.agent.runtime] type`` (None: not given)."""
KIND_ENV = {"native": "reverse-text", "legacy": "digit-sums-vf", "v1": "digit-sums"}


def available(kind: str) -> str | None:
    """Why a row cannot run here (verifiers missing, or the wrong generation), or None."""
    if kind in ("native", "raw"):
        return None
    from importlib import metadata

    try:
        version = metadata.version("verifiers")
    except metadata.PackageNotFoundError:
        return "verifiers is not installed"
    if kind == "legacy" and not version.startswith("0.3."):
        return f"verifiers {version} has no legacy API"
    return None


def run_startup(url: str, env_id: str) -> float:
    """Wall seconds of ``prime eval run ENV -n 10 -r 1`` as a fresh process (imports, load, 10 rollouts, files)."""
    with tempfile.TemporaryDirectory() as out:
        args = _ENV_ARGS[env_id](10)
        command = [sys.executable, "-m", "primekit_cli", "eval", "run", env_id, "-m", "stub", "-b", url, "-n", "10",
                   "-r", "1", "-c", "32", "-t", "16", "-a", json.dumps(args), "-o", out]
        env = {**os.environ, "OPENAI_API_KEY": "bench"}
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"start-up run of {env_id} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return wall


# ----- the suite --------------------------------------------------------------------------------

def suite(args: argparse.Namespace) -> None:
    """Every row, rates interleaved ``--repeat`` times (best kept), then the table with ratios."""
    n, c = args.rollouts, args.concurrency
    kinds = [k for k in ("native", "legacy", "v1") if k in args.kinds]
    skipped = {k: why for k in kinds if (why := available(k))}
    best: dict[str, Measured] = {}

    def keep(name: str, measured: Measured) -> None:
        if name not in best or measured.rate > best[name].rate:
            best[name] = measured

    stub = Stub(0)
    try:
        for _ in range(args.repeat):
            keep("raw", run_raw(stub.url, n, c))
            for kind in kinds:
                if kind not in skipped:
                    keep(kind, run_harness(stub.url, KIND_ENV[kind], args.v1_rollouts if kind == "v1" else n, c))
        startup = {
            k: run_startup(stub.url, KIND_ENV[k]) for k in ("native", "legacy") if k in kinds and k not in skipped
        }
    finally:
        stub.close()
    slow = Stub(args.slow_ms)
    try:
        for _ in range(args.repeat):
            keep("raw@slow", run_raw(slow.url, args.slow_rollouts, c))
            keep("native@slow", run_harness(slow.url, "reverse-text", args.slow_rollouts, c))
    finally:
        slow.close()
    _print_table(best, startup, skipped, args)


def _print_table(best: dict[str, Measured], startup: dict[str, float], skipped: dict[str, str],
                 args: argparse.Namespace) -> None:
    raw = best["raw"]
    limit = args.concurrency / (args.slow_ms / 1000)
    print(f"eval harness bench: concurrency {args.concurrency}, best of {args.repeat}, {args.stub} stub; "
          f"load {_load()}")
    print(f"{'row':<34}{'n':>6}{'rate/s':>9}{'CPU ms':>8}{'- raw':>8}{'ratio':>7}{'err':>5}")
    rows = [("raw aiohttp client, 0 ms", "raw", raw.rate, "of raw")]
    rows += [("native reverse-text, 0 ms", "native", raw.rate, "of raw"),
             ("legacy digit-sums-vf, 0 ms", "legacy", raw.rate, "of raw"),
             ("v1 digit-sums, 0 ms", "v1", raw.rate, "of raw"),
             (f"raw aiohttp client, {args.slow_ms:g} ms", "raw@slow", limit, f"of {limit:,.0f}/s"),
             (f"native reverse-text, {args.slow_ms:g} ms", "native@slow", limit, f"of {limit:,.0f}/s")]
    for label, key, ceiling, what in rows:
        if key in skipped:
            print(f"{label:<34}  skipped: {skipped[key]}")
        elif key in best:
            m = best[key]
            base = best["raw@slow"] if key.endswith("@slow") else raw
            print(f"{label:<34}{m.n:>6}{m.rate:>9,.0f}{m.cpu_ms:>8.3f}{m.cpu_ms - base.cpu_ms:>8.3f}"
                  f"{m.rate / ceiling:>7.2f}{m.errors:>5}  {what}")
    if "native@slow" in best:
        print(f"native / raw at {args.slow_ms:g} ms: {best['native@slow'].rate / best['raw@slow'].rate:.2f}")
    if "native" in best and "legacy" in best:
        print(f"legacy / native rate at 0 ms: {best['legacy'].rate / best['native'].rate:.2f}")
    for kind, wall in startup.items():
        print(f"start-up, prime eval run of 10 rollouts, {kind}: {wall:.2f} s wall")


def _load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def single(args: argparse.Namespace) -> None:
    """One row (``--only``), as the suite measures it, optionally profiled or on another transport."""
    stub = Stub(args.latency_ms)
    try:
        if args.only == "raw":
            m = run_raw(stub.url, args.rollouts, args.concurrency)
        elif args.only == "startup":
            for kind in ("native", "legacy"):
                if not available(kind):
                    print(f"start-up {kind}: {run_startup(stub.url, KIND_ENV[kind]):.2f} s wall")
            return
        else:
            n = args.v1_rollouts if args.only == "v1" else args.rollouts
            m = run_harness(stub.url, KIND_ENV[args.only], n, args.concurrency, args.transport, args.profile)
    finally:
        stub.close()
    print(f"{args.only} transport={args.transport} n={m.n} concurrency={args.concurrency} "
          f"latency={args.latency_ms:g} ms load {_load()}")
    print(f"  {m.rate:,.0f} rollouts/s  ({m.wall:.2f} s wall), client CPU {m.cpu_ms:.3f} ms each, errors {m.errors}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--v1-rollouts", type=int, default=200, help="rollouts of the v1 row")
    parser.add_argument("--concurrency", "-c", type=int, default=256)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="with --only: the stub's latency")
    parser.add_argument("--slow-ms", type=float, default=200.0, help="the suite's slow-server latency")
    parser.add_argument("--slow-rollouts", type=int, default=4096, help="rollouts of the slow-server row")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--kinds", default="native,legacy,v1", help="the suite's environment rows")
    parser.add_argument("--only", choices=["raw", "native", "legacy", "v1", "startup"])
    parser.add_argument("--transport", choices=["aiohttp", "openai-sdk", "openai-sdk-aiohttp"], default="aiohttp")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--runtime", choices=["subprocess", "sandbox"], default=None,
                        help="the v1 row's runtime, chosen explicitly (default: unset, the local subprocess)")
    parser.add_argument("--stub", choices=["aiohttp", "protocol"], default="aiohttp",
                        help="the stub server: aiohttp.web (default) or a bare asyncio protocol (cheaper)")
    args = parser.parse_args()
    Stub.kind = args.stub
    global V1_RUNTIME
    V1_RUNTIME = args.runtime
    if args.serve is not None and args.stub == "protocol":
        serve_protocol(args.serve, args.latency_ms)
    elif args.serve is not None:
        serve(args.serve, args.latency_ms)
    elif args.only:
        single(args)
    else:
        suite(args)


if __name__ == "__main__":
    main()

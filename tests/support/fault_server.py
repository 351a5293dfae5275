"""An OpenAI-compatible chat server on 127.0.0.1 that injects faults, for the eval engine's tests.

Run as a script (``python tests/support/fault_server.py --faults 429,500 --reply reverse``); it prints
``PORT <n>`` once listening. :class:`FaultServer` starts it as a subprocess, keeps its PID and
stops exactly that process.

Faults are deterministic per conversation: the server counts requests per *prompt text*, and the
k-th request for a prompt gets ``faults[k]`` (then plain success once the list is used up), so a
test knows how many retries each prompt needs no matter how requests interleave. A prompt that
contains ``ALWAYS_FAIL`` always gets HTTP 500; with ``--always FAULT`` every request gets FAULT except
one-token requests (preflights), so a run gets past its preflight and every rollout fails; with
``--fail-every K`` every K-th such request gets ``--fail-with`` (default 503). Fault names: ``429`` (with
``Retry-After``), ``500``, ``503``, ``400``, ``401``, ``timeout`` (sleeps past the client's timeout), ``drop``
(closes the connection without a reply), ``badjson`` (200 with a broken body), ``empty`` (200 with no choices),
``echo401``/``echo500`` (an error whose message repeats the request's headers, as some gateways
do), ``surrogate`` (200 with a reply holding a lone UTF-16 surrogate, an emoji cut in half), ``silent`` (never
answers), ``drip`` (200 and headers at once, then one body byte every ``--drip-interval`` seconds, for about a
minute: only a whole-reply timeout ends it). ``--reply headers`` answers with the request's headers as the
reply's text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from aiohttp import web


async def _drip(request: web.Request, interval_s: float) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        for _ in range(int(60 / interval_s)):
            await response.write(b" ")
            await asyncio.sleep(interval_s)
        await response.write_eof()
    except ConnectionResetError:  # the client gave up, as it should
        pass
    return response


def make_app(
    faults: list[str],
    reply: str,
    latency_s: float,
    retry_after: str,
    timeout_sleep_s: float,
    drip_interval_s: float = 0.1,
    always: str = "",
    fail_every: int = 0,
    fail_with: str = "503",
) -> web.Application:
    counts: dict[str, int] = defaultdict(int)
    served = [0]  # non-preflight chat requests so far
    seen_auth: list[str] = []
    seen_bodies: list[dict] = []
    seen_x_headers: list[dict] = []

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen_auth.append(request.headers.get("Authorization", ""))
        seen_bodies.append(body)
        seen_x_headers.append({k: v for k, v in request.headers.items() if k.lower().startswith("x-")})
        messages = body.get("messages") or []
        prompt = json.dumps(messages[-1].get("content") if messages else "")
        attempt = counts[prompt]
        counts[prompt] += 1
        fault = faults[attempt] if attempt < len(faults) else None
        if "ALWAYS_FAIL" in prompt:
            fault = "500"
        if always and body.get("max_tokens") != 1:
            fault = always
        if fail_every and body.get("max_tokens") != 1:
            served[0] += 1
            if served[0] % fail_every == 0:
                fault = fail_with
        if latency_s:
            await asyncio.sleep(latency_s)
        if fault == "429":
            return web.json_response(
                {"error": {"message": "rate limited"}}, status=429, headers={"Retry-After": retry_after}
            )
        if fault in ("500", "503", "400", "401"):
            return web.json_response({"error": {"message": f"injected {fault}"}}, status=int(fault))
        if fault in ("echo401", "echo500"):
            headers = {name: value for name, value in request.headers.items()}
            message = f"upstream rejected the request; request headers were {headers}"
            return web.json_response({"error": {"message": message, "headers": headers}}, status=int(fault[4:]))
        if fault == "silent":
            await asyncio.sleep(3600)
        if fault == "drip":
            return await _drip(request, drip_interval_s)
        if fault == "timeout":
            await asyncio.sleep(timeout_sleep_s)
        if fault == "drop":
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=200)
        if fault == "badjson":
            return web.Response(text='{"choices": [ {"message": ', content_type="application/json")
        if fault == "empty":
            return web.json_response({"id": "x", "choices": []})
        last = messages[-1].get("content") if messages else ""
        text = {"reverse": str(last)[::-1], "echo": str(last)}.get(reply, reply)
        if reply == "headers":  # a reply that repeats the request's headers (a debugging proxy, a careless gateway)
            text = f"your request headers: {json.dumps(dict(request.headers.items()))}"
        if fault == "surrogate":
            text = "half an emoji: \ud83d, then more"
        choice: dict = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        data: dict = {"id": "cmpl", "object": "chat.completion", "model": body.get("model"), "choices": [choice],
                      "usage": {"prompt_tokens": 7, "completion_tokens": len(text.split()) or 1}}
        if body.get("return_token_ids"):
            data["prompt_token_ids"] = [1, 2, 3]
            choice["token_ids"] = [5, 6]
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -0.25}]}
        return web.json_response(data)

    async def auth_log(request: web.Request) -> web.Response:
        return web.json_response(seen_auth)

    async def body_log(request: web.Request) -> web.Response:
        return web.json_response(seen_bodies)

    async def header_log(request: web.Request) -> web.Response:
        return web.json_response(seen_x_headers)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/auth_log", auth_log)
    app.router.add_get("/body_log", body_log)
    app.router.add_get("/header_log", header_log)
    return app


class ScriptServer:
    """A server script (``SCRIPT``, taking ``--port``) started as a subprocess on a free port; it prints
    ``PORT n`` once listening (see :func:`serve_forever`). ``stop()`` ends that PID only."""

    SCRIPT = Path(__file__).resolve()

    def __init__(self, *args: str):
        self.process = subprocess.Popen(
            [sys.executable, str(self.SCRIPT), "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"{self.SCRIPT.stem} did not start: {line!r}")
        self.port = int(line.split()[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict[str, Any]]:
        """The request bodies the server kept (``GET /requests``; the solver and hash servers keep them)."""
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/requests", timeout=5) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class FaultServer(ScriptServer):
    """This file's fault-injecting server; ``*args`` are its command-line flags (faults, latency, ...)."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--faults", default="")
    parser.add_argument("--reply", default="reverse")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--retry-after", default="0")
    parser.add_argument("--timeout-sleep", type=float, default=3.0)
    parser.add_argument("--drip-interval", type=float, default=0.1)
    parser.add_argument("--always", default="")
    parser.add_argument("--fail-every", type=int, default=0)
    parser.add_argument("--fail-with", default="503")
    args = parser.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    app = make_app(
        faults,
        args.reply,
        args.latency,
        args.retry_after,
        args.timeout_sleep,
        args.drip_interval,
        args.always,
        args.fail_every,
        args.fail_with,
    )

    serve_forever(app, args.port)


def serve_forever(app: web.Application, port: int) -> None:
    """Serve ``app`` on 127.0.0.1 until killed, printing ``PORT n`` first (what the test wrappers read)."""

    async def serve() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"PORT {bound}", flush=True)
        await asyncio.Event().wait()

    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    asyncio.run(serve())


if __name__ == "__main__":
    main()

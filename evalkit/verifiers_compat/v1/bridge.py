"""The model bridge for verifiers v1: a loopback OpenAI-compatible endpoint in front of a primekit ModelClient.

In verifiers v1 the harness program talks to verifiers' interception server, which forwards each model request
to the endpoint in the rollout's ``ModelContext`` with its own ``EvalClient`` (an HTTP relay). The endpoint is
the only seam, so the bridge is one: :class:`ModelBridgeServer` listens on ``127.0.0.1`` (a free port), turns
each ``POST /v1/chat/completions`` into :meth:`ModelClient.chat` and answers in the OpenAI chat-completion
shape (:mod:`evalkit.clients.wire`): a ``chat.completion`` body, or for ``stream: true`` (verifiers 0.4's chat program
always streams) the same reply as SSE chunks, tool-call deltas and the usage chunk included. The client call
is not streamed, so the chunks follow the finished reply; a tool-call reply keeps ``content: null``. It also
keeps every primekit :class:`Completion` it returned, in order, so the rollout's per-turn token ids and
logprobs reach RL exactly as the client reported them.

One bridge serves every rollout of a run on one ModelClient (:meth:`TasksetEnvironment.serving` holds it), so
verifiers' interception server sees one endpoint and keeps one HTTP client for it: a bridge per rollout gave
each rollout a new base URL, and verifiers built a new client (an SSL context: ~25 ms of CPU) for each. A
rollout's requests are told apart by the trace id verifiers' interception sends with every upstream request
(``X-Session-ID``): :meth:`ModelBridgeServer.take` hands an episode the calls its traces made. A failed model
call is answered HTTP 502 with the (already redacted) error text, which verifiers records on the trace as a
provider error. A request's messages leave with every registered secret replaced
(:func:`~evalkit.core.redact.scrub_data`): a command the model ran may have printed one. Requests must carry the
process's bridge token (:func:`bridge_key_var` names the variable verifiers reads it from), so no other local
process can use the model through it; the variable's name contains ``API_KEY``, which verifiers' subprocess
runtime keeps out of harness programs.

Tool descriptions (GEPA's ``tools`` component, ``prime eval run --tools-file``): a v1 taskset's tools are MCP
servers that verifiers' chat program lists itself, so the only place a candidate's descriptions can reach the
model is the request. :meth:`ModelBridgeServer.url_for` hands out a base URL under ``/described/<key>/`` for a
set of descriptions; a request arriving there has the ``description`` of each tool its ``tools`` list names
replaced by the set's text (tools the set does not name keep theirs), so the model sees the candidate's text.
Each set has its own URL because verifiers' interception forwards nothing else of the rollout but its trace id.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from typing import Any

from aiohttp import web

from evalkit.clients.base import ModelClient
from evalkit.clients.wire import SSE_MEDIA_TYPE, completion_body, completion_events, error_body, parse_request
from evalkit.core.errors import ModelCallError
from evalkit.core.redact import scrub_data
from evalkit.core.types import Completion
from evalkit.envs.tool_descriptions import describe

BRIDGE_KEY_VAR = "PRIMEKIT_BRIDGE_API_KEY"
SESSION_HEADER = "X-Session-ID"
_TOKEN = secrets.token_urlsafe(24)


def bridge_key_var() -> str:
    """The environment variable verifiers' client reads the bridge token from (set, and registered as a secret)."""
    if os.environ.get(BRIDGE_KEY_VAR) != _TOKEN:
        os.environ[BRIDGE_KEY_VAR] = _TOKEN
        from evalkit.core.redact import register_secret

        register_secret(_TOKEN)
    return BRIDGE_KEY_VAR


class ModelBridgeServer:
    """``POST /v1/chat/completions`` on 127.0.0.1 answered by a ModelClient (see the module docstring)."""

    def __init__(self, client: ModelClient):
        self.client = client
        self._calls: dict[str | None, list[tuple[int, Completion]]] = {}
        """Per trace id (``X-Session-ID``; None for a request without one), its (arrival number, completion)s."""
        self._answered = 0
        self._described: dict[str, dict[str, str]] = {}
        """Per ``/described/<key>/`` path, the tool descriptions its requests get (:meth:`url_for`)."""
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def start(self) -> ModelBridgeServer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/described/{key}/v1/chat/completions", self._chat)
        # a client that hangs up cancels its handler, and with it the model call it was waiting for
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def url_for(self, descriptions: dict[str, str] | None) -> str:
        """The base URL whose requests get ``descriptions`` (tool name -> text) in their tools; the plain
        :attr:`base_url` when there are none. One URL per distinct set, kept while the bridge runs."""
        if not descriptions:
            return self.base_url
        key = hashlib.sha256(json.dumps(descriptions, sort_keys=True).encode()).hexdigest()[:24]
        self._described.setdefault(key, dict(descriptions))
        return self.base_url.removesuffix("/v1") + f"/described/{key}/v1"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def take(self, trace_ids: set[str | None]) -> list[tuple[str | None, Completion]]:
        """``(trace id, completion)`` of every request the traces ``trace_ids`` made, in arrival order, handed
        over once (the bridge forgets them). Requests without a trace id are filed under None (verifiers' own
        requests always carry one)."""
        taken = [(number, trace_id, completion) for trace_id in trace_ids
                 for number, completion in self._calls.pop(trace_id, [])]
        return [(trace_id, completion) for _, trace_id, completion in sorted(taken, key=lambda call: call[0])]

    async def __aenter__(self) -> ModelBridgeServer:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {_TOKEN}":
            return _error(401, "this loopback endpoint serves one primekit rollout; bad or missing bridge token")
        try:
            chat = parse_request(await request.json())
        except ValueError as exc:  # not JSON, or not a chat request (WireError)
            return _error(400, f"bad chat request: {exc}")
        tools = chat.tools
        key = request.match_info.get("key")
        if key is not None:
            if key not in self._described:
                return _error(404, "no tool descriptions are registered under this bridge path")
            tools = describe(tools, self._described[key]) if tools else tools
        try:
            # a command's output may hold a secret of this process (docs/reliability.md): never sent on
            completion = await self.client.chat(scrub_data(chat.messages), chat.sampling, tools)
        except ModelCallError as exc:
            return _error(502, str(exc))
        self._answered += 1
        self._calls.setdefault(request.headers.get(SESSION_HEADER), []).append((self._answered, completion))
        model = chat.model or self.client.model
        if not chat.stream:
            return web.json_response(completion_body(completion, model))
        response = web.StreamResponse(headers={"Content-Type": SSE_MEDIA_TYPE, "Cache-Control": "no-cache"})
        await response.prepare(request)
        for event in completion_events(completion, model, include_usage=chat.include_usage):
            await response.write(event)
        await response.write_eof()
        return response


def _error(status: int, message: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "upstream_error"
    return web.json_response(error_body(message, kind), status=status)

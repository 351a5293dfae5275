"""The model bridge for verifiers v1: a loopback OpenAI-compatible endpoint in front of a primekit ModelClient.

In verifiers v1 the harness program talks to verifiers' interception server, which forwards each model request
to the endpoint in the rollout's ``ModelContext`` with its own ``EvalClient`` (an HTTP relay). The endpoint is
the only seam, so the bridge is one: :class:`ModelBridgeServer` listens on ``127.0.0.1`` (a free port), turns
each ``POST /v1/chat/completions`` into :meth:`ModelClient.chat` and answers in the OpenAI chat-completion
shape. It also keeps every primekit :class:`Completion` it returned, in order, so the rollout's per-turn token
ids and logprobs reach RL exactly as the client reported them.

One bridge serves one rollout (start, run the episode, close), so requests never mix across rollouts and
nothing outlives the event loop. A failed model call is answered HTTP 502 with the (already redacted) error
text, which verifiers records on the trace as a provider error. Requests must carry the process's bridge
token (:func:`bridge_key_var` names the variable verifiers reads it from), so no other local process can
use the model through it; the variable's name contains ``API_KEY``, which verifiers' subprocess runtime keeps
out of harness programs.
"""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from typing import Any

from aiohttp import web

from evalkit.clients.base import ModelClient
from evalkit.errors import ModelCallError
from evalkit.types import Completion, SamplingArgs

_NOT_SAMPLING = {"model", "messages", "tools", "tool_choice", "stream", "stream_options", "n", "user"}
BRIDGE_KEY_VAR = "PRIMEKIT_BRIDGE_API_KEY"
SESSION_HEADER = "X-Session-ID"
_TOKEN = secrets.token_urlsafe(24)


def bridge_key_var() -> str:
    """The environment variable verifiers' client reads the bridge token from (set, and registered as a secret)."""
    if os.environ.get(BRIDGE_KEY_VAR) != _TOKEN:
        os.environ[BRIDGE_KEY_VAR] = _TOKEN
        from evalkit.redact import register_secret

        register_secret(_TOKEN)
    return BRIDGE_KEY_VAR


class ModelBridgeServer:
    """``POST /v1/chat/completions`` on 127.0.0.1 answered by a ModelClient (see the module docstring)."""

    def __init__(self, client: ModelClient):
        self.client = client
        self.completions: list[Completion] = []
        self.sessions: list[str | None] = []
        """Per completion, the verifiers trace it was made for (``X-Session-ID``: verifiers' interception
        sends the trace id with every upstream request), so a multi-agent episode's turns map to their seats."""
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def start(self) -> "ModelBridgeServer":
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def calls(self) -> list[tuple[str | None, Completion]]:
        """``(trace id, completion)`` per answered request, in order."""
        return list(zip(self.sessions, self.completions))

    async def __aenter__(self) -> "ModelBridgeServer":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _chat(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {_TOKEN}":
            return _error(401, "this loopback endpoint serves one primekit rollout; bad or missing bridge token")
        try:
            body = await request.json()
            messages = body["messages"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            return _error(400, f"bad chat request: {exc}")
        try:
            completion = await self.client.chat(messages, request_sampling(body), body.get("tools") or None)
        except ModelCallError as exc:
            return _error(502, str(exc))
        self.completions.append(completion)
        self.sessions.append(request.headers.get(SESSION_HEADER))
        return web.json_response(completion_body(completion, str(body.get("model") or self.client.model)))


def request_sampling(body: dict[str, Any]) -> SamplingArgs:
    """The sampling keys of a chat request (what verifiers' interception set from the run's sampling)."""
    values = {k: v for k, v in body.items() if k not in _NOT_SAMPLING and v is not None}
    if "logprobs" in values:
        values["logprobs"] = bool(values["logprobs"])
    values.pop("top_logprobs", None)
    return SamplingArgs.from_dict(values)


def completion_body(completion: Completion, model: str) -> dict[str, Any]:
    """An OpenAI chat.completion for ``completion``, with vLLM-style token ids when the client reported them."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if completion.tool_calls:
        message["tool_calls"] = [call.to_message_dict() for call in completion.tool_calls]
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": completion.finish_reason or "stop"}
    usage = completion.usage
    body: dict[str, Any] = {
        "id": f"primekit-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                  "total_tokens": usage.input_tokens + usage.output_tokens},
    }
    if completion.prompt_token_ids is not None and completion.completion_token_ids is not None:
        body["prompt_token_ids"] = list(completion.prompt_token_ids)
        choice["token_ids"] = list(completion.completion_token_ids)
    return body


def _error(status: int, message: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "upstream_error"
    return web.json_response({"error": {"message": message, "type": kind}}, status=status)

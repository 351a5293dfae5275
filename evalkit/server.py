"""The embedded engine behind an OpenAI-compatible HTTP API (what ``prime serve`` runs).

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (non-streaming).
Beyond the OpenAI shape, like vLLM's ``return_token_ids``, every response carries
``prompt_token_ids`` and each choice its ``token_ids``; ``logprobs: true`` returns
``choices[i].logprobs.content[{token, logprob, bytes, top_logprobs: []}]``. vLLM-style extra body
keys ``top_k`` and ``ignore_eos`` are honoured.

A bad request (unknown model, prompt beyond the context window, ``max_tokens`` < 1, malformed
body) is answered 400 with ``{"error": {"message", "type": "invalid_request_error"}}`` and never
disturbs the requests being generated for others.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from evalkit.model.chat_format import parse_tool_calls
from evalkit.model.registry import ALIASES
from evalkit.types import SamplingArgs

if TYPE_CHECKING:
    from evalkit.model.engine import Engine
    from evalkit.model.requests import GenerationResult

MAX_CHOICES = 16


class BadRequest(Exception):
    """Answered as HTTP 400 ``invalid_request_error``."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


def build_app(engine: "Engine", model_name: str | None = None) -> FastAPI:
    """A FastAPI app serving ``engine`` under ``model_name`` (default: the engine's name)."""
    served = model_name or engine.name
    accepted = {served, engine.name} | {alias for alias, target in ALIASES.items() if target in (served, engine.name)}
    app = FastAPI(title="primekit embedded model", docs_url=None, redoc_url=None)
    started = int(time.time())

    @app.exception_handler(BadRequest)
    async def _bad_request(_: Request, exc: BadRequest) -> JSONResponse:
        return _error(400, str(exc), "invalid_request_error", exc.param)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, f"invalid request: {exc.errors()}", "invalid_request_error")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return _error(exc.status_code, str(exc.detail), kind)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": served}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": served, "object": "model", "created": started, "owned_by": "primekit", "max_model_len": engine.context_length}
            ],
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> JSONResponse:
        body = await _json_body(request)
        model = body.get("model", served)
        if model not in accepted:
            raise BadRequest(f"model '{model}' is not served here (serving: {served})", "model")
        if body.get("stream"):
            raise BadRequest("streaming is not supported by prime serve; send stream=false", "stream")
        messages = _messages(body)
        tools = _tools(body)
        n = _choices(body)
        sampling = _sampling(body)
        from evalkit.model.engine import EngineError
        from evalkit.model.requests import InvalidRequest

        try:
            prompt_ids = engine.encode_chat(messages, tools)
            futures = [
                engine.submit(prompt_ids, _nth_seed(sampling, i)) for i in range(n)
            ]
        except InvalidRequest as exc:
            raise BadRequest(str(exc)) from None
        except EngineError as exc:
            return _error(503, str(exc), "server_error")
        except Exception as exc:  # the chat template rejected the messages
            raise BadRequest(f"cannot render these messages: {type(exc).__name__}: {exc}", "messages") from None
        try:
            results = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
        except EngineError as exc:
            return _error(500, str(exc), "server_error")
        return JSONResponse(_response(engine, served, prompt_ids, results, tools_given=bool(tools), logprobs=bool(body.get("logprobs"))))

    return app


def _error(status: int, message: str, kind: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind, "param": param, "code": None}})


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{index}] must be an object with a role", "messages")
        if not isinstance(message.get("content"), (str, list, type(None))):
            raise BadRequest(f"messages[{index}].content must be a string, a list of parts or null", "messages")
    return messages


def _tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if tools is None or body.get("tool_choice") == "none":
        return None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadRequest("tools must be a list of objects", "tools")
    return tools or None


def _choices(body: dict[str, Any]) -> int:
    n = body.get("n", 1)
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise BadRequest(f"n must be an integer from 1 to {MAX_CHOICES}", "n")
    return n


def _sampling(body: dict[str, Any]) -> SamplingArgs:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise BadRequest("stop must be a string or a list of strings", "stop")
    extra = {"ignore_eos": bool(body.get("ignore_eos", False))}
    return SamplingArgs(
        max_tokens=max_tokens,
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        top_k=body.get("top_k"),
        stop=stop,
        seed=body.get("seed"),
        logprobs=bool(body.get("logprobs")),
        extra=extra,
    )


def _nth_seed(sampling: SamplingArgs, index: int) -> SamplingArgs:
    """Choice ``index`` of a seeded request uses ``seed + index`` (so n > 1 choices differ)."""
    if index == 0 or sampling.seed is None or not isinstance(sampling.seed, int):
        return sampling
    return sampling.merged(SamplingArgs(seed=sampling.seed + index))


def _response(
    engine: "Engine", model: str, prompt_ids: list[int], results: list["GenerationResult"], *, tools_given: bool, logprobs: bool
) -> dict[str, Any]:
    choices = []
    for index, result in enumerate(results):
        text, calls = parse_tool_calls(result.text) if tools_given else (result.text, [])
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [call.to_message_dict() for call in calls]
        choices.append(
            {
                "index": index,
                "message": message,
                "finish_reason": "tool_calls" if calls else result.finish_reason,
                "logprobs": {"content": _token_logprobs(engine, result)} if logprobs else None,
                "token_ids": result.token_ids,
            }
        )
    completion_tokens = sum(len(r.token_ids) for r in results)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": completion_tokens,
            "total_tokens": len(prompt_ids) + completion_tokens,
        },
        "prompt_token_ids": prompt_ids,
    }


def _token_logprobs(engine: "Engine", result: "GenerationResult") -> list[dict[str, Any]]:
    out = []
    for token_id, logprob in zip(result.token_ids, result.logprobs):
        token = engine.tokenizer.decode([token_id])
        out.append({"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8")), "top_logprobs": []})
    return out

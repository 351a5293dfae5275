"""The embedded engine behind an OpenAI-compatible HTTP API (what ``prime serve`` runs).

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (non-streaming).
Beyond the OpenAI shape, like vLLM's ``return_token_ids``, every response carries
``prompt_token_ids`` and each choice its ``token_ids``; ``logprobs: true`` returns
``choices[i].logprobs.content[{token, logprob, bytes, top_logprobs: []}]``. vLLM-style extra body
keys ``top_k`` and ``ignore_eos`` are honoured.

A bad request (unknown model, prompt beyond the context window, ``max_tokens`` < 1, malformed
body) is answered 400 with ``{"error": {"message", "type": "invalid_request_error"}}`` and never
disturbs the requests being generated for others.

A client that disconnects before its answer is ready has its sequences cancelled: the engine drops
them from the batch at its next step, so abandoned requests cost nothing afterwards. With an API
key (``build_app(..., api_key=...)``), every endpoint but ``/health`` wants
``Authorization: Bearer <key>`` and answers 401 otherwise. :func:`serve_forever` runs the app and
stops within seconds on the first SIGINT/SIGTERM: the engine is closed at once, so requests in
flight end (503) instead of holding the shutdown until they finish.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import secrets
import time
import uuid
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
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
SHUTDOWN_GRACE_S = 3.0
"""How long a stopping server waits for responses still being written before cancelling them."""


class BadRequest(Exception):
    """Answered as HTTP 400 ``invalid_request_error``."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


class Unauthorized(Exception):
    """Answered as HTTP 401 ``authentication_error``."""


def build_app(engine: "Engine", model_name: str | None = None, *, api_key: str | None = None) -> FastAPI:
    """A FastAPI app serving ``engine`` under ``model_name`` (default: the engine's name); with
    ``api_key``, every endpoint but ``/health`` checks ``Authorization: Bearer <api_key>``."""
    served = model_name or engine.name
    accepted = {served, engine.name} | {alias for alias, target in ALIASES.items() if target in (served, engine.name)}
    app = FastAPI(title="primekit embedded model", docs_url=None, redoc_url=None, openapi_url=None)
    started = int(time.time())
    authorized = [Depends(_bearer_check(api_key))] if api_key else []
    _install_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": served, **engine.load()}

    @app.get("/v1/models", dependencies=authorized)
    async def models() -> dict[str, Any]:
        card = {"id": served, "object": "model", "created": started, "owned_by": "primekit", "max_model_len": engine.context_length}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions", dependencies=authorized)
    async def chat_completions(request: Request) -> JSONResponse:
        body = await _json_body(request)
        model = body.get("model", served)
        if not isinstance(model, str):
            raise BadRequest(f"model must be a string, got {type(model).__name__}", "model")
        if model not in accepted:
            raise BadRequest(f"model '{model}' is not served here (serving: {served})", "model")
        if body.get("stream"):
            raise BadRequest("streaming is not supported by prime serve; send stream=false", "stream")
        messages, tools, n, sampling = _messages(body), _tools(body), _choices(body), _sampling(body)
        from evalkit.model.engine import EngineError

        try:
            prompt_ids, futures = _submit(engine, messages, tools, n, sampling)
            results = await _until_done_or_gone(request, futures)
        except EngineError as exc:
            return _error(503, str(exc), "server_error")
        if results is None:  # the client left; nobody reads this
            return _error(499, "client closed the request", "client_closed_request")
        return JSONResponse(_response(engine, served, prompt_ids, results, tools_given=bool(tools), logprobs=bool(body.get("logprobs"))))

    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(BadRequest)
    async def _bad_request(_: Request, exc: BadRequest) -> JSONResponse:
        return _error(400, str(exc), "invalid_request_error", exc.param)

    @app.exception_handler(Unauthorized)
    async def _unauthorized(_: Request, exc: Unauthorized) -> JSONResponse:
        return _error(401, str(exc), "authentication_error")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, f"invalid request: {exc.errors()}", "invalid_request_error")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return _error(exc.status_code, str(exc.detail), kind)


def _bearer_check(api_key: str) -> Any:
    expected = f"Bearer {api_key}".encode()

    async def check(request: Request) -> None:
        given = request.headers.get("authorization", "").encode()
        if not secrets.compare_digest(given, expected):
            raise Unauthorized("invalid or missing API key; send the header 'Authorization: Bearer <key>'")

    return check


def _submit(engine: "Engine", messages: list[dict[str, Any]], tools: Any, n: int, sampling: SamplingArgs) -> tuple[list[int], list[concurrent.futures.Future]]:
    from evalkit.model.engine import EngineError
    from evalkit.model.requests import InvalidRequest

    try:
        prompt_ids = engine.encode_chat(messages, tools)
    except Exception as exc:  # the chat template rejected the messages
        raise BadRequest(f"cannot render these messages: {type(exc).__name__}: {exc}", "messages") from None
    futures: list[concurrent.futures.Future] = []
    try:
        for index in range(n):
            futures.append(engine.submit(prompt_ids, _nth_seed(sampling, index)))
    except (InvalidRequest, EngineError) as exc:
        for future in futures:
            future.cancel()
        if isinstance(exc, EngineError):
            raise
        raise BadRequest(str(exc)) from None
    return prompt_ids, futures


async def _until_done_or_gone(request: Request, futures: list[concurrent.futures.Future]) -> list["GenerationResult"] | None:
    """The results, or ``None`` (every future cancelled) if the client disconnects first."""
    done = asyncio.ensure_future(asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({done, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not done.done():
        done.cancel()
        for future in futures:
            future.cancel()  # the engine drops cancelled sequences at its next step
        return None
    return done.result()


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body has been read by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def serve_forever(app: FastAPI, engine: "Engine", host: str, port: int) -> None:
    """Run ``app`` until SIGINT/SIGTERM. The first signal closes ``engine`` at once (its requests
    fail, so their connections end) and uvicorn's graceful shutdown then takes a moment, not the
    length of the longest generation."""
    import uvicorn

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            engine.close(wait=False)
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    try:
        _Server(config).run()
    finally:
        engine.close(timeout=SHUTDOWN_GRACE_S)


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

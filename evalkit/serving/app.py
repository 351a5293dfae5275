"""The embedded engine behind an OpenAI-compatible HTTP API (what ``prime serve`` runs).

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (``stream: true``
answers SSE chunks as tokens are sampled, see :mod:`evalkit.serving.stream`; the shapes are
:mod:`evalkit.clients.wire`'s). Beyond the OpenAI shape, like vLLM's ``return_token_ids``, every response carries
``prompt_token_ids`` and each choice its ``token_ids``; ``logprobs: true`` returns
``choices[i].logprobs.content[{token, logprob, bytes, top_logprobs: []}]``. vLLM-style extra body
keys ``top_k`` and ``ignore_eos`` are honoured.

Scoring given tokens (a teacher for on-policy distillation): vLLM's ``prompt_logprobs: k`` on
``/v1/chat/completions`` (top-level ``prompt_logprobs`` of the rendered prompt) and on ``POST /v1/completions``
(``prompt`` a text or token ids; ``choices[0].prompt_logprobs``): per position ``None`` (the first) or
``{"<token id>": {"logprob", "rank", "decoded_token"}}`` with the given token and the ``k`` most likely ones.

A bad request (unknown model, prompt beyond the context window, ``max_tokens`` < 1, malformed
body) is answered 400 with ``{"error": {"message", "type": "invalid_request_error"}}`` and never
disturbs the requests being generated for others.

A client that disconnects before its answer is ready has its sequences cancelled: the engine drops
them from the batch at its next step, so abandoned requests cost nothing afterwards. With an API
key (``build_app(..., api_key=...)``), every endpoint but ``/health`` wants
``Authorization: Bearer <key>`` (the scheme in any case, RFC 7235) and answers 401 otherwise.

No single request can stall the server: a body over :data:`MAX_BODY_BYTES` is refused 413 (what
goes past the bound is read and dropped, never held), and the JSON parse and
chat-template rendering run on a worker thread, so ``/health`` and the streams of other clients keep
being answered while a large prompt is tokenized. :func:`serve_forever` runs the app and
stops within seconds on the first SIGINT/SIGTERM: the engine is closed at once, so requests in
flight end (503) instead of holding the shutdown until they finish, even during a long prefill.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from evalkit.clients.wire import (
    SSE_MEDIA_TYPE,
    ChatRequest,
    CompletionRequest,
    WireError,
    assistant_message,
    error_body,
    parse_completions_request,
    parse_request,
    prompt_logprobs_body,
    response_body,
    usage_body,
)
from evalkit.core.types import SamplingArgs, Usage
from evalkit.model.chat_format import parse_tool_calls
from evalkit.model.registry import ALIASES
from evalkit.serving.request_body import check_text, parse_body
from evalkit.serving.stream import EngineStream, token_logprobs, until_disconnected

if TYPE_CHECKING:
    from evalkit.model.engine import Engine
    from evalkit.model.requests import GenerationResult
    from evalkit.model.scheduler import TokenListener

MAX_CHOICES = 16
MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest request body served (8 MiB): hundreds of times what fits the embedded model's context."""
SHUTDOWN_GRACE_S = 3.0
"""How long a stopping server waits for responses still being written before cancelling them."""


class BadRequest(Exception):
    """Answered as HTTP 400 ``invalid_request_error``."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


class Unauthorized(Exception):
    """Answered as HTTP 401 ``authentication_error``."""


class TooLarge(Exception):
    """Answered as HTTP 413 ``invalid_request_error``."""


def build_app(engine: Engine, model_name: str | None = None, *, api_key: str | None = None) -> FastAPI:
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
        card = {
            "id": served,
            "object": "model",
            "created": started,
            "owned_by": "primekit",
            "max_model_len": engine.context_length,
        }
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions", dependencies=authorized)
    async def chat_completions(request: Request) -> Response:
        body = await _body(request)
        chat, prompt_ids = await asyncio.to_thread(_prepare, body, engine, served, accepted)
        from evalkit.model.engine import EngineError

        if chat.stream and chat.prompt_logprobs is not None:
            raise BadRequest("prompt_logprobs is not served with stream: true", "prompt_logprobs")
        try:
            if chat.stream:
                stream = EngineStream(engine, chat, served)
                stream.begin(prompt_ids, _submit(engine, chat, prompt_ids, stream.listener))
                return StreamingResponse(stream.events(request), media_type=SSE_MEDIA_TYPE)
            futures = _submit(engine, chat, prompt_ids)
            results = await _until_done_or_gone(request, futures)
        except EngineError as exc:
            return _error(503, str(exc), "server_error")
        if results is None:  # the client left; nobody reads this
            return _error(499, "client closed the request", "client_closed_request")
        body = _response(engine, served, chat, prompt_ids, results)
        if chat.prompt_logprobs is not None:
            top = chat.prompt_logprobs
            body["prompt_logprobs"] = await asyncio.to_thread(_prompt_logprobs, engine, prompt_ids, top)
        return JSONResponse(body)

    @app.post("/v1/completions", dependencies=authorized)
    async def completions(request: Request) -> Response:
        body = await _body(request)
        req, prompt_ids = await asyncio.to_thread(_prepare_completion, body, engine, served, accepted)
        from evalkit.model.engine import EngineError
        from evalkit.model.requests import InvalidRequest

        try:
            futures = [engine.submit(prompt_ids, req.sampling)]
            results = await _until_done_or_gone(request, futures)
        except InvalidRequest as exc:
            raise BadRequest(str(exc)) from None
        except EngineError as exc:
            return _error(503, str(exc), "server_error")
        if results is None:
            return _error(499, "client closed the request", "client_closed_request")
        scored = None
        if req.prompt_logprobs is not None:
            scored = await asyncio.to_thread(_prompt_logprobs, engine, prompt_ids, req.prompt_logprobs)
        return JSONResponse(_completions_response(served, prompt_ids, results[0], scored))

    return app


def _prepare_completion(body: bytes, engine: Engine, served: str,
                        accepted: set[str]) -> tuple[CompletionRequest, list[int]]:
    """The checked ``/v1/completions`` request and its prompt ids (a text prompt tokenized as is, no template)."""
    try:
        parsed = parse_body(body)
        check_text(parsed)
        req = parse_completions_request(parsed)
    except WireError as exc:
        raise BadRequest(str(exc), exc.param) from None
    if req.model is not None and req.model not in accepted:
        raise BadRequest(f"model '{req.model}' is not served here (serving: {served})", "model")
    if isinstance(req.prompt, list):
        return req, list(req.prompt)
    return req, [int(i) for i in engine.tokenizer.encode(req.prompt, add_special_tokens=False)]


def _prompt_logprobs(engine: Engine, prompt_ids: list[int], top: int) -> list[dict[str, Any] | None]:
    """vLLM's ``prompt_logprobs`` of the prompt (blocking: a forward over it; run on a worker thread)."""
    from evalkit.model.requests import InvalidRequest

    try:
        scores = engine.score(prompt_ids, top)
    except InvalidRequest as exc:
        raise BadRequest(str(exc), "prompt") from None
    return prompt_logprobs_body(scores, lambda token: engine.tokenizer.decode([token]))


def _completions_response(model: str, prompt_ids: list[int], result: GenerationResult,
                          scored: list[dict[str, Any] | None] | None) -> dict[str, Any]:
    """A ``text_completion`` body with vLLM's extensions (``token_ids``, ``prompt_token_ids``, ``prompt_logprobs``)."""
    import uuid

    choice = {"index": 0, "text": result.text, "logprobs": None, "finish_reason": result.finish_reason,
              "token_ids": result.token_ids, "prompt_token_ids": prompt_ids, "prompt_logprobs": scored}
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": usage_body(Usage(len(prompt_ids), len(result.token_ids)))}


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(BadRequest)
    async def _bad_request(_: Request, exc: BadRequest) -> JSONResponse:
        return _error(400, str(exc), "invalid_request_error", exc.param)

    @app.exception_handler(Unauthorized)
    async def _unauthorized(_: Request, exc: Unauthorized) -> JSONResponse:
        return _error(401, str(exc), "authentication_error")

    @app.exception_handler(TooLarge)
    async def _too_large(_: Request, exc: TooLarge) -> JSONResponse:
        return _error(413, str(exc), "invalid_request_error")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, f"invalid request: {exc.errors()}", "invalid_request_error")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return _error(exc.status_code, str(exc.detail), kind)


def _bearer_check(api_key: str) -> Any:
    expected = api_key.encode()

    async def check(request: Request) -> None:
        scheme, _, token = request.headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), expected):
            raise Unauthorized("invalid or missing API key; send the header 'Authorization: Bearer <key>'")

    return check


def _chat_request(body: bytes, served: str, accepted: set[str]) -> ChatRequest:
    """The request, parsed and checked: its shape (:func:`evalkit.clients.wire.parse_request`) and the model it
    names."""
    try:
        parsed = parse_body(body)
        check_text(parsed)
        chat = parse_request(parsed, max_choices=MAX_CHOICES)
    except WireError as exc:
        raise BadRequest(str(exc), exc.param) from None
    if chat.model is not None and chat.model not in accepted:
        raise BadRequest(f"model '{chat.model}' is not served here (serving: {served})", "model")
    if chat.tool_choice == "none":
        chat.tools = None
    return chat


def _prepare(body: bytes, engine: Engine, served: str, accepted: set[str]) -> tuple[ChatRequest, list[int]]:
    """The checked request and its prompt token ids (run on a worker thread: a huge prompt takes seconds)."""
    chat = _chat_request(body, served, accepted)
    try:
        return chat, engine.encode_chat(chat.messages, chat.tools)
    except Exception as exc:  # the chat template rejected the messages
        raise BadRequest(f"cannot render these messages: {type(exc).__name__}: {exc}", "messages") from None


def _submit(engine: Engine, chat: ChatRequest, prompt_ids: list[int],
            listener: Callable[[int], TokenListener] | None = None) -> list[concurrent.futures.Future]:
    """Queue the chat's ``n`` generations (``listener(i)`` hears choice ``i``'s tokens)."""
    from evalkit.model.engine import EngineError
    from evalkit.model.requests import InvalidRequest

    futures: list[concurrent.futures.Future] = []
    try:
        for index in range(chat.n):
            on_tokens = listener(index) if listener is not None else None
            futures.append(engine.submit(prompt_ids, _nth_seed(chat.sampling, index), on_tokens=on_tokens))
    except (InvalidRequest, EngineError) as exc:
        for future in futures:
            future.cancel()
        if isinstance(exc, EngineError):
            raise
        raise BadRequest(str(exc)) from None
    return futures


async def _until_done_or_gone(
    request: Request, futures: list[concurrent.futures.Future]
) -> list[GenerationResult] | None:
    """The results, or ``None`` (every future cancelled) if the client disconnects first."""
    done = asyncio.ensure_future(asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))
    gone = asyncio.ensure_future(until_disconnected(request))
    try:
        await asyncio.wait({done, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not done.done():
        done.cancel()
        done.add_done_callback(_retrieved)  # cancelled children may finish it with CancelledError; nobody awaits it
        for future in futures:
            future.cancel()  # the engine drops cancelled sequences at its next step
        return None
    return done.result()


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark ``future``'s outcome as seen, so asyncio does not log "exception was never retrieved"."""
    if not future.cancelled():
        future.exception()


def serve_forever(app: FastAPI, engine: Engine, host: str, port: int) -> None:
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
        if not engine.close(timeout=SHUTDOWN_GRACE_S):
            _exit_now()


def _exit_now() -> None:
    """Leave while the engine's worker is still inside one long step (a prefill of thousands of
    tokens): its requests have already failed (503) and nothing is left to save, but interpreter
    teardown under a running torch kernel aborts (exit 134, "terminate called without an active
    exception"). So flush, say so, and skip the teardown."""
    import os
    import sys

    print("stopped (the model was inside a long step; not waiting for it)", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(0)


def _error(status: int, message: str, kind: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(message, kind, param))


async def _body(request: Request) -> bytes:
    """The request's body, or :class:`TooLarge` when it exceeds :data:`MAX_BODY_BYTES`."""
    refusal = f"the request body is over {MAX_BODY_BYTES // (1024 * 1024)} MiB; send a smaller conversation"
    parts, size = [], 0
    async for part in request.stream():  # past the bound, read on but keep nothing: the client then reads the 413
        size += len(part)
        if size <= MAX_BODY_BYTES:
            parts.append(part)
    if size > MAX_BODY_BYTES:
        raise TooLarge(refusal)
    return b"".join(parts)


def _nth_seed(sampling: SamplingArgs, index: int) -> SamplingArgs:
    """Choice ``index`` of a seeded request uses ``seed + index`` (so n > 1 choices differ)."""
    if index == 0 or sampling.seed is None or not isinstance(sampling.seed, int):
        return sampling
    return sampling.merged(SamplingArgs(seed=sampling.seed + index))


def _response(engine: Engine, model: str, chat: ChatRequest, prompt_ids: list[int],
              results: list[GenerationResult]) -> dict[str, Any]:
    choices = []
    for index, result in enumerate(results):
        text, calls = parse_tool_calls(result.text) if chat.tools else (result.text, [])
        logprobs = (
            token_logprobs(engine.tokenizer, result.token_ids, result.logprobs) if chat.sampling.logprobs else None
        )
        choices.append({
            "index": index,
            "message": assistant_message(text, calls),
            "finish_reason": "tool_calls" if calls else result.finish_reason,
            "logprobs": {"content": logprobs} if logprobs is not None else None,
            "token_ids": result.token_ids,
        })
    usage = Usage(len(prompt_ids), sum(len(r.token_ids) for r in results))
    return response_body(model, choices, usage, prompt_ids)

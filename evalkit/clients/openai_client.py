"""A client for any OpenAI-compatible chat endpoint (vLLM, OpenAI, OpenRouter, `prime serve`).

Why raw aiohttp rather than the ``openai`` SDK: the transport sets the eval harness's ceiling
(DESIGN.md). Measured on the 2-core dev machine against a local stub at 256 concurrent requests,
the SDK on httpx costs several ms of client CPU per request; a bare aiohttp session costs a
fraction of a millisecond (see ``bench/eval_harness.py``). The request/response shapes used here
are the stable core of the chat-completions API, so the SDK adds little but cost.

Reliability contract (see :mod:`evalkit.clients.base`): 429 (honouring ``Retry-After``), 408/409/5xx,
read timeouts, dropped connections, malformed JSON bodies and replies without choices are retried
with exponential backoff and full jitter, up to ``max_retries`` times; other 4xx fail at once. When
the retries are spent ``chat`` raises :class:`ModelCallError`. The API key only ever lives in the
request header; it is not part of ``repr``, error messages or anything returned.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from typing import Any

import aiohttp

from evalkit.errors import ModelCallError
from evalkit.types import Completion, Message, SamplingArgs, ToolCall, Usage

logger = logging.getLogger(__name__)
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
MAX_RETRY_AFTER_S = 60.0


class OpenAIClient:
    """Chat completions over HTTP with retries; safe to share between many asyncio tasks.

    The aiohttp session is created lazily inside the running event loop on the first call, so a
    client can be built in synchronous code and used later from ``asyncio.run``.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        *,
        max_retries: int = 3,
        timeout: float | None = None,
        connect_timeout: float = 10.0,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        max_connections: int = 1024,
        extra_headers: dict[str, str] | None = None,
    ):
        self.model = model
        self.base_url: str | None = base_url.rstrip("/")
        self.max_retries = max(0, int(max_retries))
        self.timeout = timeout
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._url = f"{self.base_url}/chat/completions"
        self._headers = {"Content-Type": "application/json", **(extra_headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never show headers (they hold the key)
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"

    # ----- session ----------------------------------------------------------------------------
    def _get_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=self._timeout
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            try:
                await session.close()
            except RuntimeError:  # the loop that owned it is gone; nothing left to release
                pass

    # ----- requests ---------------------------------------------------------------------------
    def build_body(
        self, messages: list[Message], sampling: SamplingArgs, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The JSON body: standard keys when set, ``sampling.extra`` passed through (vLLM extras)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if sampling.max_tokens is not None:
            body["max_tokens"] = sampling.max_tokens
        if sampling.temperature is not None:
            body["temperature"] = sampling.temperature
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        if sampling.top_k is not None:
            body["top_k"] = sampling.top_k
        if sampling.stop:
            body["stop"] = sampling.stop
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.logprobs:
            body["logprobs"] = True
        if tools:
            body["tools"] = tools
        if sampling.extra:
            body.update(sampling.extra)
        return body

    async def chat(
        self,
        messages: list[Message],
        sampling: SamplingArgs,
        tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        body = self.build_body(messages, sampling, tools)
        return await self._post_with_retries(body, self.max_retries, retry_connect_errors=True)

    async def preflight(self) -> None:
        """One tiny request; connection errors fail at once (nothing to wait for), 429/5xx are retried."""
        body = self.build_body([{"role": "user", "content": "Say OK."}], SamplingArgs(max_tokens=1))
        await self._post_with_retries(body, self.max_retries, retry_connect_errors=False)

    async def _post_with_retries(self, body: dict[str, Any], retries: int, *, retry_connect_errors: bool) -> Completion:
        session = self._get_session()
        attempt = 0
        while True:
            try:
                return await self._post_once(session, body)
            except _Retryable as exc:
                if attempt >= retries or (exc.connect and not retry_connect_errors):
                    raise ModelCallError(
                        f"{exc} (after {attempt + 1} attempt{'s' if attempt else ''})", retryable=True, status=exc.status
                    ) from None
                delay = self._delay(attempt, exc.retry_after)
                logger.debug("retry %d/%d in %.2f s: %s", attempt + 1, retries, delay, exc)
                await asyncio.sleep(delay)
                attempt += 1

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with full jitter; a server's Retry-After is a floor, capped at 60 s."""
        backoff = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        delay = random.uniform(backoff / 2, backoff)
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER_S))
        return delay

    async def _post_once(self, session: aiohttp.ClientSession, body: dict[str, Any]) -> Completion:
        try:
            async with session.post(self._url, data=json.dumps(body).encode()) as response:
                raw = await response.read()
                status = response.status
                retry_after = _parse_retry_after(response.headers.get("Retry-After"))
        except aiohttp.ConnectionTimeoutError:
            raise _Retryable(f"cannot connect to {self.base_url}: connect timed out", connect=True) from None
        except asyncio.TimeoutError:
            raise _Retryable(f"request to {self.base_url} timed out after {self.timeout} s") from None
        except aiohttp.ClientConnectorError as exc:
            raise _Retryable(f"cannot connect to {self.base_url}: {exc.os_error or exc}", connect=True) from None
        except (aiohttp.ClientError, ConnectionError) as exc:
            raise _Retryable(f"connection to {self.base_url} failed: {type(exc).__name__}: {exc}") from None
        if status >= 400:
            detail = _error_detail(raw)
            message = f"HTTP {status} from {self.base_url}: {detail}"
            if status in RETRYABLE_STATUS:
                raise _Retryable(message, status=status, retry_after=retry_after)
            raise ModelCallError(message, retryable=False, status=status)
        try:
            data = json.loads(raw)
        except ValueError:
            raise _Retryable(f"malformed JSON reply from {self.base_url}: {raw[:120]!r}", status=status) from None
        if not isinstance(data, dict) or not data.get("choices"):
            raise _Retryable(f"reply from {self.base_url} has no choices: {str(data)[:160]}", status=status)
        try:
            return parse_completion(data)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise _Retryable(f"unexpected reply shape from {self.base_url}: {type(exc).__name__}: {exc}") from None


class _Retryable(Exception):
    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None, connect: bool = False):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.connect = connect


def parse_completion(data: dict[str, Any]) -> Completion:
    """Turn a chat-completions JSON reply into a Completion, keeping token ids/logprobs when present.

    Token ids follow vLLM: ``prompt_token_ids`` at the top level (or on the choice) and
    ``token_ids`` on the choice when the request set ``return_token_ids``; logprobs come from
    ``choices[0].logprobs.content[*].logprob``.
    """
    choice = data["choices"][0]
    message = choice.get("message") or {}
    text = message.get("content") or ""
    if not isinstance(text, str):  # some servers send content parts
        text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
    tool_calls = [
        ToolCall(
            id=str(call.get("id") or f"call_{i}"),
            name=str((call.get("function") or {}).get("name", "")),
            arguments=_arguments_text((call.get("function") or {}).get("arguments")),
        )
        for i, call in enumerate(message.get("tool_calls") or [])
    ]
    finish = choice.get("finish_reason") or ("tool_calls" if tool_calls else "stop")
    usage_data = data.get("usage") or {}
    usage = Usage(
        input_tokens=int(usage_data.get("prompt_tokens") or 0), output_tokens=int(usage_data.get("completion_tokens") or 0)
    )
    logprobs = None
    content = (choice.get("logprobs") or {}).get("content")
    if content:
        logprobs = [float(item["logprob"]) for item in content]
    prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids")
    completion_ids = choice.get("token_ids")
    return Completion(
        text=text,
        tool_calls=tool_calls,
        finish_reason=str(finish),
        usage=usage,
        prompt_token_ids=list(prompt_ids) if prompt_ids else None,
        completion_token_ids=list(completion_ids) if completion_ids is not None else None,
        logprobs=logprobs,
    )


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _error_detail(raw: bytes) -> str:
    """The server's error message, short; falls back to the raw body's start."""
    try:
        data = json.loads(raw)
        if isinstance(data, dict):
            error = data.get("error", data)
            message = error.get("message") if isinstance(error, dict) else error
            return str(message)[:200]
    except ValueError:
        pass
    return raw[:200].decode("utf-8", "replace").strip() or "(empty body)"


def _parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())

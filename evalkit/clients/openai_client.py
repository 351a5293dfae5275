"""A client for any OpenAI-compatible chat endpoint (vLLM, OpenAI, OpenRouter, `prime serve`).

Why raw aiohttp rather than the ``openai`` SDK: the transport sets the eval harness's ceiling
(DESIGN.md). Measured on the 2-core dev machine against a local stub at 256 concurrent requests,
the SDK on httpx costs several ms of client CPU per request; a bare aiohttp session costs a
fraction of a millisecond (see ``bench/eval_harness.py``). The request/response shapes used here
are the stable core of the chat-completions API, so the SDK adds little but cost; they are built and
parsed by :mod:`evalkit.clients.wire` (plain dicts, no pydantic). Requests are not streamed.

Reliability contract (see :mod:`evalkit.clients.base` and :mod:`evalkit.clients.retry`): every
attempt is bounded by ``timeout`` (the whole reply, so a server that drips bytes cannot hold it
open); 429 (honouring ``Retry-After``), 408/409/5xx, timeouts, dropped connections, malformed JSON
bodies and replies without choices are retried with backoff, up to ``max_retries`` times; other
4xx fail at once. The API key only ever lives in the request header; it is registered with
:mod:`evalkit.core.redact`, so it is scrubbed from errors and logs even when a server echoes it.

Also RL's client for a vLLM server: ``sampling.extra`` keys (``return_token_ids``,
``skip_special_tokens``...) pass through to the body, token ids and logprobs come back on the
Completion, no key is needed, and ``model`` may be reassigned between requests (LoRA adapter names).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from yarl import URL

from evalkit.clients.retry import RETRYABLE_STATUS, Retryable, RetryPolicy, parse_retry_after, with_retries
from evalkit.clients.spec import PREFLIGHT_TIMEOUT_S
from evalkit.clients.wire import parse_completion, request_body
from evalkit.core.defaults import DEFAULT_TIMEOUT_S
from evalkit.core.errors import ModelCallError
from evalkit.core.redact import redact, register_secret, register_secret_headers
from evalkit.core.types import Completion, Message, SamplingArgs

PREFLIGHT_MESSAGES: list[Message] = [{"role": "user", "content": "Say OK."}]
"""The preflight's one-token request (every remote client sends the same)."""


class OpenAIClient:
    """Chat completions over HTTP with retries; safe to share between many asyncio tasks.

    The aiohttp session is created lazily inside the running event loop on the first call, so a
    client can be built in synchronous code and used later from ``asyncio.run``. A caller that runs
    each batch in a fresh event loop (RL) should ``await aclose()`` before that loop ends; a session
    left behind by a closed loop is dropped on the next call.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        *,
        max_retries: int = 3,
        timeout: float = DEFAULT_TIMEOUT_S,
        connect_timeout: float = 10.0,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        max_connections: int = 1024,
        extra_headers: dict[str, str] | None = None,
    ):
        self.model = model
        self.base_url: str | None = redact(base_url.rstrip("/"))
        self.timeout = timeout
        self.policy = RetryPolicy(max(0, int(max_retries)), backoff_base_s, backoff_max_s)
        # parsed once: aiohttp parses a str URL on every request, measured at ~10% of the client's CPU
        self._url: URL | str = _parsed(f"{base_url.rstrip('/')}/chat/completions")
        self._headers = {"Content-Type": "application/json", **(extra_headers or {})}
        register_secret_headers(extra_headers)
        if api_key:
            register_secret(api_key)
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=min(connect_timeout, timeout))
        self._preflight_timeout = aiohttp.ClientTimeout(total=min(timeout, PREFLIGHT_TIMEOUT_S),
                                                        sock_connect=min(connect_timeout, timeout))
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never show headers (they hold the key)
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def max_retries(self) -> int:
        return self.policy.max_retries

    # ----- session ----------------------------------------------------------------------------
    def _get_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            _drop_stale(self._session)
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
        return request_body(self.model, messages, sampling, tools)

    async def chat(
        self,
        messages: list[Message],
        sampling: SamplingArgs,
        tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        body = self.build_body(messages, sampling, tools)
        session = self._get_session()
        return await with_retries(lambda: self._post_once(session, body, self.timeout), self.policy)

    async def preflight(self) -> None:
        """One tiny request bounded by ``min(timeout, 60 s)``; unreachable or silent servers fail at once."""
        body = self.build_body(PREFLIGHT_MESSAGES, SamplingArgs(max_tokens=1))
        session = self._get_session()
        bound = min(self.timeout, PREFLIGHT_TIMEOUT_S)
        await with_retries(lambda: self._post_once(session, body, bound, self._preflight_timeout), self.policy,
                           preflight=True)

    async def _post_once(self, session: aiohttp.ClientSession, body: dict[str, Any], limit_s: float,
                         timeout: aiohttp.ClientTimeout | None = None) -> Completion:
        raw, status, retry_after = await self._send(session, body, limit_s, timeout)
        if status >= 400:
            message = f"HTTP {status} from {self.base_url}: {_error_detail(raw)}"
            if status in RETRYABLE_STATUS:
                raise Retryable(message, status=status, retry_after=retry_after)
            raise ModelCallError(message, retryable=False, status=status)
        try:
            data = json.loads(raw)
        except ValueError:
            raise Retryable(
                f"malformed JSON reply from {self.base_url}: {_snippet(raw, 120)!r}", status=status
            ) from None
        if not isinstance(data, dict) or not data.get("choices"):
            raise Retryable(f"reply from {self.base_url} has no choices: {_snippet(str(data), 160)}", status=status)
        try:
            return parse_completion(data)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise Retryable(f"unexpected reply shape from {self.base_url}: {type(exc).__name__}: {exc}") from None

    async def _send(self, session: aiohttp.ClientSession, body: dict[str, Any], limit_s: float,
                    timeout: aiohttp.ClientTimeout | None) -> tuple[bytes, int, float | None]:
        """One POST: the raw body, status and Retry-After; transport failures as :class:`Retryable`."""
        try:
            async with session.post(
                self._url, data=json.dumps(body).encode(), timeout=timeout or self._timeout
            ) as response:
                return await response.read(), response.status, parse_retry_after(response.headers.get("Retry-After"))
        except aiohttp.ConnectionTimeoutError:
            raise Retryable(f"cannot connect to {self.base_url}: connect timed out", connect=True) from None
        except TimeoutError:
            raise Retryable(f"request to {self.base_url} timed out after {limit_s:g} s", timeout=True) from None
        except aiohttp.ClientConnectorError as exc:
            raise Retryable(f"cannot connect to {self.base_url}: {exc.os_error or exc}", connect=True) from None
        except (aiohttp.ClientError, ConnectionError) as exc:
            raise Retryable(f"connection to {self.base_url} failed: {type(exc).__name__}: {exc}") from None


def _parsed(url: str) -> URL | str:
    """``url`` parsed, or left as text for aiohttp to refuse per request (a Retryable, as before)."""
    try:
        return URL(url)
    except ValueError:
        return url


def _drop_stale(session: aiohttp.ClientSession | None) -> None:
    """Forget a session whose event loop has ended (its connections died with it) without warnings."""
    if session is None or session.closed:
        return
    connector = session.connector
    if connector is not None and connector._loop.is_closed():  # noqa: SLF001 - no public check exists
        connector._close()  # noqa: SLF001 - marks it closed; there is no loop left to await on
        session.detach()


def _error_detail(raw: bytes) -> str:
    """The server's error message, short; falls back to the raw body's start."""
    try:
        data = json.loads(raw)
        if isinstance(data, dict):
            error = data.get("error", data)
            message = error.get("message") if isinstance(error, dict) else error
            return _snippet(str(message), 200)
    except ValueError:
        pass
    return _snippet(raw, 200).strip() or "(empty body)"


def _snippet(text: str | bytes, limit: int) -> str:
    """The start of a server's text, scrubbed *before* it is cut (a cut key would no longer match)."""
    if isinstance(text, bytes):
        text = text[: limit * 8].decode("utf-8", "replace")
    return redact(text)[:limit]

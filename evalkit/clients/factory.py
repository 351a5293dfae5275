"""Building the model client a :class:`~evalkit.clients.spec.ClientSpec` describes; the one-request preflight.

``make_client(spec)`` is the only way eval, GEPA and RL get a client. The backend is chosen by
:func:`evalkit.clients.routing.route` (the rule is written there, once). Mistakes (unknown endpoint
id, a named key variable that is unset, a bad URL, litellm not installed) raise UserError before any
request is sent. Keys are read from the environment here, handed to the client's header only, and
registered with :mod:`evalkit.core.redact`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from evalkit.clients.base import ModelClient
from evalkit.clients.openai_client import OpenAIClient
from evalkit.clients.routing import Route, route
from evalkit.clients.spec import DEFAULT_BASE_URL, DEFAULT_KEY_VAR, ClientSpec
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.redact import register_secret
from evalkit.core.types import Completion, Message, SamplingArgs


def make_client(spec: ClientSpec) -> ModelClient:
    """The client for ``spec``, of the backend the routing rule picks."""
    chosen = route(spec)
    return _BUILDERS[chosen.backend](chosen, spec)


def _local(chosen: Route, spec: ClientSpec) -> ModelClient:
    if spec.engine is not None:
        return make_local_client(chosen.model, engine=spec.engine)
    return make_local_client(chosen.model, spec.device)


def _litellm(chosen: Route, spec: ClientSpec) -> ModelClient:
    from evalkit.clients.litellm_client import LiteLLMClient

    return LiteLLMClient(
        chosen.model,
        base_url=_check_url(spec.base_url) if spec.base_url else None,
        api_key=_read_key(spec.api_key_var, required=True) if spec.api_key_var else None,
        max_retries=spec.max_retries,
        timeout=spec.timeout,
        backoff_base_s=spec.backoff_base_s,
        extra_headers=spec.headers,
    )


def _http(chosen: Route, spec: ClientSpec) -> ModelClient:
    url = _check_url(chosen.base_url or DEFAULT_BASE_URL)
    if url == DEFAULT_BASE_URL and spec.api_key_var is None and not os.environ.get(DEFAULT_KEY_VAR):
        _explain_uncached_hub_model(chosen.model)
    key = _read_key(spec.api_key_var, required=spec.api_key_var is not None or url == DEFAULT_BASE_URL)
    return _openai_client(chosen.model, url, key, spec)


def _explain_uncached_hub_model(model: str) -> None:
    """A Hub id (``Qwen/Qwen3.5-4B``) that fell through to OpenAI's API only because it is not cached here:
    say that (the registry's own line), not that ``OPENAI_API_KEY`` is unset."""
    from evalkit.model.registry import hub_model_id, resolve_model

    if hub_model_id(model) == model:
        try:
            resolve_model(model)
        except UserError as exc:
            raise UserError(
                f"{exc}, or name a server that serves it (-b URL, $OPENAI_BASE_URL or an endpoint id)"
            ) from None


def _endpoints(chosen: Route, spec: ClientSpec) -> ModelClient:
    clients = [
        _openai_client(
            row.model, _check_url(row.url), _read_key(row.key, required=row.key is not None, url=row.url), spec
        )
        for row in chosen.endpoints
    ]
    return clients[0] if len(clients) == 1 else RoundRobinClient(clients)


def _openai_client(model: str, url: str, key: str | None, spec: ClientSpec) -> OpenAIClient:
    return OpenAIClient(
        model,
        url,
        key,
        max_retries=spec.max_retries,
        timeout=spec.timeout,
        max_connections=spec.max_connections,
        backoff_base_s=spec.backoff_base_s,
        extra_headers=spec.headers,
    )


def _mock(chosen: Route, spec: ClientSpec) -> ModelClient:
    from evalkit.clients.mock import mock_client

    return mock_client(chosen.model)


_BUILDERS: dict[str, Callable[[Route, ClientSpec], ModelClient]] = {
    "local": _local, "litellm": _litellm, "http": _http, "endpoint": _endpoints, "mock": _mock,
}


def make_local_client(model: str, device: str | None = None, *, engine: Any = None) -> ModelClient:
    """The embedded engine's client (shared per model, so GEPA/RL/eval reuse one loaded model), or
    one over ``engine`` when the caller built it (the RL trainer).

    An install without the engine's dependencies (torch, transformers) is a UserError that says how
    to use a server instead.
    """
    try:
        from evalkit.clients.local import LocalClient
    except ImportError as exc:
        raise UserError(
            f"the embedded model engine is not available in this install ({exc}); "
            "pass -m MODEL -b URL to use an OpenAI-compatible server"
        ) from exc
    return LocalClient(model, device=device, engine=engine)


def _check_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"base URL '{url}' is not an http(s) URL; pass e.g. -b http://localhost:8000/v1")
    return url


PLACEHOLDER_KEY = "EMPTY"
"""What verifiers sends when an endpoint's key variable is unset (its clients use ``api_key or "EMPTY"``);
a local vLLM or ``prime serve`` without ``--api-key`` accepts any key."""
PLACEHOLDER_KEY_NAMES = frozenset({"local", "empty", "none", "dummy", "nokey", "no_key"})
"""Key "names" endpoint files write for a server that needs no key (``"key": "local"``)."""


def _read_key(var: str | None, *, required: bool, url: str | None = None) -> str | None:
    """The key in ``$var``. Unset: verifiers' placeholder for a placeholder name (``"key": "local"``) or, given
    an endpoint row's ``url``, a server on this machine; an error when a key is required; else no key.

    ``-k VAR`` on the command line passes no ``url``: naming a variable there and not exporting it is a mistake."""
    name = var or DEFAULT_KEY_VAR
    value = os.environ.get(name)
    if value:
        register_secret(value)
        return value
    if var is not None and (var.lower() in PLACEHOLDER_KEY_NAMES or (url is not None and is_loopback(url))):
        return PLACEHOLDER_KEY  # a row naming no key at all sends none, as before
    if required:
        raise UserError(f"API key environment variable {name} is not set; export it or name another with -k VAR")
    return None


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (localhost, 127.0.0.0/8, ::1, 0.0.0.0)."""
    import ipaddress

    host = (urlparse(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


class RoundRobinClient:
    """Spreads calls over replicas of one model, in turn."""

    def __init__(self, clients: list[OpenAIClient]):
        self.clients = clients
        self.model = clients[0].model
        self.base_url: str | None = ",".join(c.base_url or "" for c in clients)
        self._cycle = itertools.cycle(clients)

    async def chat(
        self, messages: list[Message], sampling: SamplingArgs, tools: list[dict[str, Any]] | None = None
    ) -> Completion:
        return await next(self._cycle).chat(messages, sampling, tools)

    async def preflight(self) -> None:
        for client in self.clients:
            await client.preflight()

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


async def preflight(client: ModelClient) -> None:
    """One small request before hundreds of rollouts: an unreachable URL or a rejected key is a UserError.

    Clients without a ``preflight`` method (in-process engines, scripted fakes) have nothing to check.
    The request is bounded by ``min(timeout, 60 s)`` and does not wait out retries for a server that
    cannot be reached or does not answer.
    """
    check = getattr(client, "preflight", None)
    if check is None:
        return
    try:
        await check()
    except ModelCallError as exc:
        key_hint = "check the API key variable (-k; for litellm/... the provider's, e.g. ANTHROPIC_API_KEY)"
        hint = {
            401: key_hint,
            403: key_hint,
            404: "check the base URL (it usually ends in /v1) and the model name",
        }.get(exc.status or 0, "check -b/--api-base-url or the endpoint's url, and that the server is up")
        raise UserError(f"preflight request to model '{client.model}' failed: {exc}; {hint}") from None

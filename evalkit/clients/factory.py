"""Choosing and building the model client from what the user typed; the one-request preflight.

Resolution order for ``make_client`` (the same for eval, GEPA and RL):

1. no model and no base URL -> the embedded ``local/smollm2-135m``;
2. ``local/...`` or a folder holding a model (e.g. RL's ``weights/step_N/``) -> the embedded engine;
3. a model name that is an ``endpoint_id`` in endpoints.toml -> that endpoint (replicas round-robin);
4. otherwise an OpenAI-compatible server at ``base_url`` (``-b``) or ``$OPENAI_BASE_URL``
   (default ``https://api.openai.com/v1``), key from the env var named by ``api_key_var``
   (``-k``, default ``OPENAI_API_KEY``).

Mistakes (unknown endpoint id, a named key variable that is unset, a bad URL) raise UserError
before any request is sent. Keys are read from the environment here and handed to the client's
header only.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from evalkit.clients.base import ModelClient
from evalkit.clients.openai_client import OpenAIClient
from evalkit.endpoints import Endpoint, default_endpoints_path, load_endpoints
from evalkit.errors import ModelCallError, UserError
from evalkit.types import Completion, Message, SamplingArgs

DEFAULT_LOCAL_MODEL = "local/smollm2-135m"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_VAR = "OPENAI_API_KEY"


def make_client(
    model: str | None = None,
    base_url: str | None = None,
    api_key_var: str | None = None,
    endpoints_path: str | Path | None = None,
    max_retries: int = 3,
    timeout: float | None = None,
    *,
    max_connections: int = 1024,
    backoff_base_s: float = 0.5,
) -> ModelClient:
    """The client for ``model`` (see the module docstring for the rules)."""
    if model is None and base_url is None:
        return make_local_client(DEFAULT_LOCAL_MODEL)
    if model is not None and is_local_model(model):
        return make_local_client(model)
    if model is not None and base_url is None:
        endpoints_file = Path(endpoints_path) if endpoints_path else default_endpoints_path()
        if endpoints_path and not Path(endpoints_path).is_file():
            raise UserError(f"endpoints file not found: {endpoints_path}")
        if endpoints_file is not None:
            endpoints = load_endpoints(endpoints_file)
            if model in endpoints:
                return _client_for_endpoints(endpoints[model], max_retries, timeout, max_connections, backoff_base_s)
            if endpoints_path:  # the user pointed at this file, so -m names one of its endpoints
                known = ", ".join(sorted(endpoints)) or "none"
                raise UserError(f"endpoint id '{model}' not found in {endpoints_file} (known: {known}); "
                                "or pass -b URL to use the model name directly")
    if model is None:
        raise UserError("a base URL was given without a model; pass -m MODEL as the server names it")
    if base_url is None and _is_embedded_alias(model):
        return make_local_client(model)
    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return OpenAIClient(
        model,
        _check_url(url),
        _read_key(api_key_var, required=api_key_var is not None or url == DEFAULT_BASE_URL),
        max_retries=max_retries,
        timeout=timeout,
        max_connections=max_connections,
        backoff_base_s=backoff_base_s,
    )


def resolve_endpoint(endpoint_id: str, endpoints_path: str | Path | None = None) -> list[Endpoint]:
    """The replica rows of ``endpoint_id``; UserError naming the known ids when it is missing."""
    file = Path(endpoints_path) if endpoints_path else default_endpoints_path()
    if file is None or not file.is_file():
        raise UserError(
            f"endpoint '{endpoint_id}' needs an endpoints file; none at {file or 'configs/endpoints.toml'} "
            "(pass -e PATH or create one with `prime lab setup`)"
        )
    endpoints = load_endpoints(file)
    if endpoint_id not in endpoints:
        known = ", ".join(sorted(endpoints)) or "none"
        raise UserError(f"endpoint id '{endpoint_id}' not found in {file} (known: {known})")
    return endpoints[endpoint_id]


def make_endpoint_client(
    endpoint_id: str, endpoints_path: str | Path | None = None, max_retries: int = 3, timeout: float | None = None
) -> ModelClient:
    """The client for an explicit ``endpoint_id`` (TOML configs name endpoints this way)."""
    return _client_for_endpoints(resolve_endpoint(endpoint_id, endpoints_path), max_retries, timeout, 1024, 0.5)


def _client_for_endpoints(
    rows: list[Endpoint], max_retries: int, timeout: float | None, max_connections: int, backoff_base_s: float
) -> ModelClient:
    if rows[0].type == "local":
        return make_local_client(rows[0].model)
    clients = [
        OpenAIClient(
            row.model,
            _check_url(row.url),
            _read_key(row.key, required=row.key is not None),
            max_retries=max_retries,
            timeout=timeout,
            max_connections=max_connections,
            backoff_base_s=backoff_base_s,
        )
        for row in rows
    ]
    return clients[0] if len(clients) == 1 else RoundRobinClient(clients)


def is_local_model(model: str) -> bool:
    """``local/...`` ids, paths (``./weights/step_3``) and folders that hold a model go to the embedded engine.

    A name like ``Qwen/Qwen3-8B`` is a server's model name unless a folder of that name holds a model.
    """
    if model.startswith(("local/", ".", "/", "~")):
        return True
    path = Path(model).expanduser()
    return path.is_dir() and any((path / name).exists() for name in ("config.json", "model.safetensors", "adapter_config.json"))


def _is_embedded_alias(model: str) -> bool:
    """Short names of the embedded models (``smollm2-135m``); not Hub ids, which a server may serve."""
    try:
        from evalkit.model.registry import ALIASES
    except ImportError:
        return False
    return "/" not in model and model in ALIASES


def make_local_client(model: str) -> ModelClient:
    """The embedded engine's client (shared per model, so GEPA/RL/eval reuse one loaded model)."""
    try:
        from evalkit.clients import local
    except ImportError as exc:
        raise UserError(
            f"the embedded model engine is not available in this install ({exc}); "
            "pass -m MODEL -b URL to use an OpenAI-compatible server"
        ) from exc
    getter = getattr(local, "get_local_client", None) or getattr(local, "LocalClient", None)
    if getter is None:
        raise UserError("the embedded model engine is not available in this install; pass -m MODEL -b URL")
    return getter(model)


def _check_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"base URL '{url}' is not an http(s) URL; pass e.g. -b http://localhost:8000/v1")
    return url


def _read_key(var: str | None, *, required: bool) -> str | None:
    name = var or DEFAULT_KEY_VAR
    value = os.environ.get(name)
    if value:
        return value
    if required:
        raise UserError(f"API key environment variable {name} is not set; export it or name another with -k VAR")
    return None


class RoundRobinClient:
    """Spreads calls over replicas of one model, in turn."""

    def __init__(self, clients: list[OpenAIClient]):
        self.clients = clients
        self.model = clients[0].model
        self.base_url: str | None = ",".join(c.base_url or "" for c in clients)
        self._cycle = itertools.cycle(clients)

    async def chat(self, messages: list[Message], sampling: SamplingArgs, tools: list[dict[str, Any]] | None = None) -> Completion:
        return await next(self._cycle).chat(messages, sampling, tools)

    async def preflight(self) -> None:
        for client in self.clients:
            await client.preflight()

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


async def preflight(client: ModelClient) -> None:
    """One small request before hundreds of rollouts: an unreachable URL or a rejected key is a UserError.

    In-process clients (no ``base_url``) have nothing to check.
    """
    check = getattr(client, "preflight", None)
    if check is None or client.base_url is None:
        return
    try:
        await check()
    except ModelCallError as exc:
        hint = {
            401: "check the API key variable (-k)",
            403: "check the API key variable (-k)",
            404: "check the base URL (it usually ends in /v1) and the model name",
        }.get(exc.status or 0, "check -b/--api-base-url or the endpoint's url, and that the server is up")
        raise UserError(f"preflight request to model '{client.model}' failed: {exc}; {hint}") from None

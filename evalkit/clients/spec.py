"""What a model client is built from (:class:`ClientSpec`) and where an OpenAI-compatible model goes.

Eval, GEPA (task and reflection models) and RL describe the model they want as a ClientSpec and
hand it to :func:`evalkit.clients.factory.make_client`; which backend serves it is decided by one
rule, written in :mod:`evalkit.clients.routing`. This module imports nothing heavy (no torch, no
pydantic, no aiohttp), so configs and the CLI can use its constants freely. The defaults shared beyond
the client layer (model, timeout, retries) are in :mod:`evalkit.core.defaults`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evalkit.core.defaults import DEFAULT_MAX_RETRIES, DEFAULT_MODEL, DEFAULT_TIMEOUT_S
from evalkit.core.errors import ConfigError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where an OpenAI-compatible model goes with neither ``-b`` nor ``$OPENAI_BASE_URL``."""
DEFAULT_KEY_VAR = "OPENAI_API_KEY"
"""The env var read for the key when ``-k`` names none."""
PREFLIGHT_TIMEOUT_S = 60.0
"""The preflight request's own bound: ``min(timeout, PREFLIGHT_TIMEOUT_S)``."""
LITELLM_PREFIX = "litellm/"
MOCK_PREFIX = "mock/"


@dataclass(frozen=True)
class ClientSpec:
    """Everything needed to build one model client; see :mod:`evalkit.clients.routing` for the backend rule.

    Invalid values (a non-positive or infinite timeout, negative retries) raise ConfigError, which
    the CLI prints as one ``error:`` line.
    """

    model: str | None = None
    """What the user typed as ``-m``: a name, ``endpoint_id``, ``local/...``, ``hf/<org>/<name>``, a
    model folder or ``litellm/<provider>/<model>``; ``None`` with no ``base_url`` is :data:`DEFAULT_MODEL`."""
    base_url: str | None = None
    """``-b``: an OpenAI-compatible base URL (``.../v1``); ``None`` reads ``$OPENAI_BASE_URL``."""
    api_key_var: str | None = None
    """``-k``: the NAME of the env var holding the key (never the key). Unset: ``OPENAI_API_KEY`` if present."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra HTTP headers on every request; every value but a few benign ones is redacted everywhere."""
    max_retries: int = DEFAULT_MAX_RETRIES
    """Retries per request after the first attempt (429/5xx/timeouts/dropped connections/bad bodies)."""
    timeout: float = DEFAULT_TIMEOUT_S
    """Seconds per request attempt, the whole reply included; must be positive."""
    endpoints_path: str | None = None
    """``-e``: endpoints.toml; default ``./configs/endpoints.toml`` when present."""
    endpoint_id: str | None = None
    """An endpoint that must exist in the endpoints file (TOML configs' ``endpoint_id``); wins over ``model``."""
    device: str | None = None
    """In-process engines only: ``cpu``, ``cuda``, ``cuda:1``...; ``None`` lets the engine choose."""
    max_connections: int = 1024
    """HTTP connection pool size per client."""
    backoff_base_s: float = 0.5
    """First retry waits about this long; each later one twice as long (capped at 20 s)."""
    engine: Any = None
    """An in-process engine built by the caller (the RL trainer's, over the module it trains): requests
    go to the embedded client over it, whatever ``model`` names (routing rule 0)."""
    served: bool = False
    """``model`` is the name the server at ``base_url`` serves it under, even when it looks like a path
    (RL's vLLM source asks the server for it); needs ``base_url`` (routing rule 0)."""

    def __post_init__(self) -> None:
        if not isinstance(self.timeout, (int, float)) or not math.isfinite(self.timeout) or self.timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {self.timeout!r} "
                              f"(default {DEFAULT_TIMEOUT_S:g})")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be 0 or more, got {self.max_retries}")
        if self.served and not (self.model and self.base_url):
            raise ConfigError("a served model needs its name (model) and the server's base_url")

    @property
    def label(self) -> str:
        """The model as paths and metadata name it."""
        return self.endpoint_id or self.model or DEFAULT_MODEL

"""The one model-client contract every part talks to.

A client turns a chat (``messages``, ``sampling``, optional OpenAI-format ``tools``) into a
:class:`~evalkit.core.types.Completion`. Implementations: the OpenAI-compatible HTTP client
(:mod:`evalkit.clients.openai_client`), litellm (:mod:`evalkit.clients.litellm_client`), the
embedded engine client (:mod:`evalkit.clients.local`); tests add a scripted fake
(``tests/support/scripted_client.py``) and ``mock/...`` models (:mod:`evalkit.clients.mock`). Callers get one
from ``make_client(ClientSpec(...))``
(:mod:`evalkit.clients.factory`), never by constructing a backend themselves.

Error policy: ``chat`` either returns a Completion or raises :class:`~evalkit.core.errors.ModelCallError`
once its own retries (if any) are spent. It never returns ``None`` or an empty stand-in for a
failure. Environments and the eval runner turn that exception into an ``error`` on the rollout row.
Every request is bounded in time (remote clients: ``timeout``, default 600 s). Nothing a client
passes on (errors, log lines) carries an API key or an auth header value
(:mod:`evalkit.core.redact`; ModelCallError scrubs its own message).

Remote clients may also offer ``async preflight()``: one tiny request, bounded by
``min(timeout, 60 s)``, that :func:`evalkit.clients.factory.preflight` turns into a UserError.

Clients are safe to call concurrently from many asyncio tasks; ``aclose`` releases connections.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from evalkit.core.types import Completion, Message, SamplingArgs


@runtime_checkable
class ModelClient(Protocol):
    model: str
    """The model name as the user gave it (recorded in metadata; never a key)."""

    base_url: str | None
    """Where requests go (``None`` for in-process models); recorded in metadata."""

    async def chat(
        self,
        messages: list[Message],
        sampling: SamplingArgs,
        tools: list[dict[str, Any]] | None = None,
    ) -> Completion: ...

    async def aclose(self) -> None: ...

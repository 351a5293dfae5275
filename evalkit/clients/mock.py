"""A scripted model selectable by name (``-m mock/...``): deterministic replies with no server and no weights,
so a command's whole path (flags, config, runner, outputs) runs in process in a test or a dry check.

Scripts (the part after ``mock/``):

- ``echo``: the text of the last user message.
- ``reverse``: that text reversed, character by character.
- ``text:WORDS``: always ``WORDS``.
- ``error``: every request fails as a model error (what a dead server gives, without one).

Replies go through :class:`~evalkit.clients.scripted.ScriptedPolicyClient` (token usage in whitespace-separated
words); it never calls tools.
"""

from __future__ import annotations

from typing import Any

from evalkit.clients.base import ModelClient
from evalkit.clients.scripted import ReplyFn, ScriptedPolicyClient, message_text
from evalkit.clients.spec import MOCK_PREFIX
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import Completion, Message, SamplingArgs

SCRIPTS = ("echo", "reverse", "text:WORDS", "error")


def _last_user(messages: list[Message]) -> str:
    return next((message_text(m) for m in reversed(messages) if m.get("role") == "user"), "")


class FailingClient:
    """``mock/error``: every request is a model error, after no retries (there is nothing to retry)."""

    base_url: str | None = None

    def __init__(self, model: str):
        self.model = model

    async def chat(self, messages: list[Message], sampling: SamplingArgs,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        raise ModelCallError(f"{self.model} fails every request")

    async def aclose(self) -> None:
        return None


def mock_client(model: str) -> ModelClient:
    """The client of a ``mock/...`` model name; UserError naming the scripts for an unknown one."""
    script = model.removeprefix(MOCK_PREFIX)
    if script == "error":
        return FailingClient(model)
    replies: dict[str, ReplyFn] = {"echo": _last_user, "reverse": lambda messages: _last_user(messages)[::-1]}
    if script.startswith("text:"):
        text = script.removeprefix("text:")
        replies[script] = lambda messages: text
    if script not in replies:
        raise UserError(f"unknown mock model {model!r}; use one of {', '.join(MOCK_PREFIX + s for s in SCRIPTS)}")
    return ScriptedPolicyClient(replies[script], model=model)

"""A scripted model selectable by name (``-m mock/...``): deterministic replies with no server and no weights,
so a command's whole path (flags, config, runner, outputs) runs in process in a test or a dry check.

Scripts (the part after ``mock/``):

- ``echo``: the text of the last user message.
- ``reverse``: that text reversed, character by character.
- ``text:WORDS``: always ``WORDS``.
- ``error``: every request fails as a model error (what a dead server gives, without one).

Token usage counts whitespace-separated words (input: every message; output: the reply), so summaries have
numbers to sum. It never calls tools.
"""

from __future__ import annotations

from typing import Any

from evalkit.clients.spec import MOCK_PREFIX
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import Completion, Message, SamplingArgs, Usage

SCRIPTS = ("echo", "reverse", "text:WORDS", "error")


class MockClient:
    """The ``mock/...`` models (see the module docstring)."""

    base_url: str | None = None

    def __init__(self, model: str):
        script = model.removeprefix(MOCK_PREFIX)
        if script not in ("echo", "reverse", "error") and not script.startswith("text:"):
            raise UserError(f"unknown mock model {model!r}; use one of {', '.join(MOCK_PREFIX + s for s in SCRIPTS)}")
        self.model = model
        self._script = script

    async def chat(self, messages: list[Message], sampling: SamplingArgs,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        if self._script == "error":
            raise ModelCallError(f"{self.model} fails every request")
        if self._script.startswith("text:"):
            reply = self._script.removeprefix("text:")
        else:
            last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
            text = last.get("content") if isinstance(last.get("content"), str) else ""
            reply = text[::-1] if self._script == "reverse" else text
        words_in = sum(len(str(m.get("content") or "").split()) for m in messages)
        return Completion(text=reply, usage=Usage(input_tokens=words_in, output_tokens=len(reply.split())),
                          finish_reason="stop")

    async def aclose(self) -> None:
        return None

"""A model client whose replies are chosen in advance: scripted policies for ``prime env check``.

``prime env check`` asks what an environment pays for replies nobody should be paid for (an empty reply,
the prompt echoed back, a rubric quoted) and for the gold answer, without a model or a network. This
client plays such a policy through the same rollout skeleton a real model goes through, so native
environments, wrapped verifiers environments and v1 tasksets see an ordinary model. (``-m mock/...`` models are
built on it, :mod:`evalkit.clients.mock`; tests keep their own fake, ``tests/support/scripted_client.py``, which also
records requests and raises on demand.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalkit.core.types import Completion, Message, SamplingArgs, Usage

ReplyFn = Callable[[list[Message]], str]
"""The reply to a conversation so far (the same function answers every turn of a multi-turn rollout)."""


class ScriptedPolicyClient:
    """Answers every request with ``reply(messages)``; never fails, never calls out.

    Token usage is counted in whitespace-separated words, so summaries stay meaningful.
    """

    def __init__(self, reply: ReplyFn, *, model: str = "scripted"):
        self.model = model
        self.base_url: str | None = None
        self._reply = reply

    async def chat(self, messages: list[Message], sampling: SamplingArgs,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        text = self._reply(messages)
        words_in = sum(len(message_text(m).split()) for m in messages)
        return Completion(text=text, usage=Usage(input_tokens=words_in, output_tokens=len(text.split())))

    async def aclose(self) -> None:
        return None


def message_text(message: Message) -> str:
    """A message's text: its string content, or the text parts of a multi-part content list."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)

"""A deterministic fake model for tests: replies come from a script, not a network.

Test-only (it lives under tests/ and ships in no package): no model name selects it, tests construct it
directly. It records every request so tests can assert what the environment sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from evalkit.core.errors import ModelCallError
from evalkit.core.types import Completion, Message, SamplingArgs, ToolCall, Usage

Reply = str | Completion | Exception
ReplyFn = Callable[[list[Message], SamplingArgs, list[dict[str, Any]] | None], Reply]


class ScriptedClient:
    """Replies from a list (consumed in order, last one repeated) or a function of the request.

    A reply may be a string (plain text), a :class:`Completion` (tool calls, finish reasons), or an
    exception instance (raised, as a failing server would). Token usage is counted in whitespace
    words so tests can check that usage is summed.
    """

    def __init__(self, replies: Sequence[Reply] | ReplyFn, *, model: str = "scripted", delay_s: float = 0.0):
        self.model = model
        self.base_url: str | None = None
        self._replies = replies
        self._next = 0
        self._delay_s = delay_s
        self.requests: list[dict[str, Any]] = []

    async def chat(
        self,
        messages: list[Message],
        sampling: SamplingArgs,
        tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        self.requests.append({"messages": [dict(m) for m in messages], "sampling": sampling, "tools": tools})
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        reply = self._pick(messages, sampling, tools)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, Completion):
            return reply
        words_in = sum(len(str(m.get("content") or "").split()) for m in messages)
        return Completion(text=reply, usage=Usage(input_tokens=words_in, output_tokens=len(reply.split())))

    def _pick(self, messages: list[Message], sampling: SamplingArgs, tools: list[dict[str, Any]] | None) -> Reply:
        if callable(self._replies):
            return self._replies(messages, sampling, tools)
        if not self._replies:
            return ModelCallError("scripted client has no replies")
        index = min(self._next, len(self._replies) - 1)
        self._next += 1
        return self._replies[index]

    async def aclose(self) -> None:
        return None


def tool_call_reply(name: str, arguments: str, call_id: str = "call_0", text: str = "") -> Completion:
    """A Completion asking for one tool call (helper for scripted tool-using tests)."""
    return Completion(
        text=text, tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)], finish_reason="tool_calls"
    )

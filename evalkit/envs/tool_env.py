"""ToolEnv: the model calls Python functions as OpenAI tools until it answers without a tool call.

Tool failures (unknown tool, arguments that are not valid JSON or do not fit the signature, a tool
that raises) are returned to the model as the tool message's text, so the model can recover; they
do not error the rollout. The rollout ends with ``no_tool_calls`` when the model answers in text,
or ``max_turns``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from evalkit.core.aio import call_user_code
from evalkit.core.types import Message
from evalkit.envs.multiturn import ENV_POOL, MultiTurnEnv
from evalkit.envs.tool_descriptions import TOOL_DESCRIPTIONS, describe
from evalkit.envs.tools import tool_schema


class ToolEnv(MultiTurnEnv):
    def __init__(self, *args: Any, tools: list[Callable[..., Any]] | None = None, max_turns: int = 10, **kwargs: Any):
        super().__init__(*args, max_turns=max_turns, **kwargs)
        self.tools = {tool.__name__: tool for tool in (tools or [])}
        self.tool_schemas = [tool_schema(tool) for tool in (tools or [])]

    def tools_for(self, state: dict[str, Any]) -> list[dict[str, Any]] | None:
        override = TOOL_DESCRIPTIONS.get()  # a GEPA candidate's descriptions, for the rollouts it started
        return (describe(self.tool_schemas, override) if override else self.tool_schemas) or None

    def is_completed(self, messages: list[Message], state: dict[str, Any]) -> bool | str:
        last = messages[-1]
        if last.get("role") == "assistant" and not last.get("tool_calls"):
            return "no_tool_calls"
        return False

    async def env_response(self, messages: list[Message], state: dict[str, Any]) -> list[Message]:
        replies = []
        for call in messages[-1].get("tool_calls") or []:
            function = call.get("function", {})
            content = await self.call_tool(function.get("name", ""), function.get("arguments") or "{}")
            replies.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": content})
        return replies

    async def call_tool(self, name: str, raw_arguments: str) -> str:
        """Run one tool; every failure becomes text for the model."""
        tool = self.tools.get(name)
        if tool is None:
            return f"Error: unknown tool {name!r}; available tools: {', '.join(self.tools) or 'none'}"
        try:
            arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return f"Error: arguments for {name} are not valid JSON ({exc.msg})"
        if not isinstance(arguments, dict):
            return f"Error: arguments for {name} must be a JSON object"
        try:
            inspect.signature(tool).bind(**arguments)
        except TypeError as exc:
            return f"Error: bad arguments for {name}: {exc}"
        try:
            result = await call_user_code(ENV_POOL, tool, **arguments)  # a sync tool runs on a worker thread
        except Exception as exc:  # the model sees the failure and may try again
            return f"Error: {name} raised {type(exc).__name__}: {exc}"
        return result if isinstance(result, str) else json.dumps(result, default=str)

"""Chat messages <-> the plain ChatML text the embedded model reads, including tool calls.

SmolLM2 has no native tool-call format, so tools are described in the system prompt and the
model is asked to answer with ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks,
which :func:`parse_tool_calls` turns back into :class:`~evalkit.core.types.ToolCall` objects. Earlier
tool calls and tool results in the conversation are written back in the same notation, so a
multi-turn tool conversation reads consistently to the model.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from evalkit.core.types import Message, ToolCall

TOOL_INSTRUCTIONS = (
    "You can call these tools:\n<tools>\n{tools}\n</tools>\n"
    "To call a tool, reply with one block per call and nothing else:\n"
    '<tool_call>{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}</tool_call>'
)

TOOL_CALL_OPEN = "<tool_call>"
"""Where a tool-call block starts in the model's text (a stream holds its content back from here)."""
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)


def render_messages(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> list[dict[str, str]]:
    """``{"role", "content"}`` string messages for the chat template, tools folded into the system prompt."""
    rendered = [{"role": _role(m), "content": _content(m)} for m in messages]
    if tools:
        block = TOOL_INSTRUCTIONS.format(tools="\n".join(json.dumps(_function(t)) for t in tools))
        if rendered and rendered[0]["role"] == "system":
            rendered[0]["content"] = f"{rendered[0]['content']}\n\n{block}".lstrip()
        else:
            rendered.insert(0, {"role": "system", "content": block})
    return rendered


def encode_chat(tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                template_kwargs: Mapping[str, Any] | None = None, generation_prompt: bool = True) -> list[int]:
    """Prompt token ids of a chat under ``tokenizer``'s chat template, generation prompt appended: what the
    embedded engine samples after, and what a teacher must render the same way to share the policy's tokens.
    ``generation_prompt=False``: the chat as it stands (where each message's tokens end)."""
    ids = tokenizer.apply_chat_template(
        render_messages(messages, tools), tokenize=True, add_generation_prompt=generation_prompt,
        **dict(template_kwargs or {})
    )
    if isinstance(ids, Mapping) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """(text without the well-formed tool-call blocks, the calls). A block whose JSON does not
    parse or lacks a name stays in the text: it is what the model said, not a call."""
    calls: list[ToolCall] = []

    def take(match: re.Match[str]) -> str:
        try:
            payload = json.loads(match.group(1))
        except json.JSONDecodeError:
            return match.group(0)
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            return match.group(0)
        arguments = payload.get("arguments", payload.get("parameters", {}))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=payload["name"], arguments=arguments))
        return ""

    remaining = _TOOL_CALL.sub(take, text)
    return (remaining.strip() if calls else text), calls


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    """The function schema of an OpenAI tool (``{"type": "function", "function": {...}}``) or a bare one."""
    return tool.get("function", tool) if isinstance(tool, dict) else {"name": str(tool)}


def _role(message: Message) -> str:
    role = str(message.get("role", "user"))
    return "user" if role == "tool" else role


def _content(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts: keep the text ones
        text = "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type", "text") == "text"
        )
    else:
        text = "" if content is None else str(content)
    if message.get("role") == "tool":
        return f"<tool_response>\n{text}\n</tool_response>"
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        arguments = function.get("arguments", "{}")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError:
            pass
        block = json.dumps({"name": function.get("name", ""), "arguments": arguments})
        text = f"{text}\n<tool_call>{block}</tool_call>" if text else f"<tool_call>{block}</tool_call>"
    return text

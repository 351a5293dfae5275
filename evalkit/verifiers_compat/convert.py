"""Translating between verifiers' shapes and primekit's: chat messages, tool schemas, sampling args.

verifiers (legacy, 0.3.x) keeps messages as pydantic models (``SystemMessage``, ``AssistantMessage`` with
``tool_calls=[ToolCall(id, name, arguments)]``, ...) and tools as ``Tool(name, description, parameters)``;
primekit's clients and results files speak OpenAI chat dicts. Sampling args are a plain dict in verifiers
(``n``, ``max_tokens`` or ``max_completion_tokens``, ``extra_body``) and :class:`SamplingArgs` here.
Nothing in this module imports verifiers: it reads the models through ``model_dump``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalkit.core.types import Message, SamplingArgs


def to_openai_message(message: Any, keep_text_role: bool = False) -> Message:
    """One verifiers message (pydantic model or dict) as an OpenAI chat dict.

    An assistant message that only calls tools keeps ``content: None``, as verifiers' own client sends it
    (and as its rows record it); one without tool calls gets ``""`` for a missing content.
    ``keep_text_role``: a completion-mode ``text`` message stays ``text`` (what a row records) rather than
    becoming the user turn it is sent as."""
    data = message.model_dump(exclude_none=True) if hasattr(message, "model_dump") else dict(message)
    role = data.get("role", "user")
    if role == "text" and not keep_text_role:  # verifiers' raw-text message is sent as a user turn
        role = "user"
    out: Message = {"role": role, "content": data.get("content")}
    if role == "assistant":
        calls = [_openai_tool_call(call) for call in data.get("tool_calls") or []]
        if out["content"] is None and not calls:
            out["content"] = ""
        if calls:
            out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = data.get("tool_call_id", "")
    if data.get("name"):
        out["name"] = data["name"]
    return out


def to_openai_messages(messages: Iterable[Any] | None, keep_text_role: bool = False) -> list[Message]:
    return [to_openai_message(m, keep_text_role) for m in messages or []]


def _openai_tool_call(call: Any) -> dict[str, Any]:
    data = call if isinstance(call, Mapping) else call.model_dump()
    if "function" in data:  # already OpenAI-shaped
        return {"id": data.get("id", ""), "type": "function", "function": dict(data["function"])}
    return {"id": data.get("id", ""), "type": "function",
            "function": {"name": data.get("name", ""), "arguments": data.get("arguments", "")}}


def to_openai_tool(tool: Any) -> dict[str, Any]:
    """A verifiers ``Tool`` (or its dict) as an OpenAI ``{"type": "function", "function": {...}}`` schema."""
    data = tool if isinstance(tool, Mapping) else tool.model_dump(exclude_none=True)
    function = {"name": data["name"], "description": data.get("description", ""),
                "parameters": data.get("parameters") or {"type": "object", "properties": {}}}
    if data.get("strict") is not None:
        function["strict"] = data["strict"]
    return {"type": "function", "function": function}


def to_sampling_args(vf_sampling: Mapping[str, Any] | None) -> SamplingArgs:
    """verifiers' sampling dict -> SamplingArgs; ``extra_body`` keys and unknown keys pass through to the server.

    ``n`` is dropped (verifiers always asks for one choice); ``None`` values mean "not set".
    """
    data = {k: v for k, v in dict(vf_sampling or {}).items() if v is not None}
    data.pop("n", None)
    extra_body = data.pop("extra_body", None) or {}
    if "max_completion_tokens" in data and "max_tokens" not in data:
        data["max_tokens"] = data.pop("max_completion_tokens")
    merged = {**data, **{k: v for k, v in dict(extra_body).items() if v is not None}}
    if "logprobs" in merged:
        merged["logprobs"] = bool(merged["logprobs"])
    return SamplingArgs.from_dict(merged)


def to_vf_sampling(base: Mapping[str, Any] | None, sampling: SamplingArgs | None) -> dict[str, Any]:
    """verifiers' own merge: the environment's sampling dict, updated with the run's (as ``generate`` does)."""
    merged: dict[str, Any] = {k: v for k, v in dict(base or {}).items()}
    if sampling is not None:
        merged.update(sampling.to_dict())
    return merged

"""The rollouts of a report as compact JSON for the page's own script (search, filter, pages).

Every rollout of an eval run goes into the page (the script shows one page at a time, so a
10,000-rollout run stays responsive); what is cut is the text of a single message past
``MAX_MESSAGE_CHARS``, marked in place with how much was left out. Prompts are stored once and
referenced by index, since every rollout of an example (and usually every example) repeats the
system prompt. The JSON is made safe to sit inside ``<script>``: ``<``, ``>`` and ``&`` are escaped.
"""

from __future__ import annotations

import json
from typing import Any

from evalkit.report.eval_data import error_kind_and_message, text_of

MAX_MESSAGE_CHARS = 8000


class RolloutPayload:
    """Collects rows of one or more runs; ``to_json()`` is what the page script reads."""

    def __init__(self, run_labels: list[str]):
        self.run_labels = run_labels
        self.prompts: list[list[dict[str, Any]]] = []
        self._prompt_index: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []
        self.clipped = 0

    def add(self, run: int, row: dict[str, Any]) -> None:
        error = row.get("error")
        kind, message = error_kind_and_message(row) if error else (None, None)
        usage = row.get("token_usage") or {}
        item: dict[str, Any] = {
            "r": run,
            "e": row.get("example_id"),
            "i": row.get("rollout_idx"),
            "rw": _number(row.get("reward")),
            "m": {str(k): _number(v) for k, v in (row.get("metrics") or {}).items()},
            "err": message,
            "ek": kind,
            "st": row.get("stop_condition"),
            "tr": bool(row.get("is_truncated")),
            "p": self._prompt(row.get("prompt")),
            "c": self._messages(row.get("completion")),
            "a": self._clip(text_of(row.get("answer"))),
            "tk": [usage.get("input_tokens"), usage.get("output_tokens")],
        }
        for key, short in (("step", "s"), ("kept", "k"), ("advantage", "adv")):
            if key in row:
                item[short] = row[key]
        self.rows.append(item)

    def to_json(self) -> str:
        data = {"runs": self.run_labels, "prompts": self.prompts, "rows": self.rows,
                "clipped": self.clipped, "maxChars": MAX_MESSAGE_CHARS}
        return script_safe_json(data)

    def _prompt(self, prompt: Any) -> int:
        messages = self._messages(prompt)
        key = json.dumps(messages, sort_keys=True, ensure_ascii=False)
        if key not in self._prompt_index:
            self._prompt_index[key] = len(self.prompts)
            self.prompts.append(messages)
        return self._prompt_index[key]

    def _messages(self, messages: Any) -> list[dict[str, Any]]:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        out = []
        for message in messages or []:
            if not isinstance(message, dict):
                continue
            item: dict[str, Any] = {
                "role": str(message.get("role") or "?"),
                "text": self._clip(text_of(message.get("content"))),
            }
            calls = [_tool_call(call) for call in message.get("tool_calls") or []]
            if calls:
                item["calls"] = calls
            if message.get("tool_call_id"):
                item["id"] = str(message["tool_call_id"])
            out.append(item)
        return out

    def _clip(self, text: str) -> str:
        if len(text) <= MAX_MESSAGE_CHARS:
            return text
        self.clipped += 1
        return text[:MAX_MESSAGE_CHARS] + f"\n… [{len(text) - MAX_MESSAGE_CHARS:,} more characters in the run's files]"


def script_safe_json(data: Any) -> str:
    """JSON that cannot end a ``<script>`` element or start a comment/entity inside it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _tool_call(call: Any) -> dict[str, str]:
    """OpenAI's ``{id, function: {name, arguments}}`` or a flat ``{id, name, arguments}``."""
    if not isinstance(call, dict):
        return {"name": "?", "args": str(call)}
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, default=str)
    return {"name": str(function.get("name") or "?"), "args": arguments, "id": str(call.get("id") or "")}


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None

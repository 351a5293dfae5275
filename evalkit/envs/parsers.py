"""Parsers turn a model's text into the part a reward function checks, and score format.

``Parser`` passes text through; ``XMLParser`` reads ``<field>...</field>`` blocks; ``ThinkParser``
drops a leading ``<think>...</think>`` block. ``parse_answer`` works on a string or a completion
(message list) and reads the last assistant message, which is what rubrics almost always want.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from evalkit.core.types import Message


def last_assistant_text(completion: list[Message] | str) -> str:
    """The content of the last assistant message ('' when there is none)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion):
        if message.get("role") == "assistant":
            return str(message.get("content") or "")
    return ""


def _with_role(messages: list[Message], role: str) -> list[Message]:
    return [m for m in messages if (m.get("role") if isinstance(m, dict) else getattr(m, "role", None)) == role]


class Parser:
    """Identity parser with an optional ``extract_fn`` applied to the answer text."""

    def __init__(self, extract_fn: Callable[[str], str | None] | None = None):
        self.extract_fn = extract_fn

    def parse(self, text: str) -> Any:
        return text.strip()

    # verifiers' message helpers: the messages of one role, in order (dicts or message objects).
    def get_assistant_messages(self, completion: list[Message]) -> list[Message]:
        return _with_role(completion, "assistant")

    def get_user_messages(self, completion: list[Message]) -> list[Message]:
        return _with_role(completion, "user")

    def get_system_messages(self, completion: list[Message]) -> list[Message]:
        return _with_role(completion, "system")

    def get_tool_messages(self, completion: list[Message]) -> list[Message]:
        return _with_role(completion, "tool")

    def parse_answer(self, completion: list[Message] | str) -> str | None:
        text = self.parse(last_assistant_text(completion))
        if not isinstance(text, str):
            return None
        return self.extract_fn(text) if self.extract_fn else text

    def format_score(self, completion: list[Message] | str) -> float:
        """1.0 when the last assistant message is non-empty (subclasses check real structure)."""
        return 1.0 if last_assistant_text(completion).strip() else 0.0

    def get_format_reward_func(self) -> Callable[..., float]:
        """A reward function named ``format_reward`` scoring this parser's format (for a Rubric)."""

        def format_reward(completion: list[Message] | str) -> float:
            return self.format_score(completion)

        return format_reward


class XMLParser(Parser):
    """Reads ``<field>value</field>`` blocks; ``parse`` returns a namespace with one attribute per field.

    ``fields`` entries may be a name or a tuple of alternative names (the first is canonical).
    A missing field is ``None``. When a field appears several times the last one wins, matching how
    models revise an answer.
    """

    def __init__(self, fields: list[str | tuple[str, ...]], answer_field: str | None = None):
        super().__init__()
        if not fields:
            raise ValueError("XMLParser needs at least one field")
        self._fields: list[tuple[str, ...]] = [(f,) if isinstance(f, str) else tuple(f) for f in fields]
        self.answer_field = answer_field or self._fields[-1][0]
        self._patterns = {
            alt: re.compile(rf"<{re.escape(alt)}>\s*(.*?)\s*(?:</{re.escape(alt)}>|$)", re.DOTALL)
            for names in self._fields
            for alt in names
        }

    @property
    def field_names(self) -> list[str]:
        return [names[0] for names in self._fields]

    def parse(self, text: str) -> SimpleNamespace:
        values: dict[str, str | None] = {}
        for names in self._fields:
            values[names[0]] = None
            for alt in names:
                matches = self._patterns[alt].findall(text)
                if matches:
                    values[names[0]] = matches[-1].strip()
                    break
        return SimpleNamespace(**values)

    def parse_answer(self, completion: list[Message] | str) -> str | None:
        return getattr(self.parse(last_assistant_text(completion)), self.answer_field, None)

    def format_score(self, completion: list[Message] | str) -> float:
        """Fraction of the expected fields present as properly closed tags in the last message."""
        text = last_assistant_text(completion)
        if not text:
            return 0.0
        present = 0
        for names in self._fields:
            if any(re.search(rf"<{re.escape(a)}>.*?</{re.escape(a)}>", text, re.DOTALL) for a in names):
                present += 1
        return present / len(self._fields)

    def format(self, **values: str) -> str:
        """Render values as the XML this parser reads (used in few-shot examples and prompts)."""
        return "\n".join(f"<{name}>\n{values[name]}\n</{name}>" for name in self.field_names if name in values)


class ThinkParser(Parser):
    """Drops reasoning in ``<think>...</think>``; the answer is what follows the last ``</think>``."""

    def parse(self, text: str) -> str:
        if "</think>" in text:
            text = text.rsplit("</think>", 1)[1]
        return text.strip()

    def format_score(self, completion: list[Message] | str) -> float:
        text = last_assistant_text(completion).strip()
        ok = text.startswith("<think>") and text.count("<think>") == 1 and text.count("</think>") == 1
        return 1.0 if ok and self.parse(text) else 0.0

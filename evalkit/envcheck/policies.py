"""The scripted policies ``prime env check`` plays: replies chosen to find what a reward pays for.

A policy turns one dataset row into a reply function (:data:`~evalkit.clients.scripted.ReplyFn`), or
``None`` where it does not apply (no gold answer; a parser with no template). ``gold`` policies should
score the environment's maximum; every other one should score the floor. The gold answer is tried in the
renderings a rubric is likely to read (bare, in the parser's answer tag, in ``\\boxed{}``): the best one
counts, and the adversarial "every plausible answer" reply uses that same rendering so it tests the
reward, not the format.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.clients.scripted import ReplyFn, message_text
from evalkit.core.types import Message

HUGE_REPLY_CHARS = 90_000
"""Length of the "huge reply": just under the default ``max_message_chars`` (100,000), so the rubric sees all of it."""
RUBRIC_QUOTE_CHARS = 8_000
"""At most this much reward-function source is quoted back."""

GOLD, FLOOR = "max", "floor"


@dataclass(frozen=True)
class Policy:
    """One scripted behaviour: ``expect`` is :data:`GOLD` (should score the maximum) or :data:`FLOOR`."""

    name: str
    expect: str
    describe: str
    reply_for: Callable[[dict[str, Any]], ReplyFn | None]


def gold_renderings(answer: str, parser: Any) -> list[tuple[str, str]]:
    """``(label, text)`` renderings of a gold answer: bare, in the parser's answer tag, boxed."""
    out = [("bare", answer)]
    tagged = _tagged(parser, answer)
    if tagged is not None and tagged != answer:
        out.append(("tagged", tagged))
    out.append(("boxed", f"\\boxed{{{answer}}}"))
    return out


def _tagged(parser: Any, answer: str) -> str | None:
    """The parser's own rendering of ``answer`` in its answer field (XML parsers, ours and verifiers')."""
    field = getattr(parser, "answer_field", None)
    fmt = getattr(parser, "format", None)
    if not field or not callable(fmt):
        return None
    values = {name: "" for name in _field_names(parser)}  # some parsers' format wants every field
    values[field] = answer
    try:
        return str(fmt(**values))
    except Exception:  # a parser's own format refusing a value is no finding; the other renderings remain
        return None


def format_only(parser: Any) -> str | None:
    """The parser's template with every field empty (``<think>\n</think>`` for think parsers); None if it has none."""
    names = _field_names(parser)
    if names:
        return "\n".join(f"<{name}>\n</{name}>" for name in names)
    if "think" in type(parser).__name__.lower():
        return "<think>\n</think>\n"
    return None


def _field_names(parser: Any) -> list[str]:
    names = getattr(parser, "field_names", None)
    if names is None and callable(getattr(parser, "get_fields", None)):
        names = parser.get_fields()
    return [str(n) for n in names] if isinstance(names, (list, tuple)) else []


def reward_source(rubric: Any) -> str:
    """The source of the rubric's reward functions, as far as Python can show it (for the rubric-quoting reply)."""
    funcs = getattr(rubric, "funcs", None) or getattr(rubric, "reward_funcs", None) or []
    parts = []
    for func in funcs:
        try:
            parts.append(inspect.getsource(func))
        except (OSError, TypeError):
            parts.append(f"def {getattr(func, '__name__', 'reward')}(...): ...")
    return "\n".join(parts)[:RUBRIC_QUOTE_CHARS] or "def reward(completion, answer): return 1.0"


def echo_reply(messages: list[Message]) -> str:
    """The last user (or, lacking one, any) message's text, sent straight back."""
    users = [m for m in messages if m.get("role") == "user"] or list(messages)
    return message_text(users[-1]) if users else ""


def shotgun(own: str, answers: Sequence[str], limit: int = 40) -> str:
    """Every plausible answer in one reply: the row's own among the others, neither first nor last."""
    others = [a for a in dict.fromkeys(answers) if a != own][: limit - 1]
    if not others:
        return own
    middle = len(others) // 2 or 1
    return "\n".join([*others[:middle], own, *others[middle:]] if len(others) > 1 else [others[0], own, others[0]])


def constant(text: str) -> Callable[[dict[str, Any]], ReplyFn]:
    return lambda row: (lambda messages: text)


def floor_policies(parser: Any, rubric: Any) -> list[Policy]:
    """The replies that should earn nothing, whatever the task."""
    template = format_only(parser)
    quote = reward_source(rubric)
    huge = ("the answer is " * (HUGE_REPLY_CHARS // 14 + 1))[:HUGE_REPLY_CHARS]
    policies = [
        Policy("empty", FLOOR, "an empty reply", constant("")),
        Policy("echo", FLOOR, "the prompt echoed back", lambda row: echo_reply),
        Policy("rubric-quote", FLOOR, "the reward functions' source quoted back", constant(quote)),
        Policy("huge", FLOOR, f"one {HUGE_REPLY_CHARS:,}-character reply", constant(huge)),
    ]
    if template is not None:
        policies.insert(2, Policy("format-only", FLOOR, "the parser's template with nothing in it", constant(template)))
    return policies


def answer_of(row: dict[str, Any]) -> str | None:
    """The row's gold answer, if it has a usable one."""
    answer = row.get("answer")
    return None if answer is None or str(answer).strip() == "" else str(answer)

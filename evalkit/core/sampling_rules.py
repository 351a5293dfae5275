"""Types and ranges of the sampling keys primekit knows, checked before any request is sent.

A bad value (``temperature: "hot"``, ``max_tokens: -5``) would otherwise reach the server, which
rejects every request, or the embedded engine, where every rollout errors: a whole run spent on
nothing. Keys not listed here pass through to OpenAI-compatible servers unchecked (servers accept
keys of their own); ``None`` means "the server's default" and is always allowed.

Every range is bounded where a value reaches a tensor or a per-token loop, so one request cannot
fail or slow the batch it shares with others (docs/serve-limits.md lists them): ``top_k`` at
:data:`MAX_TOP_K` (beyond any vocabulary; the engine treats ``k >= vocab`` as no limit),
``max_tokens`` at :data:`MAX_MAX_TOKENS` (the engine then holds it to the context window), and
``stop`` at :data:`MAX_STOP_STRINGS` strings of :data:`MAX_STOP_CHARS` characters (each is looked
for in the tail of the text after every token).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

MAX_TOP_K = 1 << 20
"""1,048,576: more than any vocabulary served; a larger ``top_k`` would overflow the engine's int64 rows."""
MAX_MAX_TOKENS = 1 << 24
"""16,777,216 tokens: beyond every context window; the engine refuses what its own window cannot hold."""
MAX_STOP_STRINGS = 32
"""Stop strings per request (OpenAI takes 4): each is searched for after every sampled token."""
MAX_STOP_CHARS = 256
"""Characters per stop string: the text tail searched after every token is this long (plus a few tokens)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _stop(value: Any) -> bool:
    strings = [value] if isinstance(value, str) else value
    return (isinstance(strings, list) and len(strings) <= MAX_STOP_STRINGS
            and all(isinstance(v, str) and len(v) <= MAX_STOP_CHARS for v in strings))


def _tokens(value: Any) -> bool:
    return _is_int(value) and 1 <= value <= MAX_MAX_TOKENS


Rule = tuple[Callable[[Any], bool], str]

RULES: dict[str, Rule] = {
    "max_tokens": (_tokens, f"a whole number of at least 1 (at most {MAX_MAX_TOKENS})"),
    "max_completion_tokens": (_tokens, f"a whole number of at least 1 (at most {MAX_MAX_TOKENS})"),
    "temperature": (lambda v: _is_number(v) and v >= 0, "a number of at least 0"),
    "top_p": (lambda v: _is_number(v) and 0 < v <= 1, "a number in (0, 1]"),
    "top_k": (
        lambda v: _is_int(v) and -1 <= v <= MAX_TOP_K,
        f"a whole number from -1 to {MAX_TOP_K} (-1 or 0 for no limit)",
    ),
    "min_p": (lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "seed": (_is_int, "a whole number (any size: the engine folds it into 64 bits)"),
    "stop": (
        _stop,
        f"a string or a list of strings, at most {MAX_STOP_STRINGS} of them, each at most {MAX_STOP_CHARS} characters",
    ),
    "logprobs": (lambda v: isinstance(v, bool), "true or false"),
    "top_logprobs": (lambda v: _is_int(v) and 0 <= v <= 20, "a whole number from 0 to 20"),
    "presence_penalty": (lambda v: _is_number(v) and -2 <= v <= 2, "a number in [-2, 2]"),
    "frequency_penalty": (lambda v: _is_number(v) and -2 <= v <= 2, "a number in [-2, 2]"),
    "repetition_penalty": (lambda v: _is_number(v) and v > 0, "a number above 0"),
    "n": (lambda v: v == 1 and _is_int(v), "1 (one reply per request; use rollouts_per_example / -r for more)"),
}


def sampling_problems(data: Mapping[str, Any]) -> list[str]:
    """One line per known key whose value has the wrong type or range (empty when all is well)."""
    problems = []
    for key, value in data.items():
        rule = RULES.get(key)
        if rule is not None and value is not None and not rule[0](value):
            problems.append(f"'{key}' must be {rule[1]}, got {_shown(value)}")
    return problems


def _shown(value: Any) -> str:
    """``repr(value)``, cut short: a refused value can be megabytes (400,000 stop strings)."""
    text = repr(value)
    if len(text) <= 120:
        return text
    count = f" ({len(value)} items)" if isinstance(value, (list, dict)) else ""
    return f"{text[:100]}...{count}"


def check_sampling(data: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first bad key (see :func:`sampling_problems`)."""
    problems = sampling_problems(data)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)

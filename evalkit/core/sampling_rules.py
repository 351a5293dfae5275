"""Types and ranges of the sampling keys primekit knows, checked before any request is sent.

A bad value (``temperature: "hot"``, ``max_tokens: -5``) would otherwise reach the server, which
rejects every request, or the embedded engine, where every rollout errors: a whole run spent on
nothing. Keys not listed here pass through to OpenAI-compatible servers unchecked (servers accept
keys of their own); ``None`` means "the server's default" and is always allowed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _stop(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


Rule = tuple[Callable[[Any], bool], str]

RULES: dict[str, Rule] = {
    "max_tokens": (lambda v: _is_int(v) and v >= 1, "a whole number of at least 1"),
    "max_completion_tokens": (lambda v: _is_int(v) and v >= 1, "a whole number of at least 1"),
    "temperature": (lambda v: _is_number(v) and v >= 0, "a number of at least 0"),
    "top_p": (lambda v: _is_number(v) and 0 < v <= 1, "a number in (0, 1]"),
    "top_k": (lambda v: _is_int(v) and v >= -1, "a whole number (-1 or 0 for no limit)"),
    "min_p": (lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "seed": (_is_int, "a whole number"),
    "stop": (_stop, "a string or a list of strings"),
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
            problems.append(f"'{key}' must be {rule[1]}, got {value!r}")
    return problems


def check_sampling(data: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first bad key (see :func:`sampling_problems`)."""
    problems = sampling_problems(data)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)

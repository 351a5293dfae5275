"""Nested config data addressed by dotted keys: ``--trainer.lr 5e-6`` on a command line, ``trainer.lr`` in a
translation table.

One reader of a dotted flag, one key splitter, one merge and one get/pop, shared by `prime rl run` / `prime sft run`
overrides (:func:`rl_backend.config.parse_overrides`), verifiers 0.4's dotted flags and ``@`` files
(:mod:`primekit_cli.dialect.args`), the prime-rl shape translation (:mod:`rl_backend.config_shapes`) and the
validated read-back of run files (:mod:`evalkit.core.readback`). What a flag's text value becomes stays with the
caller: a TOML value for RL, text for verifiers (its config classes coerce it, as ``prime-pydantic-config`` leaves
it to them).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalkit.core.errors import ConfigError
from evalkit.core.tomlio import MAX_DEPTH

MISSING: Any = object()
"""What :func:`get` returns for a key that is not there (``None`` can be a value)."""


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``, table by table (a table merges key by key; anything else replaces); both stay
    as they were."""
    merged = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def read_flag(args: Sequence[str], index: int, is_value: Callable[[str], bool]) -> tuple[str, str, int]:
    """The ``--key`` flag at ``args[index]``: its key (no ``--``), its text value and the index after it.

    ``--key=value`` and ``--key value`` (when ``is_value`` says the next token is one) give ``value``; a flag with
    no value is ``"true"``.
    """
    key, has_value, value = args[index][2:].partition("=")
    index += 1
    if not has_value:
        has_value = index < len(args) and is_value(args[index])
        value = args[index] if has_value else "true"
        index += 1 if has_value else 0
    return key, value, index


def key_parts(key: str) -> list[str] | None:
    """``trainer.max-steps`` -> ``["trainer", "max_steps"]`` (a ``-`` in a key is a ``_``); None when a part is
    empty (``a..b``, ``.a``); ``ConfigError`` for more than :data:`~evalkit.core.tomlio.MAX_DEPTH` parts (one line,
    not a traceback: no config nests that deep)."""
    parts = key.split(".", MAX_DEPTH)
    if len(parts) > MAX_DEPTH:
        shown = key if len(key) <= 40 else key[:37] + "..."
        raise ConfigError(f"--{shown}: a dotted key of more than {MAX_DEPTH} parts names no config field")
    parts = [part.replace("-", "_") for part in parts]
    return parts if all(parts) else None


def nested(parts: Sequence[str], value: Any) -> dict[str, Any]:
    """``["a", "b"], 1`` -> ``{"a": {"b": 1}}``."""
    for part in reversed(parts[1:]):
        value = {part: value}
    return {parts[0]: value}


def get(data: Mapping[str, Any], dotted: str) -> Any:
    """The value at ``dotted`` (``a.b``), or :data:`MISSING`."""
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return MISSING
        node = node[part]
    return node


def pop(data: dict[str, Any], dotted: str) -> None:
    """Remove ``dotted`` (it must be there) and every table it leaves empty on the way up."""
    parts = dotted.split(".")
    chain = [data]
    for part in parts[:-1]:
        chain.append(chain[-1][part])
    del chain[-1][parts[-1]]
    for depth in range(len(parts) - 1, 0, -1):
        if chain[depth] == {}:
            del chain[depth - 1][parts[depth - 1]]

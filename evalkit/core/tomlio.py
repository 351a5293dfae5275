"""Reading TOML configs into pydantic models with errors a user can act on.

Malformed TOML names the file and line; a validation error names the dotted key and what was
expected; unknown keys are rejected by the models (``extra="forbid"``), never silently ignored.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from evalkit.core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

M = TypeVar("M", bound=BaseModel)


def load_toml(path: str | Path) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file not found: {file}")
    try:
        with file.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}") from exc


def validate(model: type[M], data: dict[str, Any], source: str | Path) -> M:
    """``model.model_validate(data)`` with the first problem turned into one clear line."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, source)) from exc


def describe_validation_error(exc: ValidationError, source: str | Path) -> str:
    problems = []
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown key '{key}'")
        elif err["type"] == "missing":
            problems.append(f"missing required key '{key}'")
        else:
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"'{key}': {message}")
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{source}: {problems[0]}{more}"


def dumps(data: dict[str, Any], inline: tuple[str, ...] = ()) -> str:
    """``data`` as TOML text: scalars and arrays first, then one ``[table]`` / ``[[array]]`` per nested dict.

    Keys named in ``inline`` hold dicts written as inline tables (``args = { a = 1 }``). ``None``
    has no TOML form: leave such keys out before calling. Reading the text back with ``tomllib``
    gives ``data`` again.
    """
    return _dump_table(data, [], inline)


def _dump_table(data: dict[str, Any], path: list[str], inline: tuple[str, ...]) -> str:
    lines = []
    tables = []
    for key, value in data.items():
        if isinstance(value, dict) and key not in inline:
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            tables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {toml_value(value)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for key, value in tables:
        name = ".".join(_key(part) for part in [*path, key])
        if isinstance(value, list):
            for item in value:
                out += f"\n[[{name}]]\n" + _dump_table(item, [*path, key], inline).lstrip("\n")
        else:
            out += f"\n[{name}]\n" + _dump_table(value, [*path, key], inline).lstrip("\n")
    return out


def toml_value(value: Any) -> str:
    """One TOML value (string, number, boolean, array or inline table)."""
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _key(key: str) -> str:
    import json
    import re

    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)

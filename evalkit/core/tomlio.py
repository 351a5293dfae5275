"""Reading TOML configs into pydantic models with errors a user can act on.

Malformed TOML names the file and line; a validation error names the dotted key and what was
expected; unknown keys are rejected by the models (``extra="forbid"``), never silently ignored.
A config is a regular file of at most :data:`evalkit.core.fileio.MAX_USER_FILE_BYTES`, UTF-8 text, whose
tables and arrays nest at most :data:`MAX_DEPTH` deep (no real config comes near; thousands of levels would
overflow the stack of every reader after this one): each is one ``ConfigError`` line otherwise.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from evalkit.core.errors import ConfigError
from evalkit.core.fileio import MAX_RUN_OBJECT_BYTES, MAX_USER_FILE_BYTES, FileRefused, read_regular

M = TypeVar("M", bound=BaseModel)
MAX_DEPTH = 64
"""How deep tables and arrays of a config (or the parts of a dotted key) may nest."""


def load_toml(path: str | Path) -> dict[str, Any]:
    """A TOML config file's data; ``ConfigError`` naming the file for anything but a valid config (see above)."""
    file = Path(path)
    try:
        data = read_regular(file, MAX_USER_FILE_BYTES)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {file}") from None
    except FileRefused as exc:
        raise ConfigError(f"config file {file}: {exc.why}; pass a TOML file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror or exc}") from None
    return parse_toml(data, file)


def parse_toml(data: bytes, source: str | Path) -> dict[str, Any]:
    """TOML bytes read from ``source``, checked as :func:`load_toml` checks a file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}") from exc
    except RecursionError:
        parsed = None
    if parsed is None or depth_over(parsed, MAX_DEPTH):
        raise ConfigError(f"{source}: tables or arrays nest more than {MAX_DEPTH} deep; no config needs that, "
                          "so check the file")
    return parsed


def read_run_toml(path: Path) -> dict[str, Any] | None:
    """A TOML file of a run dir (its resolved config), or ``None`` when it is missing, not a regular file, larger
    than :data:`evalkit.core.fileio.MAX_RUN_OBJECT_BYTES` or not a valid config: a run dir is data from anywhere."""
    try:
        return parse_toml(read_regular(path, MAX_RUN_OBJECT_BYTES), path)
    except (OSError, FileRefused, ConfigError):
        return None


def depth_over(value: Any, limit: int) -> bool:
    """Whether dicts and lists in ``value`` nest more than ``limit`` deep (walked without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


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

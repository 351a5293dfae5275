"""Reading TOML configs into pydantic models with errors a user can act on.

Malformed TOML names the file and line; a validation error names the dotted key and what was
expected; unknown keys are rejected by the models (``extra="forbid"``), never silently ignored.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from evalkit.errors import ConfigError

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

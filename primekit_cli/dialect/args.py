"""verifiers 0.4's command-line forms for a run config, read into raw config data (no schema here).

``vf-eval`` / ``vf-gepa`` (through ``prime-pydantic-config``) take ``@ file.toml`` (several merge, later wins), a
leading bare taskset id (``--env.taskset.id``), and dotted overrides ``--sampling.temperature 0.5`` /
``--env.taskset.split=train`` (a ``-`` in a key is a ``_``; a dotted flag with no value, one followed by another
flag, is ``true``). This module
only collects those into one nested dict; verifiers' own config classes validate it
(:mod:`~primekit_cli.dialect.config`). Values stay strings (pydantic's lax mode coerces ``"0.5"`` to a
float field), except JSON lists and objects (``--reflection_columns '["a"]'``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.dotted import deep_merge, key_parts, nested, read_flag
from evalkit.core.errors import UserError

FILE_SIGN = "@"


@dataclass
class DialectArgs:
    """The v1 dialect's part of a command line: config files (in order) and dotted overrides (in order)."""

    files: list[str] = field(default_factory=list)
    overrides: list[tuple[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.files or self.overrides)


def is_dotted_flag(token: str) -> bool:
    """``--a.b`` or ``--a.b=value``: a verifiers dotted override (primekit's own flags have no dot)."""
    return token.startswith("--") and "." in token.split("=", 1)[0]


def take_dialect_tokens(args: list[str]) -> tuple[list[str], DialectArgs]:
    """Split a command line into (the tokens primekit's own parser reads, the v1 dialect's tokens)."""
    rest: list[str] = []
    found = DialectArgs()
    i = 0
    while i < len(args):
        token = args[i]
        if token == FILE_SIGN:
            if i + 1 >= len(args):
                raise UserError("'@' must be followed by a config file path, e.g. @ configs/eval.toml")
            found.files.append(args[i + 1])
            i += 2
        elif token.startswith(FILE_SIGN) and len(token) > 1 and token[1:].endswith((".toml", ".json")):
            found.files.append(token[1:])
            i += 1
        elif is_dotted_flag(token):
            key, value, i = read_flag(args, i, lambda following: not _is_flag(following))
            found.overrides.append((key, _value(value)))
        else:
            rest.append(token)
            i += 1
    return rest, found


def _is_flag(token: str) -> bool:
    """A flag or ``@`` (so a dotted flag before it has no value), not a negative number."""
    if token.startswith(FILE_SIGN):
        return True
    if not token.startswith("-"):
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def _value(text: str) -> Any:
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"dotted override value {text!r} is not valid JSON: {exc.msg}") from exc
        except RecursionError:
            raise UserError(f"dotted override value {text[:20]!r}... nests thousands deep; "
                            "no config needs that") from None
    return text


def load_file(path: str) -> dict[str, Any]:
    """A config file's data (TOML, or JSON such as verifiers' own ``configs/resolved/eval.json``)."""
    from evalkit.core.fileio import read_user_bytes
    from evalkit.core.tomlio import MAX_DEPTH, depth_over, load_toml

    if path.endswith(".json"):
        file = Path(path)
        if not file.is_file():
            raise UserError(f"config file not found: {file}")
        try:
            data = json.loads(read_user_bytes(file, "config file").decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{file} is not valid JSON: {exc}") from exc
        except RecursionError:
            data = None
        if data is None or depth_over(data, MAX_DEPTH):
            raise UserError(f"{file}: objects or arrays nest more than {MAX_DEPTH} deep; no config needs that")
        if not isinstance(data, dict):
            raise UserError(f"{file} must hold a JSON object (a run config)")
        return data
    if not path.endswith(".toml"):
        raise UserError(f"config file {path} must end in .toml or .json")
    return load_toml(path)


def raw_config(files: list[str], overrides: list[tuple[str, Any]], taskset: str | None) -> dict[str, Any]:
    """The files merged in order, then the overrides, then a positional taskset id (``--env.taskset.id``)."""
    data: dict[str, Any] = {}
    for path in files:
        data = deep_merge(data, load_file(path))
    for key, value in overrides:
        parts = key_parts(key)
        if parts is None:
            raise UserError(f"--{key} is not a dotted config key (e.g. --sampling.temperature 0.5)")
        data = deep_merge(data, nested(parts, value))
    if taskset is not None:
        data = deep_merge(data, {"env": {"taskset": {"id": taskset}}})
    return data


V1_ONLY_KEYS = frozenset({"num_rollouts", "num_tasks", "group_size", "select", "client", "run", "push", "rich",
                          "serve", "clean", "max_total_rollouts", "reflection_minibatch_size", "reflection_columns",
                          "initial_prompt", "reflection_client"})
"""Top-level keys only verifiers 0.4's run configs have (primekit's own eval/GEPA TOML never uses them)."""


PRIMEKIT_ENV_KEYS = frozenset({"id", "env_id", "args", "env_args", "extra_env_kwargs", "harness"})
"""Keys of primekit's own ``[env]`` table (GEPA, RL); its ``[env.taskset]`` sub-table never names an ``id``."""


def is_v1_file(data: dict[str, Any]) -> bool:
    """Whether a TOML's data is a verifiers 0.4 run config rather than primekit's ``[[eval]]`` / ``[env]`` file:
    an ``[env.taskset]`` table naming the taskset ``id``, a seat table (``[env.agent]``), or a top-level key
    only verifiers' run configs have."""
    if "eval" in data:
        return False
    env = data.get("env")
    if isinstance(env, dict):
        taskset = env.get("taskset")
        if isinstance(taskset, dict) and "id" in taskset:
            return True
        if any(isinstance(value, dict) for key, value in env.items() if key not in PRIMEKIT_ENV_KEYS | {"taskset"}):
            return True
    return bool(V1_ONLY_KEYS & set(data))

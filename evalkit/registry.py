"""Resolving an environment id to a loaded :class:`Environment`.

Rules (DESIGN.md): an owner prefix is dropped (``primeintellect/reverse-text``), ``-`` becomes ``_``;
then look in ``./environments/<mod>/`` (a folder holding ``<mod>.py`` or a package ``<mod>/``),
then an installed module ``<mod>``, then the built-ins in :mod:`evalkit.builtin`. A path
(``./environments/my_env``, ``/abs/path/my_env``) loads that folder directly.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from evalkit.errors import UserError

BUILTIN_PACKAGE = "evalkit.builtin"
BUILTIN_IDS = ("reverse-text", "alphabet-sort", "arithmetic", "wordle", "fact-search")


@dataclass(frozen=True)
class EnvSource:
    env_id: str
    module_name: str
    origin: str  # "local", "installed" or "builtin"
    path: Path | None = None


def module_name_for(env_id: str) -> str:
    """``primeintellect/reverse-text`` -> ``reverse_text``."""
    name = env_id.rstrip("/").split("/")[-1]
    return name.replace("-", "_")


def _looks_like_path(env_id: str) -> bool:
    # A bare id that happens to name an unrelated folder in the cwd (e.g. ``./arithmetic/`` holding
    # outputs) must still resolve as an id; only a folder holding the environment module is a path.
    if env_id.startswith((".", "/", "~")):
        return True
    folder = Path(env_id)
    return folder.is_dir() and _local_module_file(folder, module_name_for(folder.name)) is not None


def _local_module_file(folder: Path, module: str) -> Path | None:
    for candidate in (folder / f"{module}.py", folder / module / "__init__.py", folder / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def resolve(env_id: str, environments_dir: Path | str = "environments") -> EnvSource:
    """Find where ``env_id`` comes from without importing it."""
    if not env_id or not env_id.strip():
        raise UserError("no environment given; pass an id such as 'reverse-text' (see `prime env list`)")
    if _looks_like_path(env_id):
        folder = Path(env_id).expanduser().resolve()
        module = module_name_for(folder.name)
        if not folder.is_dir() or _local_module_file(folder, module) is None:
            raise UserError(f"{env_id} is not an environment folder (expected {folder}/{module}.py)")
        return EnvSource(folder.name.replace("_", "-"), module, "local", folder)
    module = module_name_for(env_id)
    folder = Path(environments_dir) / module
    if folder.is_dir() and _local_module_file(folder, module) is not None:
        return EnvSource(env_id.split("/")[-1], module, "local", folder.resolve())
    if importlib.util.find_spec(module) is not None and module not in sys.stdlib_module_names:
        return EnvSource(env_id.split("/")[-1], module, "installed")
    builtin = f"{BUILTIN_PACKAGE}.{module}"
    if importlib.util.find_spec(builtin) is not None:
        return EnvSource(env_id.split("/")[-1], builtin, "builtin")
    known = ", ".join(BUILTIN_IDS)
    raise UserError(
        f"unknown environment '{env_id}': not in ./environments/, not an installed module '{module}', "
        f"not a built-in ({known}); see `prime env list` or create one with `prime env init {env_id}`"
    )


def import_env_module(source: EnvSource) -> ModuleType:
    if source.origin != "local":
        return importlib.import_module(source.module_name)
    assert source.path is not None
    file = _local_module_file(source.path, source.module_name)
    unique = f"primekit_local_env_{source.module_name}"
    spec = importlib.util.spec_from_file_location(
        unique, file, submodule_search_locations=[str(file.parent)] if file.name == "__init__.py" else None
    )
    if spec is None or spec.loader is None:
        raise UserError(f"cannot import environment from {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(unique, None)
        raise UserError(f"environment module {file} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def parse_json_object(raw: str | dict[str, Any] | None, what: str) -> dict[str, Any]:
    """A command-line JSON object (``-a``, ``-S``) -> dict; bad JSON or a non-object is a UserError naming ``what``."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} is not valid JSON ({exc.msg} at column {exc.colno}): {raw}") from exc
    if not isinstance(value, dict):
        raise UserError(f"{what} must be a JSON object like '{{\"key\": 1}}', got: {raw}")
    return value


def parse_env_args(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """``-a '{"difficulty": "easy"}'`` -> dict, with a clear error for bad JSON."""
    return parse_json_object(raw, "env args")


def load_environment(env_id: str, env_args: dict[str, Any] | None = None, environments_dir: Path | str = "environments"):
    """Resolve, import and call ``load_environment(**env_args)``; user mistakes become UserError."""
    from evalkit.envs.base import Environment

    env_args = dict(env_args or {})
    source = resolve(env_id, environments_dir)
    module = import_env_module(source)
    loader = getattr(module, "load_environment", None)
    if not callable(loader):
        raise UserError(f"environment '{env_id}' ({source.module_name}) has no load_environment() function")
    signature = inspect.signature(loader)
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        unknown = sorted(set(env_args) - set(signature.parameters))
        if unknown:
            accepted = ", ".join(signature.parameters) or "none"
            raise UserError(f"environment '{env_id}' does not accept env arg(s) {unknown}; it accepts: {accepted}")
    try:
        env = loader(**env_args)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"load_environment() of '{env_id}' raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(env, Environment):
        raise UserError(f"load_environment() of '{env_id}' returned {type(env).__name__}, not an Environment")
    if not env.env_id:
        env.env_id = source.env_id
    return env

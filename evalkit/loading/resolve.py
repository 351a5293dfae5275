"""Resolving an environment id to a loaded :class:`Environment`.

Rules, as verifiers resolves ids (plus primekit's built-ins, last): an owner prefix is dropped
(``primeintellect/reverse-text``) and ``-`` becomes ``_``; then an installed module ``<mod>`` (an
environment package from the Hub or ``prime env install``); then ``./environments/<mod>/`` (a folder holding
``<mod>.py`` or a package ``<mod>/``); then the built-ins in :mod:`evalkit.builtin`. A path
(``./environments/my_env``, ``/abs/path/my_env``) loads that folder directly.

What the module provides decides how it runs: ``load_environment(**env_args)`` returning a primekit
:class:`Environment` runs as is; returning a legacy verifiers environment (``import verifiers as vf``) is
wrapped by :mod:`evalkit.verifiers_compat`; a module exporting a verifiers v1 ``Taskset`` subclass in
``__all__`` (``import verifiers.v1 as vf``, no ``load_environment``) is wrapped the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.json_args import parse_json_object

BUILTIN_PACKAGE = "evalkit.builtin"
BUILTIN_IDS = ("reverse-text", "alphabet-sort", "arithmetic", "wordle", "fact-search")
SRC = "src"
"""The folder a ``src/``-layout project keeps its package in."""


@dataclass(frozen=True)
class EnvSource:
    env_id: str
    module_name: str
    origin: str  # "local", "installed" or "builtin"
    path: Path | None = None


def module_name_for(env_id: str) -> str:
    """The module an id names, as verifiers' loader derives it: ``Owner/Reverse-Text@0.1.2`` -> ``reverse_text``
    (the last ``/`` part, without ``@version``, ``-`` -> ``_``, lower-cased)."""
    return _bare_name(env_id).replace("-", "_").lower()


def _bare_name(env_id: str) -> str:
    """``owner/name@version`` -> ``name`` (what runs and tables call the environment)."""
    return env_id.rstrip("/").split("/")[-1].split("@", 1)[0]


def _folder_module(folder: Path) -> str:
    """The module a local folder holds: its name with ``-`` -> ``_`` (case kept: the file is named that way)."""
    return folder.name.replace("-", "_")


def _looks_like_path(env_id: str) -> bool:
    # A bare id that happens to name an unrelated folder in the cwd (e.g. ``./arithmetic/`` holding
    # outputs) must still resolve as an id; only a folder holding the environment module is a path.
    if env_id.startswith((".", "/", "~")):
        return True
    folder = Path(env_id)
    return folder.is_dir() and _local_module_file(folder, _folder_module(folder)) is not None


def _local_module_file(folder: Path, module: str) -> Path | None:
    """The file ``import <module>`` runs for a local folder: ``<module>.py``, a package ``<module>/``, the
    folder itself as the package, or a ``src/`` layout (``src/<module>/``, what ``uv init --package`` writes)."""
    for candidate in (folder / f"{module}.py", folder / module / "__init__.py", folder / "__init__.py",
                      folder / SRC / module / "__init__.py", folder / SRC / f"{module}.py"):
        if candidate.is_file():
            return candidate
    return None


def resolve(env_id: str, environments_dir: Path | str = "environments") -> EnvSource:
    """Find where ``env_id`` comes from without importing it."""
    if not env_id or not env_id.strip():
        raise UserError("no environment given; pass an id such as 'reverse-text' (see `prime env list`)")
    if _looks_like_path(env_id):
        folder = Path(env_id).expanduser().resolve()
        module = _folder_module(folder)
        if not folder.is_dir() or _local_module_file(folder, module) is None:
            raise UserError(f"{env_id} is not an environment folder (expected {folder}/{module}.py, a package "
                            f"{module}/ or a src/ layout with src/{module}/)")
        return EnvSource(folder.name.replace("_", "-"), module, "local", folder)
    module = module_name_for(env_id)
    if not module.isidentifier():
        raise UserError(
            f"'{env_id}' is not an environment id: ids are names like 'reverse-text' or 'owner/name' "
            f"(letters, digits, '-', '_'; '{module}' is not a module name), or a folder path like ./environments/my_env"
        )
    if _is_installed_module(module):
        return EnvSource(_bare_name(env_id), module, "installed")
    folder = Path(environments_dir) / module
    if folder.is_dir() and _local_module_file(folder, module) is not None:
        return EnvSource(_bare_name(env_id), module, "local", folder.resolve())
    builtin = f"{BUILTIN_PACKAGE}.{module}"
    if importlib.util.find_spec(builtin) is not None:
        return EnvSource(_bare_name(env_id), builtin, "builtin")
    known = ", ".join(BUILTIN_IDS)
    raise UserError(
        f"unknown environment '{env_id}': not in ./environments/, not an installed module '{module}', "
        f"not a built-in ({known}); see `prime env list` or create one with `prime env init {env_id}`"
    )


def _is_installed_module(module: str) -> bool:
    """An importable, non-stdlib module of that name (a real module: a bare folder, i.e. a namespace package, is
    not)."""
    if not module.isidentifier() or module in sys.stdlib_module_names:
        return False
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


def import_env_module(source: EnvSource) -> ModuleType:
    """The environment's module, imported by its own name (see :func:`_import_local` for local folders)."""
    if source.origin != "local":
        try:
            return importlib.import_module(source.module_name)
        except ImportError as exc:
            raise _import_error(source.env_id, source.module_name, exc) from exc
    return _import_local(source)


_LOCAL_FILES: dict[str, Path] = {}
"""Module name -> the file primekit imported it from, for local environment folders."""


def importable_root(path: Path, module_name: str) -> Path:
    """The folder to put on ``sys.path`` so ``import <module_name>`` finds a local environment folder:
    the folder itself when it holds ``<module>.py`` or a package ``<module>/``, its ``src/`` in a ``src/``
    layout, else its parent (the folder is the package)."""
    if (path / f"{module_name}.py").is_file() or (path / module_name / "__init__.py").is_file():
        return path
    if (path / SRC / module_name / "__init__.py").is_file() or (path / SRC / f"{module_name}.py").is_file():
        return path / SRC
    return path.parent


def _import_local(source: EnvSource) -> ModuleType:
    """A local environment folder imported as an installed package would be: its root first on ``sys.path``
    (and ``PYTHONPATH``) and the module under its own name, so ``from my_env.taskset import ...`` and sibling modules
    (``from utils import ...``) resolve, and the module is the one object verifiers' own loader finds.

    The same name imported earlier from another local folder (a second project in one process) is replaced;
    a name already taken by another module (an installed package, the standard library) is a UserError,
    since importing the folder under it would shadow that module or silently run the other one.
    """
    assert source.path is not None
    file = _local_module_file(source.path, source.module_name)
    if file is None:
        raise UserError(f"{source.path} is not an environment folder (expected {source.path}/{source.module_name}.py)")
    file = file.resolve()
    name = source.module_name
    loaded = sys.modules.get(name)
    if loaded is not None and _module_file(loaded) == file:
        return loaded
    if loaded is not None or name in sys.stdlib_module_names:
        if _LOCAL_FILES.get(name) is None or name in sys.stdlib_module_names:
            where = _module_file(loaded) if loaded is not None else "the standard library"
            raise UserError(f"environment module '{name}' ({file}) has the name of an already imported module "
                            f"({where}); rename the environment's folder and module")
        _forget_modules(name)
    _put_on_path(str(importable_root(source.path, name)))
    spec = importlib.util.spec_from_file_location(
        name, file, submodule_search_locations=[str(file.parent)] if file.name == "__init__.py" else None
    )
    if spec is None or spec.loader is None:
        raise UserError(f"cannot import environment from {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    _LOCAL_FILES[name] = file
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        _forget_modules(name)
        if isinstance(exc, ImportError):
            raise _import_error(source.env_id, str(file), exc) from exc
        raise UserError(f"environment module {file} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def _put_on_path(root: str) -> None:
    """``root`` first on ``sys.path``, and on ``PYTHONPATH`` for the processes the environment starts (a v1
    tool server runs ``python -m my_env.servers.x``), as an installed package is importable from both."""
    if root not in sys.path:
        sys.path.insert(0, root)
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in current:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *current])


def _module_file(module: ModuleType) -> Path | None:
    location = getattr(module, "__file__", None)
    return Path(location).resolve() if location else None


def _forget_modules(name: str) -> None:
    """Drop a local environment's module and its submodules from ``sys.modules`` (a failed or replaced import)."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    _LOCAL_FILES.pop(name, None)


def _import_error(env_id: str, where: str, exc: ImportError) -> UserError:
    """A missing ``verifiers`` names the extra to install; a module or name the installed verifiers lacks is
    named with that version (verifiers is there: installing it is not the fix); other import errors say what failed."""
    from evalkit.verifiers_compat import CURRENT_SERIES, INSTALL_HINT, LEGACY_VERSION, installed_version

    version = installed_version()
    if _is_verifiers_missing(exc) and (version is None or exc.name == "verifiers"):
        return UserError(f"environment '{env_id}' imports verifiers, which is not installed ({exc}); {INSTALL_HINT}")
    if _is_verifiers_missing(exc):
        return UserError(f"environment '{env_id}' imports {exc.name}, which the installed verifiers {version} does not "
                         f"have ({exc}); it was written for another verifiers version: run it with the one it needs "
                         f"(primekit runs {LEGACY_VERSION} and {CURRENT_SERIES}.x)")
    if version is not None and (getattr(exc, "name", None) or "").split(".")[0] == "verifiers":
        return UserError(f"environment module {where} failed to import: {type(exc).__name__}: {exc} "
                         f"(verifiers {version} is installed)")
    return UserError(f"environment module {where} failed to import: {type(exc).__name__}: {exc}")


def _is_verifiers_missing(exc: BaseException) -> bool:
    """A ``verifiers`` module (the package or one of its submodules) could not be found."""
    name = getattr(exc, "name", None) or ""
    return isinstance(exc, ModuleNotFoundError) and name.split(".")[0] == "verifiers"


def parse_env_args(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """``-a '{"difficulty": "easy"}'`` -> dict, with a clear error for bad JSON."""
    return parse_json_object(raw, "env args")


def load_environment(
    env_id: str, env_args: dict[str, Any] | None = None, environments_dir: Path | str = "environments"
):
    """Resolve, import and load the environment (see the module docstring); user mistakes become UserError."""
    env_args = dict(env_args or {})
    source = resolve(env_id, environments_dir)
    with _legacy_api_errors(source.env_id):
        module = import_env_module(source)
    loader = getattr(module, "load_environment", None)
    if not callable(loader):
        from evalkit.verifiers_compat.v1.loader import taskset_class_of

        if taskset_class_of(module) is not None:
            from evalkit.verifiers_compat.v1.env import load_taskset_environment

            return load_taskset_environment(source, module, env_args)
        raise UserError(
            f"environment '{env_id}' ({source.module_name}) has no load_environment() function "
            "(and exports no verifiers v1 Taskset in __all__)"
        )
    _check_env_args(env_id, loader, env_args)
    try:
        with _legacy_api_errors(source.env_id):
            env = loader(**env_args)
    except UserError:
        raise
    except Exception as exc:
        if _is_verifiers_missing(exc):
            raise _import_error(env_id, source.module_name, exc) from exc  # type: ignore[arg-type]
        from evalkit.verifiers_compat import version_problem

        hint = f" ({version_problem()})" if version_problem() else ""
        raise UserError(f"load_environment() of '{env_id}' raised {type(exc).__name__}: {exc}{hint}") from exc
    return _as_environment(env, env_id, source, env_args)


@contextmanager
def _legacy_api_errors(env_id: str) -> Iterator[None]:
    """A legacy verifiers environment failing under verifiers 0.4 becomes the one line saying what it needs."""
    try:
        yield
    except Exception as exc:
        from evalkit.verifiers_compat import legacy_api_error

        legacy = legacy_api_error(env_id, exc)
        if legacy is None:
            raise
        raise legacy from exc


def _check_env_args(env_id: str, loader: Any, env_args: dict[str, Any]) -> None:
    signature = inspect.signature(loader)
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        unknown = sorted(set(env_args) - set(signature.parameters))
        if unknown:
            accepted = ", ".join(signature.parameters) or "none"
            v1_only = " (taskset/harness/runtime tables and args are for verifiers v1 tasksets)" if (
                set(unknown) & {"taskset", "harness", "runtime"}) else ""
            raise UserError(f"environment '{env_id}' does not accept env arg(s) {unknown}; it accepts: "
                            f"{accepted}{v1_only}")


def _as_environment(env: Any, env_id: str, source: EnvSource, env_args: dict[str, Any]):
    """A primekit Environment as is; a verifiers environment wrapped; anything else a UserError."""
    from evalkit.envs.base import Environment
    from evalkit.verifiers_compat import is_verifiers_object, wrap_legacy

    if isinstance(env, Environment):
        if not env.env_id:
            env.env_id = source.env_id
        return env
    if is_verifiers_object(env):
        return wrap_legacy(env, source.env_id, env_args)
    raise UserError(
        f"load_environment() of '{env_id}' returned {type(env).__name__}, not an Environment "
        "(a primekit evalkit.envs environment or a verifiers one)"
    )

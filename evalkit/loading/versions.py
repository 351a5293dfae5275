"""``version_info`` of a run's metadata.json, with verifiers' keys and meanings plus primekit's own.

verifiers records ``{vf_version, vf_commit, env_version, env_commit}``: the verifiers package's
version and the git commit of its source (None outside a checkout), the environment package's
installed version and the git commit of the environment's source. Here ``vf_version`` is the
installed verifiers' version, or None when it is not installed (primekit then ran the environment
itself); ``primekit_version`` and ``primekit_commit`` say which primekit ran it. Nothing is imported:
versions come from package metadata, commits from ``git rev-parse HEAD`` in the source folder.
"""

from __future__ import annotations

import importlib.util
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any


def version_info(env_id: str, env_dir_path: str | Path = "environments") -> dict[str, Any]:
    """The ``version_info`` dict for a run of ``env_id`` (see the module docstring)."""
    env_version, env_folder = _env_source(env_id, env_dir_path)
    primekit_folder = Path(__file__).resolve().parent
    return {
        "vf_version": _version("verifiers"),
        "vf_commit": _commit(_module_folder("verifiers")),
        "env_version": env_version,
        "env_commit": _commit(env_folder),
        "primekit_version": _version("primekit"),
        "primekit_commit": _commit(primekit_folder),
    }


def _env_source(env_id: str, env_dir_path: str | Path) -> tuple[str | None, Path | None]:
    from evalkit.core.errors import UserError
    from evalkit.loading.resolve import module_name_for, resolve

    try:
        source = resolve(env_id, env_dir_path)
    except UserError:
        return None, None
    if source.origin == "builtin":
        return _version("primekit"), Path(__file__).resolve().parent / "builtin"
    folder = source.path if source.path is not None else _module_folder(source.module_name)
    return _version(module_name_for(env_id)) or _version(source.module_name.replace("_", "-")), folder


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except (metadata.PackageNotFoundError, ValueError):
        return None


def _module_folder(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def _commit(folder: Path | None) -> str | None:
    """HEAD of the git checkout whose tracked files include ``folder`` (a package installed into an ignored
    ``.venv`` inside some repository is not that repository's code: None)."""
    if folder is None or not folder.is_dir():
        return None
    tracked = _git(folder, "ls-files", "--", ".")
    return _git(folder, "rev-parse", "HEAD") if tracked else None


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None

"""Which environments a user can run from here, without importing any of them.

Three origins, in the order :func:`evalkit.loading.resolve.resolve` searches them: ``installed`` distributions
that depend on primekit or on verifiers (what ``prime env install`` and ``pip install`` of an environment
package produce, Environments Hub packages included), ``local`` folders under ``./environments/``, and the
``builtin`` ones. Descriptions come
from the first line of each module's docstring, read with ``ast`` so a broken or slow module cannot
break the listing.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from evalkit.loading.resolve import BUILTIN_IDS, BUILTIN_PACKAGE, _local_module_file, module_name_for


@dataclass(frozen=True)
class EnvInfo:
    env_id: str
    origin: str  # "local", "installed" or "builtin"
    description: str
    path: Path | None


def describe(file: Path | None) -> str:
    """The first line of a module's docstring ('' when unreadable or absent)."""
    if file is None or not file.is_file():
        return ""
    try:
        doc = ast.get_docstring(ast.parse(file.read_text(encoding="utf-8")))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return "(module does not parse)"
    return doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""


def local_envs(environments_dir: Path | str = "environments") -> list[EnvInfo]:
    root = Path(environments_dir)
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        file = _local_module_file(folder, module_name_for(folder.name))
        if file is not None:
            found.append(EnvInfo(folder.name.replace("_", "-"), "local", describe(file), folder))
    return found


def installed_envs() -> list[EnvInfo]:
    """Distributions that require primekit or verifiers and provide an importable module named after themselves."""
    found: dict[str, EnvInfo] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get("Name") or ""
        requires = dist.requires or []
        if not name or name.lower() in ("primekit", "verifiers"):
            continue
        if not any(
            re.match(r"(primekit|verifiers)\b", req.strip().lower()) and "extra ==" not in req for req in requires
        ):
            continue
        module = module_name_for(name.lower())
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        origin = Path(spec.origin) if spec.origin and spec.origin not in ("built-in", "frozen") else None
        found[module] = EnvInfo(module.replace("_", "-"), "installed", describe(origin), origin)
    return sorted(found.values(), key=lambda e: e.env_id)


def builtin_envs() -> list[EnvInfo]:
    found = []
    for env_id in BUILTIN_IDS:
        spec = importlib.util.find_spec(f"{BUILTIN_PACKAGE}.{module_name_for(env_id)}")
        file = Path(spec.origin) if spec and spec.origin else None
        found.append(EnvInfo(env_id, "builtin", describe(file), file))
    return found


def list_environments(environments_dir: Path | str = "environments") -> list[EnvInfo]:
    """Installed, then local, then built-in (resolution order: the first of an id is what runs)."""
    return installed_envs() + local_envs(environments_dir) + builtin_envs()

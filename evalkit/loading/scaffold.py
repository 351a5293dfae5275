"""Creating a new environment folder from the template in :mod:`evalkit.templates.env`.

The folder is ``<environments_dir>/<module>/`` (``my-env`` -> ``my_env``) because that is where
:func:`evalkit.loading.resolve.resolve` looks, so ``prime eval run my-env`` finds it at once.
"""

from __future__ import annotations

import keyword
import os
import re
import sys
import tempfile
from importlib import resources
from pathlib import Path
from string import Template

from evalkit.core.errors import UserError
from evalkit.loading.resolve import BUILTIN_IDS, module_name_for

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
TEMPLATE_FILES = {
    "module.py.tmpl": "{module}.py",
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
}


def validate_name(name: str) -> str:
    """The module name for ``name``; UserError with a suggestion when the name cannot be one."""
    if not _NAME.fullmatch(name or "") or len(name) > 64:
        suggestion = re.sub(r"[^a-z0-9]+", "-", (name or "").lower()).strip("-") or "my-env"
        raise UserError(
            f"invalid environment name {name!r}: use lowercase letters, digits and single '-' or '_' "
            f"between them, starting with a letter (e.g. {suggestion!r})"
        )
    module = module_name_for(name)
    if keyword.iskeyword(module) or module in sys.stdlib_module_names:
        raise UserError(f"environment name {name!r} clashes with the Python module {module!r}; pick another name")
    return module


def render(name: str, module: str) -> dict[str, str]:
    """File name -> text of every template file, filled in."""
    folder = resources.files("evalkit.templates").joinpath("env")
    return {
        target.format(module=module): Template(folder.joinpath(source).read_text(encoding="utf-8")).substitute(
            name=name, module=module
        )
        for source, target in TEMPLATE_FILES.items()
    }


def init_environment(name: str, environments_dir: Path | str = "environments") -> tuple[Path, list[str]]:
    """Write the new folder; refuses to touch an existing one. Returns the folder and a warning list."""
    module = validate_name(name)
    folder = Path(environments_dir) / module
    if folder.exists():
        raise UserError(f"{folder} already exists; pick another name or delete that folder first")
    warnings = []
    if name.replace("_", "-") in BUILTIN_IDS:
        warnings.append(f"./environments/{module} will shadow the built-in '{name}' when run from this folder")
    files = render(name, module)
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Build in a temp folder and rename, so a failure never leaves a half-written environment.
    staging = Path(tempfile.mkdtemp(prefix=f".{module}-", dir=folder.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; an environment folder is an ordinary folder
        for file_name, text in files.items():
            (staging / file_name).write_text(text, encoding="utf-8")
        os.rename(staging, folder)
    except OSError as exc:
        for leftover in staging.glob("*"):
            leftover.unlink()
        staging.rmdir()
        raise UserError(f"could not create {folder}: {exc.strerror or exc}") from exc
    return folder, warnings

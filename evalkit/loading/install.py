"""``prime env install``: pip-install an environment into the running interpreter, as the prime CLI does.

What the argument may be (the prime CLI's forms):

- a folder holding a ``pyproject.toml``/``setup.py`` (``./environments/my_env``): installed editable;
- a name whose folder exists under ``./environments/`` (``my-env`` -> ``./environments/my_env``): the same;
- an Environments Hub id ``owner/name`` or ``owner/name@version``: ``pip install name[==version]`` with the
  Hub's per-owner package index added (``https://hub.primeintellect.ai/<owner>/simple/``, as prime-rl documents);
- a package name (``my-env``, ``my-env==0.2``): ``pip install`` from the configured index.

Uses ``sys.executable -m pip`` so the package lands in the same environment as primekit (never a different
``pip`` on PATH); pip's usual variables (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``) apply. pip's
own output streams to the terminal; a failure is one UserError.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from evalkit.core.errors import UserError

HUB_INDEX = "https://hub.primeintellect.ai/{owner}/simple/"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class InstallPlan:
    """What will be installed: the pip arguments, the module it provides, and how the user names it."""

    pip_args: list[str]
    module: str
    source: str


def plan_install(
    target: str, environments_dir: Path | str = "environments", *, no_build_isolation: bool = False
) -> InstallPlan:
    """Decide how to install ``target`` (see the module docstring) without running pip."""
    target = target.strip()
    if not target:
        raise UserError("nothing to install; pass a folder (./environments/my_env), a package name or owner/name")
    folder = Path(target).expanduser()
    local = Path(environments_dir) / target.split("/")[-1].replace("-", "_")
    if target.startswith((".", "/", "~")) or folder.is_dir():
        return _folder_plan(folder, no_build_isolation)
    if "/" not in target and local.is_dir():
        return _folder_plan(local, no_build_isolation)
    return _package_plan(target)


def _folder_plan(folder: Path, no_build_isolation: bool) -> InstallPlan:
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder; pass the environment's folder, e.g. ./environments/my_env")
    if not (folder / "pyproject.toml").is_file() and not (folder / "setup.py").is_file():
        raise UserError(
            f"{folder} has no pyproject.toml or setup.py; create one with `prime env init NAME` "
            "or add a pyproject.toml (see environments/vowel_count/)"
        )
    args = ["-e", str(folder.resolve())] + (["--no-build-isolation"] if no_build_isolation else [])
    return InstallPlan(args, folder.resolve().name.replace("-", "_"), str(folder))


def _package_plan(target: str) -> InstallPlan:
    owner, _, rest = target.rpartition("/")
    name, _, version = rest.partition("@")
    requirement = name.split("==")[0].split(">")[0].split("<")[0].split("~")[0].strip()
    if not _NAME.fullmatch(requirement) or (owner and not _NAME.fullmatch(owner)):
        raise UserError(f"'{target}' is neither a folder nor a package name like my-env or owner/my-env@0.1.0")
    spec = f"{name}=={version}" if version else name
    args = [spec]
    if owner:
        args += ["--extra-index-url", HUB_INDEX.format(owner=owner)]
    return InstallPlan(args, requirement.replace("-", "_").lower(), target)


def install_environment(target: Path | str, *, no_build_isolation: bool = False,
                        environments_dir: Path | str = "environments") -> str:
    """Install ``target`` (a folder, a package name or a Hub id); return the module name it provides."""
    plan = plan_install(str(target), environments_dir, no_build_isolation=no_build_isolation)
    command = [sys.executable, "-m", "pip", "install", *plan.pip_args]
    print("running: pip install " + " ".join(plan.pip_args), flush=True)
    try:
        result = subprocess.run(command, check=False)
    except OSError as exc:
        raise UserError(f"could not run pip ({exc}); is pip installed in {sys.executable}?") from exc
    if result.returncode != 0:
        hint = ("offline? try --no-build-isolation" if plan.pip_args[0] == "-e"
                else "is the name right, and is its index reachable? (pip reads PIP_INDEX_URL / PIP_FIND_LINKS)")
        raise UserError(
            f"pip install {' '.join(plan.pip_args)} failed (exit {result.returncode}); see pip's output above ({hint})"
        )
    return plan.module

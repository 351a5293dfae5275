"""``prime env install``: pip-install a local environment package into the running interpreter.

Uses ``sys.executable -m pip`` so the package lands in the same environment as primekit (never a
different ``pip`` on PATH). pip's own output streams to the terminal; a failure is one UserError.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evalkit.errors import UserError


def install_environment(path: Path | str, *, no_build_isolation: bool = False) -> str:
    """Install ``path`` editable; return the module name it provides."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder; pass the environment's folder, e.g. ./environments/my_env")
    if not (folder / "pyproject.toml").is_file() and not (folder / "setup.py").is_file():
        raise UserError(
            f"{folder} has no pyproject.toml or setup.py; create one with `prime env init NAME` "
            "or add a pyproject.toml (see environments/vowel_count/)"
        )
    module = folder.resolve().name.replace("-", "_")
    command = [sys.executable, "-m", "pip", "install", "-e", str(folder.resolve())]
    if no_build_isolation:
        command.append("--no-build-isolation")
    try:
        result = subprocess.run(command, check=False)
    except OSError as exc:
        raise UserError(f"could not run pip ({exc}); is pip installed in {sys.executable}?") from exc
    if result.returncode != 0:
        raise UserError(
            f"pip install -e {folder} failed (exit {result.returncode}); see pip's output above "
            "(offline? try --no-build-isolation)"
        )
    return module

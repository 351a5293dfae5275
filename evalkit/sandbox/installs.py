"""Agent programs installed once on the host, outside any sandbox, and mounted read-only into each sandboxed run.

verifiers installs a third-party harness's program (mini-swe-agent, harbor's terminus-2 ...) inside its container
on every start, with uv and the network. A sandbox has no network, so primekit installs the program's packages
here instead: with pip, through the package indexes this machine's pip is configured for, into a virtual
environment under ``<primekit home>/harnesses/<harness>-<version>-<hash of the requirements>/``, made once and
reused (a lock file keeps concurrent rollouts and processes to one install). The sandbox sees that environment and
its base interpreter read-only (:attr:`ProgramInstall.mounts`). A failed install is one
:class:`~evalkit.core.errors.UserError` naming the requirements and pip's last error line.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from evalkit.core.errors import UserError

FOLDER = "harnesses"
READY = "ready.json"
PYTHONS = ("python3.10", "python3.11", "python3.12", "python3.13", "python3.14")
"""Interpreters looked for on PATH when this one does not satisfy a program's ``requires-python``."""
MANAGED = ("{pyenv}/versions/*/bin/python3.*[0-9]", "~/.local/share/uv/python/*/bin/python3.*[0-9]")
"""Where pyenv and uv keep the interpreters they installed (looked in after PATH: pyenv's shims on PATH refuse a
version that is not the selected one)."""


@dataclass(frozen=True)
class ProgramInstall:
    """An installed program environment: its interpreter and the host folders a sandbox must see read-only."""

    python: str
    mounts: tuple[str, ...]


def script_metadata(source: str) -> tuple[list[str], str]:
    """``(dependencies, requires-python)`` of a PEP 723 script (its ``# /// script`` block)."""
    block = re.search(r"^# /// script\s*$(.*?)^# ///\s*$", source, re.M | re.S)
    if block is None:
        return [], ""
    text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in block.group(1).splitlines())
    import tomllib

    data = tomllib.loads(text)
    return [str(d) for d in data.get("dependencies", [])], str(data.get("requires-python", ""))


def install_folder(home: Path, harness: str, version: str, requirements: list[str]) -> Path:
    """Where ``harness`` at ``version`` with ``requirements`` is installed (the requirements' hash in the name)."""
    key = hashlib.sha256(json.dumps(sorted(requirements)).encode()).hexdigest()[:12]
    return home / FOLDER / f"{harness}-{version}-{key}"


def installed(folder: Path) -> ProgramInstall | None:
    """The install in ``folder`` if it finished (its ready file), else ``None``."""
    try:
        data = json.loads((folder / READY).read_text())
        return ProgramInstall(python=data["python"], mounts=tuple(data["mounts"]))
    except (OSError, ValueError, KeyError):
        return None


def ensure_installed(home: Path, harness: str, version: str, requirements: list[str], requires_python: str,
                     say: Callable[[str], None] | None = None) -> ProgramInstall:
    """The program environment of ``harness``, installed first if it is not yet (``say`` gets the progress lines;
    stderr by default). UserError when no interpreter fits ``requires_python`` or pip fails."""
    folder = install_folder(home.expanduser().resolve(), harness, version, requirements)
    found = installed(folder)
    if found is not None:
        return found
    say = say or _to_stderr
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(folder.with_name(folder.name + ".lock")):
        found = installed(folder)
        if found is not None:
            return found
        python = find_python(requires_python)
        if python is None:
            here = f"{sys.version_info.major}.{sys.version_info.minor}"
            raise UserError(f"harness '{harness}' needs Python {requires_python}, and no interpreter here fits (this "
                            f"one is {here}; looked for {', '.join(PYTHONS)} on PATH and in pyenv's and uv's "
                            "folders): install one (e.g. uv python install 3.12)")
        shutil.rmtree(folder, ignore_errors=True)
        say(f"installing harness '{harness}' {version} ({', '.join(requirements)}) with pip into {folder} "
            "(once; later runs reuse it)")
        started = time.monotonic()
        try:
            result = _install(folder, python, requirements, say, f"harness '{harness}' {version}")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        (folder / READY).write_text(json.dumps({"python": result.python, "mounts": list(result.mounts),
                                                "requirements": requirements, "seconds": time.monotonic() - started}))
        say(f"installed harness '{harness}' {version} in {time.monotonic() - started:.0f} s")
        return result


def find_python(requires_python: str) -> str | None:
    """A base interpreter (not a virtual environment's) whose version satisfies ``requires_python``: this one's
    base first, then :data:`PYTHONS` on PATH."""
    from packaging.specifiers import SpecifierSet

    spec = SpecifierSet(requires_python or "")
    here = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    candidates = [here] if os.path.exists(here) else []
    candidates += [p for p in (shutil.which(name) for name in PYTHONS) if p]
    pyenv = os.environ.get("PYENV_ROOT") or "~/.pyenv"
    for pattern in MANAGED:
        candidates += sorted(glob.glob(os.path.expanduser(pattern.format(pyenv=pyenv))))
    for candidate in candidates:
        try:
            probe = subprocess.run([candidate, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3]); "
                                    "print(sys.base_prefix); print(sys.executable)"],
                                   capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = probe.stdout.split()
        if probe.returncode == 0 and len(lines) == 3 and spec.contains(lines[0], prereleases=True):
            return lines[2]
    return None


def _install(folder: Path, python: str, requirements: list[str], say: Callable[[str], None],
             label: str) -> ProgramInstall:
    """A virtual environment in ``folder`` made by ``python``, with ``requirements`` installed by its pip."""
    made = subprocess.run([python, "-m", "venv", str(folder)], capture_output=True, text=True)
    if made.returncode != 0:
        raise UserError(f"could not make a virtual environment with {python}: {_last_line(made.stderr)}")
    venv_python = str(folder / "bin" / "python")
    pip = [venv_python, "-m", "pip", "install", "--no-input", "--progress-bar", "off", *requirements]
    proc = subprocess.Popen(pip, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert proc.stdout is not None
    lines: list[str] = []
    collected = 0
    for line in proc.stdout:
        lines.append(line.rstrip())
        if line.startswith("Collecting "):
            collected += 1
            if collected % 25 == 0:
                say(f"  {collected} packages collected ...")
        elif line.startswith("Installing collected packages"):
            say(f"  installing {collected} packages ...")
    code = proc.wait()
    if code != 0:
        raise UserError(f"{label}: pip could not install {' '.join(requirements)}: {_last_line(chr(10).join(lines))}")
    base = subprocess.run([venv_python, "-c", "import sys; print(sys.base_prefix)"], capture_output=True,
                          text=True, check=True).stdout.strip()
    return ProgramInstall(python=venv_python, mounts=(str(folder), os.path.realpath(base)))


def _last_line(text: str) -> str:
    """pip's last line that says something (not its warnings about the machine's configured index folders)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("WARNING:")]
    return lines[-1] if lines else "no output"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

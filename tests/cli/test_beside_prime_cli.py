"""primekit and the official prime CLI (``prime`` 0.18.0 from the package index) in one venv, in both install
orders: ``primekit`` always runs primekit, ``import prime_cli`` is the prime CLI's, and primekit's ``prime`` (when it
is the one installed last) hands ``login`` to the prime CLI. Needs the package index (marked ``network``).

The venv is layered on this one (a .pth file adds its site-packages), so only the prime CLI's own dependencies
are installed; primekit goes in editable and without dependencies, as a user's second install would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support import REPO

pytestmark = [pytest.mark.network, pytest.mark.slow]
PRIME_CLI = "prime==0.18.0"


def _layered_venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    base = sysconfig.get_paths()["purelib"]
    Path(purelib, "_primekit_base.pth").write_text(f"import site; site.addsitedir({base!r})\n")
    return python


def _pip(python: Path, *args: str) -> None:
    result = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0 and "Could not find a version" in result.stderr + result.stdout:
        pytest.skip(f"the package index does not answer for {PRIME_CLI}")
    assert result.returncode == 0, result.stderr[-2000:]


def _run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PRIME_DISABLE_VERSION_CHECK": "1"}
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=env)


@pytest.mark.parametrize("order", ["prime-cli-first", "primekit-first"])
def test_primekit_and_the_prime_cli_share_a_venv(tmp_path: Path, order: str):
    venv = tmp_path / "venv"
    python = _layered_venv(venv)
    installs = [[PRIME_CLI], ["--no-deps", "-e", str(REPO)]]
    for args in installs if order == "prime-cli-first" else installs[::-1]:
        _pip(python, *args)

    owner = subprocess.run([str(python), "-c", "import prime_cli; print(prime_cli.__file__)"],
                           capture_output=True, text=True, check=True).stdout
    assert owner.strip() == str(next(venv.glob("lib/python*/site-packages/prime_cli/__init__.py")))  # the prime CLI's
    model = [] if order == "prime-cli-first" else ["-m", "mock/reverse"]  # the embedded model once is enough
    ran = _run(venv, "primekit", "eval", "run", "reverse-text", "-n", "1", "-r", "1", *model, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "results:" in ran.stdout

    login = _run(venv, "prime", "login", "--help", cwd=tmp_path)
    assert login.returncode == 0, login.stderr[-2000:]
    assert "Login to Prime Intellect" in login.stdout  # the prime CLI's own help, reached from either `prime`
    if order == "prime-cli-first":  # primekit's `prime` was installed last: it runs primekit's own commands too
        ours = _run(
            venv, "prime", "eval", "run", "reverse-text", "-m", "mock/reverse", "-n", "1", "-r", "1", cwd=tmp_path
        )
        assert ours.returncode == 0 and "results:" in ours.stdout, ours.stderr[-2000:]

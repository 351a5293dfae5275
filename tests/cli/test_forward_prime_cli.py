"""primekit's `prime` hands only the prime CLI's commands to it (issue 45, item 8).

Each case runs the real `prime` entry point in a child process. "Installed" is a `prime_cli` package and a `prime`
distribution's metadata in a folder put first on PYTHONPATH: one whose import raises (a broken install), and one
whose `prime_cli.main` is a small typer app with a few of the prime CLI's command names.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import REPO, with_pythonpath
from support.cli import assert_user_error

PRIME = Path(sys.executable).parent / "prime"
WORKING = textwrap.dedent('''
    import typer

    app = typer.Typer()
    evals = typer.Typer()
    app.add_typer(evals, name="eval")


    @app.command("login")
    def login() -> None:
        print("prime-cli: login")


    @evals.command("logs")
    def logs(run_id: str) -> None:
        print(f"prime-cli: eval logs {run_id}")


    def run() -> None:
        app()
''')


def installed(folder: Path, main: str) -> Path:
    """A `prime` distribution (metadata) whose `prime_cli.main` is ``main``, in ``folder``."""
    (folder / "prime_cli").mkdir(parents=True)
    (folder / "prime_cli" / "__init__.py").write_text("")
    (folder / "prime_cli" / "main.py").write_text(main)
    (folder / "prime-0.18.0.dist-info").mkdir()
    (folder / "prime-0.18.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: prime\nVersion: 0.18.0\n")
    return folder


def prime(*args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    if not PRIME.exists():
        pytest.skip("no `prime` entry point beside this interpreter")
    env = with_pythonpath(*([path] if path else []), REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return subprocess.run([str(PRIME), *args], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)


def test_a_broken_prime_cli_is_one_line(tmp_path: Path):
    folder = installed(tmp_path, 'raise RuntimeError("half-installed")\n')
    line = assert_user_error(prime("login", path=folder))
    assert line == ("error: the prime CLI installed here (prime 0.18.0) fails to start (RuntimeError: half-installed); "
                    "reinstall it with `pip install --force-reinstall prime`, or run primekit's commands as "
                    "`primekit ...`")
    typo = assert_user_error(prime("eval", "frob", path=folder))
    assert "No such command 'frob'" in typo  # a typo is still primekit's


def test_a_typo_is_primekits_no_such_command_not_the_prime_clis(tmp_path: Path):
    line = assert_user_error(prime("eval", "frob"))
    assert line == "error: No such command 'frob'; see `prime eval --help`"
    folder = installed(tmp_path, WORKING)
    assert assert_user_error(prime("eval", "frob", path=folder)) == line


def test_the_prime_clis_own_commands_still_reach_it(tmp_path: Path):
    hint = assert_user_error(prime("eval", "logs", "r1"))  # not installed: what to install
    assert hint.startswith("error: `prime eval logs` is a command of the prime CLI, which is not installed here")
    folder = installed(tmp_path, WORKING)
    done = prime("eval", "logs", "r1", path=folder)
    assert done.returncode == 0 and done.stdout == "prime-cli: eval logs r1\n", done.stderr
    done = prime("login", path=folder)
    assert done.returncode == 0 and done.stdout == "prime-cli: login\n", done.stderr

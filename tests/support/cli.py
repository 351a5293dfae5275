"""`prime` as a test runs it: in this process (typer's runner) or as a real child process, and the one shape of a
refused command (exit code 2, one `error:` line, no traceback)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from click.testing import Result

from support import REPO, with_pythonpath

ASIDES = ("note: ", "warning: ")
"""Lines a refusal may print beside its `error:` line (what was adjusted or assumed on the way)."""


def prime(*args: str, env: Mapping[str, str] | None = None, catch_exceptions: bool = False) -> Result:
    """``prime ARGS`` in this process through typer's test runner; ``env`` is set for the call only.

    An exception the CLI does not turn into an exit code reaches the test with its traceback; a test that inspects
    such an exception passes ``catch_exceptions=True`` and reads ``result.exception``.
    """
    from typer.testing import CliRunner

    from primekit_cli.app import app

    return CliRunner().invoke(app, list(args), env=dict(env) if env else None, catch_exceptions=catch_exceptions)


def prime_in_project(project: Path, *args: str, env: Mapping[str, str] | None = None) -> Result:
    """``prime ARGS`` in this process, run as :func:`prime_process` runs it with ``project``: from that folder, with
    ``HOME`` at its ``home/``, offline. For a plan (``--dry-run``), a listing or a refusal, where a child would
    import the environment's libraries again (verifiers: ~8 s of CPU) to print a few lines."""
    import os

    here = os.getcwd()
    os.chdir(project)
    try:
        return prime(*args, env={"HF_HUB_OFFLINE": "1", "HOME": str(project / "home"), **(env or {})})
    finally:
        os.chdir(here)


def prime_process(*args: str, cwd: Path | str | None = None, project: Path | None = None,
                  env: Mapping[str, str] | None = None, timeout: float = 300,
                  **run: Any) -> subprocess.CompletedProcess[str]:
    """``python -m primekit_cli ARGS`` as a child process (its own interpreter, signals, exit code), waited for.

    The child is offline (``HF_HUB_OFFLINE=1``), unbuffered (what it printed survives a timeout) and imports this
    checkout first (the repository ahead on its ``PYTHONPATH``); ``env`` goes over this process's environment.
    ``project`` is a folder laid out as the ``verifiers_project`` fixture makes it: the child runs there, with
    ``HOME`` at its ``home/``. ``run`` goes to :func:`subprocess.run` (e.g. ``preexec_fn`` for a child's limits).
    """
    child = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    if project is not None:
        cwd, child["HOME"] = project, str(project / "home")
    child |= dict(env or {})
    return subprocess.run([sys.executable, "-m", "primekit_cli", *args], cwd=cwd, env=child, capture_output=True,
                          text=True, timeout=timeout, **run)


def assert_user_error(result: Result | subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Assert ``result`` is a refusal as users must see it and return its line: exit code 2, no traceback, and exactly
    one line starting with ``error: `` (holding every fragment); a child process prints nothing else on stderr but
    :data:`ASIDES`. Works on the results of :func:`prime` and :func:`prime_process`."""
    if isinstance(result, subprocess.CompletedProcess):
        code, text = result.returncode, result.stderr + result.stdout
        said = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith(ASIDES)]
        assert len(said) == 1, result.stderr[-3000:]  # a child's stderr holds the error line and nothing else
    else:
        code, text = result.exit_code, result.output
    assert code == 2, (code, text[-3000:])
    assert "Traceback" not in text, text[-3000:]
    lines = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, text[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]

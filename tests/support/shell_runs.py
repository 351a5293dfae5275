"""Running the ``vf-v1-shell`` taskset (tests/verifiers_envs/vf_v1_shell) with the bash harness and the scripted
model of :mod:`support.bash_server`: one task per shell command, the rows read back, and the processes the
commands left behind found. Shared by the runtime tests (sandbox and subprocess)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from support import REPO, with_pythonpath
from support.bash_server import BashServer

KEY_VAR = "BASH_SERVER_KEY"
MARKER = "primekit-environ-marker-4711"
SLEEP = str(90000 + os.getpid() % 9000)
"""A `sleep` argument only the detached processes of this test process's runs have (by its pid, so that another
pytest running the same tests at once is not counted): none may be left afterwards."""


def run_commands(project: Path, server: BashServer, commands: list[str], runtime: dict, out: str,
                 extra_env: dict[str, str] | None = None,
                 extra_args: tuple[str, ...] = (), harness: dict | None = None) -> subprocess.CompletedProcess:
    """``prime eval run vf-v1-shell`` with one task per command (and ``extra_args``) on the ``bash`` harness (or
    ``harness``); ``@PID@`` in a command becomes primekit's pid."""
    args = {"commands": commands, "harness": harness or {"id": "bash"}, "runtime": runtime}
    cli = [sys.executable, "-m", "primekit_cli", "eval", "run", "vf-v1-shell", "-m", "hash-model",
           "-b", server.base_url, "-k", KEY_VAR, "-n", str(len(commands)), "-r", "1", "-c", "4", "-o", out, *extra_args]
    # exec keeps the shell's pid, so $$ is primekit's own pid when the args are built
    script = f'exec {shlex.join(cli)} -a "$(printf %s "$ARGS" | sed "s/@PID@/$$/g")"'
    env = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1", "HOME": str(project / "home"), KEY_VAR: "test-key",
                                   "PRIMEKIT_TEST_SECRET": MARKER, "ARGS": json.dumps(args), **(extra_env or {})}
    return subprocess.run(["sh", "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=600)


def refused_run(project: Path, server: BashServer, commands: list[str], runtime: dict):
    """``prime eval run vf-v1-shell`` as :func:`run_commands` builds it, but in this process
    (:func:`support.cli.prime_in_project`): for a run refused before it starts. The result has ``exit_code``,
    ``stdout`` and ``stderr``."""
    from support.cli import prime_in_project

    args = {"commands": commands, "harness": {"id": "bash"}, "runtime": runtime}
    return prime_in_project(project, "eval", "run", "vf-v1-shell", "-m", "hash-model", "-b", server.base_url,
                            "-k", KEY_VAR, "-n", str(len(commands)), "-r", "1", "-o", "refused",
                            "-a", json.dumps(args), env={KEY_VAR: "test-key"})


def outputs(project: Path, out: str) -> dict[int, dict]:
    """Per task index: what its command printed (the tool result), the row's error and error kind."""
    (results,) = (project / out).glob("evals/*/*/results.jsonl")
    found = {}
    for line in results.read_text().splitlines():
        row = json.loads(line)
        tool = [m for m in row["completion"] if m.get("role") == "tool"]
        found[row["example_id"]] = {"printed": tool[0]["content"] if tool else None, "error": row["error"],
                                    "kind": row["error_kind"]}
    return found


def leftovers() -> list[str]:
    """Processes of these runs still alive on the host (the detached sleeps)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[:2] == [b"sleep", SLEEP.encode()]:
            found.append(pid)
    return found

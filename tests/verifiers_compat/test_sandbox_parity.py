"""The ``bash`` harness on primekit's ``sandbox`` runtime gives the rows it gives on ``subprocess`` for tasksets whose
commands only compute (nothing they run reads the home, other processes, the network or detached processes: what the
sandbox changes). One scripted agent model (tests/support/bash_server.py: one ``bash`` call per user turn, then what
the command printed) plays both runs; the rows of ``results.jsonl`` are compared example by example: prompt,
completion (tool calls and tool output included), reward, metrics, example id, error, stop condition, token usage,
tools, info: every field but the timings.

Then Ctrl-C: SIGINT to a ``prime eval run`` on ``sandbox`` while the model's command runs ends it with exit code 130
and leaves nothing behind: no process the sandbox started, no private folder, no rollout folder.

The rows of ``vf_v1_chat`` (two user turns) are compared under both verifiers generations (marked ``verifiers``:
each has its own bash harness program, which must run in the sandbox and resume for the second turn);
``vf_v1_math``'s one turn is a part of that, and ``vf-v1-shell``'s commands try the sandbox's binds (``/usr``'s
tools), not the program, so they are compared once, under 0.3.1. Ctrl-C asserts primekit's process tree and
cleanup only, so it runs once, under verifiers 0.3.1 too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")

from support import REPO, with_pythonpath  # noqa: E402  (after the importorskip above)
from support.bash_server import BashServer  # noqa: E402  (after the importorskip above)

from evalkit.sandbox import bwrap  # noqa: E402  (after the importorskip above)

WHY_NOT = bwrap.unavailable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"needs bubblewrap: {WHY_NOT}")

KEY_VAR = "BASH_SERVER_KEY"
SHELL_COMMANDS = ["python3 -c 'print(sum(range(10)))'", "printf '%s\\n' c b a | sort | tr -d '\\n'",
                  "echo $((6 * 7)); expr 9 - 4", "seq 3 | paste -sd+ | bc 2>/dev/null || echo no-bc"]
TASKSETS = {
    "vf_v1_math": {"harness": {"id": "bash"}},  # python3 -c 'print(A+B)' per task
    "vf_v1_chat": {"harness": {"id": "bash"}},  # two user turns, a command each
    "vf-v1-shell": {"harness": {"id": "bash"}, "commands": SHELL_COMMANDS},
}
NOT_COMPARED = {"timing"}
"""What differs between any two runs; every other field of a row is compared."""


@pytest.fixture(scope="module")
def server():
    started = BashServer()
    yield started
    started.stop()


def env_for(project: Path) -> dict[str, str]:
    return with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1", "HOME": str(project / "home"), KEY_VAR: "test-key"}


def rows(project: Path, server: BashServer, taskset: str, runtime: str) -> list[dict[str, Any]]:
    """The rows ``prime eval run`` writes for ``taskset`` with the bash harness on ``runtime``, in example order."""
    out = f"{taskset}-{runtime}"
    args = {**TASKSETS[taskset], "runtime": {"type": runtime}}
    cli = [sys.executable, "-m", "primekit_cli", "eval", "run", taskset, "-m", "hash-model", "-b", server.base_url,
           "-k", KEY_VAR, "-r", "1", "-c", "4", "-o", out, "-a", json.dumps(args)]
    done = subprocess.run(cli, cwd=project, env=env_for(project), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (project / out).glob("evals/*/*/results.jsonl")
    found = [json.loads(line) for line in results.read_text().splitlines()]
    return sorted(found, key=lambda row: row["example_id"])


def differences(ours: list[dict], theirs: list[dict]) -> list[str]:
    """Each field but the timings that differs, as ``example <id> <field>: a != b``."""
    if [r["example_id"] for r in ours] != [r["example_id"] for r in theirs]:
        return [f"example ids {[r['example_id'] for r in ours]} != {[r['example_id'] for r in theirs]}"]
    return [f"example {a['example_id']} {key}: {json.dumps(a.get(key))[:300]} != {json.dumps(b.get(key))[:300]}"
            for a, b in zip(ours, theirs) for key in sorted((set(a) | set(b)) - NOT_COMPARED)
            if a.get(key) != b.get(key)]


@pytest.mark.slow
@pytest.mark.parametrize("taskset", [pytest.param(t, marks=[pytest.mark.verifiers] if t == "vf_v1_chat" else [])
                                     for t in sorted(TASKSETS)])
def test_bash_harness_gives_the_same_rows_on_sandbox_and_subprocess(verifiers_project, server, taskset):
    sandbox = rows(verifiers_project, server, taskset, "sandbox")
    plain = rows(verifiers_project, server, taskset, "subprocess")
    assert sandbox and len(sandbox) == len(plain)
    tool_outputs = [m["content"] for r in sandbox for m in r["completion"] if m.get("role") == "tool"]
    assert len(tool_outputs) >= len(sandbox) and all(r["error"] is None for r in sandbox)  # the commands ran
    assert any(r["reward"] > 0 for r in sandbox)  # and computed something the taskset scores
    print(f"PARITY sandbox/subprocess {taskset}: rows {len(sandbox)}, rewards {[r['reward'] for r in sandbox]}")
    assert differences(sandbox, plain) == []


SLEEP = "87654"
"""The ``sleep`` argument of the command running when Ctrl-C comes: only this test's sandboxes run it."""


def descendants(root: int) -> dict[int, str]:
    """The live processes below ``root`` (by ``/proc/<pid>/stat``'s parent), each with its command line."""
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = {}, {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier and pid not in found}
        for pid in frontier:
            try:
                found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                found[pid] = ""
    return found


def still_alive(pids: dict[int, str]) -> dict[int, str]:
    """Those of ``pids`` that still run the same command line (not zombies, not a reused pid)."""
    left = {}
    for pid, cmdline in pids.items():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            now = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if state != "Z" and now == cmdline:
            left[pid] = cmdline
    return left


@pytest.mark.slow
@pytest.mark.parametrize("to", ["process", "group"])
def test_ctrl_c_mid_rollout_exits_130_and_leaves_nothing(verifiers_project, server, to):
    """SIGINT to primekit alone (``kill -INT``) or to its whole process group (a terminal's Ctrl-C) while the
    model's ``sleep`` runs in the sandbox."""
    project = verifiers_project
    args = {"commands": [f"sleep {SLEEP}"], "harness": {"id": "bash"}, "runtime": {"type": "sandbox"}}
    cli = [sys.executable, "-m", "primekit_cli", "eval", "run", "vf-v1-shell", "-m", "hash-model", "-b",
           server.base_url, "-k", KEY_VAR, "-n", "1", "-r", "1", "-o", "interrupted", "-a", json.dumps(args)]
    prime = subprocess.Popen(cli, cwd=project, env=env_for(project), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline, started = time.monotonic() + 300, {}
        while time.monotonic() < deadline and prime.poll() is None:
            started = descendants(prime.pid)
            if any(cmdline == f"sleep {SLEEP}" for cmdline in started.values()):
                break
            time.sleep(0.3)
        assert any(cmdline == f"sleep {SLEEP}" for cmdline in started.values()), "the sandboxed command never started"
        assert any("bwrap" in cmdline for cmdline in started.values()), started
        mine = list(Path("/tmp").glob(f"primekit-sandbox-{prime.pid}-*"))
        rollouts = project / "home" / ".cache" / "verifiers" / "runtimes" / "subprocess"
        assert mine and list(rollouts.iterdir())  # what must go: the private folder and the rollout folder exist
        if to == "group":
            os.killpg(prime.pid, signal.SIGINT)
        else:
            prime.send_signal(signal.SIGINT)
        _, stderr = prime.communicate(timeout=120)
    finally:
        if prime.poll() is None:
            os.killpg(prime.pid, signal.SIGKILL)
            prime.wait()
    assert prime.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    deadline = time.monotonic() + 10
    while still_alive(started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert still_alive(started) == {}  # every process primekit and its sandbox started has ended
    assert not list(Path("/tmp").glob(f"primekit-sandbox-{prime.pid}-*"))  # its private folder is gone
    ours = {str(prime.pid), *map(str, started)}  # another pytest's sandboxes may run beside this one
    assert not [f for f in Path("/tmp").glob("primekit-sandbox-*-*") if f.name.split("-")[2] in ours]
    assert list(rollouts.iterdir()) == []  # the rollout's working folder is gone
    assert not (project / "home" / ".cache" / "primekit" / "rollouts" / str(prime.pid)).exists()  # and its record
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(project) not in mounts and "primekit-sandbox-" not in mounts  # no mount left on the host

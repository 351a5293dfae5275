"""verifiers' ``bash`` harness on the plain ``subprocess`` runtime (the model's commands run as the user): the
hardening issue 44 asks for where no sandbox is, tried by the scripted model of tests/support/bash_server.py.
Each test is a line of the subprocess column of the runtime table in docs/reliability.md.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")

from support.bash_server import BashServer  # noqa: E402  (after the importorskip above)
from support.shell_runs import SLEEP, leftovers, outputs, run_commands  # noqa: E402

pytestmark = [pytest.mark.verifiers,
              pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs os.pidfd_open (Linux 5.3+)")]


@pytest.fixture(scope="module")
def server():
    started = BashServer()
    yield started
    started.stop()


def test_processes_a_command_detaches_end_with_the_rollout(verifiers_project, server):
    """``setsid`` and a plain background job, both orphaned by their subshell: the harness child is a subreaper,
    so they are its children when the program ends, and it kills them."""
    commands = [f"(setsid sleep {SLEEP} >/dev/null 2>&1 &); (sleep {SLEEP} >/dev/null 2>&1 &); "
                f"sleep 0.2; pgrep -fc '^sleep {SLEEP}'"]
    try:
        done = run_commands(verifiers_project, server, commands, {"type": "subprocess"}, "reaped")
        assert done.returncode == 0, done.stderr[-3000:]
        row = outputs(verifiers_project, "reaped")[0]
        assert row["error"] is None and row["printed"].strip() == "2", row  # both ran while the rollout did
        assert not leftovers(), "a detached process outlived its rollout"
    finally:
        for pid in leftovers():
            os.kill(int(pid), 9)

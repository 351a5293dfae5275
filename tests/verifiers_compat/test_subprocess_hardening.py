"""verifiers' ``bash`` harness on the plain ``subprocess`` runtime (the model's commands run as the user): the
hardening issue 44 asks for where no sandbox is, tried by the scripted model of tests/support/bash_server.py.
Each test is a line of the subprocess column of the runtime table in docs/reliability.md.
"""

from __future__ import annotations

import json
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


def test_a_timed_out_rollout_keeps_the_turns_done_so_far(verifiers_project, server):
    """The model's first (and only) turn runs a command that outlasts ``--rollout-timeout``: the row says one model
    turn was done and keeps that turn's tool call, and ``traces.jsonl`` has the unfinished trace."""
    commands = [f"echo started; sleep {SLEEP}"]
    try:
        done = run_commands(verifiers_project, server, commands, {"type": "subprocess"}, "late",
                            extra_args=("--rollout-timeout", "20"))
        results = list((verifiers_project / "late").glob("evals/*/*/results.jsonl"))
        assert done.returncode == 1 and len(results) == 1, done.stderr[-3000:]  # 1: every rollout errored
        results = results[0]
        (row,) = [json.loads(line) for line in results.read_text().splitlines()]
        assert row["error_kind"] == "timeout" and "(1 model turn done" in row["error"], row["error"]
        (call,) = [m for m in row["completion"] if m.get("role") == "assistant"]
        assert SLEEP in call["tool_calls"][0]["function"]["arguments"]
        (trace_file,) = results.parent.glob("traces.jsonl")
        (episode,) = [json.loads(line) for line in trace_file.read_text().splitlines()]
        assert SLEEP in json.dumps(episode["traces"])
        assert not leftovers(), "the timed-out command outlived its rollout"
    finally:
        for pid in leftovers():
            os.kill(int(pid), 9)

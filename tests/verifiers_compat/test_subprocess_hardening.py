"""verifiers' ``bash`` harness on the plain ``subprocess`` runtime (the model's commands run as the user): the
hardening issue 44 asks for where no sandbox is, tried by the scripted model of tests/support/bash_server.py.
Each test is a line of the subprocess column of the runtime table in docs/reliability.md.

Only the tests whose subject goes through code that differs between verifiers 0.3.1 and 0.4 are marked
``verifiers`` (run again under 0.4 by ``make test``): the timed-out rollout (its unfinished trace is collected through
0.4's ``on_trace``) and the secrets (redacted from ``traces.jsonl``, which each generation writes with its own
writer). The rest asserts primekit's process machinery (the harness child's subreaper, limits and their verdicts,
the launcher's fallback), which treats the harness program as an opaque process: it runs once, under 0.3.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")

from support import REPO, with_pythonpath  # noqa: E402  (after the importorskip above)
from support.bash_server import BashServer  # noqa: E402  (after the importorskip above)
from support.cli import assert_user_error  # noqa: E402
from support.shell_runs import SLEEP, leftovers, outputs, refused_run, run_commands  # noqa: E402

PLANTED = {"HF_TOKEN": "hf_plantedHubToken0001", "GITHUB_TOKEN": "ghp_plantedGithubToken0002",
           "MY_SERVICE_API_KEY": "planted-service-key-0003", "AWS_SECRET_ACCESS_KEY": "plantedAwsSecretKey0004",
           "AWS_SESSION_TOKEN": "plantedAwsSessionToken0005", "DB_PASSWORD": "planted-db-password-0006"}
"""Credentials in primekit's own environment (none is handed to the harness child: its environment is an
allowlist), which a command may still print from a file or from ``/proc``."""

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs os.pidfd_open (Linux 5.3+)")


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


@pytest.mark.verifiers
def test_a_timed_out_rollout_keeps_the_turns_done_so_far(verifiers_project, server):
    """The model's first (and only) turn runs a command that outlasts ``--rollout-timeout``: the row says one model
    turn was done and keeps that turn's tool call, and ``traces.jsonl`` has the unfinished trace."""
    commands = [f"echo started; sleep {SLEEP}"]
    try:
        for timeout in ("20", "45"):  # the first turn fits in 20 s on an idle machine; a loaded one gets 45 s
            done = run_commands(verifiers_project, server, commands, {"type": "subprocess"}, f"late-{timeout}",
                                extra_args=("--rollout-timeout", timeout))
            results = list((verifiers_project / f"late-{timeout}").glob("evals/*/*/results.jsonl"))
            assert done.returncode == 1 and len(results) == 1, done.stderr[-3000:]  # 1: every rollout errored
            results = results[0]
            (row,) = [json.loads(line) for line in results.read_text().splitlines()]
            if "(0 model turns done" not in (row["error"] or ""):
                break
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


@pytest.mark.verifiers
def test_secrets_of_primekits_environment_never_leave_even_when_a_command_prints_them(verifiers_project, server):
    """The model's commands print primekit's credentials (the ``-k`` key's value and those of :data:`PLANTED`) from a
    file that holds them and from ``/proc/<primekit pid>/environ`` (readable to root): every one is redacted from
    ``results.jsonl``, ``traces.jsonl`` and the other files of the run, from the SFT rows made from it, and from
    the conversation the model endpoint received."""
    project = verifiers_project
    values = [*PLANTED.values(), "test-key"]  # test-key: the -k variable's value (support.shell_runs)
    held = project / "held.txt"
    held.write_text("\n".join(values) + "\n")
    commands = [f"cat {held}", "tr '\\0' '\\n' < /proc/@PID@/environ | grep -E 'TOKEN|KEY|PASSWORD'; echo listed"]
    done = run_commands(project, server, commands, {"type": "subprocess"}, "secrets", extra_env=PLANTED)
    assert done.returncode == 0, done.stderr[-3000:]
    got = outputs(project, "secrets")
    assert got[0]["error"] is None and got[0]["printed"].count("[redacted]") == len(values), got[0]
    assert "listed" in got[1]["printed"]
    (run_dir,) = {path.parent for path in (project / "secrets").glob("evals/*/*/results.jsonl")}
    sft = project / "sft.jsonl"
    made = subprocess.run([sys.executable, "-m", "primekit_cli", "data", "from-eval", str(run_dir), "-o", str(sft),
                           "--min-reward", "0"], cwd=project, env=with_pythonpath(REPO) | {"HOME": str(project)},
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0 and sft.read_text().count("\n") == 2, made.stderr[-2000:]
    written = {path: path.read_text(errors="replace") for path in [*run_dir.rglob("*"), sft] if path.is_file()}
    assert {path.name for path in written} >= {"results.jsonl", "traces.jsonl", "metadata.json", "sft.jsonl"}
    for path, text in written.items():
        assert not [value for value in values if value in text], path
    sent = json.dumps(server.requests())
    assert "[redacted]" in sent, "the command's output never reached the endpoint"
    assert not [value for value in values if value in sent]


def test_a_fork_flood_and_a_big_write_end_their_rows_with_the_limit_named(verifiers_project, server):
    """The sandbox's limits on ``subprocess`` (the same knobs and defaults): the harness child's process tree is
    counted (it is a subreaper, so nothing a command forks leaves it), and ``file_size_mb`` is ``RLIMIT_FSIZE``;
    either ends the row with the error the sandbox gives, naming the runtime."""
    commands = [f"for i in $(seq 200); do sleep {SLEEP} & done; wait", "head -c 3000000 /dev/zero > big; ls -l big",
                "echo fine"]
    try:
        done = run_commands(verifiers_project, server, commands,
                            {"type": "subprocess", "processes": 32, "file_size_mb": 1}, "limits")
        got = outputs(verifiers_project, "limits")
        assert got[0]["error"].startswith("SandboxLimitError: subprocess limit reached: processes = 32"), got[0]
        assert got[1]["error"].startswith("SandboxLimitError: subprocess limit reached: file_size_mb = 1 (big "
                                          "reached 1048576 bytes)"), got[1]
        assert "File size limit exceeded" in got[1]["printed"]  # the write itself was stopped at 1 MiB
        assert got[2] == {"printed": "fine\n", "error": None, "kind": None}
        assert "SandboxLimitError: subprocess limit reached" in done.stdout + done.stderr and leftovers() == []
    finally:
        for pid in leftovers():
            os.kill(int(pid), 9)


def test_a_memory_limit_the_harness_program_cannot_live_in_is_the_named_row_error(verifiers_project, server):
    """``memory_mb`` is each process's ``RLIMIT_AS``; the harness program failing to allocate under it is the row
    error naming the limit (not the program's own failure)."""
    run_commands(verifiers_project, server, ["echo hi"], {"type": "subprocess", "memory_mb": 16}, "starved")
    (row,) = outputs(verifiers_project, "starved").values()
    assert row["error"].startswith("SandboxLimitError: subprocess limit reached: memory_mb = 16 (the harness "
                                   "program: "), row


def test_bad_subprocess_limits_are_one_error_line(verifiers_project, server):
    done = refused_run(verifiers_project, server, ["echo hi"], {"type": "subprocess", "memory": 5})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.exit_code == 2 and len(lines) == 1, done.output[-2000:]
    assert_user_error(done, "runtime setting(s) ['memory']: the subprocess runtime takes 'type' and memory_mb, "
                            "processes, file_size_mb, cpu_seconds")


def launcher_run(tmp_path: Path, script: str, limits: dict) -> subprocess.CompletedProcess:
    """``script`` run as the harness program of the fresh-interpreter fallback (``launcher.py --exec-no-stdin``:
    no fork server), with ``limits``, as verifiers' runtime starts it (a session of its own)."""
    from evalkit.verifiers_compat.v1.harness_workers import LAUNCHER

    (tmp_path / "program.py").write_text(script)
    env = {"PATH": os.environ["PATH"], "PRIMEKIT_HARNESS_LIMITS": json.dumps(limits)}
    return subprocess.run([sys.executable, "-S", str(LAUNCHER), "--exec-no-stdin", "program.py"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, start_new_session=True)


def test_the_fresh_interpreter_fallback_is_a_subreaper_that_ends_what_the_program_detached(tmp_path):
    """Without a fork server the program runs in a fresh interpreter under the launcher's reaper: what its commands
    detached (``setsid``, a double fork) ends with it, its limits apply, and the program's environment holds
    neither the limits variable nor anything but the allowlist."""
    script = (f"import os, subprocess\nsubprocess.run('(setsid sleep {SLEEP} >/dev/null 2>&1 &); "
              f"(sleep {SLEEP} >/dev/null 2>&1 &)', shell=True)\nprint(sorted(os.environ))\n"
              f"print(subprocess.run(['pgrep', '-fc', '^sleep {SLEEP}'], capture_output=True, text=True).stdout)\n")
    try:
        done = launcher_run(tmp_path, script, {})
        assert done.returncode == 0, done.stderr
        names, count = done.stdout.splitlines()[:2]
        assert count == "2" and "PRIMEKIT_HARNESS_LIMITS" not in names  # both ran while the program did
        assert not leftovers(), "a process the program detached outlived it"
    finally:
        for pid in leftovers():
            os.kill(int(pid), 9)


def test_the_fresh_interpreter_fallback_stops_a_fork_flood_with_a_verdict(tmp_path):
    script = f"import subprocess\nsubprocess.run('for i in $(seq 100); do sleep {SLEEP} & done; wait', shell=True)\n"
    try:
        done = launcher_run(tmp_path, script, {"processes": 16})
        assert done.returncode == 137, (done.returncode, done.stderr)
        (line,) = [line for line in done.stderr.splitlines() if "limit reached" in line]
        assert line.startswith('primekit harness worker: limit reached: {"limit": "processes", "value": 16'), line
        assert not leftovers()
    finally:
        for pid in leftovers():
            os.kill(int(pid), 9)

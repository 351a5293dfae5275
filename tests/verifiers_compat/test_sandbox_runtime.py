"""verifiers' ``bash`` harness on primekit's ``sandbox`` runtime (bubblewrap): what the model's commands can and
cannot reach, tried by a scripted model (tests/support/bash_server.py runs the command in backquotes of each task
of tests/verifiers_envs/vf_v1_shell and replies with what it printed), and the limits as row errors.

Each check here is a line of the runtime table in docs/reliability.md; the subprocess column is checked by the
same commands in :func:`test_the_same_commands_on_subprocess_reach_what_the_table_says`.

These assert primekit's sandbox (bwrap's binds and namespaces, the limits and their verdicts, the sweep after a
kill), which treats the harness program as an opaque process, so they run once, under verifiers 0.3.1; only the
test of verifiers 0.4's dotted flags is marked ``verifiers``. That 0.4's bash harness program runs in the sandbox
and gives the rows it gives on ``subprocess`` is test_sandbox_parity.py's, under both generations.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")

from support import REPO, with_pythonpath
from support.bash_server import BashServer
from support.cli import assert_user_error
from support.shell_runs import KEY_VAR, MARKER, SLEEP, leftovers, outputs, refused_run, run_commands

from evalkit.sandbox import bwrap

WHY_NOT = bwrap.unavailable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"needs bubblewrap: {WHY_NOT}")

@pytest.fixture(scope="module")
def server():
    started = BashServer()
    yield started
    started.stop()


@pytest.fixture()
def listener():
    """A host loopback port with a server on it that is not the model endpoint."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock.getsockname()[1]
    sock.close()


def plant(project: Path) -> dict[str, Path]:
    """A file in the user's home and one in another rollout's folder (verifiers' cache under that home)."""
    home = project / "home" / "planted.txt"
    home.write_text("PLANTED-HOME\n")
    other = project / "home" / ".cache" / "verifiers" / "runtimes" / "subprocess" / "vf-other-rollout"
    other.mkdir(parents=True)
    (other / "planted.txt").write_text("PLANTED-OTHER\n")
    return {"home": home, "other": other / "planted.txt"}


def isolation_commands(project: Path, planted: dict[str, Path], port: int) -> list[str]:
    return [
        f"cat {planted['home']}; echo rc=$?",
        f"cat {planted['other']}; echo rc=$?",
        "cat /proc/@PID@/environ; echo rc=$?; grep -l " + MARKER + " /proc/[0-9]*/environ; echo found=$?",
        f"touch {project / 'escaped.txt'}; echo x >> {planted['home']}; touch /usr/primekit-escaped; echo usr=$?; "
        "echo x > /tmp/primekit-sandbox-escape-$PPID; echo tmp=$?",
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3)\"; echo rc=$?",
        f"(setsid sleep {SLEEP} >/dev/null 2>&1 &); (sleep {SLEEP} >/dev/null 2>&1 &); echo started",
    ]


def test_the_models_commands_stay_in_the_sandbox(verifiers_project, server, listener):
    project = verifiers_project
    planted = plant(project)
    private_before = set(Path("/tmp").glob("primekit-sandbox-*"))
    done = run_commands(project, server, isolation_commands(project, planted, listener), {"type": "sandbox"}, "sb")
    assert done.returncode == 0, done.stderr[-3000:]
    got = outputs(project, "sb")
    assert all(row["error"] is None for row in got.values()), got
    home, other, environ, write, port, detached = (got[i]["printed"] for i in range(6))
    assert "PLANTED-HOME" not in home and "No such file" in home and "rc=1" in home  # the user's home
    assert "PLANTED-OTHER" not in other and "No such file" in other  # another rollout's folder
    assert MARKER not in environ and "rc=1" in environ and "found=0" not in environ  # no host process visible
    assert "usr=1" in write and not Path("/usr/primekit-escaped").exists()  # system folders are read-only
    assert not (project / "escaped.txt").exists() and planted["home"].read_text() == "PLANTED-HOME\n"  # nor elsewhere
    assert "tmp=0" in write and not list(Path("/tmp").glob("primekit-sandbox-escape-*"))  # /tmp is its own
    assert "ConnectionRefusedError" in port and "rc=1" in port  # a loopback port that is not the endpoint
    assert "started" in detached
    assert leftovers() == []  # detached processes ended with the rollout
    assert set(Path("/tmp").glob("primekit-sandbox-*")) <= private_before  # the bridge folders are gone
    rollouts = project / "home" / ".cache" / "verifiers" / "runtimes" / "subprocess"
    assert [p.name for p in rollouts.iterdir()] == ["vf-other-rollout"]  # the working folders are gone


def test_a_fork_flood_and_a_big_write_end_their_rows_with_the_limit_named(verifiers_project, server):
    commands = [f"for i in $(seq 200); do sleep {SLEEP} & done; wait", "head -c 3000000 /dev/zero > big; ls -l big"]
    done = run_commands(verifiers_project, server, commands, {"type": "sandbox", "processes": 32, "file_size_mb": 1},
                        "limits")
    got = outputs(verifiers_project, "limits")
    assert got[0]["error"].startswith("SandboxLimitError: sandbox limit reached: processes = 32"), got[0]
    assert got[1]["error"].startswith("SandboxLimitError: sandbox limit reached: file_size_mb = 1 (big reached "
                                      "1048576 bytes)"), got[1]
    assert "File size limit exceeded" in got[1]["printed"]  # the write itself was stopped at 1 MiB
    assert "SandboxLimitError" in done.stderr and leftovers() == []


def test_a_memory_limit_the_harness_program_cannot_live_in_is_the_named_row_error(verifiers_project, server):
    """``memory_mb`` is each process's ``RLIMIT_AS`` (set on the program, not on the supervisor, which keeps room
    for its bridge); the program failing to allocate under it is the row error naming the limit."""
    run_commands(verifiers_project, server, ["echo hi"], {"type": "sandbox", "memory_mb": 16}, "starved")
    (row,) = outputs(verifiers_project, "starved").values()
    assert row["error"].startswith("SandboxLimitError: sandbox limit reached: memory_mb = 16 (the harness "
                                   "program: "), row


def test_bwrap_missing_is_one_error_line_saying_how_to_install_it(verifiers_project, server, tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("sh", "sed", "printf"):
        (bare / tool).symlink_to(subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True,
                                                text=True).stdout.strip() or f"/bin/{tool}")
    done = run_commands(verifiers_project, server, ["echo hi"], {"type": "sandbox"}, "nobwrap",
                        extra_env={"PATH": str(bare)})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("error: v1 taskset 'vf-v1-shell': the sandbox runtime needs bubblewrap (bwrap), which "
                               "is not on PATH: install it (Debian/Ubuntu: apt-get install bubblewrap")


def test_bad_sandbox_limits_are_one_error_line(verifiers_project, server):
    done = refused_run(verifiers_project, server, ["echo hi"], {"type": "sandbox", "memory": 5})
    assert_user_error(done, "runtime setting(s) ['memory']: the sandbox runtime takes 'type' and memory_mb, "
                            "processes, file_size_mb, cpu_seconds")
    done = refused_run(verifiers_project, server, ["echo hi"], {"type": "sandbox", "processes": -1})
    assert_user_error(done, "runtime setting processes = -1: give a whole number >= 0")


def test_kill_9_of_primekit_ends_the_sandbox_and_the_next_start_sweeps_the_rollout_folder(verifiers_project, server):
    import signal
    import time

    project = verifiers_project
    args = {"commands": [f"sleep {SLEEP}"], "harness": {"id": "bash"}, "runtime": {"type": "sandbox"}}
    cli = [sys.executable, "-m", "primekit_cli", "eval", "run", "vf-v1-shell", "-m", "hash-model", "-b",
           server.base_url, "-k", KEY_VAR, "-n", "1", "-r", "1", "-o", "killed", "-a", json.dumps(args)]
    env = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1", "HOME": str(project / "home"), KEY_VAR: "test-key"}
    prime = subprocess.Popen(cli, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not leftovers() and time.monotonic() < deadline:  # the model's command runs
            time.sleep(0.5)
        assert leftovers(), "the sandboxed command never started"
    finally:
        prime.send_signal(signal.SIGKILL)
        prime.wait()
    rollouts = project / "home" / ".cache" / "verifiers" / "runtimes" / "subprocess"
    left = list(rollouts.iterdir())
    deadline = time.monotonic() + 10
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers() == []  # bwrap dies with its parent, and its PID namespace with it
    assert len(left) == 1  # the folder verifiers would have removed at teardown
    done = run_commands(project, server, ["echo next"], {"type": "sandbox"}, "next")
    assert done.returncode == 0, done.stderr[-2000:]
    assert list(rollouts.iterdir()) == []  # swept by the next start
    assert not list(Path("/tmp").glob(f"primekit-sandbox-{prime.pid}-*"))  # and the killed run's private folder


@pytest.mark.slow
def test_the_same_commands_on_subprocess_reach_what_the_table_says(verifiers_project, server, listener):
    """The subprocess column of docs/reliability.md: the home, other rollouts' folders, writes anywhere and every
    loopback port are reachable there."""
    project = verifiers_project
    planted = plant(project)
    commands = isolation_commands(project, planted, listener)
    done = run_commands(project, server, commands, {"type": "subprocess"}, "sub")
    assert done.returncode == 0, done.stderr[-3000:]
    home, other, environ, write, port, _ = (outputs(project, "sub")[i]["printed"] for i in range(6))
    assert "PLANTED-HOME" in home and "PLANTED-OTHER" in other
    assert (project / "escaped.txt").exists() and planted["home"].read_text() == "PLANTED-HOME\nx\n"
    assert "rc=0" in port
    for stray in [*Path("/tmp").glob("primekit-sandbox-escape-*"), Path("/usr/primekit-escaped")]:
        stray.unlink(missing_ok=True)  # what the commands wrote on the host (/usr only when the tests run as root)
    assert not leftovers(), "the rollout's detached sleeps outlived it (the child is a subreaper)"


@pytest.mark.verifiers
@pytest.mark.skipif(not str(pytest.importorskip("verifiers").__version__).startswith("0.4."),
                    reason="verifiers 0.4's dotted flags")
def test_verifiers_dotted_flags_choose_the_sandbox_and_its_limits(verifiers_project, server):
    def run(out: str, *more: str) -> list[dict]:
        cli = [sys.executable, "-m", "primekit_cli", "eval", "run", "vf_v1_math", "-m", "hash-model",
               "--client.base-url", server.base_url, "--client.api-key-var", KEY_VAR, "--env.agent.harness.id", "bash",
               "--env.agent.runtime.type", "sandbox", *more, "-o", out]
        env = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1", "HOME": str(verifiers_project / "home"), KEY_VAR: "k"}
        subprocess.run(cli, cwd=verifiers_project, env=env, capture_output=True, text=True, timeout=600)
        (results,) = (verifiers_project / out).glob("evals/*/*/results.jsonl")
        return [json.loads(line) for line in results.read_text().splitlines()]

    assert [(r["reward"], r["error"]) for r in run("fits")] == [(1.0, None)] * 3
    starved = run("starved", "--env.agent.runtime.memory_mb", "16")  # the interpreter cannot start in 16 MiB
    assert all(r["error"].startswith("SandboxLimitError: sandbox limit reached: memory_mb = 16")
               and r["reward"] == 0.0 for r in starved), starved

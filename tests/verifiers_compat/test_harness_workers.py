"""The harness fork server (evalkit/verifiers_compat/v1/harness_workers): a forked run behaves as a fresh
interpreter would for verifiers' runtime (streams, exit code, working directory, environment, signals), holds
no key of primekit's environment, and dies with the launcher (or the cancelled in-process call) that asked for
it; the server learns what its children import and build, so later children do not; a run handed over from
primekit's event loop (client.run_forked) gives what the launcher gives and leaks nothing.

Real parts: the server and launcher as real processes, a Unix socket, real signals.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import with_pythonpath

from evalkit.verifiers_compat.v1.harness_workers import ForkServer
from evalkit.verifiers_compat.v1.harness_workers.client import run_forked
from evalkit.verifiers_compat.v1.harness_workers.harness_env import declare

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs os.pidfd_open (Linux 5.3+)")

PROGRAM = """\
import json, os, sys
import email.mime.text  # stands for the chat program's libraries: the server imports them before forking
preloaded = "email.mime.text" in sys.modules
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "who": os.environ.get("WHO"),
                  "leaked": [k for k in os.environ if k == "PRIMEKIT_TEST_SECRET"],
                  "proc_environ_leak": b"sk-never-here" in open("/proc/self/environ", "rb").read(),
                  "main": __name__, "pid": os.getpid(), "group": os.getpgid(0)}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""

SLEEPER = """\
import os, sys, time
open("pid", "w").write(str(os.getpid()))
time.sleep(120)
"""


@pytest.fixture(autouse=True)
def home(monkeypatch, tmp_path_factory) -> Path:
    """primekit's home, where servers keep what they learned: a fresh one per test."""
    folder = tmp_path_factory.mktemp("primekit-home")
    monkeypatch.setenv("PRIMEKIT_HOME", str(folder))
    return folder


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("PRIMEKIT_TEST_SECRET", "sk-never-here")  # primekit's own environment holds a key
    started = ForkServer()
    yield started
    started.close()


def run(server: ForkServer, folder: Path, name: str, source: str, *args: str, **kwargs) -> subprocess.Popen:
    (folder / name).write_text(source)
    # what verifiers' runtime gives the program: its own variables, the ones the harness declares named
    env = {"PATH": os.environ["PATH"], **declare({"WHO": "the run's own"})}
    return subprocess.Popen(server.command(name) + list(args), cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, **kwargs)


def test_a_forked_run_looks_like_a_fresh_interpreter_to_the_runtime(server, tmp_path):
    for code in (0, 3):
        done = run(server, tmp_path, "prog.py", PROGRAM, str(code), "x y")
        out, err = done.communicate(timeout=60)
        assert done.returncode == code and err == b"to stderr\n"
        seen = json.loads(out)
        assert seen["argv"] == [str(code), "x y"] and seen["cwd"] == str(tmp_path) and seen["who"] == "the run's own"
        assert seen["main"] == "__main__" and seen["pid"] == seen["group"] != done.pid  # its own session
        assert seen["leaked"] == [] and seen["proc_environ_leak"] is False
    crash = run(server, tmp_path, "crash.py", "raise ValueError('boom')\n")
    out, err = crash.communicate(timeout=60)
    assert crash.returncode == 1 and b"ValueError: boom" in err and b"Traceback" in err


def test_the_server_loads_the_programs_imports_before_it_forks(server, tmp_path):
    probe = "import sys\nprint('email.mime.text' in sys.modules)\nimport email.mime.text\n"
    done = run(server, tmp_path, "probe.py", probe)
    assert done.communicate(timeout=60)[0] == b"True\n" and done.returncode == 0


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _child_pid(folder: Path) -> int:
    deadline = time.monotonic() + 30
    while not (folder / "pid").exists() or not (folder / "pid").read_text():
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.05)
    return int((folder / "pid").read_text())


def test_killing_the_launcher_kills_the_program(server, tmp_path):
    launcher = run(server, tmp_path, "sleep.py", SLEEPER)
    child = _child_pid(tmp_path)
    os.killpg(launcher.pid, signal.SIGKILL)  # what verifiers does to a run that outlives its timeout
    launcher.wait(timeout=10)
    assert _gone(child)


def test_sigterm_reaches_the_program_and_its_code_comes_back(server, tmp_path):
    launcher = run(server, tmp_path, "sleep.py", SLEEPER)
    child = _child_pid(tmp_path)
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=10) == 128 + signal.SIGTERM and _gone(child)


def test_the_server_ends_with_its_parent_and_takes_running_programs_along(tmp_path):
    script = ("import sys, time; from evalkit.verifiers_compat.v1.harness_workers import ForkServer\n"
              "s = ForkServer(); print(s.socket, s.process.pid, flush=True); time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env=with_pythonpath(Path.cwd()))
    socket_path, server_pid = parent.stdout.readline().split()
    (tmp_path / "sleep.py").write_text(SLEEPER)
    launcher = subprocess.Popen([sys.executable, "-S", str(Path(sys.modules[ForkServer.__module__].LAUNCHER)),
                                 socket_path, "sleep.py"], cwd=tmp_path)
    child = _child_pid(tmp_path)
    parent.kill()  # primekit killed with -9: the server's stdin closes
    parent.wait(timeout=10)
    assert _gone(int(server_pid)) and _gone(child)
    launcher.wait(timeout=10)


LAZY = """\
import importlib, sys
print(" ".join(str(name in sys.modules) for name in ("xml.dom.minidom", "fw_local_module")))
importlib.import_module("xml.dom.minidom")  # out of the preload's sight: no import statement names it
importlib.import_module("fw_local_module")  # lives in the run's own folder
"""


def test_the_server_learns_what_a_run_imported_except_from_the_runs_folder(server, tmp_path, home):
    (tmp_path / "fw_local_module.py").write_text("")
    seen = []
    for _ in range(2):
        done = run(server, tmp_path, "lazy.py", LAZY)
        seen.append(done.communicate(timeout=60)[0])
        assert done.returncode == 0
    assert seen == [b"False False\n", b"True False\n"]
    (kept,) = [path.read_text().split() for path in (home / "harness-preload").iterdir()]
    assert "xml.dom.minidom" in kept and "fw_local_module" not in kept and "__main__" not in kept


def test_the_next_servers_first_run_starts_with_what_an_earlier_server_learned(tmp_path):
    (tmp_path / "fw_local_module.py").write_text("")
    seen = []
    for _ in range(2):
        started = ForkServer()
        try:
            done = run(started, tmp_path, "lazy.py", LAZY)
            seen.append(done.communicate(timeout=60)[0])
        finally:
            started.close()
    assert seen == [b"False False\n", b"True False\n"]


MODELS = """\
import importlib
fw_models = importlib.import_module("fw_models")  # learned, not preloaded
print(fw_models.Deferred.__pydantic_complete__)
fw_models.Deferred(x=1)  # pydantic builds a defer_build model here, on first use
"""


def test_the_server_builds_deferred_models_while_it_waits(server_env, tmp_path):
    pytest.importorskip("pydantic")
    seen = []
    deadline = time.monotonic() + 30
    while b"True\n" not in seen and time.monotonic() < deadline:
        done = run(server_env, tmp_path, "models.py", MODELS)
        out, err = done.communicate(timeout=60)
        assert done.returncode == 0, err
        seen.append(out)
    # the first run teaches the server the module; it builds the model when it has nothing else to do
    assert seen[0] == b"False\n" and seen[-1] == b"True\n"


@pytest.fixture
def server_env(monkeypatch, tmp_path_factory):
    """A server whose import path holds ``fw_models`` (a pydantic model with ``defer_build``)."""
    library = tmp_path_factory.mktemp("library")
    (library / "fw_models.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n"
        "class Deferred(BaseModel):\n    model_config = ConfigDict(defer_build=True)\n    x: int\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(library), os.environ.get("PYTHONPATH", "")]))
    started = ForkServer()
    yield started
    started.close()


KILLED = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"


def test_a_run_handed_over_in_process_gives_what_the_launcher_gives(server, tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "killed.py").write_text(KILLED)
    env = {"PATH": os.environ["PATH"], **declare({"WHO": "the run's own"})}
    for argv in (["prog.py", "0", "x y"], ["prog.py", "3"], ["killed.py"]):
        launched = subprocess.run(server.command(argv[0]) + argv[1:], cwd=tmp_path, env=env, capture_output=True,
                                  start_new_session=True, timeout=60)
        code, out, err = asyncio.run(run_forked(server.socket, argv, str(tmp_path), env))
        assert (code, err) == (launched.returncode, launched.stderr)
        if argv[0] == "prog.py":
            here, there = json.loads(out), json.loads(launched.stdout)
            assert here["pid"] == here["group"] and here.pop("pid") != there.pop("pid")
            here.pop("group"), there.pop("group")
            assert here == there and here["cwd"] == str(tmp_path) and here["leaked"] == []
    assert code == 128 + signal.SIGKILL


SPAWNER = """\
import os, subprocess, time
grandchild = subprocess.Popen(["sleep", "120"])
open("pid", "w").write(f"{os.getpid()} {grandchild.pid}")
time.sleep(120)
"""


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_cancelling_an_in_process_run_kills_its_group_and_leaks_no_descriptor(server, tmp_path):
    (tmp_path / "spawner.py").write_text(SPAWNER)
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = {"PATH": os.environ["PATH"]}

    async def scenario() -> list[int]:
        await run_forked(server.socket, ["prog.py", "0"], str(tmp_path), env)  # warm: what the loop keeps open
        before = _open_fds()
        task = asyncio.create_task(run_forked(server.socket, ["spawner.py"], str(tmp_path), env))
        while not (tmp_path / "pid").exists() or len((tmp_path / "pid").read_text().split()) < 2:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for code in (0, 3):
            assert (await run_forked(server.socket, ["prog.py", str(code)], str(tmp_path), env))[0] == code
        assert _open_fds() == before
        return [int(pid) for pid in (tmp_path / "pid").read_text().split()]

    child, grandchild = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert _gone(child) and _gone(grandchild)


WAITER = """\
import os, time
open("pid", "w").write(str(os.getpid()))
while not os.path.exists("go"):
    time.sleep(0.05)
print("done")
"""


def test_an_in_process_run_whose_server_dies_ends_as_the_launchers_did(server, tmp_path):
    from evalkit.verifiers_compat.v1.harness_workers.client import GONE

    (tmp_path / "waiter.py").write_text(WAITER)

    async def scenario() -> tuple[int, bytes, bytes]:
        task = asyncio.create_task(run_forked(server.socket, ["waiter.py"], str(tmp_path), {}))
        while not (tmp_path / "pid").exists():
            await asyncio.sleep(0.05)
        server.process.kill()
        server.process.wait()
        (tmp_path / "go").write_text("")  # the program outlives its server, and its output still arrives
        return await task

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == (1, b"done\n", GONE)


def test_an_unreachable_server_is_an_error_before_anything_starts(tmp_path):
    from evalkit.verifiers_compat.v1.harness_workers.client import ServerUnreachable

    with pytest.raises(ServerUnreachable):
        asyncio.run(run_forked(str(tmp_path / "no.sock"), ["prog.py"], str(tmp_path), {}))


ENV_PROBE = """\
import os, sys
print(os.getcwd())
print(sorted(k for k in os.environ if "API_KEY" in k or k in ("RUNTIME_WIDE", "WHO")), os.getpgid(0) == os.getpid())
sys.exit(4)
"""


@pytest.mark.verifiers
def test_the_harness_runtime_runs_a_forked_program_itself_with_the_subprocess_runtimes_env(tmp_path, monkeypatch):
    pytest.importorskip("verifiers.v1")
    from evalkit.verifiers_compat.v1.harness import LocalInterpreterRuntime
    from evalkit.verifiers_compat.v1.harness_workers import program_command

    monkeypatch.setenv("PRIMEKIT_TEST_API_KEY", "sk-never-here")  # SubprocessRuntime.run drops *API_KEY* names

    class Wrapped:
        """The part of verifiers' SubprocessRuntime the wrapper uses; records what it is asked to start."""

        workdir = tmp_path
        started: list[list[str]] = []

        def process_env(self, env: dict[str, str]) -> dict[str, str]:
            return {"RUNTIME_WIDE": "yes", **env}

        async def run(self, argv: list[str], env: dict[str, str]) -> str:
            self.started.append(argv)
            return "started by the wrapped runtime"

        run_program = run

    wrapped = Wrapped()
    runtime = LocalInterpreterRuntime(wrapped)
    (tmp_path / "probe.py").write_text(ENV_PROBE)
    for method in (runtime.run_program, runtime.run):
        result = asyncio.run(method(program_command("probe.py") + ["an argument"], {"WHO": "the run"}))
        assert (result.exit_code, result.stderr) == (4, "")
        assert result.stdout == f"{tmp_path}\n['RUNTIME_WIDE', 'WHO'] True\n"
    assert wrapped.started == []  # no launcher: the fork server was handed the run from this process
    assert asyncio.run(runtime.run(["true"], {})) == "started by the wrapped runtime" and wrapped.started == [["true"]]

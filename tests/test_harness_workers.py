"""The harness fork server (evalkit/verifiers_compat/harness_workers): a forked run behaves as a fresh
interpreter would for verifiers' runtime (streams, exit code, working directory, environment, signals), holds
no key of primekit's environment, and dies with the launcher that asked for it.

Real parts: the server and launcher as real processes, a Unix socket, real signals.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.verifiers_compat.harness_workers import ForkServer

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


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("PRIMEKIT_TEST_SECRET", "sk-never-here")  # primekit's own environment holds a key
    started = ForkServer()
    yield started
    started.close()


def run(server: ForkServer, folder: Path, name: str, source: str, *args: str, **kwargs) -> subprocess.Popen:
    (folder / name).write_text(source)
    env = {"PATH": os.environ["PATH"], "WHO": "the run's own"}  # what verifiers' runtime gives the program
    return subprocess.Popen(server.command(name) + list(args), cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, **kwargs)


def test_a_forked_run_looks_like_a_fresh_interpreter_to_the_runtime(server, tmp_path):
    import json

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
    script = ("import sys, time; from evalkit.verifiers_compat.harness_workers import ForkServer\n"
              "s = ForkServer(); print(s.socket, s.process.pid, flush=True); time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    socket_path, server_pid = parent.stdout.readline().split()
    (tmp_path / "sleep.py").write_text(SLEEPER)
    launcher = subprocess.Popen([sys.executable, "-S", str(Path(sys.modules[ForkServer.__module__].LAUNCHER)),
                                 socket_path, "sleep.py"], cwd=tmp_path)
    child = _child_pid(tmp_path)
    parent.kill()  # primekit killed with -9: the server's stdin closes
    parent.wait(timeout=10)
    assert _gone(int(server_pid)) and _gone(child)
    launcher.wait(timeout=10)

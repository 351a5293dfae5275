"""Harness children get an allowlisted environment, and the fork server's socket folder does not outlive it.

- A v1 harness program, however verifiers' runtime starts it (run in-process through the fork server, the
  launcher from ``open_process``, a fresh interpreter where no server runs), sees the base a Python child needs and
  the variables the harness declares, nothing else of primekit's environment. Before: every variable whose name
  lacks ``API_KEY`` (``HF_TOKEN``, ``GITHUB_TOKEN``, ``--env-file`` values) was in the child's environment.
- ``kill -9 prime`` during a v1 run leaves no ``$TMPDIR/primekit-harness-*`` folder: the fork server removes its
  own when primekit goes; one left by a server that died too is removed by the next server's start. Before: the
  folder stayed.

Real parts: verifiers' own ``SubprocessRuntime`` wrapped by primekit's, the fork server, launcher and programs as
processes; ``prime eval run`` as a subprocess against tests/support/fault_server.py (a model that never answers, so the
run is mid-rollout when it is killed).
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
from support import VERIFIERS_ENVS, with_pythonpath

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs os.pidfd_open (Linux 5.3+)")

SECRETS = {
    "HF_TOKEN": "hf_secretvalue0123",
    "GITHUB_TOKEN": "ghp_secretvalue4567",
    "JUDGE_PASSWORD_VALUE": "judge-89ab",
}

PROBE = """\
import json, os
from evalkit.verifiers_compat.v1.harness_workers.harness_env import BASE_ENV
environ = open("/proc/self/environ", "rb").read()
print(json.dumps({"extra": sorted(k for k in os.environ if k not in BASE_ENV),
                  "declared": os.environ.get("DECLARED_VAR"),
                  "leaked": [v for v in %r if v.encode() in environ]}))
""" % (list(SECRETS.values()),)  # noqa: UP031  (a script with braces of its own)


@pytest.mark.verifiers
def test_every_way_a_harness_program_starts_gets_the_allowlist_and_what_the_harness_declares(tmp_path, monkeypatch):
    pytest.importorskip("verifiers.v1")
    from verifiers.v1.runtimes import SubprocessConfig
    from verifiers.v1.runtimes.subprocess import SubprocessRuntime

    from evalkit.verifiers_compat.v1.harness import LocalInterpreterRuntime
    from evalkit.verifiers_compat.v1.harness_workers import fallback_command, program_command
    from evalkit.verifiers_compat.v1.harness_workers.harness_env import DECLARED

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")]))
    expected = {"extra": sorted(["DECLARED_VAR", "RUNTIME_WIDE", DECLARED]), "declared": "yes", "leaked": []}

    async def main() -> list[dict]:
        inner = SubprocessRuntime(SubprocessConfig())
        await inner.start()
        inner.env = {"RUNTIME_WIDE": "1"}  # the task's runtime-wide values: declared too
        runtime = LocalInterpreterRuntime(inner)
        try:
            await inner.write("allowlist_probe.py", PROBE.encode())
            seen = [
                await runtime.run_program(program_command("allowlist_probe.py"), {"DECLARED_VAR": "yes"})
            ]  # in-process
            process = await runtime.open_process(
                program_command("allowlist_probe.py"), {"DECLARED_VAR": "yes"}
            )  # launcher
            out = b"".join([chunk async for chunk in process.stdout])
            err = b"".join([chunk async for chunk in process.stderr])
            seen.append((await process.wait(), out.decode(), err.decode()))
            seen.append(await runtime.run(fallback_command("allowlist_probe.py"), {"DECLARED_VAR": "yes"}))  # no server
            results = [item if isinstance(item, tuple) else (item.exit_code, item.stdout, item.stderr) for item in seen]
            assert [code for code, _, _ in results] == [0, 0, 0], results
            return [json.loads(out) for _, out, _ in results]
        finally:
            await inner.teardown()

    for seen in asyncio.run(main()):
        assert seen == expected


@pytest.mark.verifiers
def test_kill_9_prime_leaves_no_harness_folder_and_stale_ones_are_swept(tmp_path):
    pytest.importorskip("verifiers.v1")
    import shutil

    from support.fault_server import FaultServer

    shutil.copytree(VERIFIERS_ENVS / "vf_v1_math", tmp_path / "environments" / "vf_v1_math")
    import tempfile

    temp = Path(tempfile.mkdtemp(prefix="pkh-"))  # short: a Unix socket path (fork.sock) has ~107 bytes at most
    (tmp_path / "home").mkdir()
    server = FaultServer("--always", "silent")
    try:
        prime = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "primekit_cli",
                "eval",
                "run",
                "vf-v1-math",
                "-m",
                "m",
                "-b",
                server.base_url,
                "-k",
                "NO_KEY",
                "-n",
                "1",
                "-r",
                "1",
            ],
            cwd=tmp_path,
            stdout=(tmp_path / "prime.log").open("wb"),
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "TMPDIR": str(temp),
                "NO_KEY": "x",
                "HF_HUB_OFFLINE": "1",
                "HOME": str(tmp_path / "home"),
            },
        )
        deadline = time.monotonic() + 120
        while not list(temp.glob("primekit-harness-*/fork.sock")) and time.monotonic() < deadline:
            assert prime.poll() is None
            time.sleep(0.1)
        folders = list(temp.glob("primekit-harness-*"))  # this test's own TMPDIR: the run's server's folder
        assert len(folders) == 1, (tmp_path / "prime.log").read_text()[-3000:]  # the run's server started
        folder = folders[0]
        time.sleep(1.0)  # the rollout's harness program is running now, waiting on the model
        prime.send_signal(signal.SIGKILL)
        assert prime.wait(timeout=30) == -signal.SIGKILL
        deadline = time.monotonic() + 30
        while folder.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not folder.exists()
    finally:
        if prime.poll() is None:
            prime.kill()
        server.stop()

    # a folder whose server died with primekit: the next server's start removes it (a live process's stays)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale, live = temp / f"primekit-harness-{gone.pid}-abc", temp / f"primekit-harness-{os.getpid()}-def"
    for made in (stale, live):
        made.mkdir()
        (made / "fork.sock").write_text("")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from evalkit.verifiers_compat.v1.harness_workers import ForkServer; ForkServer().close()",
        ],
        env=with_pythonpath(Path.cwd()) | {"TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not stale.exists() and live.exists()
    shutil.rmtree(temp, ignore_errors=True)

"""The bubblewrap sandbox without verifiers: what a program inside sees, which host ports it reaches (only the
bridged ones), and primekit's own hardening for the ``subprocess`` runtime (not dumpable). Real bwrap, real
processes, real sockets; skipped with the reason where bwrap cannot run."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from support import REPO, with_pythonpath

from evalkit.sandbox import bwrap
from evalkit.sandbox.bridge import Bridge, loopback_ports

WHY_NOT = bwrap.unavailable()
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=f"needs bubblewrap: {WHY_NOT}")


def echo_server() -> tuple[socket.socket, int]:
    """A host loopback server that answers each connection with ``echo:`` and what it read."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"echo:" + conn.recv(100))

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def sandboxed(tmp_path: Path, script: str, ports: list[int], limits: bwrap.Limits = bwrap.Limits()) -> str:
    """What ``sh -c script`` prints in a sandbox on ``tmp_path/work`` with ``ports`` bridged."""
    work, private = tmp_path / "work", tmp_path / "private"
    work.mkdir(exist_ok=True)
    private.mkdir(exist_ok=True)
    argv = bwrap.command(str(work), str(private), ["sh", "-c", script], bwrap.sandbox_env(str(work), {}), limits,
                         ports)

    async def go() -> bytes:
        bridge = Bridge(str(private), ports)
        await bridge.start()
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT)
            out, _ = await proc.communicate()
            return out
        finally:
            await bridge.close()

    return asyncio.run(go()).decode()


def test_loopback_ports_are_read_from_a_programs_arguments():
    argv = ["--base-url=http://127.0.0.1:4001/v1", '--mcp-config={"a": {"url": "http://localhost:4002/mcp"}}',
            "--other=https://example.com:443/x", "--again=http://127.0.0.1:4001/"]
    assert loopback_ports(argv) == [4001, 4002]


@needs_bwrap
def test_inside_no_secret_files_no_home_no_host_processes(tmp_path):
    printed = sandboxed(tmp_path, "ls /etc/shadow; echo shadow=$?; ls $(getent passwd 0 | cut -d: -f6)/.bashrc; "
                                  "echo rootrc=$?; ls /proc | grep -c '^[0-9]'; touch /usr/x; echo usr=$?; "
                                  "echo hi > here; cat here", [])
    assert "shadow=2" in printed and "rootrc=2" in printed and "usr=1" in printed and "hi" in printed
    count = int(printed.split("rootrc=2\n")[1].split("\n")[0])
    assert count <= 5  # bwrap's init, the supervisor, sh, ls, grep: none of the host's processes
    assert (tmp_path / "work" / "here").read_text() == "hi\n"  # the working folder is the host's, read-write


@needs_bwrap
def test_only_the_bridged_loopback_ports_are_reachable(tmp_path):
    bridged, port = echo_server()
    other, other_port = echo_server()
    try:
        probe = ("import socket, sys\nfor p in sys.argv[1:]:\n    try:\n        s = socket.create_connection("
                 "('127.0.0.1', int(p)), 3); s.sendall(b'x'); print(p, s.recv(100))\n    except OSError as e: "
                 "print(p, type(e).__name__)\n")
        (tmp_path / "work").mkdir()
        (tmp_path / "work" / "probe.py").write_text(probe)
        printed = sandboxed(tmp_path, f"{sys.executable} -I probe.py {port} {other_port}", [port])
    finally:
        bridged.close()
        other.close()
    assert f"{port} b'echo:x'" in printed and f"{other_port} ConnectionRefusedError" in printed


def _as_other_user() -> dict:
    """Run a child as an unprivileged user when the tests run as root (root reads every /proc entry anyway)."""
    if os.getuid() != 0:
        return {}

    def drop() -> None:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    return {"preexec_fn": drop}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
@pytest.mark.parametrize("harden", [True, False])
def test_a_process_made_undumpable_keeps_its_environment_from_the_same_user(harden, tmp_path):
    code = ("import sys, time\nfrom evalkit.sandbox.hardening import make_undumpable\n"
            f"print(make_undumpable() if {harden} else 'plain', flush=True)\ntime.sleep(30)\n")
    env = with_pythonpath(REPO) | {"PRIMEKIT_TEST_SECRET": "undumpable-marker"}
    python = "/usr/bin/python3" if os.getuid() == 0 and os.path.exists("/usr/bin/python3") else sys.executable
    holder = subprocess.Popen([python, "-c", code], stdout=subprocess.PIPE, text=True, env=env,
                              cwd="/", **_as_other_user())
    try:
        assert holder.stdout.readline().strip() == ("True" if harden else "plain")
        reader = subprocess.run(["cat", f"/proc/{holder.pid}/environ"], capture_output=True, cwd="/",
                                **_as_other_user())
    finally:
        holder.kill()
        holder.wait()
    if harden:
        assert reader.returncode != 0 and b"undumpable-marker" not in reader.stdout
        assert b"Permission denied" in reader.stderr
    else:
        assert b"undumpable-marker" in reader.stdout  # the same user reads a plain process's environment


def test_rollout_folders_of_a_killed_process_are_swept_by_the_next_and_only_those(tmp_path):
    from evalkit.sandbox import sweep

    home, cache = tmp_path / "home", tmp_path / "cache" / "runtimes" / "subprocess"
    dead_work, live_work, outside = cache / "vf-dead", cache / "vf-live", tmp_path / "outside"
    for folder in (dead_work, live_work, outside):
        folder.mkdir(parents=True)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has now
    records = home / sweep.FOLDER / str(gone.pid)
    records.mkdir(parents=True)
    (records / "vf-dead").write_text(str(dead_work))
    (records / "escape").write_text(str(outside))  # a record pointing outside the runtime cache is not followed
    private = Path(tempfile.mkdtemp(prefix=f"{sweep.PRIVATE_PREFIX}{gone.pid}-"))  # its sandbox's private folder
    sweep.record(home, "vf-live", str(live_work), str(cache))  # this process's first rollout sweeps first
    assert not dead_work.exists() and not records.exists() and not private.exists()
    assert live_work.exists() and outside.exists()
    assert (home / sweep.FOLDER / str(os.getpid()) / "vf-live").read_text() == str(live_work)


def test_closing_the_bridge_mid_connection_logs_no_traceback(tmp_path):
    """Ctrl-C closes the bridge while a connection is open: that ends quietly (asyncio once logged a CancelledError
    traceback from the cancelled forwarding task)."""
    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(1)
    port = upstream.getsockname()[1]

    async def scenario() -> list[dict]:
        errors: list[dict] = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
        bridge = Bridge(str(tmp_path), [port])
        await bridge.start()
        reader, writer = await asyncio.open_unix_connection(str(tmp_path / f"port-{port}.sock"))
        writer.write(b"hello")
        await writer.drain()
        for _ in range(100):  # the forwarding task is connected upstream and pumping
            if bridge._tasks:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        await bridge.close()
        await asyncio.sleep(0.1)
        writer.close()
        return errors

    try:
        assert asyncio.run(scenario()) == []
    finally:
        upstream.close()

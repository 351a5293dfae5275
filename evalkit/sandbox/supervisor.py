"""The first program inside a sandbox (run by bwrap as ``python -I -S supervisor.py PRIVATE LIMITS PORTS -- [ARGV]``).

Standard library only, started by path. It starts the program with the run's rlimits (not on itself: the bridge's
threads and the watch need room a 16 MiB address space does not give), listens on
``127.0.0.1:<port>`` of the sandbox's own loopback for each bridged port and forwards each connection to the unix
socket ``PRIVATE/port-<port>.sock`` (the host side, :mod:`evalkit.sandbox.bridge`, forwards it on to the host's
port), then runs ``ARGV`` and waits for it. Meanwhile it counts the sandbox's processes (``/proc`` here shows only
them; root ignores ``RLIMIT_NPROC``, so the count is what stops a fork flood for root); when the program ends it
looks for a file that reached the file-size limit. A limit reached is written as one JSON line to
``PRIVATE/verdict.json`` ({"limit": name, "value": n, "detail": ...}) and ends everything inside; the exit code
is the program's (137 when the supervisor killed it). Without ``ARGV`` it holds the sandbox open for a program
that joins it (:func:`hold`).
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time

THREAD_ROOM = 64
"""Tasks beyond ``processes`` that ``RLIMIT_NPROC`` allows (it counts threads too): the interpreter's own."""
POLL_S = 0.02


def main(argv: list[str]) -> int:
    private, limits_arg, ports_arg = argv[:3]
    program = argv[argv.index("--") + 1:]
    limits = {k: int(v) for k, v in (item.split("=") for item in limits_arg.split(",") if item)}
    apply_process_limit(limits)
    servers = [(listen(int(port)), os.path.join(private, f"port-{port}.sock"))
               for port in filter(None, ports_arg.split(","))]
    # the program's own limits, set in its process before exec: the supervisor keeps room for its bridge threads
    # and its watch (under a 16 MiB address space it could not start a thread). Forked before any thread starts.
    child = subprocess.Popen(program, preexec_fn=lambda: apply_limits(limits)) if program else None
    for server, target in servers:
        threading.Thread(target=accept, args=(server, target), daemon=True).start()
    if child is None:
        return hold(private, limits)
    verdict = watch(child, limits)
    if verdict is None and child.returncode is not None:
        verdict = oversized(limits.get("file_size_mb", 0))
    if verdict is None and child.returncode == -signal.SIGXCPU:
        verdict = {"limit": "cpu_seconds", "value": limits.get("cpu_seconds", 0), "detail": "the program's CPU time"}
    if verdict is not None:
        with open(os.path.join(private, "verdict.json"), "w") as out:
            out.write(json.dumps(verdict) + "\n")
    end_all()
    code = child.returncode if child.returncode is not None else 137
    return code if code >= 0 else 128 - code


def hold(private: str, limits: dict[str, int]) -> int:
    """No program of its own: the sandbox is held open for a program that joins it (the fork server's child,
    ``sandbox_join.py``) until stdin closes, watched as a program of its own would be; ``READY`` on stdout once
    the bridge listens."""
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    most, verdict = limits.get("processes", 0), None
    while verdict is None:
        if select.select([sys.stdin], [], [], POLL_S)[0] and not os.read(sys.stdin.fileno(), 4096):
            break
        count = sum(1 for name in os.listdir("/proc") if name.isdigit()) if most else 0
        if most and count >= most:
            end_all()
            verdict = {"limit": "processes", "value": most, "detail": f"{count} processes alive at once"}
    verdict = verdict or oversized(limits.get("file_size_mb", 0))
    if verdict is not None:
        with open(os.path.join(private, "verdict.json"), "w") as out:
            out.write(json.dumps(verdict) + "\n")
    end_all()
    return 0


def apply_limits(limits: dict[str, int]) -> None:
    """The program's per-process limits (a joined program sets the same on itself: ``sandbox_join.py``)."""
    mib = 2**20
    for name, rlimit, scale in (("memory_mb", resource.RLIMIT_AS, mib), ("file_size_mb", resource.RLIMIT_FSIZE, mib),
                                ("cpu_seconds", resource.RLIMIT_CPU, 1)):
        if limits.get(name):
            resource.setrlimit(rlimit, (limits[name] * scale, limits[name] * scale))


def apply_process_limit(limits: dict[str, int]) -> None:
    """``RLIMIT_NPROC`` for the sandbox's tasks, on the supervisor itself (its children inherit it)."""
    if limits.get("processes"):
        allowed = limits["processes"] + THREAD_ROOM
        resource.setrlimit(resource.RLIMIT_NPROC, (allowed, allowed))


def listen(port: int) -> socket.socket:
    """A socket listening on the sandbox's ``127.0.0.1:<port>`` (its accept thread is started by :func:`main`)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    return server


def accept(server: socket.socket, target: str) -> None:
    while True:
        conn, _ = server.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(target)
        except OSError:
            conn.close()
            upstream.close()
            continue
        threading.Thread(target=pump, args=(conn, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, conn), daemon=True).start()


def pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def watch(child: subprocess.Popen, limits: dict[str, int]) -> dict | None:
    """Wait for ``child``; a verdict (and everything killed) when the sandbox's processes reach the limit."""
    most = limits.get("processes", 0)
    while child.poll() is None:
        if most:
            count = sum(1 for name in os.listdir("/proc") if name.isdigit())
            if count >= most:
                end_all()
                child.wait()
                return {"limit": "processes", "value": most, "detail": f"{count} processes alive at once"}
        time.sleep(POLL_S)
    return None


def oversized(file_size_mb: int) -> dict | None:
    """A verdict naming a file (in the working folder or /tmp) that reached the file-size limit, if one did."""
    if not file_size_mb:
        return None
    limit = file_size_mb * 2**20
    for root in (os.getcwd(), "/tmp"):
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    size = os.lstat(path).st_size
                except OSError:
                    continue
                if size >= limit:
                    return {"limit": "file_size_mb", "value": file_size_mb,
                            "detail": f"{os.path.relpath(path, root)} reached {size} bytes"}
    return None


def end_all() -> None:
    """Kill every other process of the sandbox (all of them are ours: it has its own PID namespace)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

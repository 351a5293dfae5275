"""A fork server for verifiers' chat program: one process that has imported what the program imports, forking
a fresh child for every harness run. Standard library only; started by path (see ``__init__``), never imported.

Why: the chat program spends 1.5 s of CPU importing ``openai``, ``httpx``, ``mcp`` and ``tenacity`` before it
sends its first request, so one interpreter per rollout caps a v1 taskset near 2 rollouts/s on two cores. A
forked child starts with those modules loaded in a few milliseconds, and is still its own process: its own
session (process group), working directory, environment, standard streams and exit code, killed with its
whole group when the launcher that asked for it goes away.

Protocol (one Unix-socket connection per run, opened by ``launcher.py``): a 4-byte big-endian length, then a
JSON header ``{"argv": [program, *args], "cwd": ..., "env": {...}}``, with the launcher's stdin, stdout and
stderr passed as descriptors alongside the first bytes. The server answers one line ``<exit code>\\n`` when the
child ends. A byte ``T`` from the launcher forwards SIGTERM to the child's group; the connection closing
before the child ends (the launcher was killed) SIGKILLs the group. The server ends, killing what still runs,
when its own stdin closes (primekit exited, however it exited).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import random
import runpy
import selectors
import signal
import socket
import struct
import sys
import traceback
import types

_compiled: dict[str, object] = {}
"""Program file name -> its code object (primekit names the file by a hash of its text)."""


def preload(program: str) -> object | None:
    """The program's code, compiled once per file name, after importing every module it imports anywhere (a
    module that fails to import fails again in the child, with its traceback); ``None`` if it cannot be read."""
    name = os.path.basename(program)
    if name in _compiled:
        return _compiled[name]
    try:
        with open(program, "rb") as handle:
            source = handle.read()
        tree = ast.parse(source)
        code = compile(tree, program, "exec")
    except (OSError, SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    for module in sorted(names):
        try:
            importlib.import_module(module)
        except BaseException:  # noqa: BLE001 - the child meets the same failure, and reports it
            pass
    _compiled[name] = code
    return code


def read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """The launcher's header and the three descriptors sent with it."""
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    while len(head) < 4:
        more = conn.recv(4 - len(head))
        if not more:
            raise EOFError
        head += more
    (size,) = struct.unpack(">I", head)
    body = b""
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise EOFError
        body += more
    return json.loads(body), list(fds)


def run_child(request: dict, fds: list[int], code: object | None, listener: socket.socket,
              open_conns: list[socket.socket]) -> None:
    """In the forked child: become the program (never returns)."""
    status = 1
    try:
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        listener.close()
        for conn in open_conns:
            conn.close()
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, kept for its life
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        random.seed()
        argv = list(request["argv"])
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        if code is None:
            runpy.run_path(argv[0], run_name="__main__")
        else:  # what run_path does, minus reading and compiling the file again
            main = types.ModuleType("__main__")
            main.__file__ = argv[0]
            sys.modules["__main__"] = main
            exec(code, main.__dict__)  # noqa: S102 - the harness program verifiers asked to run
        status = 0
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if stop.code is not None and not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the program's own failure, reported as a script's would be
        traceback.print_exc()
        status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(status)


class Server:
    """The accept / fork / reap loop (single-threaded, so forking is safe)."""

    def __init__(self, path: str):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(256)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.selector.register(sys.stdin, selectors.EVENT_READ, ("parent", None))
        self.children: dict[int, tuple[socket.socket, int]] = {}  # pid -> (connection, pidfd)

    def serve(self) -> None:
        print("READY", flush=True)
        while True:
            for key, _ in self.selector.select():
                kind, data = key.data
                if kind == "parent":
                    if not os.read(sys.stdin.fileno(), 4096):
                        self.stop()
                        return
                elif kind == "accept":
                    self.accept()
                elif kind == "conn":
                    self.from_launcher(data)
                elif kind == "exit":
                    self.reap(data)

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            request, fds = read_request(conn)
        except (OSError, EOFError, ValueError):
            conn.close()
            return
        code = preload(os.path.join(request["cwd"], request["argv"][0]))
        pid = os.fork()
        if pid == 0:
            run_child(request, fds, code, self.listener, [c for c, _ in self.children.values()] + [conn])
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (conn, pidfd)
        self.selector.register(conn, selectors.EVENT_READ, ("conn", pid))
        self.selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))

    def from_launcher(self, pid: int) -> None:
        conn, _ = self.children[pid]
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if data:
            if b"T" in data:
                self.signal(pid, signal.SIGTERM)
            return
        self.selector.unregister(conn)  # the launcher is gone: so is its run
        self.signal(pid, signal.SIGKILL)

    def reap(self, pid: int) -> None:
        conn, pidfd = self.children.pop(pid)
        _, status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        self.signal(pid, signal.SIGKILL)  # the program's own children live only as long as its run
        try:
            conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    @staticmethod
    def signal(pid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self) -> None:
        for pid in list(self.children):
            self.signal(pid, signal.SIGKILL)
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


if __name__ == "__main__":
    Server(sys.argv[1]).serve()

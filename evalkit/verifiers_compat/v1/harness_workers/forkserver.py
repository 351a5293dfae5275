"""A fork server for verifiers' chat program: one process that has imported what the program imports, forking
a fresh child for every harness run. Standard library only; started by path (see ``__init__``), never imported.

Why: the chat program spends 1.5 s of CPU importing ``openai``, ``httpx``, ``mcp`` and ``tenacity`` before it
sends its first request, so one interpreter per rollout caps a v1 taskset near 2 rollouts/s on two cores. A
forked child starts with those modules loaded in a few milliseconds, and is still its own process: its own
session (process group), working directory, environment, standard streams and exit code, killed with its
whole group when the launcher that asked for it goes away.

Protocol (one Unix-socket connection per run, opened by ``launcher.py``): a 4-byte big-endian length, then a
JSON header ``{"argv": [program, *args], "cwd": ..., "env": {...}}`` (and ``"limits"``: the ``subprocess``
runtime's, see ``process_tree.py``: rlimits set in the child, its processes counted here), with the launcher's
stdin, stdout and stderr passed as descriptors alongside the first bytes. The server answers one line
``<exit code>\\n`` when the child ends, or ``<exit code> <verdict JSON>\\n`` when the run reached a limit (the
whole run killed). A byte ``T`` from the launcher forwards SIGTERM to the child's group; the connection closing
before the child ends (the launcher was killed) SIGKILLs the group. The server ends, killing what still runs,
when its own stdin closes (primekit exited, however it exited), and removes its socket and the socket's folder.
A child's environment is the allowlist of ``harness_env.py`` applied to the one sent.

Learned preload: a program imports much more than its source names (``openai`` builds its HTTP client, the
first request pulls in ``httpcore``, ``h11``, ``anyio``...), and a child that imports it pays for it on every
run. So each child is given the write end of a pipe, and just before it exits it writes there the modules it
imported that the server had not; the server imports those (once each, in the order the child did, failures
ignored) after answering, so the next children start with them. Only modules whose file lies under the
server's own ``sys.path`` (or built in) are learned, never ``__main__`` nor one that lives in the run's
working directory or the program's folder: what the server imports is what any run of that interpreter could.
(As for the modules the program names, preloaded already: a module that reads the environment when it is
imported reads the server's allowlisted one, not the run's.)
Learned module names are also kept in a file per program and Python environment (:class:`Memory`, in the
folder given as the second argument), so the next primekit process imports them before its first fork.

Deferred models: pydantic builds a ``defer_build`` model (``openai`` defers all of its hundreds) the first time
it is used, so every child would build the ones it uses again, and the validators it makes of them
(``TypeAdapter``) from scratch. When it has nothing else to do, the server builds every such model it has
loaded, a few milliseconds at a time, so a request never waits for more than one slice of that.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import os
import random
import re
import runpy
import selectors
import signal
import socket
import struct
import sys
import time
import traceback
import types

from harness_env import allowed  # sibling modules: this file runs by path
from process_tree import (
    POLL_S,
    apply_limits,
    become_subreaper,
    end_descendants,
    kill_tree,
    over_processes,
    verdict_after,
)

_compiled: dict[str, object] = {}
"""Program file name -> its code object (primekit names the file by a hash of its text)."""
_learned: set[str] = set()
"""Module names a child reported and the server has tried to import (whether or not it could)."""
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
PROGRAM_NAME = re.compile(r"[\w.-]{1,200}")
REPORT_LIMIT = 60_000
"""The most bytes of module names a child reports: less than a pipe holds, so its write never blocks."""
BUILD_SLICE_S = 0.01
"""CPU seconds of model building between two looks for requests."""


def import_roots() -> tuple[str, ...]:
    """The folders the server imports from (its ``sys.path`` without its script's folder), each ending in a
    separator: a module a child loaded from under one of them is one the server can load the same way."""
    roots = []
    for entry in sys.path[1:]:
        if os.path.isabs(entry) and os.path.isdir(entry):
            roots.append(os.path.join(os.path.realpath(entry), ""))
    return tuple(roots)


def new_modules(known: frozenset[str], roots: tuple[str, ...], run_dirs: tuple[str, ...]) -> list[str]:
    """In the child: the modules it imported that the server had not and could (see the module docstring),
    in import order."""
    found = []
    for name, module in list(sys.modules.items()):
        if name in known or name == "__main__" or module is None:
            continue
        spec = getattr(module, "__spec__", None)
        where = getattr(module, "__file__", None)
        if where is None:
            if spec is not None and spec.origin in ("built-in", "frozen"):
                found.append(name)
            continue
        where = os.path.realpath(where)
        if where.startswith(roots) and not where.startswith(run_dirs):
            found.append(name)
    return found


def deferred_models() -> list[type]:
    """The pydantic models the server has loaded but not built (see the module docstring)."""
    base = getattr(sys.modules.get("pydantic.main"), "BaseModel", None)
    if not isinstance(base, type):
        return []
    found, stack, seen = [], [base], {base}
    while stack:
        for sub in type.__subclasses__(stack.pop()):
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                if sub.__dict__.get("__pydantic_complete__") is False:
                    found.append(sub)
    return found


def build_models(models: list[type], seconds: float) -> None:
    """Build models from the end of ``models`` (removing them) for about ``seconds`` of CPU. Built with no
    caller's namespace: the names the model's own module and class define; one that cannot be built (failures
    ignored) stays the child's to try."""
    deadline = time.process_time() + seconds
    while models and time.process_time() < deadline:
        model = models.pop()
        if model.__dict__.get("__pydantic_complete__") is False:
            try:
                model.model_rebuild(raise_errors=False, _parent_namespace_depth=0)
            except BaseException:  # noqa: BLE001
                pass


def report(fd: int, names: list[str]) -> None:
    """In the child: write ``names``, as whole lines of at most :data:`REPORT_LIMIT` bytes in all, to the
    server's pipe."""
    data = b""
    for name in names:
        line = name.encode()
        if len(data) + len(line) >= REPORT_LIMIT:
            break
        data += line + b"\n"
    try:
        os.write(fd, data)
    except OSError:
        pass


def learn(fd: int) -> list[str]:
    """In the server: read a finished child's report and import the modules it names (once each, failures
    ignored: what the server cannot import stays the child's to import). The modules that imported."""
    data = b""
    try:
        while more := os.read(fd, 65536):
            data += more
    except OSError:  # empty for now: a process the program forked still holds the pipe open
        pass
    finally:
        os.close(fd)
    return [name for name in data.decode(errors="replace").splitlines() if import_once(name)]


def import_once(name: str) -> bool:
    """Import a learned module unless it was tried before (or is ``__main__``); True if that imported it."""
    if name in _learned or name in sys.modules or name == "__main__" or not MODULE_NAME.fullmatch(name):
        return False
    _learned.add(name)
    try:
        importlib.import_module(name)
    except BaseException:  # noqa: BLE001 - a module the server cannot import stays the child's to import
        return False
    return True


class Memory:
    """The modules learned for each program, in one file per program file name (primekit names it by a hash of
    its text) and Python environment under ``folder`` (none: nothing is kept). Best effort: a file that cannot
    be read or written is as good as none, and each name is imported only as a learned one would be."""

    def __init__(self, folder: str | None):
        self.folder = folder
        self.kept: dict[str, list[str]] = {}
        self.environment = hashlib.sha256(f"{sys.prefix}\0{sys.version}".encode()).hexdigest()[:12]

    def path(self, program: str) -> str | None:
        if self.folder is None or not PROGRAM_NAME.fullmatch(program) or program.startswith(".."):
            return None
        return os.path.join(self.folder, f"{program.lstrip('.')}.{self.environment}.modules")

    def recall(self, program: str) -> list[str]:
        """The module names kept for ``program`` (read once per server)."""
        if program not in self.kept:
            self.kept[program] = []
            path = self.path(program)
            try:
                if path is not None:
                    with open(path, encoding="utf-8") as handle:
                        self.kept[program] = [name for name in handle.read(REPORT_LIMIT).splitlines()
                                              if MODULE_NAME.fullmatch(name)]
            except (OSError, ValueError):
                pass
        return self.kept[program]

    def keep(self, program: str, names: list[str]) -> None:
        """Add ``names`` to what is kept for ``program`` (the file replaced whole, never half-written)."""
        kept = self.recall(program)
        kept += [name for name in names if name not in kept]
        path = self.path(program)
        if path is None:
            return
        try:
            os.makedirs(self.folder, exist_ok=True)  # type: ignore[arg-type]
            with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as handle:
                handle.write("".join(f"{name}\n" for name in kept))
            os.replace(f"{path}.{os.getpid()}", path)
        except OSError:
            pass


def preload(program: str, memory: Memory) -> object | None:
    """The program's code, compiled once per file name, after importing every module it imports anywhere (a
    module that fails to import fails again in the child, with its traceback) and those learned for it before
    (``memory``); ``None`` if it cannot be read."""
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
    for module in [*sorted(names), *memory.recall(name)]:
        import_once(module)  # one that fails to import fails again in the child, with its traceback
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


def run_child(request: dict, fds: list[int], code: object | None, inherited: list[int],
              learning: tuple[int, tuple[str, ...]]) -> None:
    """In the forked child: become the program (never returns). ``inherited``: the server's descriptors (its
    listener, other runs' connections and pipes), closed first; ``learning``: the pipe for its :func:`report`
    and the server's import roots."""
    known = frozenset(sys.modules)
    run_dirs: tuple[str, ...] = ()
    status = 1
    try:
        os.setsid()
        become_subreaper()  # what the program's commands detach is orphaned to it, and ended with it (finally)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for fd in inherited:
            try:
                os.close(fd)
            except OSError:
                pass
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, kept for its life
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        if request.get("join"):  # a sandboxed run: enter the sandbox; this process only waits for the program
            import sandbox_join  # a sibling module, as harness_env

            outside = sandbox_join.enter(int(request["join"]["pid"]), request["join"].get("limits") or {})
            if outside is not None:
                os._exit(outside if outside >= 0 else 128 - outside)
        else:
            apply_limits(request.get("limits") or {})  # the subprocess runtime's (a sandbox's are its own)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(allowed(request["env"]))
        random.seed()
        argv = list(request["argv"])
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        run_dirs = tuple(os.path.join(os.path.realpath(folder), "") for folder in (os.getcwd(), sys.path[0]))
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
        try:
            end_descendants()
        except BaseException:  # noqa: BLE001 - whatever is left, the server ends with the run's group
            pass
        if run_dirs:
            try:
                report_fd, roots = learning
                report(report_fd, new_modules(known, roots, run_dirs))
            except BaseException:  # noqa: BLE001 - learning is an optimisation; the run's status stands
                pass
        os._exit(status)


class Server:
    """The accept / fork / reap loop (single-threaded, so forking is safe)."""

    def __init__(self, path: str, memory: Memory):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(256)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.selector.register(sys.stdin, selectors.EVENT_READ, ("parent", None))
        self.children: dict[int, tuple[socket.socket, int, int, str]] = {}
        """pid -> (connection, pidfd, report pipe, its program's file name)"""
        self.limits: dict[int, tuple[str, dict]] = {}
        """pid -> (working folder, limits) of each run with limits (the subprocess runtime's)"""
        self.verdicts: dict[int, dict] = {}
        """pid -> the limit a run reached while it ran (``processes``), until it is reaped"""
        self.next_watch = 0.0
        self.memory = memory
        self.roots = import_roots()
        self.unbuilt: list[type] = []  # deferred_models() not built yet, since the last import
        self.modules_seen = 0

    def serve(self) -> None:
        become_subreaper()  # a killed run's detached descendants are orphaned here, and ended in reap()
        print("READY", flush=True)
        while True:
            if len(sys.modules) != self.modules_seen:
                self.unbuilt, self.modules_seen = deferred_models()[::-1], len(sys.modules)  # built first to last
            watching = any(limits.get("processes") for _, limits in self.limits.values())
            events = self.selector.select(0 if self.unbuilt else (POLL_S if watching else None))
            if watching and time.monotonic() >= self.next_watch:
                self.watch()
            if not events and self.unbuilt:
                build_models(self.unbuilt, BUILD_SLICE_S)
            for key, _ in events:
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
        program = os.path.join(request["cwd"], request["argv"][0])
        code = preload(program, self.memory)
        report_read, report_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            run_child(request, fds, code, self.inherited() + [conn.fileno(), report_read],
                      (report_write, self.roots))
        for fd in (*fds, report_write):
            os.close(fd)
        os.set_blocking(report_read, False)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (conn, pidfd, report_read, os.path.basename(program))
        if request.get("limits") and not request.get("join"):
            self.limits[pid] = (request["cwd"], request["limits"])
        self.selector.register(conn, selectors.EVENT_READ, ("conn", pid))
        self.selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))

    def watch(self) -> None:
        """Count each limited run's processes; a run at its ``processes`` limit is killed whole, with a verdict."""
        self.next_watch = time.monotonic() + POLL_S
        for pid, (_, limits) in list(self.limits.items()):
            if pid in self.verdicts:
                continue
            verdict = over_processes(pid, limits)
            if verdict is not None:
                self.verdicts[pid] = verdict
                kill_tree(pid)

    def inherited(self) -> list[int]:
        """The descriptors a new child must close: the listener, the selector, every other run's."""
        fds = [self.listener.fileno(), self.selector.fileno()]
        for conn, pidfd, report_read, *_ in self.children.values():
            fds += [conn.fileno(), pidfd, report_read]
        return fds

    def from_launcher(self, pid: int) -> None:
        conn = self.children[pid][0]
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
        conn, pidfd, report_read, program = self.children.pop(pid)
        _, status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        self.signal(pid, signal.SIGKILL)  # the program's own children live only as long as its run
        end_descendants(frozenset(self.children))  # and those it detached, orphaned here when it was killed
        cwd, limits = self.limits.pop(pid, ("", {}))
        verdict = self.verdicts.pop(pid, None) or (verdict_after(status, cwd, limits) if limits else None)
        answer = f"{os.waitstatus_to_exitcode(status)}" + (f" {json.dumps(verdict)}" if verdict else "")
        try:
            conn.sendall(f"{answer}\n".encode())
        except OSError:
            pass
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()
        imported = learn(report_read)
        if imported:
            self.memory.keep(program, imported)

    @staticmethod
    def signal(pid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self) -> None:
        """Kill what still runs; remove the socket and its folder (primekit may be gone: ``kill -9``)."""
        for pid in list(self.children):
            self.signal(pid, signal.SIGKILL)
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        path = self.listener.getsockname()
        self.listener.close()
        try:
            os.unlink(path)
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass


if __name__ == "__main__":
    Server(sys.argv[1], Memory(sys.argv[2] if len(sys.argv) > 2 else None)).serve()

"""One harness run handed to the fork server from primekit's own event loop: what ``launcher.py`` does, without
starting a launcher process for it.

The launcher is a whole interpreter start-up (~25 ms of CPU) per rollout only to forward a working directory, an
environment and three descriptors over a socket and wait for one line. :func:`run_forked` does the same from
asyncio: it connects to the server's socket, sends the header with the write ends of two fresh pipes (stdout,
stderr; stdin is ``/dev/null``), reads both pipes and the server's ``<exit code>\\n`` line without blocking the
loop, and returns what a finished subprocess would. The program still runs only in the forked child, in its own
session, working directory and environment. Cancelled, or failing, before the answer: the connection closes,
and the server SIGKILLs the child's process group, as it does when a launcher dies.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct

GONE = b"primekit harness worker: the fork server went away\n"
"""What a run says on stderr (exit code 1) when the server ends before the program does, as the launcher does."""
CONNECT_RETRY_S = 0.005


class ServerUnreachable(OSError):
    """The server's socket refused the connection (the server is gone): nothing was started."""


class LimitReached(Exception):
    """The run reached one of its limits (``limits`` of :func:`run_forked`) and was killed whole: ``verdict`` is
    ``{"limit": name, "value": n, "detail": ...}`` (``process_tree.py``); ``code``, ``stdout``, ``stderr`` what the
    run gave until then."""

    def __init__(self, verdict: dict, code: int, stdout: bytes, stderr: bytes):
        super().__init__(f"{verdict.get('limit')} = {verdict.get('value')} ({verdict.get('detail', '')})")
        self.verdict, self.code, self.stdout, self.stderr = verdict, code, stdout, stderr


async def run_forked(socket_path: str, argv: list[str], cwd: str, env: dict[str, str],
                     join: dict | None = None, limits: dict | None = None) -> tuple[int, bytes, bytes]:
    """Run ``argv`` (program path relative to ``cwd``, then its arguments) in a child forked by the server
    listening on ``socket_path``; its exit code (``128 + N`` when killed by signal N, as from the launcher),
    stdout and stderr. ``join`` (``{"pid": ..., "limits": {...}}``): the child enters that process's sandbox first
    (``sandbox_join.py``). ``limits`` (the ``subprocess`` runtime's ``memory_mb``, ``processes``, ``file_size_mb``,
    ``cpu_seconds``): the child's rlimits and the server's count of its processes; :class:`LimitReached` when one
    ended the run. Raises :class:`ServerUnreachable` when the server cannot be reached."""
    loop = asyncio.get_running_loop()
    conn = await _connect(socket_path)
    pipes: list[int] = []
    readers: list[int] = []
    try:
        out_read, out_write = os.pipe()
        pipes += [out_read, out_write]
        err_read, err_write = os.pipe()
        pipes += [err_read, err_write]
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        pipes.append(null)
        extra = {**({"join": join} if join else {}), **({"limits": limits} if limits else {})}
        header = json.dumps({"argv": argv, "cwd": cwd, "env": env, **extra}).encode()
        data = struct.pack(">I", len(header)) + header
        sent = socket.send_fds(conn, [data], [null, out_write, err_write])
        for fd in (null, out_write, err_write):  # the child holds its own copies now
            pipes.remove(fd)
            os.close(fd)
        if sent < len(data):
            await loop.sock_sendall(conn, data[sent:])
        readers += [out_read, err_read]
        results = await asyncio.gather(_answer(loop, conn), _drain(loop, out_read), _drain(loop, err_read))
    finally:
        for fd in readers:
            loop.remove_reader(fd)
        for fd in pipes:
            os.close(fd)
        conn.close()  # before the answer: the server kills the run's group
    (code, verdict), out, err = results
    if code is None:
        return 1, out, err + GONE
    code = 128 - code if code < 0 else code
    if verdict is not None:
        raise LimitReached(verdict, code, out, err)
    return code, out, err


async def _connect(path: str) -> socket.socket:
    """A connected non-blocking socket. A Unix socket's connect never waits in progress: with the server's
    backlog full it fails with EAGAIN at once, so it is retried after a short sleep."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
    try:
        while True:
            try:
                conn.connect(path)
                return conn
            except BlockingIOError:
                await asyncio.sleep(CONNECT_RETRY_S)
    except (ConnectionRefusedError, FileNotFoundError) as exc:
        conn.close()
        raise ServerUnreachable(str(exc)) from exc
    except BaseException:
        conn.close()
        raise


async def _answer(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> tuple[int | None, dict | None]:
    """The server's ``<exit code>[ <verdict>]\\n`` line: the code as an int (negative: killed by that signal), or
    None if the connection ended first, and the limit verdict if the run reached one."""
    answer = b""
    while not answer.endswith(b"\n"):
        more = await loop.sock_recv(conn, 4096)
        if not more:
            return None, None
        answer += more
    code, _, verdict = answer.decode().partition(" ")
    return int(code), (json.loads(verdict) if verdict.strip() else None)


async def _drain(loop: asyncio.AbstractEventLoop, fd: int) -> bytes:
    """Everything written to the pipe ``fd`` until its last writer closes it, read as it becomes readable."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    done: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            chunks.append(data)
            return
        loop.remove_reader(fd)
        if not done.done():
            done.set_result(b"".join(chunks))

    loop.add_reader(fd, readable)
    return await done

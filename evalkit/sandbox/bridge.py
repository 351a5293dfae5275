"""The host side of a sandbox's bridge: a unix socket per bridged port, forwarded to that port on host loopback.

The sandbox has a network of its own with nothing on it; :mod:`.supervisor` listens on the same port numbers there
and connects each connection to these sockets. So a program inside reaches the model endpoint and the taskset's tool
servers at their usual ``http://127.0.0.1:<port>`` URLs, and no other host port or address.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from urllib.parse import urlsplit

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def loopback_ports(texts: list[str]) -> list[int]:
    """The ports of the host-loopback URLs in ``texts`` (a program's arguments: ``--base-url=...``, an MCP
    config JSON ...), in order, each once."""
    found: list[int] = []
    for text in texts:
        for url in re.findall(r"https?://[^\s\"',]+", text):
            parts = urlsplit(url)
            if parts.hostname in LOOPBACK and parts.port and parts.port not in found:
                found.append(parts.port)
    return found


class Bridge:
    """The unix-socket servers of one sandboxed run (``folder/port-<port>.sock``), closed with :meth:`close`."""

    def __init__(self, folder: str, ports: list[int]):
        self.folder = folder
        self.ports = ports
        self._servers: list[asyncio.AbstractServer] = []
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        for port in self.ports:
            path = os.path.join(self.folder, f"port-{port}.sock")
            server = await asyncio.start_unix_server(lambda r, w, p=port: self._forward(r, w, p), path=path)
            self._servers.append(server)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        except asyncio.CancelledError:
            # only close() cancels this task; asyncio's server callback calls task.exception() on it, which for a
            # cancelled task logs "Exception in callback ... CancelledError" with a traceback (seen on Ctrl-C)
            pass
        finally:
            for w in (writer, up_writer):
                w.close()
            if task is not None:
                self._tasks.discard(task)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers = []


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()

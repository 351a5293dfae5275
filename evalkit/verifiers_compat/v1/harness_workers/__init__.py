"""Harness runs for v1 tasksets without an interpreter start-up each: one fork server per primekit process.

verifiers' subprocess runtime starts the chat program once per rollout. Started as a fresh interpreter, the
program spends ~1.5 s of CPU importing its libraries first; here ``forkserver.py`` forks a child that already
holds those imports. The command verifiers is given (:func:`program_command`) starts ``launcher.py``
(``python -S``), which hands the run to the server; where primekit runs that command itself (the harness's
runtime, :func:`forked_request`), :func:`~.client.run_forked` hands it over from primekit's event loop
instead, and no launcher starts. The child is still a separate process with the run's own session, working
directory, environment and streams (the isolation v1 promises: harness code never runs in primekit's
process), and the exit code is the program's.

The server learns which modules the program imports lazily (``forkserver.py`` says how) and keeps their
names under ``$PRIMEKIT_HOME/harness-preload`` for the next process's server.

The server is started on first use and lives as long as this process (it exits when its stdin closes). It
is started with a small allowlisted environment (:data:`SERVER_ENV`), so no key of primekit's environment is
in its memory; each run's environment is an allowlist too (:mod:`.harness_env`): that base and the variables
the harness declares, never the rest of primekit's environment. Where the server cannot run (no
``os.pidfd_open``: not Linux 5.3+; or it fails to start), every run falls back to a fresh interpreter, started
through the launcher (``launcher.py --exec``) so its environment is the same allowlist and a reaper ends what it
detached and applies its limits (``process_tree.py``) as the server does, and one warning says so.

The server's socket lives in a folder of its own, ``$TMPDIR/primekit-harness-<pid>-*`` (``<pid>``: the primekit
process). The server removes it when it ends, also when primekit was killed with ``kill -9`` (its stdin closes);
should the server die too, the next primekit process to start one removes the folders of dead processes.
"""

from __future__ import annotations

import atexit
import logging
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from evalkit.core.pid_folders import remove_orphans
from evalkit.model.registry import primekit_home
from evalkit.verifiers_compat.v1.harness_workers.harness_env import BASE_ENV

log = logging.getLogger(__name__)

FORKSERVER = Path(__file__).with_name("forkserver.py")
LAUNCHER = Path(__file__).with_name("launcher.py")
SERVER_ENV = BASE_ENV
"""The variables the fork server starts with: enough to find Python's packages, nothing secret."""
FOLDER_PREFIX = "primekit-harness-"
START_TIMEOUT_S = 60.0
LEARNED_FOLDER = "harness-preload"
"""Under primekit's home: the modules the server learned each program imports, for the next process's server."""


class ForkServer:
    """One running ``forkserver.py`` and the socket it listens on."""

    def __init__(self) -> None:
        remove_stale_folders()
        self.folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")
        self.socket = os.path.join(self.folder, "fork.sock")
        env = {name: os.environ[name] for name in SERVER_ENV if name in os.environ}
        learned = str(primekit_home() / LEARNED_FOLDER)
        self.process = subprocess.Popen([sys.executable, str(FORKSERVER), self.socket, learned], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, start_new_session=True)
        ready = _read_line(self.process, START_TIMEOUT_S)
        if ready != b"READY\n":
            self.close()
            raise RuntimeError(f"the harness fork server did not start (said {ready!r})")

    def command(self, program: str) -> list[str]:
        """The argv that runs ``program`` (a path, relative to the run's working directory) in a forked child."""
        return [sys.executable, "-S", str(LAUNCHER), self.socket, program]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()  # type: ignore[union-attr]
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def remove_stale_folders() -> None:
    """Remove the socket folders (``primekit-harness-<pid>-*``, this user's) of primekit processes that are gone
    and whose server could not remove them itself (it was killed too)."""
    remove_orphans(FOLDER_PREFIX)


def _read_line(process: subprocess.Popen, timeout: float) -> bytes:
    """The server's first line, or b"" if it says nothing within ``timeout`` (then it is killed)."""
    if not select.select([process.stdout], [], [], timeout)[0]:
        process.kill()
        return b""
    return process.stdout.readline()  # type: ignore[union-attr]


_lock = threading.Lock()
_server: ForkServer | None = None
_unavailable = False


def forked_request(argv: list[str]) -> tuple[str, list[str]] | None:
    """``(socket, [program, *args])`` when ``argv`` is a :func:`program_command` of this process's server
    followed by the program's arguments; ``None`` for any other command."""
    server = _server
    if server is None:
        return None
    prefix = server.command("")[:-1]
    if argv[:len(prefix)] != prefix or len(argv) == len(prefix):
        return None
    return server.socket, list(argv[len(prefix):])


def fallback_command(program: str, stdin: bool = True) -> list[str]:
    """A fresh interpreter for ``program``, started through the launcher so its environment is the allowlist;
    ``stdin`` False: with ``/dev/null`` as its stdin instead of the caller's."""
    return [sys.executable, "-S", str(LAUNCHER), "--exec" if stdin else "--exec-no-stdin", program]


def is_harness_command(argv: list[str]) -> bool:
    """Whether ``argv`` runs a program through this module (forked or fresh): its environment is then the
    allowlist plus what the caller declares (:func:`~.harness_env.declare`)."""
    return forked_request(argv) is not None or argv[:4] in (fallback_command("")[:4], fallback_command("", False)[:4])


def without_stdin(argv: list[str]) -> list[str]:
    """``argv`` (a :func:`fallback_command` and the program's arguments) started with ``/dev/null`` as stdin."""
    return fallback_command(argv[4], stdin=False) + argv[5:] if argv[:4] == fallback_command("")[:4] else argv


def program_command(program: str) -> list[str]:
    """How verifiers' runtime should start ``program``: through the fork server, or (where it cannot run) a
    fresh interpreter."""
    global _server, _unavailable
    with _lock:
        if _server is None and not _unavailable:
            if not hasattr(os, "pidfd_open"):
                _unavailable = True
                log.warning("harness runs start a fresh interpreter each (no os.pidfd_open on this system)")
            else:
                try:
                    _server = ForkServer()
                    atexit.register(_server.close)
                except (OSError, RuntimeError) as exc:
                    _unavailable = True
                    log.warning("harness runs start a fresh interpreter each: %s", exc)
        server = _server
    return server.command(program) if server is not None else fallback_command(program)

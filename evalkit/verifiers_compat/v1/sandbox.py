"""The ``sandbox`` runtime for verifiers v1 tasksets: every program of a rollout runs under bubblewrap.

verifiers validates a seat's runtime against its own list of types, so primekit keeps verifiers' ``subprocess``
config (the rollout's working folder in verifiers' cache, its teardown) and puts :class:`SandboxRuntime` between
the harness and it: the harness plugins :class:`SandboxChatHarness` (``null``) and :class:`SandboxBashHarness`
(``bash``), chosen by :mod:`~evalkit.verifiers_compat.v1.config` for ``[env.agent.runtime] type = "sandbox"``,
hand verifiers' ``launch`` that wrapper. The whole harness program runs inside (the chat loop and the model's
commands: the ``edit`` tool writes files from the program itself, so leaving the program outside would leave it
unconfined), with this interpreter and its packages read-only, nothing installed (no uv, no network). Its limits
are the harness config's ``sandbox`` table (:class:`~evalkit.sandbox.bwrap.Limits`, from the runtime's knobs).
The program is not a fresh interpreter (its imports cost ~2.3 s of CPU): bwrap makes the sandbox with the supervisor
holding it, and the fork server's child joins it (``harness_workers/sandbox_join.py``); a fresh interpreter under
bwrap only where no fork server runs.

File I/O verifiers does on the runtime (``write``, ``read``) runs inside a sandbox too, so a link the model left
in its folder cannot make primekit read or write outside it. A limit reached ends the run with
:class:`~evalkit.verifiers_compat.v1.limits.SandboxLimitError`, a row error naming the limit (the harness program
failing to allocate under ``memory_mb`` too, :func:`~evalkit.verifiers_compat.v1.limits.memory_verdict`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
from typing import Any

from verifiers.v1.harness import Harness
from verifiers.v1.harnesses.bash.harness import BashHarness, BashHarnessConfig
from verifiers.v1.harnesses.null.harness import NullHarness, NullHarnessConfig
from verifiers.v1.runtimes import ProgramResult

from evalkit.core.redact import register_env_secrets
from evalkit.sandbox import bwrap
from evalkit.sandbox.bridge import Bridge, loopback_ports
from evalkit.sandbox.sweep import private_folder, record_rollout
from evalkit.verifiers_compat.v1.harness_workers import forked_request, program_command
from evalkit.verifiers_compat.v1.harness_workers.client import ServerUnreachable, run_forked
from evalkit.verifiers_compat.v1.harness_workers.harness_env import DECLARED, allowed, declare
from evalkit.verifiers_compat.v1.limits import (
    SandboxError,
    SandboxLimitError,
    SandboxSettings,
    limit_error,
    memory_verdict,
)

TOUCHED = "_primekit_sandbox_ran"
"""The attribute set on verifiers' runtime once a sandboxed program has run in its folder."""
PROGRAM_PREFIX = ".primekit-program-"
SANDBOX_HARNESS_ID = "primekit-sandbox-harness"
SANDBOX_BASH_HARNESS_ID = "primekit-sandbox-bash-harness"


class SandboxRuntime:
    """A rollout's verifiers ``subprocess`` runtime whose commands and file I/O run inside a bwrap sandbox in the
    same working folder. Every other attribute is the wrapped runtime's own."""

    def __init__(self, runtime: Any, limits: bwrap.Limits):
        self._runtime = runtime
        self._limits = limits

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    @property
    def _touched(self) -> bool:
        """Whether a sandboxed program has run in the folder (of any seat: kept on the shared runtime): until then
        it holds only what primekit and the taskset put there, no link the model made, so file I/O is direct."""
        return bool(getattr(self._runtime, TOUCHED, False))

    @property
    def workdir(self) -> str:
        return os.path.abspath(self._runtime.workdir)

    async def run(self, argv: list[str], env: dict[str, str]) -> ProgramResult:
        return await self._sandboxed(argv, env, [])

    async def run_program(self, argv: list[str], env: dict[str, str]) -> ProgramResult:
        """The harness program, with the host loopback ports its arguments name bridged in: forked from the fork
        server into the sandbox (:meth:`_joined`) where one runs, else a fresh interpreter under bwrap."""
        ports = loopback_ports(argv)
        result = None
        if len(argv) > 1 and argv[0] == bwrap.interpreter() and argv[1].startswith(PROGRAM_PREFIX):
            request = forked_request(program_command(argv[1]) + argv[2:])
            if request is not None:
                result = await self._joined(request, env, ports)
        if result is None:
            result = await self._sandboxed(argv, env, ports)
        verdict = memory_verdict(self._limits.memory_mb, result.exit_code, result.stderr)
        if verdict is not None:  # an allocation failed under memory_mb: the program could not go on
            raise limit_error("sandbox", verdict)
        return result

    async def open_process(self, argv: list[str], env: dict[str, str]) -> Any:
        raise SandboxError("the sandbox runtime does not run live processes (open_process) yet")

    async def run_background(self, argv: list[str], env: dict[str, str], log: str) -> None:
        raise SandboxError("the sandbox runtime does not run background servers (run_background) yet")

    async def prepare_uv_script(self, script: str | bytes, env: dict[str, str] | None = None, *,
                                activate: bool = True) -> list[str]:
        """The program written into the working folder, run by this interpreter (read-only inside): no uv."""
        data = script.encode() if isinstance(script, str) else script
        path = f"{PROGRAM_PREFIX}{hashlib.sha256(data).hexdigest()[:16]}.py"
        await self.write(path, data)
        return [bwrap.interpreter(), path]

    async def write(self, path: str, data: bytes) -> None:
        """``data`` to ``path`` (relative to the working folder), written from inside the sandbox once a program
        has run there (before that, directly: the folder holds nothing the model made)."""
        if not self._touched:
            return await self._runtime.write(path, data)
        with _private() as private:
            with open(os.path.join(private, "incoming"), "wb") as out:
                out.write(data)
            script = 'mkdir -p -- "$(dirname -- "$2")" && cat -- "$1" > "$2"'
            result = await self._in(private, ["sh", "-c", script, "sh", f"{bwrap.INSIDE}/incoming", path], {}, [])
        if result.exit_code:
            raise SandboxError(f"write {path!r}: {result.stderr.strip()[-500:]}")

    async def read(self, path: str, max_bytes: int | None = None) -> bytes:
        return await self._read(path, max_bytes)

    async def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        """``path`` read from inside the sandbox, at most ``max_bytes`` (SandboxError past them)."""
        head = f'head -c {max_bytes + 1} -- "$1"' if max_bytes is not None else 'cat -- "$1"'
        result = await self.run(["sh", "-c", f'{head} > /tmp/.read && base64 -w0 /tmp/.read', "sh", path], {})
        if result.exit_code:
            raise SandboxError(f"read {path!r}: {result.stderr.strip()[-500:]}")
        data = base64.b64decode(result.stdout)
        if max_bytes is not None and len(data) > max_bytes:
            raise SandboxError(f"read {path!r}: over the {max_bytes} byte limit")
        return data

    async def _joined(self, request: tuple[str, list[str]], env: dict[str, str], ports: list[int]) -> ProgramResult:
        """The program forked by the fork server (its imports loaded) and entering a sandbox that the supervisor
        holds open for it; SandboxLimitError when a limit ended it. A fresh interpreter if the server is gone."""
        setattr(self._runtime, TOUCHED, True)
        socket_path, program = request
        inside = bwrap.sandbox_env(self.workdir, allowed({**os.environ, **declare(self._runtime.process_env(env))}))
        with _private() as private:
            info_read, info_write = os.pipe()
            full = bwrap.command(self.workdir, private, [], inside, self._limits, ports, info_fd=info_write)
            bridge = Bridge(private, ports)
            await bridge.start()
            holder = None
            try:
                holder = await asyncio.create_subprocess_exec(
                    *full, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, pass_fds=(info_write,), start_new_session=True,
                    env={"PATH": os.environ.get("PATH", "")})
                os.close(info_write)
                info_write = -1
                info = await asyncio.wait_for(asyncio.to_thread(_read_info, info_read), timeout=60)
                assert holder.stdout is not None
                ready = await asyncio.wait_for(holder.stdout.readline(), timeout=60)
                if ready != b"READY\n":
                    err = await holder.stderr.read() if holder.stderr is not None else b""
                    raise SandboxError(f"the sandbox did not start: {(ready + err).decode(errors='replace')[-500:]}")
                join = {"pid": _supervisor_pid(int(info["child-pid"])), "limits": self._limits.as_dict()}
                try:
                    code, out, err = await run_forked(socket_path, program, self.workdir, inside, join)
                except ServerUnreachable:
                    return await self._in(private, [bwrap.interpreter(), *program], env, ports)
            finally:
                for fd in (info_read, info_write):
                    if fd >= 0:
                        os.close(fd)
                if holder is not None:
                    await _release(holder)
                await bridge.close()
            verdict = _verdict(private)
        if verdict is not None:
            raise limit_error("sandbox", verdict)
        return ProgramResult(exit_code=code, stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"))

    async def _sandboxed(self, argv: list[str], env: dict[str, str], ports: list[int]) -> ProgramResult:
        setattr(self._runtime, TOUCHED, True)
        with _private() as private:
            return await self._in(private, argv, env, ports)

    async def _in(self, private: str, argv: list[str], env: dict[str, str], ports: list[int]) -> ProgramResult:
        """``argv`` in a sandbox whose private folder is ``private``; SandboxLimitError when a limit ended it."""
        declared = allowed({**os.environ, **declare(self._runtime.process_env(env))})
        declared.pop(DECLARED, None)
        inside = bwrap.sandbox_env(self.workdir, declared)
        full = bwrap.command(self.workdir, private, argv, inside, self._limits, ports)
        bridge = Bridge(private, ports)
        await bridge.start()
        try:
            proc = await asyncio.create_subprocess_exec(
                *full, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True, env={"PATH": os.environ.get("PATH", "")})
            try:
                stdout, stderr = await proc.communicate()
            finally:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    await proc.wait()
        finally:
            await bridge.close()
        verdict = _verdict(private)
        if verdict is not None:
            raise limit_error("sandbox", verdict)
        return ProgramResult(exit_code=proc.returncode or 0, stdout=stdout.decode(errors="replace"),
                             stderr=stderr.decode(errors="replace"))


@contextlib.contextmanager
def _private():
    """A run's private host folder (bridge sockets, verdict, incoming file), removed afterwards."""
    folder = private_folder()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _read_info(fd: int) -> dict[str, Any]:
    """bwrap's ``--info-fd`` JSON, read until it is whole (bwrap may write it in pieces)."""
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
        try:
            return json.loads(data)
        except ValueError:
            continue
    raise SandboxError(f"bwrap gave no sandbox info: {data[-200:]!r}")


def _supervisor_pid(init_pid: int) -> int:
    """The supervisor's host pid: the child of bwrap's process in the sandbox (its namespaces are final)."""
    try:
        children = open(f"/proc/{init_pid}/task/{init_pid}/children").read().split()  # noqa: SIM115
    except OSError:
        return init_pid
    return int(children[0]) if children else init_pid


async def _release(holder: asyncio.subprocess.Process) -> None:
    """Let the supervisor end the sandbox (its stdin closes: verdict, then everything inside killed)."""
    if holder.stdin is not None:
        holder.stdin.close()
    try:
        await asyncio.wait_for(holder.communicate(), timeout=30)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(holder.pid, signal.SIGKILL)
        await holder.wait()
        raise


def _verdict(private: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(private, "verdict.json")) as found:
            return json.loads(found.read())
    except (OSError, ValueError):
        return None


class _SandboxProgram:
    """What the sandbox harnesses share: nothing installed (``setup``), and verifiers' ``launch`` on a
    :class:`SandboxRuntime` with the config's limits. Mixed in before a verifiers harness class."""

    config: Any

    async def setup(self, runtime: Any) -> None:
        return None

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: Any, **kwargs: Any) -> Any:
        limits = bwrap.Limits(**self.config.sandbox.model_dump())
        sandboxed = SandboxRuntime(runtime, limits)
        register_env_secrets()  # should a command still print one of this process's credentials: redacted
        record_rollout(sandboxed.workdir)
        launch = super().launch  # type: ignore[misc]
        return await launch(ctx, trace, sandboxed, endpoint, secret, mcp_urls, data, **kwargs)


class SandboxChatConfig(NullHarnessConfig):
    sandbox: SandboxSettings = SandboxSettings()


class SandboxBashConfig(BashHarnessConfig):
    sandbox: SandboxSettings = SandboxSettings()


class SandboxChatHarness(_SandboxProgram, NullHarness, Harness[SandboxChatConfig]):
    """verifiers' ``null`` chat program, run inside the sandbox."""


class SandboxBashHarness(_SandboxProgram, BashHarness, Harness[SandboxBashConfig]):
    """verifiers' ``bash`` harness (the chat program with shell tools), run inside the sandbox with the model's
    commands."""


__all__ = ["SandboxBashHarness", "SandboxChatHarness", "SandboxLimitError", "SandboxRuntime"]

"""An offline harness for verifiers v1 tasksets: verifiers' own ``null`` chat program, run by this interpreter.

Why it exists: verifiers (0.3.1 and 0.4.x) runs every harness program as a PEP 723 script through ``uv``
(``Runtime.prepare_uv_script``): on first use it runs ``pip install --user uv`` and ``uv sync`` downloads the
script's dependencies into a fresh environment. That needs the network and writes to the user's home
(``~/.local/bin/uv``, ``~/.cache/uv``). The ``null`` harness's program (a plain chat loop with MCP tool support,
``verifiers/v1/harnesses/null/program.py`` in 0.3.1; in 0.4 the bundled ``harnesses/utils`` modules, which always
stream) only needs ``openai``, ``mcp``, ``httpx`` and ``tenacity`` (0.4 adds ``httpx2`` and ``certifi``), which
verifiers itself depends on, so they are installed wherever verifiers is.

:class:`OfflineChatHarness` is that harness with one change: on the ``subprocess`` runtime the program is
written into the rollout's working directory and run by this interpreter instead of a uv environment:
forked, with its imports already loaded, from one server per primekit process
(:mod:`~evalkit.verifiers_compat.v1.harness_workers`), so a rollout does not pay an interpreter start-up.
Everything else (arguments, system prompt, MCP config, the interception endpoint every model call
goes through) is verifiers' ``NullHarness.launch``. On container runtimes it behaves exactly like ``null``.

:class:`OfflineBashHarness` does the same for verifiers' ``bash`` harness, which in verifiers is that same chat
program started with ``--bash`` (and ``--edit``, ``--compaction``): the model's shell commands run on this
machine, so primekit builds it only when the user chose the ``subprocess`` runtime.

verifiers finds harnesses by module name, so the plugins are exposed as the top-level modules
``primekit_harness`` (harness id ``primekit-harness``) and ``primekit_bash_harness`` (``primekit-bash-harness``).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from verifiers.v1.harness import Harness
from verifiers.v1.harnesses.bash.harness import BashHarness, BashHarnessConfig
from verifiers.v1.harnesses.null.harness import NullHarness, NullHarnessConfig
from verifiers.v1.runtimes import ProgramResult, SubprocessConfig

from evalkit.core.redact import register_env_secrets
from evalkit.sandbox.hardening import make_undumpable
from evalkit.sandbox.sweep import record_rollout
from evalkit.verifiers_compat.v1.harness_workers import (
    fallback_command,
    forked_request,
    is_harness_command,
    program_command,
    without_stdin,
)
from evalkit.verifiers_compat.v1.harness_workers.client import LimitReached, ServerUnreachable, run_forked
from evalkit.verifiers_compat.v1.harness_workers.harness_env import allowed, declare
from evalkit.verifiers_compat.v1.limits import SandboxSettings, limit_error, marked_verdict, memory_verdict

HARNESS_ID = "primekit-harness"
BASH_HARNESS_ID = "primekit-bash-harness"
LIMITS_VAR = "PRIMEKIT_HARNESS_LIMITS"
"""Carries a run's limits to ``launcher.py`` (its ``LIMITS_VAR``), which keeps them from the program."""


class LocalInterpreterRuntime:
    """A rollout's subprocess runtime, except that a PEP 723 script runs with this interpreter, not uv: forked
    from a server that has its imports loaded (:mod:`~evalkit.verifiers_compat.v1.harness_workers`), and handed to
    it from this process (:func:`~evalkit.verifiers_compat.v1.harness_workers.client.run_forked`) when verifiers
    runs it with ``run`` or ``run_program`` (no launcher process). The run gets an allowlisted environment
    (:mod:`~evalkit.verifiers_compat.v1.harness_workers.harness_env`): the base a Python child needs and what the
    harness declares (``process_env(env)``), never the rest of this process's environment (verifiers' own
    runtime passes all of it but ``*API_KEY*`` names); the runtime's working directory; ``/dev/null`` as stdin
    (verifiers' runtime leaves it unset, so its program, and the model's shell commands, read the evaluator's own:
    a deliberate difference, docs/verifiers-parity.md); a new session, killed with its group when the call is
    cancelled. ``open_process`` and ``run_background`` of such a program (the
    launcher, or a fresh interpreter where no server runs) declare the same variables, and the launcher and the
    server apply the same allowlist.

    The run's ``limits`` (the ``subprocess`` runtime's knobs, :mod:`~evalkit.verifiers_compat.v1.limits`) go with
    it: rlimits of the harness child, its processes counted, a limit reached raised as ``SandboxLimitError``.

    Every other attribute and method is the wrapped runtime's own.
    """

    def __init__(self, runtime: Any, limits: dict[str, int] | None = None):
        self._runtime = runtime
        self._limits = dict(limits or {})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    async def run(self, argv: list[str], env: dict[str, str]) -> ProgramResult:
        return await self._run(argv, env, self._runtime.run)

    async def run_program(self, argv: list[str], env: dict[str, str]) -> ProgramResult:
        return await self._run(argv, env, self._runtime.run_program)

    async def open_process(self, argv: list[str], env: dict[str, str]) -> Any:
        return await self._runtime.open_process(argv, self._declared(argv, env))

    async def run_background(self, argv: list[str], env: dict[str, str], log: str) -> None:
        return await self._runtime.run_background(argv, self._declared(argv, env), log)

    def _declared(self, argv: list[str], env: dict[str, str]) -> dict[str, str]:
        """``env`` with the names of what the harness declares when ``argv`` is a program started here (the
        launcher and the server keep only those and the base); any other command's ``env`` as given."""
        if not is_harness_command(argv):
            return env
        return {**declare(self._runtime.process_env(env)), LIMITS_VAR: json.dumps(self._limits)}

    async def _run(self, argv: list[str], env: dict[str, str], wrapped: Any) -> ProgramResult:
        """A forked program run in-process; any other command (or a server gone away: then a fresh
        interpreter) by the wrapped runtime's ``wrapped`` method."""
        request = forked_request(argv)
        if request is None:
            if not is_harness_command(argv):
                return await wrapped(argv, env)
            argv = without_stdin(argv)  # a fresh interpreter (no server) gets /dev/null too, as a forked run does
            return self._checked(await wrapped(argv, self._declared(argv, env)))
        socket_path, program = request
        full_env = allowed({**os.environ, **declare(self._runtime.process_env(env))})
        workdir = self._runtime.workdir
        cwd = os.path.abspath(workdir) if workdir is not None else os.getcwd()
        try:
            code, out, err = await run_forked(socket_path, program, cwd, full_env, limits=self._limits)
        except ServerUnreachable:
            fresh = fallback_command(program[0], stdin=False) + program[1:]
            return self._checked(await wrapped(fresh, self._declared(fresh, env)))
        except LimitReached as reached:
            raise limit_error("subprocess", reached.verdict) from None
        return self._checked(ProgramResult(exit_code=code, stdout=out.decode(errors="replace"),
                                           stderr=err.decode(errors="replace")))

    def _checked(self, result: ProgramResult) -> ProgramResult:
        """A harness program's result, or SandboxLimitError when a limit ended it (the launcher's verdict line, or
        an allocation failure under ``memory_mb``)."""
        verdict = marked_verdict(result.stderr) or memory_verdict(self._limits.get("memory_mb", 0),
                                                                  result.exit_code, result.stderr)
        if verdict is not None:
            raise limit_error("subprocess", verdict)
        return result

    async def prepare_uv_script(
        self, script: str | bytes, env: dict[str, str] | None = None, *, activate: bool = True
    ) -> list[str]:
        data = script.encode() if isinstance(script, str) else script
        path = f".primekit-program-{hashlib.sha256(data).hexdigest()[:16]}.py"
        await self._runtime.write(path, data)
        return program_command(path)


class _OfflineProgram:
    """What the offline harnesses share: on the subprocess runtime nothing is installed (``setup``) and the
    program runs with this interpreter (``launch`` on a :class:`LocalInterpreterRuntime`); on any other runtime
    the verifiers harness's own ``setup`` and ``launch``. Mixed in before a verifiers harness class."""

    async def setup(self, runtime: Any) -> None:
        if not isinstance(runtime.config, SubprocessConfig):
            await super().setup(runtime)  # type: ignore[misc]

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: Any, **kwargs: Any) -> Any:
        """The verifiers harness's ``launch`` on a runtime that runs the program with this interpreter; keyword
        arguments (0.4 adds ``tool_interception_url``) pass through unchanged."""
        if isinstance(runtime.config, SubprocessConfig):
            limits = getattr(getattr(self, "config", None), "limits", None)  # set by primekit's config
            runtime = LocalInterpreterRuntime(runtime, limits.model_dump() if limits is not None else {})
            make_undumpable()  # the program and what it runs are this user's processes: keep our /proc/<pid> closed
            register_env_secrets()  # what they print may hold this process's credentials: redacted in every output
            record_rollout(runtime.workdir)  # swept by the next primekit should this one be killed
        return await super().launch(ctx, trace, runtime, endpoint, secret, mcp_urls, data, **kwargs)  # type: ignore[misc]


class OfflineChatConfig(NullHarnessConfig):
    limits: SandboxSettings = SandboxSettings()


class OfflineBashConfig(BashHarnessConfig):
    limits: SandboxSettings = SandboxSettings()


class OfflineChatHarness(_OfflineProgram, NullHarness, Harness[OfflineChatConfig]):
    """verifiers' ``null`` harness whose program runs offline on the subprocess runtime (see the module docstring).

    Its config is the ``null`` harness's (``env``, ``forward_env``, ``tool_timeout``) and the run's ``limits``
    (set from ``[env.agent.runtime]``); nothing is installed.
    """


class OfflineBashHarness(_OfflineProgram, BashHarness, Harness[OfflineBashConfig]):
    """verifiers' ``bash`` harness (the same chat program as ``null``, started with ``--bash``/``--edit``/
    ``--compaction`` and a coding-agent system prompt) whose program runs offline on the subprocess runtime.

    The model's shell commands run on this machine, in the rollout's working directory, with the program's
    allowlisted environment; primekit builds it only when the user chose the ``subprocess`` runtime
    (:mod:`~evalkit.verifiers_compat.v1.config`). Its config is the ``bash`` harness's (``edit``, ``search``,
    ``compaction`` in 0.4, and the shared ``env``, ``forward_env``, ``tool_timeout``) and the run's ``limits``.
    """


__all__ = ["OfflineBashHarness", "OfflineChatHarness"]

"""The limits of a harness run on primekit's local runtimes, and the row error a limit reached becomes.

Both local runtimes take the same knobs beside ``type`` in ``[env.agent.runtime]`` (``memory_mb``, ``processes``,
``file_size_mb``, ``cpu_seconds``, :class:`~evalkit.sandbox.bwrap.Limits` says each one's meaning and default):
``sandbox`` applies them inside bubblewrap (:mod:`evalkit.sandbox.supervisor`), ``subprocess`` to the harness
child's process tree (``harness_workers/process_tree.py``). Either way a limit reached ends the rollout with
:class:`SandboxLimitError`, one name on both runtimes: verifiers' :class:`SandboxError` is its error of any
runtime (``sandbox_error``), whatever isolates it. The message names the runtime and the limit.

Memory has no verdict of its own (``RLIMIT_AS`` makes an allocation fail, it kills nothing): the harness program
failing with an allocation failure (:data:`ALLOCATION_FAILURES` in its stderr) under ``memory_mb`` is the limit
reached (:func:`memory_verdict`). A model's command that fails to allocate is that command's failure, which the
model sees as its output; the rollout goes on.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_config import BaseConfig

from evalkit.sandbox import bwrap

try:
    from verifiers.v1.errors import SandboxError
except ImportError:  # verifiers 0.3.1 has no error vocabulary
    SandboxError = RuntimeError  # type: ignore[misc,assignment]

LIMIT_MARK = "primekit harness worker: limit reached: "
"""How ``launcher.py`` reports a verdict on stderr (then the verdict's JSON): its ``LIMIT_MARK``, which it
cannot import from here (it runs by path, standard library only)."""
ALLOCATION_FAILURES = ("MemoryError", "Cannot allocate memory", "cannot allocate memory", "out of memory",
                       "failed to map segment", "std::bad_alloc", "can't start new thread")
"""What a program says when an allocation failed (Python, libc's strerror, the loader, C++, thread creation)."""


class SandboxLimitError(SandboxError):  # type: ignore[misc,valid-type]
    """A harness run reached one of its limits (processes, file size, CPU time, memory); the message names it."""


class SandboxSettings(BaseConfig):
    """A harness run's limits (see :class:`~evalkit.sandbox.bwrap.Limits` for each one's meaning); 0: none."""

    memory_mb: int = bwrap.Limits.memory_mb
    processes: int = bwrap.Limits.processes
    file_size_mb: int = bwrap.Limits.file_size_mb
    cpu_seconds: int = bwrap.Limits.cpu_seconds


def limit_error(runtime: str, verdict: dict[str, Any]) -> SandboxLimitError:
    """The row error for ``verdict`` (``{"limit", "value", "detail"}``) on ``runtime``."""
    return SandboxLimitError(f"{runtime} limit reached: {verdict['limit']} = {verdict['value']} "
                             f"({verdict.get('detail', '')}); raise it in [env.agent.runtime]")


def memory_verdict(memory_mb: int, exit_code: int, stderr: str) -> dict[str, Any] | None:
    """The ``memory_mb`` verdict when a harness program that ran under it failed with an allocation failure."""
    if not memory_mb or exit_code == 0:
        return None
    tail = stderr[-4000:]
    said = next((line.strip() for line in reversed(tail.splitlines())
                 if any(failure in line for failure in ALLOCATION_FAILURES)), None)
    if said is None:
        return None
    return {"limit": "memory_mb", "value": memory_mb, "detail": f"the harness program: {said[:200]}"}


def marked_verdict(stderr: str) -> dict[str, Any] | None:
    """The verdict ``launcher.py`` reported on ``stderr`` (its last :data:`LIMIT_MARK` line), if any."""
    for line in reversed(stderr.splitlines()[-20:]):
        if line.startswith(LIMIT_MARK):
            try:
                found = json.loads(line[len(LIMIT_MARK):])
            except ValueError:
                return None
            return found if isinstance(found, dict) and "limit" in found else None
    return None

"""The ``sandbox`` runtime's part of a v1 env config: its knobs checked, bwrap checked, the sandboxed plugin chosen.

Kept apart from :mod:`~evalkit.verifiers_compat.v1.sandbox` (which imports verifiers' harness classes) so config
checks stay light.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import UserError
from evalkit.sandbox import bwrap

SANDBOX_PLUGINS = {"primekit-harness": "primekit-sandbox-harness",
                   "primekit-bash-harness": "primekit-sandbox-bash-harness"}
"""primekit's plugin for a program on ``subprocess`` -> the same program in the sandbox."""


def check_sandbox(where: str, knobs: dict[str, Any]) -> bwrap.Limits:
    """The limits the knobs give; UserError for a bad knob, or when bwrap cannot sandbox a run here."""
    limits = bwrap.Limits.from_knobs(where, knobs)
    why = bwrap.unavailable()
    if why is not None:
        raise UserError(f"{where}: {why}")
    return limits


def sandbox_program(plugin: str, runtime: dict[str, Any]) -> dict[str, Any]:
    """The seat's harness data for ``plugin`` in the sandbox: the sandboxed plugin id and its limits."""
    limits = bwrap.Limits.from_knobs("runtime", {k: v for k, v in runtime.items() if k != "type"})
    return {"id": SANDBOX_PLUGINS[plugin], "sandbox": limits.as_dict()}


def hide_sandbox(env: Any) -> None:
    """Rewrite, in place, each seat's ``runtime`` table of type ``sandbox`` in raw ``[env]`` data to verifiers'
    ``subprocess`` (the type verifiers validates and runs under primekit's sandboxed plugins), and a ``subprocess``
    table to its bare type (verifiers' config has no limit knobs); the caller keeps a copy of the raw table for the
    runtime's knobs."""
    for seat in (env.values() if isinstance(env, dict) else ()):
        runtime = seat.get("runtime") if isinstance(seat, dict) else None
        if isinstance(runtime, dict) and runtime.get("type") in ("sandbox", "subprocess"):
            seat["runtime"] = {"type": "subprocess"}

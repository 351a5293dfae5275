"""Environments written for ``verifiers``, run unchanged by primekit.

Wrap, don't reimplement: when an environment module's ``load_environment(**args)`` returns a verifiers
object (legacy ``import verifiers as vf``), or the module exports a verifiers v1 ``Taskset``
(``import verifiers.v1 as vf``), resolution wraps it in a primekit :class:`~evalkit.envs.base.Environment`
whose rows come from verifiers' own dataset methods and whose rollouts verifiers itself runs (its turns,
tools, stop conditions, rubric), with every model request sent through a bridge to primekit's
:class:`~evalkit.clients.base.ModelClient` (so the embedded engine, HTTP endpoints, endpoint replicas and
the scripted test client all work, and token ids/logprobs are kept for RL).

``verifiers`` is an optional extra (``pip install 'primekit[verifiers]'``); nothing here imports it until
an environment needs it. Tested versions: :data:`TESTED_VERSIONS`.
"""

from __future__ import annotations

from typing import Any

from evalkit.errors import UserError

TESTED_VERSIONS = ("0.3.1",)
"""The verifiers releases the test suite runs against (the ``verifiers`` extra pins this range)."""

INSTALL_HINT = "install the extra: pip install 'primekit[verifiers]' (verifiers 0.3.1)"


def require_verifiers(env_id: str = "") -> None:
    """Raise a UserError naming the extra when ``verifiers`` cannot be imported."""
    try:
        import verifiers  # noqa: F401
    except ImportError as exc:
        subject = f"environment '{env_id}' needs" if env_id else "this needs"
        raise UserError(f"{subject} the 'verifiers' package ({exc}); {INSTALL_HINT}") from exc


def version_problem() -> str | None:
    """Why the installed verifiers cannot be used (None when it is a tested version or not imported at all)."""
    import sys

    module = sys.modules.get("verifiers")
    if module is None:
        return None
    version = str(getattr(module, "__version__", "unknown"))
    if version in TESTED_VERSIONS:
        return None
    return (f"verifiers {version} is installed, but primekit runs verifiers environments with "
            f"{', '.join(TESTED_VERSIONS)} only; {INSTALL_HINT}")


def check_version() -> None:
    """UserError when the installed verifiers is not a tested version (see :func:`version_problem`)."""
    problem = version_problem()
    if problem:
        raise UserError(problem)


def is_verifiers_object(obj: Any) -> bool:
    """Whether ``obj`` is an instance of a class defined by the ``verifiers`` package (without importing it)."""
    return any(cls.__module__.split(".")[0] == "verifiers" for cls in type(obj).__mro__)


def wrap_legacy(vf_env: Any, env_id: str, env_args: dict[str, Any] | None = None):
    """A primekit Environment running the legacy verifiers environment ``vf_env``; UserError for other objects."""
    check_version()
    from evalkit.verifiers_compat.legacy_env import VerifiersEnvironment, is_legacy_environment

    if not is_legacy_environment(vf_env):
        raise UserError(
            f"load_environment() of '{env_id}' returned a verifiers {type(vf_env).__name__}, which is not a "
            "verifiers Environment (SingleTurnEnv, MultiTurnEnv, ToolEnv, ...); primekit runs those and v1 Tasksets"
        )
    return VerifiersEnvironment(vf_env, env_id=env_id, env_args=env_args)


__all__ = ["TESTED_VERSIONS", "INSTALL_HINT", "require_verifiers", "version_problem", "check_version", "is_verifiers_object", "wrap_legacy"]

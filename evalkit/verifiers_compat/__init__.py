"""Environments written for ``verifiers``, run unchanged by primekit.

Wrap, don't reimplement: when an environment module's ``load_environment(**args)`` returns a verifiers
object (legacy ``import verifiers as vf``), or the module exports a verifiers v1 ``Taskset``
(``import verifiers.v1 as vf``), resolution wraps it in a primekit :class:`~evalkit.envs.base.Environment`
whose rows come from verifiers' own dataset methods and whose rollouts verifiers itself runs (its turns,
tools, stop conditions, rubric), with every model request sent through a bridge to primekit's
:class:`~evalkit.clients.base.ModelClient` (so the embedded engine, HTTP endpoints, endpoint replicas and
the scripted test client all work, and token ids/logprobs are kept for RL).

``verifiers`` is an optional extra in two generations that cannot share a venv: ``primekit[verifiers]`` is
the current series (0.4.x: v1 tasksets only, the package root exports just ``__version__``) and
``primekit[verifiers-legacy]`` is 0.3.1 (legacy environments and v1 tasksets). primekit works with whichever
is installed; nothing here imports it until an environment needs it. Tested versions: :data:`TESTED_VERSIONS`.

Laid out as verifiers splits its API: :mod:`.legacy` (``import verifiers as vf``) and :mod:`.v1` (``Taskset``);
here at the top, what both use (:mod:`.convert`: messages and sampling args; :mod:`.signature_cache`) and the
version checks.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import UserError

LEGACY_VERSION = "0.3.1"
"""The verifiers release with both APIs (legacy ``import verifiers as vf`` and v1): extra ``verifiers-legacy``."""
CURRENT_SERIES = "0.4"
"""The current verifiers series (v1 only, ``import verifiers.v1 as vf``): extra ``verifiers``."""
TESTED_VERSIONS = (LEGACY_VERSION, "0.4.0")
"""The verifiers releases the test suite runs against (one venv each; the extras pin them)."""

CURRENT_INSTALL = "pip install 'primekit[verifiers]'"
LEGACY_INSTALL = "pip install 'primekit[verifiers-legacy]'"
INSTALL_HINT = (f"install one extra: {CURRENT_INSTALL} (verifiers {CURRENT_SERIES}, v1 tasksets) or "
                f"{LEGACY_INSTALL} (verifiers {LEGACY_VERSION}, legacy environments and v1 tasksets)")


def require_verifiers(env_id: str = "") -> None:
    """Raise a UserError naming the extras when ``verifiers`` cannot be imported."""
    try:
        import verifiers  # noqa: F401
    except ImportError as exc:
        subject = f"environment '{env_id}' needs" if env_id else "this needs"
        raise UserError(f"{subject} the 'verifiers' package ({exc}); {INSTALL_HINT}") from exc


def installed_version() -> str | None:
    """The version of the imported ``verifiers`` package (None when it was never imported)."""
    import sys

    module = sys.modules.get("verifiers")
    return None if module is None else str(getattr(module, "__version__", "unknown"))


def is_current_generation() -> bool:
    """Whether the installed verifiers is the v1-only series (0.4.x); imports verifiers when needed."""
    import verifiers

    return str(getattr(verifiers, "__version__", "")).startswith(CURRENT_SERIES + ".")


def version_problem() -> str | None:
    """Why the installed verifiers cannot be used (None when it is supported or not imported at all)."""
    version = installed_version()
    if version is None or version == LEGACY_VERSION or version.startswith(CURRENT_SERIES + "."):
        return None
    return (f"verifiers {version} is installed, but primekit runs verifiers environments with "
            f"{LEGACY_VERSION} or {CURRENT_SERIES}.x only; {INSTALL_HINT}")


def check_version() -> None:
    """UserError when the installed verifiers is not a supported version (see :func:`version_problem`)."""
    problem = version_problem()
    if problem:
        raise UserError(problem)


def legacy_api_error(env_id: str, exc: BaseException) -> UserError | None:
    """The one line for an environment written for verifiers' legacy API that failed under verifiers 0.4
    (which removed it): what it needs and the install command. None when ``exc`` is something else.

    Read from the failure itself, never guessed from a message: an ``AttributeError`` on the ``verifiers``
    module (``vf.SingleTurnEnv``), an ``ImportError`` of a name from ``verifiers``, or a missing
    ``verifiers.<module>`` other than ``verifiers.v1`` (``verifiers.types``, ``verifiers.legacy``)."""
    import sys

    module = sys.modules.get("verifiers")
    version = installed_version()
    if module is None or version is None or not version.startswith(CURRENT_SERIES + "."):
        return None
    for err in _chain(exc):
        if _names_legacy_api(err, module):
            return UserError(
                f"environment '{env_id}' is written for verifiers' legacy API (`import verifiers as vf`: "
                f"SingleTurnEnv, ToolEnv, rubrics, ...), which verifiers {version} no longer has "
                f"({type(err).__name__}: {err}); run it with verifiers {LEGACY_VERSION} in its own venv: "
                f"{LEGACY_INSTALL}"
            )
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _names_legacy_api(err: BaseException, module: Any) -> bool:
    if isinstance(err, ModuleNotFoundError):
        name = err.name or ""
        return name.startswith("verifiers.") and not name.startswith("verifiers.v1")
    if isinstance(err, ImportError):
        return err.name == "verifiers"
    if isinstance(err, AttributeError):
        return getattr(err, "obj", None) is module
    return False


def is_verifiers_object(obj: Any) -> bool:
    """Whether ``obj`` is an instance of a class defined by the ``verifiers`` package (without importing it)."""
    return any(cls.__module__.split(".")[0] == "verifiers" for cls in type(obj).__mro__)


def wrap_legacy(vf_env: Any, env_id: str, env_args: dict[str, Any] | None = None):
    """A primekit Environment running the legacy verifiers environment ``vf_env``; UserError for other objects."""
    check_version()
    from evalkit.verifiers_compat.legacy.env import VerifiersEnvironment, is_legacy_environment

    if not is_legacy_environment(vf_env):
        raise UserError(
            f"load_environment() of '{env_id}' returned a verifiers {type(vf_env).__name__}, which is not a "
            "verifiers Environment (SingleTurnEnv, MultiTurnEnv, ToolEnv, ...); primekit runs those and v1 Tasksets"
        )
    return VerifiersEnvironment(vf_env, env_id=env_id, env_args=env_args)


__all__ = [
    "LEGACY_VERSION",
    "CURRENT_SERIES",
    "TESTED_VERSIONS",
    "INSTALL_HINT",
    "require_verifiers",
    "installed_version",
    "is_current_generation",
    "version_problem",
    "check_version",
    "legacy_api_error",
    "is_verifiers_object",
    "wrap_legacy",
]

"""verifiers' legacy rollout and rubric asking ``inspect.signature`` once per function, not once per call.

verifiers 0.3.x decides which keyword arguments a stop condition, reward function or cleanup handler takes
by calling ``inspect.signature`` on it every time it calls it (``maybe_call_with_named_args``,
``Rubric._call_individual_reward_func``, ``Rubric.cleanup_objects``): about ten times per single-turn
rollout, a fifth of the CPU a wrapped environment spends per rollout against a fast server. A function's
signature does not change between calls, so :func:`install` gives those verifiers modules an ``inspect``
whose ``signature`` remembers its answers; everything else is the real module. verifiers' behaviour is the
same call for call: same arguments passed, same errors for a callable without a signature.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
from typing import Any

PATCHED_MODULES = ("verifiers.legacy.utils.async_utils", "verifiers.legacy.rubrics.rubric")
"""The verifiers modules whose per-call ``inspect.signature`` runs on every rollout."""


@functools.lru_cache(maxsize=4096)
def _remembered(func: Any) -> inspect.Signature:
    return inspect.signature(func)


def signature(obj: Any, *args: Any, **kwargs: Any) -> inspect.Signature:
    """``inspect.signature(obj)``, remembered per callable (an unhashable one, or extra options: asked each time)."""
    if args or kwargs:
        return inspect.signature(obj, *args, **kwargs)
    try:
        return _remembered(obj)
    except TypeError:  # unhashable callable, or no signature: the real call says which
        return inspect.signature(obj)


class _RememberingInspect(types.ModuleType):
    """The ``inspect`` module with :func:`signature` in place of its own."""

    signature = staticmethod(signature)

    def __getattr__(self, name: str) -> Any:
        return getattr(inspect, name)


_INSPECT = _RememberingInspect("inspect")


def install() -> None:
    """Point the verifiers modules in :data:`PATCHED_MODULES` at the remembering ``inspect`` (idempotent; a
    module that is missing or no longer uses ``inspect`` is left alone)."""
    for name in PATCHED_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "inspect", None) is inspect:
            module.inspect = _INSPECT

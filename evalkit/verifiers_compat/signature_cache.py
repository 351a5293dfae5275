"""verifiers' rollouts asking ``inspect.signature`` once per function, not once per call.

Two hot spots, one remedy:

- verifiers 0.3.x's legacy rollout decides which keyword arguments a stop condition, reward function or
  cleanup handler takes by calling ``inspect.signature`` on it every time it calls it
  (``maybe_call_with_named_args``, ``Rubric._call_individual_reward_func``, ``Rubric.cleanup_objects``):
  about ten times per single-turn rollout, a fifth of the CPU a wrapped environment spends per rollout
  against a fast server.
- verifiers v1 records each turn with pydantic's ``model_construct``, which asks for the signature of every
  field's ``default_factory`` (``list``, ``dict``) on every call, to see whether it takes the validated data.
  For a builtin, ``inspect`` parses its text signature, copying ``sys.modules`` to do so: about 5 times per
  v1 rollout, a few milliseconds of primekit's CPU each time.

A callable's signature does not change between calls, so :func:`install` points those modules at a
``signature`` that remembers its answers (verifiers' modules get an ``inspect`` module that differs from the
real one only there). Behaviour is the same call for call: same arguments passed, same errors for a callable
without a signature.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
from typing import Any

PATCHED_MODULES = ("verifiers.legacy.utils.async_utils", "verifiers.legacy.rubrics.rubric")
"""The verifiers modules whose per-call ``inspect.signature`` runs on every rollout (their ``inspect`` is replaced)."""
PYDANTIC_SIGNATURE = "pydantic._internal._typing_extra"
"""The pydantic module whose ``signature`` (``from inspect import signature``) ``model_construct`` reaches."""


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
    """Point the modules in :data:`PATCHED_MODULES` at the remembering ``inspect`` and pydantic's
    :data:`PYDANTIC_SIGNATURE` at :func:`signature` (idempotent; a module that is missing or no longer uses
    ``inspect.signature`` that way is left alone)."""
    for name in PATCHED_MODULES:
        module = _module(name)
        if module is not None and getattr(module, "inspect", None) is inspect:
            module.inspect = _INSPECT
    module = _module(PYDANTIC_SIGNATURE)
    if module is not None and getattr(module, "signature", None) is inspect.signature:
        module.signature = signature


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None

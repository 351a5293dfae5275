"""Making a raising verifiers reward function visible on the rollout it failed on.

verifiers' ``Rubric`` catches an exception from a reward function, logs one line and scores it 0.0
(``_call_individual_reward_func`` / ``_call_group_reward_func``), so a buggy rubric looks like a model that
scores 0. primekit's rule is that such a rollout is a row with ``error`` set. The log line does not say which
rollout failed (group scoring runs the functions of a whole group concurrently), so the only exact place to
see it is the call itself: :func:`record_reward_errors` replaces each function in the rubric (and in nested
``RubricGroup`` rubrics) with a :class:`RecordedRewardFunc` that presents verifiers the same name, signature
and return annotation, records the exception on the rollout's verifiers state (``state[ERRORS_KEY]``; for a
group function, on every state of the group) and re-raises it, so verifiers' own handling (log line, 0.0) is
unchanged. A sync function runs on primekit's scoring threads (:func:`evalkit.envs.rubric.call_reward_func`),
so a slow one holds up only its own rollout, as in a native rubric; one marked
:func:`~evalkit.envs.rubric.fast_reward` runs inline, as there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from evalkit.envs.rubric import call_reward_func

ERRORS_KEY = "primekit_reward_errors"
"""The verifiers state key holding this rollout's reward-function error messages."""


class RecordedRewardFunc:
    """A reward function that records its exceptions on the verifiers state(s) it scored (see module docstring)."""

    def __init__(self, func: Callable[..., Any]):
        self.func = func
        self.__name__ = getattr(func, "__name__", type(func).__name__)
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(func, "__doc__", None)
        signature = inspect.signature(func)
        params = signature.parameters
        self._takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        self._group = bool({"states", "prompts", "completions", "answers", "tasks", "infos"} & set(params))
        self._group = self._group or _returns_list(signature)
        self._state_key = "states" if self._group else "state"
        self._added = not self._takes_all and self._state_key not in params
        if self._added:  # ask verifiers for the state(s) too, so an error can be recorded on them
            extra = inspect.Parameter(self._state_key, inspect.Parameter.KEYWORD_ONLY, default=None)
            keep = [p for p in params.values() if p.kind is not inspect.Parameter.VAR_POSITIONAL]
            positional = [p for p in keep if p.kind is not inspect.Parameter.KEYWORD_ONLY]
            keyword = [p for p in keep if p.kind is inspect.Parameter.KEYWORD_ONLY]
            signature = signature.replace(parameters=[*positional, *keyword, extra])
        self.__signature__ = signature

    async def __call__(self, **kwargs: Any) -> Any:
        target = kwargs.get(self._state_key)
        if self._added:
            kwargs.pop(self._state_key, None)
        try:
            return await call_reward_func(self.func, **kwargs)  # a sync function runs on a worker thread
        except Exception as exc:
            message = f"reward function {self.__name__} raised {type(exc).__name__}: {exc}"
            for state in (target if self._group else [target]) or []:
                if state is not None:
                    state.setdefault(ERRORS_KEY, []).append(message)
            raise


def _returns_list(signature: inspect.Signature) -> bool:
    annotation = signature.return_annotation
    return annotation is list or getattr(annotation, "__origin__", None) is list


def record_reward_errors(rubric: Any) -> None:
    """Replace every reward function of ``rubric`` (recursively through ``RubricGroup.rubrics``) once."""
    for sub in getattr(rubric, "rubrics", None) or []:
        record_reward_errors(sub)
    funcs = getattr(rubric, "funcs", None)
    if isinstance(funcs, list):
        funcs[:] = [f if isinstance(f, RecordedRewardFunc) else RecordedRewardFunc(f) for f in funcs]


def reward_errors(state: Any) -> list[str]:
    """The reward-function errors recorded on a verifiers state."""
    return list(state.get(ERRORS_KEY) or []) if state is not None else []

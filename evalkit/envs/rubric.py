"""Rubrics: weighted reward functions that never crash a run.

A reward function takes only the keyword arguments it names from ``prompt, completion, answer,
state, info, parser, task`` (all of them when it takes ``**kwargs``), may be sync or async, and
returns a number. Its name is its metric name. Weight 0 makes it a logged metric that does not move
the reward. A function that raises scores 0, and the error is recorded on the rollout.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalkit.envs.parsers import Parser
from evalkit.types import RolloutState

RewardFunc = Callable[..., Any]
INJECTABLE = ("prompt", "completion", "answer", "state", "info", "parser", "task")


@dataclass
class Score:
    reward: float
    metrics: dict[str, float]
    errors: list[str] = field(default_factory=list)


class Rubric:
    """A weighted sum of reward functions (weights default to 1.0)."""

    def __init__(
        self,
        funcs: Sequence[RewardFunc] | None = None,
        weights: Sequence[float] | None = None,
        parser: Parser | None = None,
    ):
        self.funcs: list[RewardFunc] = list(funcs or [])
        self.weights: list[float] = list(weights) if weights is not None else [1.0] * len(self.funcs)
        if len(self.weights) != len(self.funcs):
            raise ValueError(f"Rubric got {len(self.funcs)} funcs but {len(self.weights)} weights")
        self.parser = parser or Parser()
        self._wanted = [_wanted_kwargs(f) for f in self.funcs]

    def add_reward_func(self, func: RewardFunc, weight: float = 1.0) -> None:
        self.funcs.append(func)
        self.weights.append(weight)
        self._wanted.append(_wanted_kwargs(func))

    @property
    def names(self) -> list[str]:
        return [_func_name(f) for f in self.funcs]

    async def score(self, state: RolloutState) -> Score:
        """Run every function on one finished rollout; the weighted sum is the reward."""
        available = {
            "prompt": state.prompt,
            "completion": state.completion,
            "answer": state.answer,
            "state": state.extra,
            "info": state.info,
            "parser": self.parser,
            "task": state.task,
        }
        metrics: dict[str, float] = {}
        errors: list[str] = []
        reward = 0.0
        for func, weight, wanted in zip(self.funcs, self.weights, self._wanted):
            name = _func_name(func)
            kwargs = available if wanted is None else {k: available[k] for k in wanted}
            try:
                value = func(**kwargs)
                if inspect.isawaitable(value):
                    value = await value
                value = float(value)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bad reward function is data, not a crash
                errors.append(f"reward function {name} raised {type(exc).__name__}: {exc}")
                value = 0.0
            metrics[name] = value
            reward += weight * value
        return Score(reward=reward, metrics=metrics, errors=errors)


def _func_name(func: RewardFunc) -> str:
    return getattr(func, "__name__", type(func).__name__)


def _wanted_kwargs(func: RewardFunc) -> tuple[str, ...] | None:
    """The injectable names a function asks for; ``None`` means it takes ``**kwargs`` (give all)."""
    params = inspect.signature(func).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params if p.name in INJECTABLE)

"""Rubrics: weighted reward functions that never crash or stall a run.

A reward function takes only the keyword arguments it names from ``prompt, completion, answer,
state, info, parser, task`` (all of them when it takes ``**kwargs``), may be sync or async, and
returns a number. Its name is its metric name. Weight 0 makes it a logged metric that does not move
the reward. A function that raises scores 0, and the error (kind ``reward``) is recorded on the rollout.

Sync functions run on a pool of worker threads (:class:`evalkit.aio.DaemonThreadPool`), async ones
on the event loop, so a slow or sleeping function holds up only its own rollout. A function that
computes in pure Python holds the GIL while it runs: other rollouts still progress (the loop gets
the GIL back every few milliseconds) but the CPU is shared, not multiplied. Scoring one rollout (all
its functions) is bounded by ``timeout`` seconds; past it the rollout records an error of kind
``timeout`` and gets no score, and a sync function still running is left to finish on its thread
(Python cannot stop a thread), where it holds one of the pool's workers until it returns.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalkit.aio import DaemonThreadPool
from evalkit.defaults import DEFAULT_SCORE_TIMEOUT_S
from evalkit.envs.parsers import Parser
from evalkit.errors import REWARD, TIMEOUT
from evalkit.types import RolloutState

SCORING_THREADS = 64
"""Worker threads for sync reward functions, shared by every rubric of the process."""
_POOL = DaemonThreadPool(SCORING_THREADS, "reward")  # threads start on first use

RewardFunc = Callable[..., Any]
INJECTABLE = ("prompt", "completion", "answer", "state", "info", "parser", "task")


@dataclass
class Score:
    """The weighted reward, each function's value, and what went wrong (``timed_out``: no score)."""

    reward: float
    metrics: dict[str, float]
    errors: list[str] = field(default_factory=list)
    timed_out: bool = False

    @property
    def error_kind(self) -> str | None:
        return TIMEOUT if self.timed_out else REWARD if self.errors else None


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

    async def score(self, state: RolloutState, timeout: float | None = DEFAULT_SCORE_TIMEOUT_S) -> Score:
        """Run every function on one finished rollout; the weighted sum is the reward.

        ``timeout`` (seconds, ``None`` for none) bounds the whole scoring; past it the result has
        ``timed_out`` set, reward 0, and 0 for each function that had not finished.
        """
        available = {
            "prompt": state.prompt,
            "completion": state.completion,
            "answer": state.answer,
            "state": state.extra,
            "info": state.info,
            "parser": self.parser,
            "task": state.task,
        }
        kwargs = [available if wanted is None else {k: available[k] for k in wanted} for wanted in self._wanted]
        values: list[float] = []  # in function order; appended as each function finishes
        errors: list[str] = []
        try:
            async with asyncio.timeout(timeout):
                start = 0
                while start < len(self.funcs):
                    end = start + 1
                    if _is_async(self.funcs[start]):
                        values.append(await _call_async(self.funcs[start], kwargs[start], errors))
                    else:  # a run of sync functions: one hop to a worker thread for all of them
                        while end < len(self.funcs) and not _is_async(self.funcs[end]):
                            end += 1
                        calls = list(zip(self.funcs[start:end], kwargs[start:end]))
                        loop = asyncio.get_running_loop()
                        await loop.run_in_executor(_POOL, _call_sync, calls, values, errors, loop)
                    start = end
        except TimeoutError:
            names = self.names
            finished = list(values)  # a snapshot: a function still running on its thread may append later
            running = names[len(finished)] if len(finished) < len(names) else "?"
            metrics = {name: finished[i] if i < len(finished) else 0.0 for i, name in enumerate(names)}
            message = (f"scoring timed out after {timeout:g} s in reward function {running} "
                       "(raise --score-timeout if it needs longer)")
            return Score(reward=0.0, metrics=metrics, errors=[*list(errors), message], timed_out=True)
        metrics: dict[str, float] = {}
        reward = 0.0
        for func, weight, value in zip(self.funcs, self.weights, values):
            metrics[_func_name(func)] = value
            reward += weight * value
        return Score(reward=reward, metrics=metrics, errors=errors)


def _call_sync(calls: list[tuple[RewardFunc, dict[str, Any]]], values: list[float], errors: list[str],
               loop: asyncio.AbstractEventLoop) -> None:
    """On a worker thread: each function in turn; a raising one scores 0 and is recorded. A sync
    callable that returns an awaitable has it awaited on ``loop`` (where its resources live)."""
    for func, kwargs in calls:
        try:
            value = func(**kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run_coroutine_threadsafe(_awaited(value), loop).result()
            values.append(float(value))
        except Exception as exc:  # a bad reward function is data, not a crash
            errors.append(f"reward function {_func_name(func)} raised {type(exc).__name__}: {exc}")
            values.append(0.0)


async def _awaited(value: Any) -> Any:
    return await value


async def call_reward_func(func: RewardFunc, **kwargs: Any) -> Any:
    """``func(**kwargs)`` off the event loop when it is sync (on the scoring threads), awaited when
    async: for reward functions that another library's rubric calls (wrapped verifiers environments)."""
    if _is_async(func):
        return await func(**kwargs)
    value = await asyncio.get_running_loop().run_in_executor(_POOL, lambda: func(**kwargs))
    return await value if inspect.isawaitable(value) else value


async def _call_async(func: RewardFunc, kwargs: dict[str, Any], errors: list[str]) -> float:
    """An async function's value, on the event loop; raising scores 0 and is recorded."""
    try:
        return float(await func(**kwargs))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a bad reward function is data, not a crash
        errors.append(f"reward function {_func_name(func)} raised {type(exc).__name__}: {exc}")
        return 0.0


def _is_async(func: RewardFunc) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def _func_name(func: RewardFunc) -> str:
    return getattr(func, "__name__", type(func).__name__)


def _wanted_kwargs(func: RewardFunc) -> tuple[str, ...] | None:
    """The injectable names a function asks for; ``None`` means it takes ``**kwargs`` (give all)."""
    params = inspect.signature(func).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params if p.name in INJECTABLE)

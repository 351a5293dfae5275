"""Rubrics: weighted reward functions that never crash or stall a run.

A reward function takes only the keyword arguments it names from ``prompt, completion, answer,
state, info, parser, task`` (all of them when it takes ``**kwargs``), may be sync or async, and
returns a number. Its name is its metric name. Weight 0 makes it a logged metric that does not move
the reward. A function that raises, or returns NaN or an infinity, scores 0, and the error (kind
``reward``) is recorded on the rollout.

Sync functions run on a pool of worker threads (:class:`evalkit.core.aio.DaemonThreadPool`), async ones
on the event loop, so a slow or sleeping function holds up only its own rollout. A function that
computes in pure Python holds the GIL while it runs: other rollouts still progress (the loop gets
the GIL back every few milliseconds) but the CPU is shared, not multiplied. Scoring one rollout (all
its functions) may run ``timeout`` seconds (time spent waiting for a free thread does not count);
past it the rollout records an error of kind ``timeout`` and gets no score. A sync function still
running then is left to finish on its thread (Python cannot stop a thread), and that thread stops
counting against the pool's ``SCORING_THREADS``: a new one serves the rollouts queued behind it, so
stuck functions never starve healthy ones.

The exception: a sync function its author marks :func:`fast_reward` (pure, bounded work on the
rollout's own text, such as a regex or an exact match) runs inline on the event loop. A hop to a
scoring thread costs more CPU than such a function (and the GIL hand-offs cost the loop more still),
so at thousands of rollouts per second the hop, not the function, is the harness's bottleneck. The
mark is a promise: an inline call cannot be timed out, and a hanging one stops the whole run.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalkit.core.aio import USER_EXITS, DaemonThreadPool, ExitRequested, call_user_code, is_async_callable
from evalkit.core.defaults import DEFAULT_SCORE_TIMEOUT_S
from evalkit.core.errors import REWARD, TIMEOUT
from evalkit.core.types import RolloutState
from evalkit.envs.parsers import Parser

SCORING_THREADS = 64
"""Worker threads for sync reward functions, shared by every rubric of the process."""
_POOL = DaemonThreadPool(SCORING_THREADS, "reward")  # threads start on first use

RewardFunc = Callable[..., Any]
INJECTABLE = ("prompt", "completion", "answer", "state", "info", "parser", "task")
FAST_ATTR = "primekit_fast_reward"


def fast_reward(func: RewardFunc) -> RewardFunc:
    """Mark a sync reward function as fast and bounded: it runs inline on the event loop (see the module
    docstring), with no scoring thread and so no score timeout. Returns ``func`` itself."""
    setattr(func, FAST_ATTR, True)
    return func


def is_fast_reward(func: RewardFunc) -> bool:
    """A sync function marked with :func:`fast_reward` (an async one always runs on the loop)."""
    return bool(getattr(func, FAST_ATTR, False)) and not is_async_callable(func)


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
        self._modes = [_mode(f) for f in self.funcs]

    def add_reward_func(self, func: RewardFunc, weight: float = 1.0) -> None:
        self.funcs.append(func)
        self.weights.append(weight)
        self._wanted.append(_wanted_kwargs(func))
        self._modes.append(_mode(func))

    @property
    def names(self) -> list[str]:
        return [_func_name(f) for f in self.funcs]

    async def score(self, state: RolloutState, timeout: float | None = DEFAULT_SCORE_TIMEOUT_S) -> Score:
        """Run every function on one finished rollout; the weighted sum is the reward.

        ``timeout`` (seconds, ``None`` for none) bounds the time the functions run, together; past it
        the result has ``timed_out`` set, reward 0, and 0 for each function that had not finished.
        Time a sync function waits for a free scoring thread does not count (it is not its fault).
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
        if len(self._modes) != len(self.funcs):  # ``funcs`` was changed in place
            self._wanted, self._modes = [_wanted_kwargs(f) for f in self.funcs], [_mode(f) for f in self.funcs]
        kwargs = [available if wanted is None else {k: available[k] for k in wanted} for wanted in self._wanted]
        values: list[float] = []  # in function order; appended as each function finishes
        errors: list[str] = []
        if all(mode == _INLINE for mode in self._modes):  # nothing to wait for, nothing to time out
            _call_sync(list(zip(self.funcs, kwargs)), values, errors, None)
            return self._total(values, errors)
        try:
            await self._run_funcs(kwargs, values, errors, timeout)
        except TimeoutError:
            names = self.names
            finished = list(values)  # a snapshot: a function still running on its thread may append later
            running = names[len(finished)] if len(finished) < len(names) else "?"
            metrics = {name: finished[i] if i < len(finished) else 0.0 for i, name in enumerate(names)}
            message = (f"scoring timed out after {timeout:g} s in reward function {running} "
                       "(raise --score-timeout if it needs longer)")
            return Score(reward=0.0, metrics=metrics, errors=[*list(errors), message], timed_out=True)
        return self._total(values, errors)

    async def _run_funcs(self, kwargs: list[dict[str, Any]], values: list[float], errors: list[str],
                         timeout: float | None) -> None:
        """Each function in order: fast ones inline, async ones on the loop, each run of other sync ones in one
        hop to a scoring thread; the clock of ``timeout`` runs only while a non-inline function runs."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(None) as limit:
            clock = _RunningClock(limit, timeout)
            start = 0
            while start < len(self.funcs):
                end = start + 1
                mode = self._modes[start]
                if mode == _INLINE:
                    _call_sync([(self.funcs[start], kwargs[start])], values, errors, None)
                elif mode == _ASYNC:
                    clock.start()
                    values.append(await _call_async(self.funcs[start], kwargs[start], errors))
                else:  # a run of sync functions: one hop to a worker thread for all of them
                    while end < len(self.funcs) and self._modes[end] == _THREAD:
                        end += 1
                    calls = list(zip(self.funcs[start:end], kwargs[start:end]))
                    await _POOL.call(_call_sync, calls, values, errors, loop, on_start=clock.start)
                clock.pause()
                start = end
            clock.close()

    def _total(self, values: list[float], errors: list[str]) -> Score:
        """The weighted sum of the functions' ``values`` (in function order)."""
        metrics: dict[str, float] = {}
        reward = 0.0
        for func, weight, value in zip(self.funcs, self.weights, values):
            metrics[_func_name(func)] = value
            reward += weight * value
        return Score(reward=reward, metrics=metrics, errors=errors)


class _RunningClock:
    """Drives a scoring's ``asyncio.timeout``: it runs only while reward functions run, so a rollout
    whose sync functions wait in the scoring threads' queue does not time out for that wait."""

    def __init__(self, limit: asyncio.Timeout, timeout: float | None):
        self.limit, self.left = limit, timeout
        self.loop = asyncio.get_running_loop()
        self.since: float | None = None
        self.closed = False

    def start(self) -> None:
        if self.left is not None and not self.closed and self.since is None:
            self.since = self.loop.time()
            self.limit.reschedule(self.since + self.left)

    def pause(self) -> None:
        if self.since is not None and self.left is not None:
            self.left -= self.loop.time() - self.since
            self.since = None
            self.limit.reschedule(None)

    def close(self) -> None:
        self.pause()
        self.closed = True


def _call_sync(calls: list[tuple[RewardFunc, dict[str, Any]]], values: list[float], errors: list[str],
               loop: asyncio.AbstractEventLoop | None) -> None:
    """On a worker thread (or inline, ``loop`` None): each function in turn; a raising one scores 0 and is
    recorded. A sync callable that returns an awaitable has it awaited on ``loop`` (where its resources
    live); inline, that is an error (a fast reward function returns its number)."""
    for func, kwargs in calls:
        try:
            value = func(**kwargs)
            if inspect.isawaitable(value):
                if loop is None:
                    _close(value)
                    raise TypeError("a fast_reward function returned an awaitable; make it async instead")
                value = asyncio.run_coroutine_threadsafe(_awaited(value), loop).result()
            values.append(_finite(func, value, errors))
        except (Exception, *USER_EXITS) as exc:  # a bad reward function is data, not a crash (sys.exit() too)
            errors.append(_raised(func, exc))
            values.append(0.0)


async def _awaited(value: Any) -> Any:
    return await value


def _close(value: Any) -> None:
    close = getattr(value, "close", None)
    if callable(close):
        close()


async def call_reward_func(func: RewardFunc, **kwargs: Any) -> Any:
    """``func(**kwargs)`` off the event loop when it is sync (on the scoring threads), awaited when
    async, inline when marked :func:`fast_reward`: for reward functions that another library's rubric calls
    (wrapped verifiers environments)."""
    if is_fast_reward(func):
        try:
            value = func(**kwargs)
            return await value if inspect.isawaitable(value) else value
        except USER_EXITS as exc:
            raise ExitRequested.of(exc) from None
    return await call_user_code(_POOL, func, **kwargs)


async def _call_async(func: RewardFunc, kwargs: dict[str, Any], errors: list[str]) -> float:
    """An async function's value, on the event loop; raising scores 0 and is recorded."""
    try:
        return _finite(func, await func(**kwargs), errors)
    except asyncio.CancelledError:
        raise
    except (Exception, *USER_EXITS) as exc:  # a bad reward function is data, not a crash (sys.exit() too)
        errors.append(_raised(func, exc))
        return 0.0


def _raised(func: RewardFunc, exc: BaseException) -> str:
    if isinstance(exc, USER_EXITS):
        exc = ExitRequested.of(exc)
    return f"reward function {_func_name(func)} raised {type(exc).__name__}: {exc}"


def _finite(func: RewardFunc, value: Any, errors: list[str]) -> float:
    """``value`` as a float; NaN or infinity scores 0 and is recorded, like a raise (they are not scores)."""
    number = float(value)
    if math.isfinite(number):
        return number
    errors.append(f"reward function {_func_name(func)} returned {number}, not a finite number (scored 0)")
    return 0.0


def _func_name(func: RewardFunc) -> str:
    return getattr(func, "__name__", type(func).__name__)


_INLINE, _ASYNC, _THREAD = "inline", "async", "thread"


def _mode(func: RewardFunc) -> str:
    """Where a function runs: inline on the loop (:func:`fast_reward`), awaited on the loop, or on a scoring thread."""
    if is_async_callable(func):
        return _ASYNC
    return _INLINE if is_fast_reward(func) else _THREAD


def _wanted_kwargs(func: RewardFunc) -> tuple[str, ...] | None:
    """The injectable names a function asks for; ``None`` means it takes ``**kwargs`` (give all)."""
    params = inspect.signature(func).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params if p.name in INJECTABLE)

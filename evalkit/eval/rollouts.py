"""Running many rollouts concurrently: the shared core of eval, GEPA and RL.

``run_groups`` runs ``rollouts_per_example`` rollouts for each row, at most ``max_concurrent``
model conversations at a time, and hands each finished *group* (all rollouts of one example) to
``on_group`` as soon as it is complete, so callers can write rows and update progress while work
continues. Once a group's rollouts are done, ``env.score_group(states)`` runs (a no-op for native
environments; group-scored verifiers rubrics score there). ``env.serving()`` is held around all groups
(a verifiers v1 taskset's shared tool servers live there). Rollout failures are rows with ``error``
set (see Environment.rollout); this function raises only for programming errors, cancellation, or
what ``on_group`` raises; then the groups still running are cancelled before it returns. The garbage
collector is held back while groups run (:mod:`evalkit.core.gctune`).

Rollouts start in input order, each once a slot of the bound is free: a task exists only for a running
rollout (an eval used to park one task per rollout of the whole run on the bound), and a group's last
rollout to finish runs the group's tail (group scoring, ``on_group``) after giving back its slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from evalkit.clients.base import ModelClient
from evalkit.core.aio import Slots
from evalkit.core.defaults import DEFAULT_MAX_CONCURRENT, RolloutLimits
from evalkit.core.errors import REWARD
from evalkit.core.gctune import relaxed_gc
from evalkit.core.types import ExampleId, RolloutState, SamplingArgs
from evalkit.core.untrusted import non_finite_scores
from evalkit.envs.base import Environment


def require_finite_scores(state: RolloutState) -> None:
    """A reward or metric that is NaN or infinite (from any rubric: native, verifiers', group-scored) is
    not a score: it becomes 0 and an error of kind ``reward`` on the rollout, before eval, GEPA or RL sees it."""
    bad = non_finite_scores(state.reward, state.metrics)
    if not bad:
        return
    shown = ", ".join(f"{name} {state.reward if name == 'reward' else state.metrics[name]!r}" for name in bad)
    state.record_error(REWARD, f"reward function results are not finite numbers ({shown}); scored 0")
    state.metrics = {name: value if name not in bad else 0.0 for name, value in state.metrics.items()}
    state.reward = state.reward if "reward" not in bad else 0.0


GroupCallback = Callable[[list[RolloutState]], Awaitable[None] | None]


async def run_groups(
    env: Environment,
    client: ModelClient,
    rows: Sequence[dict[str, Any]],
    *,
    example_ids: Sequence[ExampleId] | None = None,
    rollouts_per_example: int = 1,
    sampling: SamplingArgs | None = None,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    system_prompt: str | None = None,
    rollout_indices: dict[ExampleId, Sequence[int]] | None = None,
    on_group: GroupCallback | None = None,
    bound: Slots | None = None,
    limits: RolloutLimits = RolloutLimits(),
) -> list[list[RolloutState]]:
    """Run every group; return them in input order.

    ``example_ids`` label rows (default 0..n-1). ``rollout_indices`` restricts, per example id, which
    rollout indices to run (``--resume`` runs only the missing ones). ``bound`` replaces the one
    built from ``max_concurrent``, so several calls (one per environment of a mixture) share one bound.
    ``limits`` bound each rollout's time, scoring time and message size (see :meth:`Environment.rollout`).
    """
    ids = list(example_ids) if example_ids is not None else list(range(len(rows)))
    bound = bound or Slots(max_concurrent)
    groups = []
    for row, example_id in zip(rows, ids):
        indices = rollout_indices.get(example_id) if rollout_indices is not None else None
        groups.append(
            _Group(row, example_id, list(indices) if indices is not None else list(range(rollouts_per_example)))
        )

    async def finish(group: _Group) -> None:
        """A group's tail, once all its rollouts are done: group scoring, the finite-score rule, ``on_group``."""
        await env.score_group(group.states)
        for state in group.states:
            require_finite_scores(state)
        if on_group is not None:
            result = on_group(group.states)
            if asyncio.iscoroutine(result):
                await result

    async def one(group: _Group, position: int, started: list[bool]) -> None:
        """One rollout, on a slot its dispatcher already holds; the group's last rollout runs its tail."""
        started[0] = True  # from here on the slot is released below (see _dispatch for a task cancelled earlier)
        try:
            group.states[position] = await env.rollout(
                client, group.row, example_id=group.example_id, rollout_idx=group.wanted[position], sampling=sampling,
                system_prompt=system_prompt, limits=limits,
            )
        finally:
            bound.release()
        group.left -= 1
        if group.left == 0:
            await finish(group)

    with relaxed_gc():
        async with env.serving():
            await _dispatch(groups, bound, one, finish)
    return [group.states for group in groups]


class _Group:
    """One example's rollouts: the row, the rollout indices wanted, their states as they finish."""

    __slots__ = ("row", "example_id", "wanted", "states", "left")

    def __init__(self, row: dict[str, Any], example_id: ExampleId, wanted: list[int]):
        self.row, self.example_id, self.wanted = row, example_id, wanted
        self.states: list[Any] = [None] * len(wanted)
        self.left = len(wanted)


async def _dispatch(groups: list[_Group], bound: Any, one: Callable[[_Group, int, list[bool]], Awaitable[None]],
                    finish: Callable[[_Group], Awaitable[None]]) -> None:
    """Start each rollout, in order, once a slot of ``bound`` is free (a task exists only for a running
    rollout, not for every rollout waiting its turn). On a failure (``on_group`` raised, e.g. the disk is
    full) or a cancellation, the rollouts still running are cancelled before it is raised."""
    tasks: list[asyncio.Task[None]] = []
    failed: list[BaseException] = []

    def check(task: asyncio.Task[None]) -> None:
        """The first failure stops the others at once, before they finish (and call ``on_group``)."""
        if not task.cancelled() and task.exception() is not None:
            failed.append(task.exception())  # type: ignore[arg-type]
            for other in tasks:
                other.cancel()

    try:
        for group in groups:
            if not group.wanted:
                await finish(group)
            for position in range(len(group.wanted)):
                await bound.acquire()
                if failed:
                    bound.release()
                    raise failed[0]
                started = [False]
                task = asyncio.ensure_future(one(group, position, started))
                task.add_done_callback(check)
                # a task cancelled before its first step never runs ``one``'s ``finally``: give its slot back here
                task.add_done_callback(lambda _, started=started: None if started[0] else bound.release())
                tasks.append(task)
        if tasks:
            await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        raise

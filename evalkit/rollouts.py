"""Running many rollouts concurrently: the shared core of eval, GEPA and RL.

``run_groups`` runs ``rollouts_per_example`` rollouts for each row, at most ``max_concurrent``
model conversations at a time, and hands each finished *group* (all rollouts of one example) to
``on_group`` as soon as it is complete, so callers can write rows and update progress while work
continues. Once a group's rollouts are done, ``env.score_group(states)`` runs (a no-op for native
environments; group-scored verifiers rubrics score there). ``env.serving()`` is held around all groups
(a verifiers v1 taskset's shared tool servers live there). Rollout failures are rows with ``error``
set (see Environment.rollout); this function raises only for programming errors, cancellation, or
what ``on_group`` raises; then the groups still running are cancelled before it returns. The garbage
collector is held back while groups run (:mod:`evalkit.gctune`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from evalkit.aio import Slots
from evalkit.clients.base import ModelClient
from evalkit.defaults import DEFAULT_MAX_CONCURRENT
from evalkit.envs.base import Environment
from evalkit.errors import REWARD
from evalkit.gctune import relaxed_gc
from evalkit.defaults import RolloutLimits
from evalkit.types import RolloutState, SamplingArgs
from evalkit.untrusted import non_finite_scores

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
    example_ids: Sequence[int] | None = None,
    rollouts_per_example: int = 1,
    sampling: SamplingArgs | None = None,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    system_prompt: str | None = None,
    rollout_indices: dict[int, Sequence[int]] | None = None,
    on_group: GroupCallback | None = None,
    semaphore: asyncio.Semaphore | Slots | None = None,
    limits: RolloutLimits = RolloutLimits(),
) -> list[list[RolloutState]]:
    """Run every group; return them in input order.

    ``example_ids`` label rows (default 0..n-1). ``rollout_indices`` restricts, per example id, which
    rollout indices to run (``--resume`` runs only the missing ones). ``semaphore`` replaces the one
    built from ``max_concurrent``, so several calls (one per environment of a mixture) share one bound.
    ``limits`` bound each rollout's time, scoring time and message size (see :meth:`Environment.rollout`).
    """
    ids = list(example_ids) if example_ids is not None else list(range(len(rows)))
    semaphore = semaphore or Slots(max_concurrent)

    async def one(row: dict[str, Any], example_id: int, rollout_idx: int) -> RolloutState:
        async with semaphore:
            return await env.rollout(
                client, row, example_id=example_id, rollout_idx=rollout_idx, sampling=sampling, system_prompt=system_prompt,
                score_timeout=limits.score_timeout, rollout_timeout=limits.rollout_timeout,
                max_message_chars=limits.max_message_chars,
            )

    async def group(row: dict[str, Any], example_id: int) -> list[RolloutState]:
        indices = rollout_indices.get(example_id) if rollout_indices is not None else None
        wanted = list(indices) if indices is not None else list(range(rollouts_per_example))
        states = list(await asyncio.gather(*(one(row, example_id, idx) for idx in wanted)))
        await env.score_group(states)
        for state in states:
            require_finite_scores(state)
        if on_group is not None:
            result = on_group(states)
            if asyncio.iscoroutine(result):
                await result
        return states

    with relaxed_gc():
        return await _run_all(env, group, rows, ids)


async def _run_all(env: Environment, group: Callable[[dict[str, Any], int], Awaitable[list[RolloutState]]],
                   rows: Sequence[dict[str, Any]], ids: list[int]) -> list[list[RolloutState]]:
    """Every group as its own task inside ``env.serving()``; on failure the others are cancelled."""
    async with env.serving():
        tasks = [asyncio.ensure_future(group(row, eid)) for row, eid in zip(rows, ids)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            # ``on_group`` raised (e.g. the disk is full) or we were cancelled: stop the other groups
            # too, rather than leave them running (and calling ``on_group``) after the caller gave up
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)
            raise

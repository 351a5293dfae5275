"""Online difficulty filtering: groups whose rollouts all scored the same teach nothing.

With group-relative advantages such a group has zero advantage everywhere, so it only dilutes the
token-count normalisation. The trainer drops it and draws replacement examples, for a bounded number
of rounds (``[filter] max_rounds``), so a step never loops forever on a task that is all-or-nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evalkit.core.types import RolloutState


def is_uniform(group: Sequence[RolloutState], tol: float = 1e-9) -> bool:
    """True when every scored rollout of the group got the same reward (no learning signal).

    Rollouts that errored without a score (:attr:`RolloutState.scored`) have no reward to compare.
    """
    rewards = [state.reward for state in group if state.scored]
    return not rewards or max(rewards) - min(rewards) <= tol


@dataclass
class FilterResult:
    kept: list[list[RolloutState]]
    dropped: int


def filter_groups(groups: Sequence[list[RolloutState]], enabled: bool = True,
                  signal_when_uniform: Callable[[list[RolloutState]], bool] | None = None) -> FilterResult:
    """Keep the groups with reward variance (all of them when filtering is disabled), and those whose algorithm
    credits them against a baseline of its own (``signal_when_uniform``: ``rae``), which equal rewards do not zero."""
    if not enabled:
        return FilterResult(kept=list(groups), dropped=0)
    kept = [group for group in groups
            if not is_uniform(group) or (signal_when_uniform is not None and signal_when_uniform(group))]
    return FilterResult(kept=kept, dropped=len(groups) - len(kept))

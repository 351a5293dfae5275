"""Advantage rules: turn one group's rewards into one advantage per rollout.

Each rule is a small named class in the plain registry ``ADVANTAGES``. Pure Python (no torch), so
the config can validate names and tests can check values by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from evalkit.core import stats


class AdvantageRule:
    """``__call__(rewards) -> advantages``, same length, computed within one group only."""

    name: ClassVar[str]

    def __init__(self, std_normalize: bool = False, eps: float = 1e-6):
        self.std_normalize = std_normalize
        self.eps = eps

    def __call__(self, rewards: Sequence[float]) -> list[float]:
        raise NotImplementedError


class GroupRelative(AdvantageRule):
    """GRPO: reward minus the group mean; optionally divided by the group's (population) std.

    Without std normalisation (the default, as in Dr. GRPO) easy and hard groups are not re-weighted,
    which avoids the difficulty bias of dividing by a small std.
    """

    name = "grpo"

    def __call__(self, rewards: Sequence[float]) -> list[float]:
        if not rewards:
            return []
        mean = stats.mean(rewards)
        centered = [r - mean for r in rewards]
        if not self.std_normalize:
            return centered
        std = stats.pstdev(rewards, mean)  # any finite rewards (1e200): no OverflowError
        return [c / (std + self.eps) for c in centered]


class LeaveOneOut(AdvantageRule):
    """RLOO: reward minus the mean of the *other* rollouts of the group (an unbiased baseline)."""

    name = "rloo"

    def __call__(self, rewards: Sequence[float]) -> list[float]:
        n = len(rewards)
        if n < 2:
            return [0.0] * n
        total = sum(rewards)
        out = [r - (total - r) / (n - 1) for r in rewards]
        if self.std_normalize:
            std = stats.pstdev(rewards)
            out = [a / (std + self.eps) for a in out]
        return out


ADVANTAGES: dict[str, type[AdvantageRule]] = {rule.name: rule for rule in (GroupRelative, LeaveOneOut)}
ADVANTAGE_NAMES = frozenset(ADVANTAGES)


def make_advantage_rule(name: str, std_normalize: bool = False) -> AdvantageRule:
    return ADVANTAGES[name](std_normalize=std_normalize)

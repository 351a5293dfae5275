"""The training docs' rules of thumb, measured on a real model (the embedded one by default, or ``-m``).

Before RL: is the baseline mean between :data:`~evalkit.core.baseline_rules.MIN_REWARD` and
:data:`~evalkit.core.baseline_rules.MAX_REWARD`, how many examples are never and always solved, and do rewards
vary inside groups (:data:`~evalkit.core.baseline_rules.MIN_DIVERSE_GROUPS`)? The thresholds are the RL
baseline gate's own. A model that finds the task too hard is no bug in the environment, so these checks
warn and never fail.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.core.baseline_rules import MAX_REWARD, MIN_DIVERSE_GROUPS, MIN_REWARD
from evalkit.core.types import RolloutState
from evalkit.envcheck.judge import PASS, TOLERANCE, WARN, Check


def model_checks(groups: Sequence[list[RolloutState]], pass_threshold: float, model: str) -> list[Check]:
    """Baseline mean, solved shares and within-group spread of finished groups of ``model``'s rollouts."""
    rewards = [s.reward for g in groups for s in g if s.scored]
    attempts = sum(len(g) for g in groups)
    if not rewards:
        first = next((s.error for g in groups for s in g if s.error), "nothing scored")
        return [Check("baseline-mean", WARN, f"{model}: all {attempts} rollouts errored ({first})")]
    mean = sum(rewards) / len(rewards)
    solved = [[s.reward >= pass_threshold - TOLERANCE for s in g if s.scored] for g in groups]
    solved = [g for g in solved if g]
    never = sum(1 for g in solved if not any(g)) / len(solved)
    always = sum(1 for g in solved if all(g)) / len(solved)
    diverse = sum(1 for g in groups if _spread(g) > TOLERANCE) / len(groups)
    where = f"{model}, {len(groups)} examples x {len(groups[0])} rollouts"
    in_range = MIN_REWARD <= mean <= MAX_REWARD
    checks = [
        Check("baseline-mean", PASS if in_range else WARN,
              f"{where}: mean {mean:.3f} ({'within' if in_range else 'outside'} [{MIN_REWARD:g}, {MAX_REWARD:g}])"),
        Check("solved-share", WARN if never == 1.0 or always == 1.0 else PASS,
              f"never solved {never:.0%}, always solved {always:.0%} (solved: reward >= {pass_threshold:g})"),
        Check("group-spread", PASS if diverse >= MIN_DIVERSE_GROUPS else WARN,
              f"{diverse:.0%} of groups have varied rewards (at least {MIN_DIVERSE_GROUPS:.0%} wanted)"),
    ]
    errors = sum(1 for g in groups for s in g if s.error)
    if errors:
        checks.append(Check("model-errors", WARN, f"{errors}/{attempts} rollouts errored: "
                            f"{next(s.error for g in groups for s in g if s.error)}"))
    return checks


def _spread(group: list[RolloutState]) -> float:
    rewards = [s.reward for s in group if s.scored]
    return max(rewards) - min(rewards) if rewards else 0.0

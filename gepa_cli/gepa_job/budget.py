"""The rollout budget, kept by us rather than by the library, and the stoppers that read it.

Why not gepa's ``max_metric_calls``: the library checks it only at the top of an iteration, so the
iteration that crosses the line still runs its minibatches and a full validation pass (overshoot),
and on resume it re-runs the seed's validation pass without counting it. Here every rollout is
*reserved* before it starts and the count is written to disk first, so a run killed mid-evaluation
still counts what it may have spent, and the count carries over to ``--resume``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.fileio import write_text_atomic


class BudgetExceeded(Exception):
    """An evaluation asked for more rollouts than remain; nothing of it was run."""


class RolloutBudget:
    """Counts task-model rollouts against ``max_calls``; persisted to ``path`` on every change."""

    def __init__(self, max_calls: int, path: Path | None = None):
        self.max_calls = max_calls
        self.path = path
        self.used = 0
        self.reflection_calls = 0
        if path is not None and path.is_file():
            saved = json.loads(path.read_text())
            self.used = int(saved.get("used", 0))
            self.reflection_calls = int(saved.get("reflection_calls", 0))

    @property
    def remaining(self) -> int:
        return max(0, self.max_calls - self.used)

    def reserve(self, n: int) -> None:
        """Claim ``n`` rollouts before running them; refuses (raises) rather than overshoot."""
        if n > self.remaining:
            raise BudgetExceeded(f"{n} rollouts requested but only {self.remaining} of {self.max_calls} remain")
        self.used += n
        self._save()

    def count_reflection_call(self) -> None:
        self.reflection_calls += 1
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        write_text_atomic(
            self.path, json.dumps({"max_calls": self.max_calls, "used": self.used, "reflection_calls": self.reflection_calls})
        )


class BudgetStopper:
    """Stop before an iteration that might not be affordable.

    One reflective iteration costs at most ``2 * minibatch_size`` rollouts (parent and child on the
    minibatch) plus ``num_val`` when the child is accepted; starting one that cannot pay for its
    validation pass would waste the minibatch rollouts on a candidate that can never be scored.
    """

    def __init__(self, budget: RolloutBudget, minibatch_size: int, num_val: int):
        self.budget = budget
        self.iteration_cost = 2 * minibatch_size + num_val

    def __call__(self, gepa_state: Any) -> bool:
        return self.budget.remaining < self.iteration_cost


class PerfectScoreStopper:
    """Stop as soon as some candidate's mean validation score reaches ``perfect_score``."""

    def __init__(self, perfect_score: float):
        self.perfect_score = perfect_score
        self.reached = False

    def __call__(self, gepa_state: Any) -> bool:
        scores = list(gepa_state.program_full_scores_val_set)
        self.reached = bool(scores) and max(scores) >= self.perfect_score
        return self.reached


class FatalStopper:
    """Stop when the holder (the proposer) recorded an error the library would otherwise swallow."""

    def __init__(self, holder: Any):
        self.holder = holder

    def __call__(self, gepa_state: Any) -> bool:
        return getattr(self.holder, "fatal", None) is not None

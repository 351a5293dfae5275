"""Reading an RL run for its user: checks on the run's own per-step metrics, each with the training docs' fix.

A check is a small named class in the plain registry ``CHECKS``: ``look(rows) -> str | None`` gets the
training steps so far (``metrics.jsonl`` lines, old or prime-rl names: :mod:`evalkit.report.rl_names`)
and says what it sees when it alarms. :class:`Monitor` runs them after each step and reports each alarm
once (`prime rl run`, whose ``--halt-on`` stops the run on the chosen ones); :func:`diagnose` runs them
over a finished run (`prime eval view RUN`). Checks read only what the rows hold: a run written before a
metric existed is not alarmed on it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from evalkit.report.rl_names import TRAIN, with_old_names

Rows = Sequence[dict[str, Any]]
WINDOW = 3
"""Consecutive steps a condition must hold before it alarms (one noisy step is not a trend)."""


@dataclass(frozen=True)
class Alarm:
    name: str
    step: int
    seen: str
    """What the metrics show, with numbers."""
    fix: str

    def line(self) -> str:
        return f"health: {self.name} at step {self.step}: {self.seen}; fix: {self.fix}"


def _series(rows: Rows, key: str) -> list[float]:
    return [float(row[key]) for row in rows if isinstance(row.get(key), (int, float))]


class Check:
    """``look(rows) -> str | None``: what the steps so far show, when it is a problem."""

    name: ClassVar[str]
    fix: ClassVar[str]

    def look(self, rows: Rows) -> str | None:
        raise NotImplementedError


class RewardSpread(Check):
    """Every rollout of the step scored the same: group-relative advantages are all zero, nothing is learned. A step
    that trained no ``rl`` token (``tokens/rl`` 0: ``opd``, ``sft``, ``opsd``) does not learn from rewards."""

    name = "reward_spread"
    fix = ("more rollouts per example (rollouts_per_example), the difficulty filter ([filter] enabled = true), or "
           "examples of a difficulty the model sometimes solves (baseline reward between ~10% and ~80%)")
    EPS = 1e-6

    def look(self, rows: Rows) -> str | None:
        if rows and rows[-1].get("tokens/rl") == 0:  # a distillation step: no token learns from the rewards
            return None
        spreads = _series(rows, "reward_std")
        if len(spreads) >= WINDOW and all(s <= self.EPS for s in spreads[-WINDOW:]):
            return (
                f"reward spread ~0 for {WINDOW} steps (reward std {spreads[-1]:.2g}, "
                f"mean {_series(rows, 'reward_mean')[-1]:.3f})"
            )
        return None


class EntropyCollapse(Check):
    """Entropy far below where it started: the policy stopped exploring (mode collapse)."""

    name = "entropy_collapse"
    fix = ("lower the learning rate (trainer.lr), an entropy bonus (trainer.loss.entropy_coef), or a higher "
           "sampling.temperature")
    FRACTION = 0.1
    FLOOR = 0.05

    def look(self, rows: Rows) -> str | None:
        values = _series(rows, "entropy")
        if len(values) <= WINDOW:
            return None
        start, recent = values[0], values[-WINDOW:]
        if start > 0 and all(v < max(self.FLOOR, self.FRACTION * start) for v in recent):
            return f"entropy fell from {start:.3f} to {values[-1]:.3f}"
        return None


class KLGrowth(Check):
    """Trainer-sampler mismatch KL (or KL to the starting model) growing step after step: off-policy drift."""

    name = "kl_growth"
    fix = ("lower the learning rate (trainer.lr), train on-policy (trainer.async_level = 0), fewer "
           "trainer.num_iterations, or a clipped loss (trainer.loss.type = 'dapo' or 'cispo')")
    FACTOR = 10.0
    FLOOR = 1e-3

    def look(self, rows: Rows) -> str | None:
        for key in ("mismatch_kl", "kl_ref"):
            values = _series(rows, key)
            if len(values) <= WINDOW:
                continue
            base = statistics.median(values[:WINDOW])
            recent = values[-WINDOW:]
            rising = all(b >= a for a, b in zip(recent, recent[1:]))
            if rising and recent[-1] > max(self.FLOOR, self.FACTOR * base):
                return f"{key} grew from {base:.2e} to {recent[-1]:.2e} and rose {WINDOW} steps running"
        return None


class RefKLRising(Check):
    """The distillation's KL to its reference (``opd``'s teacher, ``opsd``'s demonstration-reading policy) growing
    step after step: the policy moves away from what it distills. ``ref_kl`` is the mean of ``log p_ref - log p``
    over the sampled tokens, an estimate of ``-KL(policy || reference)``, so the KL is ``-ref_kl``."""

    name = "ref_kl_rising"
    fix = ("lower the learning rate (trainer.lr) or train on-policy (trainer.async_level = 0); check that the teacher "
           "is the model meant (opd), or that the demonstrations fit the tasks (opsd)")
    RISE = 0.25
    """How far above its start (as a fraction) the KL must be, besides rising for ``WINDOW`` steps running."""
    FLOOR = 0.02
    """And by at least this much (nats per token): a KL near 0 that wobbles is not a trend."""

    def look(self, rows: Rows) -> str | None:
        kl = [-v for v in _series(rows, "ref_kl")]
        if len(kl) <= WINDOW:
            return None
        base = statistics.median(kl[:WINDOW])
        recent = kl[-WINDOW - 1:]
        rising = all(b > a for a, b in zip(recent, recent[1:]))
        if rising and kl[-1] > max(0.0, base) * (1 + self.RISE) + self.FLOOR:
            return (f"KL to the reference (-ref_kl) grew from {base:.3f} to {kl[-1]:.3f} nats per token and rose "
                    f"{WINDOW} steps running")
        return None


class TruncationRising(Check):
    """Most rollouts cut at max_tokens, more than at the start: rambling, or a budget too small."""

    name = "truncation_rising"
    fix = ("raise sampling.max_tokens, or leave truncated rollouts out (trainer.mask_truncated_completions) or score "
           "them 0 (trainer.zero_truncated_completions)")
    KEY = f"{TRAIN}/is_truncated/mean"
    LEVEL = 0.5
    RISE = 0.2

    def look(self, rows: Rows) -> str | None:
        values = _series(rows, self.KEY)
        if len(values) <= WINDOW:
            return None
        recent = values[-WINDOW:]
        if min(recent) > self.LEVEL and recent[-1] >= values[0] + self.RISE:
            return f"{recent[-1]:.0%} of rollouts truncated (from {values[0]:.0%} at the first step)"
        return None


class ErrorsRising(Check):
    """Rollouts erroring (model, environment, tool, timeout) at a sustained rate above the docs' 5%."""

    name = "errors_rising"
    fix = ("read the error and error_kind columns of rollouts/step_N.jsonl: fix the environment or tool, raise "
           "rollout_timeout, or check the endpoint")
    KEY = "train/agg/all/has_error/mean"
    LEVEL = 0.05

    def look(self, rows: Rows) -> str | None:
        values = _series(rows, self.KEY)
        if len(values) >= WINDOW and all(v > self.LEVEL for v in values[-WINDOW:]):
            return f"{values[-1]:.0%} of rollouts errored, above {self.LEVEL:.0%} for {WINDOW} steps"
        return None


class RewardDrop(Check):
    """Training reward well below its best for several steps: the run is unlearning."""

    name = "reward_drop"
    fix = ("lower the learning rate (trainer.lr) and resume from the checkpoint nearest the best step "
           "(prime rl run --resume STEP), or a KL penalty (trainer.kl_coef)")
    DROP = 0.2

    def look(self, rows: Rows) -> str | None:
        values = _series(rows, "reward_mean")
        if len(values) <= WINDOW:
            return None
        best = max(values[:-WINDOW])
        if all(v < best - self.DROP for v in values[-WINDOW:]):
            return f"reward {values[-1]:.3f}, down from its best {best:.3f}"
        return None


CHECKS: dict[str, type[Check]] = {check.name: check for check in
                                  (RewardSpread, EntropyCollapse, KLGrowth, RefKLRising, TruncationRising,
                                   ErrorsRising, RewardDrop)}
ALARM_NAMES = tuple(CHECKS)


class Monitor:
    """Runs every check after each step; :meth:`step` returns the alarms raised for the first time."""

    def __init__(self, history: Rows = ()):
        """``history``: the steps of a resumed run; what they already alarmed on was reported then, and is not again."""
        self.rows: list[dict[str, Any]] = []
        self.raised: set[str] = set()
        self.checks = [check() for check in CHECKS.values()]
        for row in history:
            self.step(row)

    def step(self, row: dict[str, Any]) -> list[Alarm]:
        self.rows.append(with_old_names(row))
        new = []
        for check in self.checks:
            if check.name in self.raised:
                continue
            seen = check.look(self.rows)
            if seen is not None:
                self.raised.add(check.name)
                new.append(Alarm(check.name, int(row.get("step", len(self.rows))), seen, check.fix))
        return new


def diagnose(steps: Rows) -> list[Alarm]:
    """Every alarm a finished run's steps raise, each at the step it first held."""
    monitor, found = Monitor(), []
    for row in steps:
        found += monitor.step(row)
    return found

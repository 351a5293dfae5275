"""Baseline checks: is there anything to learn before spending compute on training?

GRPO-style training learns only from groups whose rollouts score differently. A model that never
succeeds (reward ~0), always succeeds (reward near the maximum), or answers every example the same
way gives zero advantages and burns compute for nothing. The checks run the starting model on
training examples through the same rollout machinery as training and refuse, with the numbers,
when the run cannot teach. ``--skip-baseline`` overrides. The rollouts are an eval run of the
eval runner (``<rl run>/baseline/``, see ``rl_backend.runner.Trainer.baseline``); this module judges them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.core import runs, stats
from evalkit.core.errors import UserError
from evalkit.core.fileio import write_json_atomic
from evalkit.core.types import RolloutState
from rl_backend.config import BaselineConfig
from rl_backend.filtering import is_uniform

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class BaselineReport:
    num_examples: int
    rollouts_per_example: int
    attempts: int
    scored: int
    """Attempts with a reward (errored rollouts without one are left out of the mean and std)."""
    mean_reward: float
    std_reward: float
    diverse_groups: int
    diverse_fraction: float
    errors: int
    first_error: str | None
    thresholds: dict[str, float]
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        return data


def summarize(groups: Sequence[list[RolloutState]], config: BaselineConfig) -> BaselineReport:
    """Numbers and verdict for finished baseline groups."""
    n = sum(len(group) for group in groups)
    rewards = [state.reward for group in groups for state in group if state.scored]  # errors are not scores
    mean = stats.mean(rewards) if rewards else 0.0
    std = stats.pstdev(rewards, mean)  # any finite rewards (1e200): no OverflowError
    diverse = sum(1 for group in groups if not is_uniform(group))
    errored = [state.error for group in groups for state in group if state.error]
    report = BaselineReport(
        num_examples=len(groups),
        rollouts_per_example=len(groups[0]) if groups else 0,
        attempts=n,
        scored=len(rewards),
        mean_reward=mean,
        std_reward=std,
        diverse_groups=diverse,
        diverse_fraction=diverse / len(groups) if groups else 0.0,
        errors=len(errored),
        first_error=errored[0] if errored else None,
        thresholds={
            "min_reward": config.min_reward,
            "max_reward": config.max_reward,
            "min_diverse_groups": config.min_diverse_groups,
        },
    )
    report.problems = _problems(report, config)
    return report


def _problems(report: BaselineReport, config: BaselineConfig) -> list[str]:
    problems = []
    if report.attempts and report.errors == report.attempts:
        problems.append(
            f"all {report.attempts} baseline rollouts failed (first: {report.first_error}); "
            "fix the model or environment"
        )
        return problems
    if report.mean_reward < config.min_reward:
        problems.append(
            f"mean reward {report.mean_reward:.1%} after {report.attempts} attempts is below baseline.min_reward "
            f"{config.min_reward:g}: the task is too hard for this model (nothing to reinforce); use an easier task "
            "or a better system prompt (prime gepa run)"
        )
    if report.mean_reward > config.max_reward:
        problems.append(
            f"mean reward {report.mean_reward:.1%} over {report.attempts} attempts is above baseline.max_reward "
            f"{config.max_reward:g} (above {config.max_reward:.0%}): the task is too easy to learn much from; "
            "use a harder setting"
        )
    if report.diverse_fraction < config.min_diverse_groups:
        problems.append(
            f"only {report.diverse_groups}/{report.num_examples} groups ({report.diverse_fraction:.0%}) "
            "have non-identical "
            f"rewards, below baseline.min_diverse_groups {config.min_diverse_groups:g}: no learning signal; raise "
            "sampling.temperature or rollouts_per_example"
        )
    return problems


def combine(reports: dict[str, BaselineReport], config: BaselineConfig) -> BaselineReport:
    """Several environments' reports as one (their rollouts pooled); its problems are each
    environment's own, named, since an environment without a learning signal only costs compute."""
    n = sum(r.attempts for r in reports.values())
    scored = sum(r.scored for r in reports.values())  # means pool scored rollouts only: errors are not scores
    mean = sum(r.mean_reward * r.scored for r in reports.values()) / scored if scored else 0.0
    parts = [(r.scored, r.std_reward, r.mean_reward - mean) for r in reports.values()]
    scale = max((max(abs(std), abs(gap)) for _, std, gap in parts), default=0.0) or 1.0  # no overflow on squares
    spread = sum(count * ((std / scale) ** 2 + (gap / scale) ** 2) for count, std, gap in parts)
    groups = sum(r.num_examples for r in reports.values())
    diverse = sum(r.diverse_groups for r in reports.values())
    first = next((r.first_error for r in reports.values() if r.first_error), None)
    return BaselineReport(
        num_examples=groups,
        rollouts_per_example=max((r.rollouts_per_example for r in reports.values()), default=0),
        attempts=n,
        scored=scored,
        mean_reward=mean,
        std_reward=math.sqrt(spread / scored) * scale if scored else 0.0,
        diverse_groups=diverse,
        diverse_fraction=diverse / groups if groups else 0.0,
        errors=sum(r.errors for r in reports.values()),
        first_error=first,
        thresholds=dict(next(iter(reports.values())).thresholds) if reports else {},
        problems=[f"env '{name}': {problem}" for name, r in reports.items() for problem in r.problems],
    )


def groups_of(states: Sequence[RolloutState]) -> list[list[RolloutState]]:
    """Rollouts grouped by example, in example order (the eval runner returns them as groups finish)."""
    groups: dict[int, list[RolloutState]] = {}
    for state in states:
        groups.setdefault(state.example_id, []).append(state)
    return [sorted(groups[eid], key=lambda s: s.rollout_idx) for eid in sorted(groups)]


def refusal(report: BaselineReport) -> UserError:
    """The one-line error that stops training, with the numbers and the override."""
    return UserError("baseline check failed: " + "; ".join(report.problems) + " (pass --skip-baseline to train anyway)")


def run_checks(evals: Sequence[tuple[str, Callable[[], Any]]], config: BaselineConfig, rollouts_per_example: int,
               run_dir: Path, console: Console) -> dict[str, Any]:
    """Run each environment's baseline eval (``(name, run)`` pairs; ``run()`` returns an eval result
    with ``states``), judge them, write ``<run_dir>/baseline.json`` and print the verdicts.

    Returns what ``baseline.json`` holds; raises :func:`refusal` when the checks fail. The caller
    decides how the rollouts are made (the trainer's own sampler, or the eval runner's client when
    another trainer takes over after the checks).
    """
    started = time.perf_counter()
    reports = {}
    for name, run in evals:
        with console.status(f"baseline {name}: {config.num_examples} examples x {rollouts_per_example} rollouts ..."):
            result = run()
        reports[name] = summarize(groups_of(result.states), config)
        if len(evals) > 1:
            _print_verdict(console, reports[name], f" {name}")
    report = next(iter(reports.values())) if len(reports) == 1 else combine(reports, config)
    data = {**report.to_dict(), "seconds": round(time.perf_counter() - started, 2)}
    if len(reports) > 1:
        data["envs"] = {name: r.to_dict() for name, r in reports.items()}
    write_json_atomic(run_dir / runs.BASELINE, data)
    _print_verdict(console, report, "" if len(reports) == 1 else " (all environments)", data["seconds"])
    if not report.passed:
        raise refusal(report)
    return data


def _print_verdict(console: Console, report: BaselineReport, label: str, seconds: float | None = None) -> None:
    from rich.markup import escape

    verdict = "[green]ok[/green]" if report.passed else "[red]refused[/red]"
    took = f" ({seconds:.0f}s)" if seconds is not None else ""
    console.print(
        f"baseline{escape(label)} {verdict}: mean reward {report.mean_reward:.3f} over {report.attempts} rollouts, "
        f"{report.diverse_groups}/{report.num_examples} groups with varied rewards{took}"
    )

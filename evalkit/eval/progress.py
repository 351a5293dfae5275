"""The live progress bar of an eval: rollouts done/total, running mean reward, rate, errors.

The mean reward is over scored rollouts only (errors are not scores; see :mod:`evalkit.eval.summary`).

Updates are cheap counter bumps; rich redraws at a few Hz on its own thread, so the bar costs the
event loop almost nothing even at thousands of rollouts per second.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evalkit.core.stats import number
from evalkit.core.types import RolloutState


class EvalProgress:
    def __init__(self, total: int, done: int = 0, *, description: str = "eval", console: Console | None = None,
                 enabled: bool = True):
        self.total = total
        self.done = done
        self.errors = 0
        self._reward_sum = 0.0
        self._scored = 0
        self._new = 0
        self._started = time.perf_counter()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("reward {task.fields[reward]}"),
            TextColumn("{task.fields[rate]}/s"),
            TextColumn("err {task.fields[errors]}"),
            TimeElapsedColumn(),
            console=console,
            refresh_per_second=4,
            disable=not enabled,
        )
        self._task = self._progress.add_task(description, total=total, completed=done, reward="-", rate="-", errors=0)

    def __enter__(self) -> EvalProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def add_group(self, states: list[RolloutState]) -> None:
        for state in states:
            if state.scored:
                self._reward_sum += state.reward
                self._scored += 1
            self.errors += state.error is not None
        self._new += len(states)
        self.done += len(states)
        elapsed = time.perf_counter() - self._started
        self._progress.update(
            self._task,
            completed=self.done,
            reward=number(self._reward_sum / self._scored, 3) if self._scored else "-",
            rate=_rate(self._new / elapsed) if elapsed > 0 else "-",
            errors=self.errors,
        )


def _rate(value: float) -> str:
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"

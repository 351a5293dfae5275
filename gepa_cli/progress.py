"""What a person sees while GEPA runs, and what lands in ``gepa.log``.

Both are gepa callbacks/loggers: the library calls them; they never change its decisions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evalkit.core.redact import redact
from evalkit.core.types import RolloutState
from gepa_cli.budget import RolloutBudget

FLUSH_EVERY_S = 0.5
"""The longest a ``gepa.log`` line waits in memory. gepa logs a dozen lines an iteration; stamping, redacting
and writing each as it comes was ~2 ms of a 1 s run's search thread, done between its waves of rollouts."""


class FileLogger:
    """gepa's ``LoggerProtocol`` writing timestamped lines to ``gepa.log`` (and the screen with -v).

    A line is kept with its time and written, redacted, with the others of the last :data:`FLUSH_EVERY_S`
    (one redaction and one write for them all) at the next line after that, and all of them when the run
    ends (:meth:`close`, which the run's end calls whatever happened); a killed process loses that last part.
    """

    def __init__(self, path: Path, console: Console | None = None, verbose: bool = False):
        self.path = path
        self.console = console
        self.verbose = verbose
        self._handle = path.open("a", encoding="utf-8", errors="replace")  # a lone surrogate from a model: "?"
        self._pending: list[tuple[float, str]] = []
        self._flushed = time.monotonic()

    def log(self, message: str) -> None:
        self._pending.append((time.time(), str(message)))
        if self.verbose and self.console is not None:
            self.console.print(redact(str(message)), style="dim", markup=False, highlight=False)
        if time.monotonic() - self._flushed >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        """Write the lines kept so far (teacher replies and rollout errors may echo a key: redacted)."""
        self._flushed = time.monotonic()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        stamps: dict[int, str] = {}
        lines = []
        for when, message in pending:
            second = int(when)
            if second not in stamps:
                stamps[second] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second))
            lines += [f"{stamps[second]} {line}" for line in message.splitlines() or [""]]
        self._handle.write(redact("\n".join(lines)) + "\n")
        self._handle.flush()

    def close(self) -> None:
        self.flush()
        self._handle.close()


class ProgressReporter:
    """A rich bar over the rollout budget with the best validation score, accepted candidates and
    rollout errors (errored rollouts score 0 for gepa; the count says how many there were)."""

    def __init__(self, console: Console, budget: RolloutBudget, enabled: bool = True,
                 log: Callable[[str], None] | None = None):
        self.budget = budget
        self.enabled = enabled
        self.best_val: float | None = None
        self.seed_val: float | None = None
        self.accepted = 0
        self.errors = 0
        self._log = log
        self._progress = Progress(
            TextColumn("[bold]gepa[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("rollouts · best val {task.fields[best]} · accepted {task.fields[accepted]} · "
                       "errors {task.fields[errors]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self._task = self._progress.add_task(
            "gepa", total=budget.max_calls, completed=budget.used, best="-", accepted=0, errors=0
        )

    def __enter__(self) -> ProgressReporter:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._refresh()
        self._progress.stop()

    def _refresh(self) -> None:
        if not self.enabled:  # nothing to draw: the counts above are kept all the same
            return
        best = "-" if self.best_val is None else f"{self.best_val:.3f}"
        errors = f"[red]{self.errors}[/red]" if self.errors else "0"
        self._progress.update(self._task, completed=self.budget.used, best=best, accepted=self.accepted, errors=errors)

    # adapter hook
    def on_rollouts(self, n: int, reward_sum: float, errored: Sequence[RolloutState] = ()) -> None:
        if errored:
            self.errors += len(errored)
            if self._log is not None:
                first = errored[0]
                self._log(f"{len(errored)} of {n} rollouts errored (scored 0 for gepa); first: "
                          f"[{first.kind_of_error}] {first.error}")
        self._refresh()

    # gepa callbacks
    def on_valset_evaluated(self, event: Any) -> None:
        score = float(event["average_score"])
        if event["candidate_idx"] == 0 and self.seed_val is None:
            self.seed_val = score
        self.best_val = score if self.best_val is None else max(self.best_val, score)
        self._refresh()

    def on_candidate_accepted(self, event: Any) -> None:
        self.accepted += 1
        self._refresh()

    def restore(self, state: Any) -> None:
        """After a resume: show what the saved state already holds."""
        scores = list(state.program_full_scores_val_set)
        if scores:
            self.seed_val, self.best_val = scores[0], max(scores)
        self.accepted = max(0, len(scores) - 1)
        self._refresh()

"""How many intra-op threads the engine's decode steps use, chosen by measurement.

On an idle machine all cores are fastest. On a busy one (another process, the trainer, an event
loop doing real work) OpenMP's barriers wait for threads the OS has preempted, and a decode step
can get 10-20x slower with 2 threads than with 1 (measured on the 2-core dev box under load).
So the worker occasionally runs one step with the other setting and keeps whichever was faster,
probing less often while the current choice keeps winning.
"""

from __future__ import annotations

import torch

BASE_INTERVAL = 32
MAX_INTERVAL = 2048
MARGIN = 0.85
"""A probe must beat the current setting's step time by 15% to take over (steps are noisy)."""


class ThreadTuner:
    """Call :meth:`before_step` / :meth:`after_step` around each decode step of similar size."""

    def __init__(self, threads: int | None = None, adaptive: bool = True):
        self.best = max(1, threads or torch.get_num_threads())
        self.choices = sorted({self.best, 1}, reverse=True) if adaptive else [self.best]
        self._interval = BASE_INTERVAL
        self._countdown = BASE_INTERVAL
        self._last: tuple[int, float] | None = None  # (batch, seconds) of the last ordinary step
        self._probing: int | None = None

    @property
    def current(self) -> int:
        return self._probing or self.best

    def before_step(self) -> int:
        """The thread count to run the next step with (applied with ``torch.set_num_threads``)."""
        self._countdown -= 1
        if len(self.choices) > 1 and self._countdown <= 0 and self._last is not None:
            self._probing = next(c for c in self.choices if c != self.best)
        if torch.get_num_threads() != self.current:
            torch.set_num_threads(self.current)
        return self.current

    def after_step(self, batch: int, seconds: float) -> None:
        probe, self._probing = self._probing, None
        if probe is None:
            self._last = (batch, seconds)
            return
        last_batch, last_seconds = self._last or (batch, seconds)
        comparable = abs(batch - last_batch) <= max(1, last_batch // 8)
        if comparable and seconds < MARGIN * last_seconds:
            self.best, self._interval = probe, BASE_INTERVAL
        elif comparable:
            self._interval = min(self._interval * 2, MAX_INTERVAL)
        self._countdown = self._interval
        self._last = None

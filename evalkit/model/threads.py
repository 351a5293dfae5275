"""How many intra-op threads the engine's CPU decode steps use, chosen by measurement.

All cores are not always fastest. On a busy machine (another process, the trainer, an event loop
doing real work) OpenMP's barriers wait for threads the OS has preempted, and a decode step can
get 10-20x slower with 2 threads than with 1 (measured on the 2-core dev box under load). On a
many-core machine a small model's decode matmuls are too small to feed every core (reported: 16
threads no faster than 4 on a 16-core host). So the candidates are a ladder -- 1, 2, 4, ... up to
torch's thread count -- and the worker hill-climbs it: now and then it runs a few steps one rung
below or above the current choice (alternately) and moves when that was faster, probing less
often while the current choice keeps winning. A probe is judged by its best step against the best
of the steps just before it: the first step after a switch pays for oneDNN building kernels for
the new thread count, and single steps are noisy.

Another thread of the process may need cores for a while (the RL trainer, overlapping generation):
:meth:`ThreadTuner.limit` caps the ladder at what is left to the engine, and lifting the cap restores
the choice made before it.
"""

from __future__ import annotations

import torch

BASE_INTERVAL = 32
MAX_INTERVAL = 2048
PROBE_STEPS = 3
MARGIN = 0.85
"""A probe must beat the current setting by 15% to take over."""


def thread_ladder(top: int) -> list[int]:
    """1, 2, 4, ... below ``top``, and ``top`` itself."""
    rungs, size = [], 1
    while size < top:
        rungs.append(size)
        size *= 2
    return rungs + [top]


class ThreadTuner:
    """Call :meth:`before_step` / :meth:`after_step` around each decode step."""

    def __init__(self, threads: int | None = None, adaptive: bool = True):
        self.best = max(1, threads or torch.get_num_threads())
        self.top = self.best
        """The most threads the ladder may climb to (its ceiling, or the cap of :meth:`limit`)."""
        self._ceiling, self._adaptive, self._uncapped = self.best, adaptive, self.best
        self.choices = thread_ladder(self.best) if adaptive else [self.best]
        self._interval = BASE_INTERVAL
        self._countdown = BASE_INTERVAL
        self._recent: list[tuple[int, float]] = []  # (batch, seconds) of the last ordinary steps
        self._probe: list[tuple[int, float]] = []
        self._probing: int | None = None
        self._turn = 0
        self._losses = 0  # probes lost in a row since the last move

    def limit(self, top: int | None) -> None:
        """Use at most ``top`` threads from now on (``None``: the ceiling again, with the choice made
        before the cap); any probe in flight is dropped, since its comparison mixes both settings.
        Call it on the thread that runs the steps: it applies the new count at once."""
        top = self._ceiling if top is None else max(1, min(top, self._ceiling))
        if top == self.top:
            return
        if self.top == self._ceiling:
            self._uncapped = self.best
        self.top = top
        self.choices = thread_ladder(top) if self._adaptive else [top]
        self.best = min(self._uncapped, top) if self._adaptive else top
        self._probing, self._probe, self._recent, self._losses = None, [], [], 0
        self._countdown = self._interval = BASE_INTERVAL
        torch.set_num_threads(self.best)

    @property
    def current(self) -> int:
        return self._probing or self.best

    def _neighbours(self) -> list[int]:
        index = self.choices.index(self.best)
        return [self.choices[i] for i in (index - 1, index + 1) if 0 <= i < len(self.choices)]

    def before_step(self) -> int:
        """The thread count to run the next step with (applied with ``torch.set_num_threads``)."""
        if self._probing is None and len(self.choices) > 1:
            self._countdown -= 1
            if self._countdown <= 0 and len(self._recent) == PROBE_STEPS:
                neighbours = self._neighbours()
                self._probing = neighbours[self._turn % len(neighbours)]
                self._turn += 1
        if torch.get_num_threads() != self.current:
            torch.set_num_threads(self.current)
        return self.current

    def after_step(self, batch: int, seconds: float) -> None:
        if self._probing is None:
            self._recent = (self._recent + [(batch, seconds)])[-PROBE_STEPS:]
            return
        self._probe.append((batch, seconds))
        if len(self._probe) < PROBE_STEPS:
            return
        before, during = self._recent, self._probe
        batches = [b for b, _ in before + during]
        comparable = max(batches) - min(batches) <= max(1, max(batches) // 8)
        if comparable and min(s for _, s in during) < MARGIN * min(s for _, s in before):
            self.best, self._interval, self._losses = self._probing, BASE_INTERVAL, 0
        elif comparable:
            self._losses += 1
            if self._losses >= len(self._neighbours()):  # every direction lost: look less often
                self._interval, self._losses = min(self._interval * 2, MAX_INTERVAL), 0
        self._countdown = self._interval
        self._probing, self._probe, self._recent = None, [], []

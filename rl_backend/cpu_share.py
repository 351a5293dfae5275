"""How the trainer and the sampler share a CPU while they overlap (``trainer.async_level >= 1``).

Generation of step n+1 runs on the engine's worker thread while this (the trainer's) thread trains
step n. Both are torch intra-op pools; left alone each takes every core, and two pools of all cores
oversubscribe the machine (OpenMP workers spin and wait for preempted peers at every barrier).

While a training step runs, the engine is capped at its share of the cores (the cores the trainer's
half leaves, at least one), and the trainer uses either half the cores or all of them: whichever gave
the shorter step cycle (training start to the next training start, so the wait for the sampler's next
batch counts), measured, each tried again every :data:`REPROBE` steps since load changes. Half wins
when generation and training are alike (each runs on its own cores); all wins when training dominates
(generation is done early, and a trainer left on half the cores would idle the rest: measured 2x
slower than on-policy beside a busy loop). Between training steps the engine may use every core.

Neither side is deprioritised: an earlier version reniced the trainer thread to 19, and once another
process wanted the CPU the trainer got 2% of a core and a step took 4-14x longer than on-policy
(docs/engine-speed.md).

On CUDA, without an in-process engine (vLLM), or on-policy (``async_level = 0``: nothing overlaps),
nothing is split.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

REPROBE = 8
"""Every this many steps the choice not in use is tried once more."""


def split(cores: int) -> tuple[int, int]:
    """(trainer threads, sampler threads) for ``cores`` cores: the trainer half rounded down, each at least one."""
    trainer = max(1, cores // 2)
    return trainer, max(1, cores - trainer)


class CpuShare:
    """Call :meth:`training` around each training step; it splits the cores only when it should."""

    def __init__(self, engine: Any | None, overlap: bool, cores: int | None = None, cuda: bool | None = None,
                 clock: Callable[[], float] = time.perf_counter):  # fmt: skip
        if cuda is None:
            import torch

            cuda = torch.cuda.is_available()
        self.engine = engine
        self.active = bool(overlap and engine is not None and not cuda)
        self.cores = cores or os.cpu_count() or 1
        self.trainer_threads, self.sampler_threads = split(self.cores)
        self.choices = sorted({self.trainer_threads, self.cores})
        """The trainer's thread counts to choose from: half the cores, all of them."""
        self.cycle: dict[int, float] = {}
        """The latest step cycle (seconds) measured with each choice."""
        self._clock = clock
        self._last: tuple[int, float] | None = None  # (choice, start) of the step in progress
        self._steps = 0

    def next_choice(self) -> int:
        """The trainer's threads for the coming step: each choice once, then the faster, the other
        again every :data:`REPROBE` steps."""
        untried = [c for c in self.choices if c not in self.cycle]
        if untried:
            return untried[0]
        best = min(self.choices, key=lambda c: self.cycle[c])
        if self._steps % REPROBE == 0:
            return next(c for c in self.choices if c != best) if len(self.choices) > 1 else best
        return best

    @contextlib.contextmanager
    def training(self) -> Iterator[None]:
        """While the block runs: this thread at :meth:`next_choice`'s count, the engine capped at
        :attr:`sampler_threads`; afterwards both as before (the engine uncapped)."""
        if not self.active:
            yield
            return
        import torch

        now = self._clock()
        if self._last is not None:
            self.cycle[self._last[0]] = now - self._last[1]
        self._steps += 1
        threads = self.next_choice()
        self._last = (threads, now)
        before = torch.get_num_threads()
        self.engine.share_cpu(self.sampler_threads)
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)
            self.engine.share_cpu(None)

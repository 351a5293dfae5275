"""How the trainer and the sampler share a CPU while they overlap (``trainer.async_level >= 1``).

Generation of step n+1 runs on the engine's worker thread while this (the trainer's) thread trains
step n. Both are torch intra-op pools; left alone each takes every core, and two pools of all cores
oversubscribe the machine (OpenMP workers spin and wait for preempted peers at every barrier).

Each training step runs in one of three ways, whichever gave the shortest step cycle (training start
to the next training start, so the wait for the sampler's next batch counts): each is tried once, then
the fastest is kept and the others tried again every :data:`REPROBE` steps, since load changes.

* ``half``: the trainer on half the cores, the engine capped at the rest (both at once on their own cores);
* ``all``: the trainer on every core, the engine still capped at its share (training dominates:
  generation is done early, and a trainer held to half would idle the rest; measured 2x slower than
  on-policy beside a busy loop);
* ``serial``: the trainer first waits for the generation in flight, then trains on every core: what an
  on-policy step costs, so an overlapped run is never slower than on-policy by more than the noise of
  the measurement (when the CPU is too busy for two things at once, as with a busy loop on 2 cores).

Between training steps the engine may use every core.

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
"""Every this many steps a choice not in use is tried once more (in turn)."""
HALF, ALL, SERIAL = "half", "all", "serial"


def split(cores: int) -> tuple[int, int]:
    """(trainer threads, sampler threads) for ``cores`` cores: the trainer half rounded down, each at least one."""
    trainer = max(1, cores // 2)
    return trainer, max(1, cores - trainer)


class CpuShare:
    """Call :meth:`training` around each training step; it splits the cores only when it should."""

    def __init__(self, engine: Any | None, overlap: bool, cores: int | None = None, cuda: bool | None = None,
                 clock: Callable[[], float] = time.perf_counter, drain: Callable[[], None] | None = None):  # fmt: skip
        if cuda is None:
            import torch

            cuda = torch.cuda.is_available()
        self.engine = engine
        self.active = bool(overlap and engine is not None and not cuda)
        self.cores = cores or os.cpu_count() or 1
        self.trainer_threads, self.sampler_threads = split(self.cores)
        self.choices = ([HALF] if self.trainer_threads < self.cores else []) + [ALL] + ([SERIAL] if drain else [])
        """The ways to run a training step (see the module docstring)."""
        self.cycle: dict[str, float] = {}
        """The latest step cycle (seconds) measured with each choice."""
        self.drained_s = 0.0
        """Seconds the last ``serial`` step waited for the sampler (0 otherwise): waiting, not training."""
        self._clock = clock
        self._drain = drain
        self._last: tuple[str, float] | None = None  # (choice, start) of the step in progress
        self._steps = 0

    def next_choice(self) -> str:
        """How to run the coming step: each choice once, then the fastest, the others in turn every
        :data:`REPROBE` steps."""
        untried = [c for c in self.choices if c not in self.cycle]
        if untried:
            return untried[0]
        best = min(self.choices, key=lambda c: self.cycle[c])
        others = [c for c in self.choices if c != best]
        if others and self._steps % REPROBE == 0:
            return others[(self._steps // REPROBE - 1) % len(others)]
        return best

    @contextlib.contextmanager
    def training(self) -> Iterator[None]:
        """While the block runs: this thread and the engine as :meth:`next_choice` says (a ``serial``
        step first waits for the sampler, :attr:`drained_s`); afterwards both as before (the engine uncapped)."""
        self.drained_s = 0.0
        if not self.active:
            yield
            return
        import torch

        now = self._clock()
        if self._last is not None:
            self.cycle[self._last[0]] = now - self._last[1]
        self._steps += 1
        choice = self.next_choice()
        self._last = (choice, now)
        if choice == SERIAL and self._drain is not None:
            self._drain()
            self.drained_s = self._clock() - now
        before = torch.get_num_threads()
        self.engine.share_cpu(None if choice == SERIAL else self.sampler_threads)
        torch.set_num_threads(self.trainer_threads if choice == HALF else self.cores)
        try:
            yield
        finally:
            torch.set_num_threads(before)
            self.engine.share_cpu(None)

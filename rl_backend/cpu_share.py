"""How the trainer and the sampler share a CPU while they overlap (``trainer.async_level >= 1``).

Generation of step n+1 runs on the engine's worker thread while this (the trainer's) thread trains
step n. Both are torch intra-op pools; left alone each takes every core, and two pools of all cores
oversubscribe the machine (OpenMP workers spin and wait for preempted peers at every barrier).

The split: only while a training step runs, the trainer uses ``trainer_threads`` (half the cores,
rounded down, at least one) and the engine at most the rest; the rest of the time the engine may
use every core again (its tuner picks how many). Neither side is deprioritised: an earlier version
reniced the trainer thread to 19 instead, and once another process wanted the CPU the trainer got
2% of a core and a step took 4x longer than it would have without overlap. With cores of its own
each side gets the share the OS gives any thread, so an overlapped step is at worst about
``max(generation, training)`` on half the cores; bench/rl_vs_trl.py measures it beside a busy loop
(docs/engine-speed.md).

On CUDA, or without an in-process engine (vLLM), or on-policy (``async_level = 0``: nothing
overlaps), nothing is split.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any


def split(cores: int) -> tuple[int, int]:
    """(trainer threads, sampler threads) for ``cores`` cores: the trainer half rounded down, each at least one."""
    trainer = max(1, cores // 2)
    return trainer, max(1, cores - trainer)


class CpuShare:
    """Call :meth:`training` around each training step; it splits the cores only when it should."""

    def __init__(self, engine: Any | None, overlap: bool, cores: int | None = None, cuda: bool | None = None):
        if cuda is None:
            import torch

            cuda = torch.cuda.is_available()
        self.engine = engine
        self.active = bool(overlap and engine is not None and not cuda)
        self.cores = cores or os.cpu_count() or 1
        self.trainer_threads, self.sampler_threads = split(self.cores)

    @contextlib.contextmanager
    def training(self) -> Iterator[None]:
        """While the block runs: this thread at :attr:`trainer_threads`, the engine capped at
        :attr:`sampler_threads`; afterwards both as before (the engine uncapped)."""
        if not self.active:
            yield
            return
        import torch

        before = torch.get_num_threads()
        self.engine.share_cpu(self.sampler_threads)
        torch.set_num_threads(self.trainer_threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)
            self.engine.share_cpu(None)

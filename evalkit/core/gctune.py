"""Garbage collection held back while rollouts run: the collector, not the harness, was a third of its CPU.

Python's cyclic collector runs a young-generation pass every 700 net allocations and walks every
tracked object in a full pass. A run at thousands of rollouts per second allocates that many objects
in well under a millisecond, while everything imported (torch, datasets, the environment's rows) is
walked again on each full pass. Measured on the eval bench (``bench/eval_harness.py``): ~0.12 ms of
CPU per rollout went to the collector, more than the harness's own work.

:func:`relaxed_gc` is entered around a batch of rollouts (:func:`evalkit.eval.rollouts.run_groups`): it
freezes the objects alive at the start (``gc.freeze``: they are left out of every pass until the
batch ends) and raises the thresholds, so young passes come every :data:`RUN_THRESHOLDS` allocations.
Garbage cycles are still collected, only in fewer passes. Nested and concurrent batches (GEPA and RL
run several at once, from several threads) share one setting; the last to leave restores the
previous thresholds and unfreezes.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

RUN_THRESHOLDS = (20_000, 20, 20)
"""``gc.set_threshold`` while rollouts run (the default is 700, 10, 10)."""

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, ...] | None = None


@contextmanager
def relaxed_gc() -> Iterator[None]:
    """Freeze what is alive and raise the collection thresholds until the outermost batch ends."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(*RUN_THRESHOLDS)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.unfreeze()
                if _saved is not None:
                    gc.set_threshold(*_saved)

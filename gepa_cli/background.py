"""The run's per-iteration files, written by one thread beside the search instead of inside it.

Why: rewriting a small file through a temp file and a rename costs 1-5 ms on ext4 (the rename over an
existing file starts its data's writeback), and a run rewrites several after every iteration (gepa's state,
the candidate files). Rollouts wait on none of them, so they need not wait in line: the search thread
takes a snapshot (bytes, or a private copy of the state), which the library may change right after, and
the writer thread writes it while the next iteration's model calls are under way.

What this keeps: each file is still replaced in one rename (a killed run leaves the old or the new
version); writes land in the order they were asked for; a failed write is raised on the search thread at
the next iteration boundary (:class:`StateSaver`) and when the run ends (:meth:`BackgroundWriter.close`),
so it never passes silently. What it costs: a run killed while a write waits in line resumes from the
snapshot before it. The rollout budget's records go through this thread too, queued ahead of need, and
each is on disk before any rollout it allows (:mod:`gepa_cli.budget`).

How often: at most once per :data:`SAVE_EVERY_S` (:class:`Throttle`), counted from the search's start, and
always at the run's end. The writer's work (pickling the state, JSON, renames) holds the interpreter lock
while the search thread and the rollouts' event loop want it, so on a fast run (iterations of ~0.1 s) saving
after every iteration slowed the search itself; on a run of real models an iteration takes longer than that
and every one is saved. A run killed or interrupted mid-search resumes from the last saved iteration, up to
that long before (the rollouts spent since stay counted; one killed in its first second re-runs the seed's
validation).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any


class BackgroundWriter:
    """One thread that runs file writes in the order they were submitted."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gepa-files")
        self._pending: list[Future[None]] = []

    def submit(self, write: Callable[..., None], *args: Any, **kwargs: Any) -> Future[None]:
        """Queue ``write(*args, **kwargs)``; first raises the error of any earlier write that failed."""
        self.check()
        future = self._pool.submit(write, *args, **kwargs)
        self._pending.append(future)
        return future

    def check(self) -> None:
        """Raise the first error of a finished write (the writes still running are left alone)."""
        done = [future for future in self._pending if future.done()]
        self._pending = [future for future in self._pending if not future.done()]
        for future in done:
            if not future.cancelled():
                future.result()

    def drain(self) -> None:
        """Wait for every queued write; raise the first error."""
        pending, self._pending = self._pending, []
        errors = [future.exception() for future in pending if not future.cancelled()]
        for error in errors:
            if error is not None:
                raise error

    def close(self) -> None:
        """Wait for every queued write and stop the thread; raise the first error."""
        try:
            self.drain()
        finally:
            self._pool.shutdown(wait=True)


SAVE_EVERY_S = 1.0
"""The least time between two per-iteration saves (gepa's state; the candidate files), module doc."""


class Throttle:
    """``due()`` is true at most once per ``every_s`` seconds: at its first call (``wait_first=False``), or
    once ``every_s`` has passed since it was made."""

    def __init__(self, every_s: float = SAVE_EVERY_S, *, wait_first: bool = False):
        self.every_s = every_s
        self._last: float | None = time.monotonic() if wait_first else None

    def due(self) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < self.every_s:
            return False
        self._last = now
        return True


class StateSaver:
    """Saves gepa's state (``gepa_state.bin`` and its JSON files, by gepa's own ``GEPAState.save``) from
    the writer thread, at the points where gepa saves it when it owns the run dir (at most once per
    ``every_s``: module doc).

    gepa calls its stop callbacks with the state at each iteration boundary (after the seed's validation,
    after every iteration), just before it would save it; this one never stops the run, it snapshots the
    state there. It must come first among the stoppers, since gepa stops asking at the first that fires.
    The adapter's state (``get_adapter_state``) goes into the snapshot as gepa would put it. gepa ends its
    loop only when a stopper fires (or by an exception), so the state at the last save point is the final
    state: :meth:`save_last` saves it when that point was skipped.
    """

    def __init__(self, state_dir: Path, writer: BackgroundWriter, adapter: Any, every_s: float = SAVE_EVERY_S):
        self.state_dir = state_dir
        self.writer = writer
        self.adapter = adapter
        self.throttle = Throttle(every_s, wait_first=True)
        self.behind = False
        """A save point was skipped since the last save (:meth:`save_last` saves the final state)."""

    def __call__(self, gepa_state: Any) -> bool:
        self.writer.check()  # a failed write fails the run here, saved or not
        self.behind = not self.throttle.due()
        if not self.behind:
            self.writer.submit(_save, snapshot(gepa_state, self.adapter), self.state_dir)
        return False

    def save_last(self, final_state: Any) -> None:
        """When gepa's loop has ended: save its final state if the last save point was skipped."""
        if self.behind:
            self.writer.submit(_save, snapshot(final_state, self.adapter), self.state_dir)
            self.behind = False


def snapshot(gepa_state: Any, adapter: Any) -> Any:
    """A private copy of ``gepa_state`` holding what ``GEPAState.save`` writes (runtime hooks left out)."""
    from gepa.core.state import GEPAState

    excluded = getattr(GEPAState, "_EXCLUDED_FROM_SERIALIZATION", frozenset({"_budget_hooks"}))
    data = {key: value for key, value in vars(gepa_state).items() if key not in excluded}
    data["adapter_state"] = dict(adapter.get_adapter_state())
    copy = GEPAState.__new__(GEPAState)
    copy.__dict__.update(pickle.loads(pickle.dumps(data)))
    return copy


def _save(state: Any, state_dir: Path) -> None:
    state.save(str(state_dir))

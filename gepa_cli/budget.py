"""The rollout budget, kept by us rather than by the library, and the stoppers that read it.

Why not gepa's ``max_metric_calls``: the library checks it only at the top of an iteration, so the
iteration that crosses the line still runs its minibatches and a full validation pass (overshoot),
and on resume it re-runs the seed's validation pass without counting it. Here every rollout is
*reserved* before it starts and the count is written to disk first, so a run killed mid-evaluation
still counts what it may have spent, and the count carries over to ``--resume``.

The disk write is a file sync, which costs as much as a fast rollout on a busy disk, so the count is not
written before every evaluation: the file holds a *reservation* (``reserved``), a ceiling the run may spend
up to without writing again. A write reserves :data:`RESERVE_AHEAD` iterations' worth (``chunk`` each) past
the rollouts used, capped by the budget. In a run (the runner gives the budget its writer thread) the writes
are queued on that thread ahead of need: the first at the start (past the seed's validation pass), the next
at an iteration's end when what is reserved may not pay for the iteration after the next one; an evaluation
that would pass the ceiling waits for the queued write (normally done by then), or makes one itself. A
resumed run counts the whole reservation as spent (``max(used, reserved)``), so a killed (SIGKILL) or
powered-off run never overspends; the price is that a kill may forfeit up to ``RESERVE_AHEAD`` iterations'
unspent reservation, and that a killed run's file holds its ``used`` and ``reflection_calls`` as of its last
write (they are reported; only the reservation limits anything). A run that ends any other way (budget,
stopper, error, Ctrl-C, SIGTERM) writes its exact count with no reservation (:meth:`RolloutBudget.settle`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.fileio import MAX_RUN_OBJECT_BYTES, FileRefused, read_regular
from evalkit.core.readback import BUDGET, parse_line


def saved_usage(path: Path) -> tuple[int, int]:
    """``(rollouts used, reflection calls)`` from a run's ``budget.json`` ((0, 0) when there is none).

    A damaged file stops the command (``UserError``): what the run spent is unknown, and guessing low
    would let a resume overspend the budget. A killed run's reservation (``reserved``, see the module
    doc) counts as spent.
    """
    try:
        data = read_regular(path, MAX_RUN_OBJECT_BYTES)
    except FileNotFoundError:
        return 0, 0
    except FileRefused as exc:
        raise UserError(f"cannot read {path}: {exc.why}; restore the run's budget.json, or start a new run") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    saved, why = parse_line(data, BUDGET)
    if saved is None:
        raise UserError(f"{path} is damaged ({why}), so the rollouts this run spent are unknown; restore it, "
                        "or start a new run")
    return max(saved.get("used", 0), saved.get("reserved", 0)), saved.get("reflection_calls", 0)


class BudgetExceeded(Exception):
    """An evaluation asked for more rollouts than remain; nothing of it was run."""


RESERVE_AHEAD = 4
"""Iterations' worth a ``budget.json`` write reserves past the rollouts used (module doc). Measured on
``bench/gepa_gain.py`` (budget 200, ~10 iterations of 6-24 rollouts): one iteration's worth, synced on the
search thread at each iteration's end, cost ~10 syncs (1-2 ms each) a run; four, queued ahead on the writer
thread, cost 3-4 writes a run and no wait on the search thread. A kill forfeits at most four iterations'
unspent rollouts (on that bench, 96 of 200 at worst; on a budget of thousands, a few percent)."""


class RolloutBudget:
    """Counts task-model rollouts against ``max_calls``; persisted to ``path`` as a reservation (module doc).

    ``chunk``: one iteration's most (the runner sets it); a write reserves ``ahead`` chunks past the
    rollouts used. ``chunk=0`` writes before every evaluation that spends anything. ``before_sync``: called
    before the first synced write (the runner makes the run's ``metadata.json`` durable there, so a run that
    has spent anything can be resumed). ``submit``: runs a write on another thread (the runner's writer), so
    that a reservation is written ahead of need (:meth:`prefetch`) while the search goes on.
    """

    def __init__(self, max_calls: int, path: Path | None = None, chunk: int = 0, ahead: int = RESERVE_AHEAD,
                 before_sync: Callable[[], None] | None = None, submit: Callable[..., Future[None]] | None = None):
        self.max_calls = max_calls
        self.path = path
        self.chunk = chunk
        self.ahead = ahead
        self.before_sync = before_sync
        self.submit = submit
        self.used = 0
        self.reflection_calls = 0
        if path is not None:
            self.used, self.reflection_calls = saved_usage(path)
        self.reserved = self.used
        """The ceiling on disk: a resumed run counts this much as spent."""
        self._written = (self.used, self.reserved, self.reflection_calls)
        self._pending: tuple[Future[None], int] | None = None
        """A write queued on the other thread, and the ceiling it writes."""

    @property
    def remaining(self) -> int:
        return max(0, self.max_calls - self.used)

    def reserve(self, n: int) -> None:
        """Claim ``n`` rollouts before running them; refuses (raises) rather than overshoot. Returns only
        when they are within the reservation on disk: a write queued ahead is waited for, else one is made."""
        if n > self.remaining:
            raise BudgetExceeded(f"{n} rollouts requested but only {self.remaining} of {self.max_calls} remain")
        self.used += n
        if self.used > self.reserved and self._pending is not None:
            future, ceiling = self._pending
            self._pending = None
            future.result()  # its error (a failed write) stops the evaluation before any rollout
            self.reserved = ceiling
        if self.used > self.reserved:
            self._extend()

    def count_reflection_call(self) -> None:
        """Counted in memory; written with the next checkpoint (the count is reported, it limits nothing)."""
        self.reflection_calls += 1

    def checkpoint(self) -> None:
        """At an iteration's end (the runner calls it): extend the reservation when what is left of it may not
        pay for the next iteration, so that the write falls between iterations rather than inside one (with
        ``submit``: when it may not pay for the one after, written meanwhile). None when the budget cannot pay
        for another iteration (:class:`BudgetStopper` ends the run there)."""
        if self.used + self.chunk > self.max_calls:
            return
        if self.submit is not None:
            self.prefetch(2 * self.chunk)
        elif self.reserved < self.used + self.chunk:
            self._extend()

    def prefetch(self, upcoming: int, *, first: int = 0) -> None:
        """Queue a write (on ``submit``'s thread) of a reservation ``ahead`` chunks past the rollouts used
        (plus ``first``, rollouts about to be claimed) when the next ``upcoming`` may pass what is written or
        queued; the :meth:`reserve` that needs it waits for it."""
        ceiling = self._pending[1] if self._pending is not None else self.reserved
        if self.submit is None or self.path is None or self.used + upcoming <= ceiling:
            return
        target = min(self.max_calls, self.used + first + self.chunk * self.ahead)
        if self._pending is not None:  # one in flight at a time: the later one replaces it in reserve()
            self._pending[0].result()
            self.reserved = self._pending[1]
        before, self.before_sync = self.before_sync, None
        self._pending = (self.submit(_write_after, before, self.path, self._record(self.used, target)), target)
        self._written = (self.used, target, self.reflection_calls)

    def _extend(self) -> None:
        """Write the count and a reservation ``ahead`` chunks past it (at least what is used), synced."""
        self.reserved = max(self.used, min(self.max_calls, self.used + self.chunk * self.ahead))
        if self.before_sync is not None and self.path is not None:
            first, self.before_sync = self.before_sync, None
            first()
        self._save(sync=True)

    def settle(self, sync: bool = True) -> None:
        """Write the exact count with no reservation beyond it: the run is ending and spends nothing more
        (``sync=False``: the caller syncs the file, with the run's last files). A queued write lands first
        (its error is the writer's to report)."""
        if self._pending is not None:
            wait([self._pending[0]])
            self._pending = None
        self.reserved = self.used
        self._save(sync)

    def _record(self, used: int, reserved: int) -> bytes:
        return json.dumps({"max_calls": self.max_calls, "used": used, "reserved": reserved,
                           "reflection_calls": self.reflection_calls}).encode()

    def _save(self, sync: bool) -> None:
        state = (self.used, self.reserved, self.reflection_calls)
        if self.path is None or state == self._written:
            return
        write_record(self.path, self._record(self.used, self.reserved), sync=sync)
        self._written = state


def _write_after(before: Callable[[], None] | None, path: Path, record: bytes) -> None:
    """A queued record: first what must be durable before it (raising its error), then the synced record."""
    if before is not None:
        before()
    write_record(path, record)


RECORD_BYTES = 256
"""``budget.json``'s fixed size: every write overwrites the same bytes, within one disk sector."""


def write_record(path: Path, record: bytes, *, sync: bool = True) -> None:
    """Overwrite ``path`` in place with ``record`` padded to :data:`RECORD_BYTES`, then sync its data
    (``sync=False``: the caller syncs it, before anything relies on it).

    Why not a temp file and a rename (:func:`evalkit.core.fileio.write_bytes_atomic`): that costs a new
    file, a rename and a metadata sync per write, several ms on a busy disk. One ``pwrite`` of a fixed-size
    record cannot be half done when the process is killed, and the data sync makes it durable before any
    rollout it reserves starts. A write torn by a power loss reads back as damaged JSON, and
    :func:`saved_usage` refuses to guess the count from it.
    """
    if len(record) >= RECORD_BYTES:
        raise ValueError(f"budget record over {RECORD_BYTES} bytes")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size != RECORD_BYTES:  # new, or an older primekit's file of another size
            os.ftruncate(fd, RECORD_BYTES)
        os.pwrite(fd, record.ljust(RECORD_BYTES - 1) + b"\n", 0)
        if sync:
            getattr(os, "fdatasync", os.fsync)(fd)
    finally:
        os.close(fd)


MERGE_SUBSAMPLE = 5
"""Validation examples gepa scores a merged candidate on before deciding to validate it fully."""


class BudgetStopper:
    """Stop before an iteration that might not be affordable.

    One reflective iteration costs at most ``2 * minibatch_size`` rollouts (parent and child on the
    minibatch) plus ``num_val`` when the child is accepted; starting one that cannot pay for its
    validation pass would waste the minibatch rollouts on a candidate that can never be scored.
    """

    def __init__(self, budget: RolloutBudget, minibatch_size: int, num_val: int, *, proposals: int = 1,
                 accepts: int = 1, merge: bool = False):
        self.budget = budget
        # several proposals per iteration: each pays its two minibatches, and up to ``accepts`` validate;
        # a merge iteration scores the merged candidate on MERGE_SUBSAMPLE validation examples first
        reflective = proposals * 2 * minibatch_size + accepts * num_val
        self.iteration_cost = max(reflective, MERGE_SUBSAMPLE + num_val) if merge else reflective

    def __call__(self, gepa_state: Any) -> bool:
        return self.budget.remaining < self.iteration_cost


class StopAtScoreStopper:
    """``--stop-at-score``: stop as soon as some candidate's mean validation score reaches ``score``.

    (verifiers' ``--perfect-score`` does something else: it only skips reflecting on minibatches the
    parent already aces; the run goes on. That one is passed to the library as is.)
    """

    def __init__(self, score: float):
        self.score = score
        self.reached = False

    def __call__(self, gepa_state: Any) -> bool:
        scores = list(gepa_state.program_full_scores_val_set)
        self.reached = bool(scores) and max(scores) >= self.score
        return self.reached


WARN_BELOW = 3
"""Fewer accepted proposals than this fit in the budget: warn (GEPA improves over several rounds)."""


@dataclass(frozen=True)
class BudgetPlan:
    """What a rollout budget buys, computed before anything is spent (the preflight).

    The seed's validation pass costs ``val`` rollouts (nothing when a resumed run already did it).
    Each proposal scores the parent and the child on one minibatch (``2 * minibatch``) and, when the
    child is accepted, its validation pass (``accept``: ``val``, or the subsample size). With several
    proposals per iteration an iteration pays that ``proposals`` times, and up to ``accepts`` of them
    validate. :class:`BudgetStopper` starts an iteration only when the acceptance could be paid too, so
    the number of iterations lies between ``min_proposals`` (every one accepted, every allowed merge
    tried and accepted) and ``max_proposals`` (none accepted).
    """

    budget: int
    val: int
    minibatch: int
    used: int = 0
    seed_done: bool = False
    accept: int | None = None
    proposals: int = 1
    accepts: int = 1
    merges: int = 0

    @property
    def seed_cost(self) -> int:
        return 0 if self.seed_done else self.val

    @property
    def per_proposal(self) -> int:
        return 2 * self.minibatch * self.proposals

    @property
    def on_acceptance(self) -> int:
        return (self.val if self.accept is None else self.accept) * self.accepts

    @property
    def merge_cost(self) -> int:
        """The most the allowed merges may spend (each: a subsample, then a validation pass)."""
        return self.merges * (MERGE_SUBSAMPLE + (self.val if self.accept is None else self.accept))

    @property
    def after_seed(self) -> int:
        return self.budget - self.used - self.seed_cost

    @property
    def min_proposals(self) -> int:
        return max(0, (self.after_seed - self.merge_cost) // (self.per_proposal + self.on_acceptance))

    @property
    def max_proposals(self) -> int:
        if self.after_seed < self.per_proposal + self.on_acceptance:
            return 0
        return (self.after_seed - self.on_acceptance) // self.per_proposal

    @property
    def minimum_budget(self) -> int:
        """The smallest ``-B`` that buys one proposal (with the seed and its acceptance paid)."""
        return self.used + self.seed_cost + self.per_proposal + self.on_acceptance

    def line(self) -> str:
        count = (
            f"{self.min_proposals}"
            if self.min_proposals == self.max_proposals
            else f"{self.min_proposals}-{self.max_proposals}"
        )
        spent = f" ({self.used} already spent)" if self.used else ""
        seed = f"seed validation {self.seed_cost}" if not self.seed_done else "seed validated already"
        each = f"2x{self.minibatch}" if self.proposals == 1 else f"{self.proposals}x2x{self.minibatch}"
        merges = f"; up to {self.merges} merges, {self.merge_cost} in all" if self.merges else ""
        return (f"budget {self.budget}{spent} buys about {count} proposals ({seed}, each proposal "
                f"{each} + {self.on_acceptance} on acceptance{merges})")

    def check(self) -> None:
        """UserError when the budget buys no proposal, naming the flags to change."""
        if self.max_proposals > 0:
            return
        raise UserError(
            f"{self.line().replace('buys about 0 proposals', 'buys no proposal')}: raise -B/--max-calls to at least "
            f"{self.minimum_budget}, or lower -N/--num-val ({self.val} validation examples) or "
            f"--minibatch-size ({self.minibatch})"
        )

    def warning(self) -> str | None:
        """A warning when fewer than :data:`WARN_BELOW` accepted proposals fit, else None."""
        if self.min_proposals >= WARN_BELOW:
            return None
        wanted = self.used + self.seed_cost + self.merge_cost + WARN_BELOW * (self.per_proposal + self.on_acceptance)
        return (
            f"warning: the budget pays for only {self.min_proposals} accepted proposal(s); GEPA usually needs several "
            f"rounds to improve a prompt: raise -B/--max-calls (to {wanted} for {WARN_BELOW}), or lower -N/--num-val "
            f"or --minibatch-size"
        )


class FatalStopper:
    """Stop when the holder (the proposer) recorded an error the library would otherwise swallow."""

    def __init__(self, holder: Any):
        self.holder = holder

    def __call__(self, gepa_state: Any) -> bool:
        return getattr(self.holder, "fatal", None) is not None

"""The training environments of one run and the fixed order in which their rows are drawn.

Several ``[[env]]`` tables train one policy on a mixture of their rows, as hosted training and
prime-rl do (``[buffer] env_ratios``). Each row stays with its environment: it is rolled out and
scored by that environment alone, and metrics, rollout rows and eval folders carry the
environment's label.

The order is a pure function of ``(seed, cursor)``, so ``--resume`` (which stores the cursor)
draws exactly the examples the original run would have:

* one environment: example ``cursor`` is position ``cursor % N`` of epoch ``cursor // N``'s seeded
  permutation of its rows (:class:`DataOrder`);
* several, without ``env_ratios``: the same over all environments' rows pooled, so every example
  is equally likely (a larger environment is drawn more often; prime-rl's default too);
* several, with ``env_ratios``: example ``cursor`` goes to the environment a smooth weighted
  round-robin picks for that slot (every window of examples holds each environment in proportion,
  which matters for small batches), and takes that environment's next row in its own seeded
  permutation.

A v1 taskset that yields forever (``Environment.infinite``) is drawn in its own order, lazily, as
far as the cursor has gone; with other environments beside it, ``env_ratios`` must say how often.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from evalkit.core.errors import UserError
from evalkit.envs.base import Environment
from rl_backend.config import EnvConfig


class DataOrder:
    """Epoch-wise seeded permutations over ``n`` rows, addressed by a global cursor."""

    def __init__(self, n: int, seed: int):
        if n <= 0:
            raise UserError("the environment's training dataset is empty; nothing to train on")
        self.n = n
        self.seed = seed
        self._cache: dict[int, list[int]] = {}

    def index(self, cursor: int) -> int:
        epoch, position = divmod(cursor, self.n)
        if epoch not in self._cache:
            order = list(range(self.n))
            random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
            self._cache = {epoch: order}
        return self._cache[epoch][position]


@dataclass
class TrainEnv:
    """One ``[[env]]``: its config, the loaded environment and its training rows (drawn lazily when infinite)."""

    spec: EnvConfig
    env: Environment
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.label

    @property
    def infinite(self) -> bool:
        return self.env.infinite

    def row(self, index: int) -> dict[str, Any]:
        """Row ``index`` of the training split; an infinite taskset draws further (doubling) when needed."""
        if self.infinite and index >= len(self.rows):
            self.rows = self.env.get_dataset(max(index + 1, 2 * len(self.rows), 16))
            if index >= len(self.rows):
                raise UserError(
                    f"v1 taskset '{self.spec.id}' says it is infinite but ended after {len(self.rows)} tasks"
                )
        return self.rows[index]


def load_train_env(spec: EnvConfig) -> TrainEnv:
    """Load one environment (on the calling thread: legacy verifiers environments install signal handlers)."""
    from evalkit.loading.resolve import load_environment

    member = TrainEnv(spec, load_environment(spec.id, spec.args))
    if not member.infinite:
        member.rows = member.env.get_dataset(-1)
        if not member.rows:
            raise UserError(f"environment '{member.name}' has no training rows; nothing to train on")
    return member


class EnvMixture:
    """Maps a global example cursor to ``(environment, row)`` (see the module docstring)."""

    def __init__(self, members: list[TrainEnv], ratios: list[float] | None, seed: int):
        if not members:
            raise UserError("add one [[env]] table with the environment id")
        infinite = [m.name for m in members if m.infinite]
        if infinite and len(members) > 1 and ratios is None:
            raise UserError(
                f"environment '{infinite[0]}' is an infinite v1 taskset, so its rows cannot be pooled with the others; "
                "set [buffer] env_ratios to say how often each [[env]] is drawn"
            )
        self.members = members
        self.seed = seed
        self.weights = _normalized(ratios) if ratios is not None and len(members) > 1 else None
        self._orders = [None if m.infinite else DataOrder(len(m.rows), seed + 7_919 * k) for k, m in enumerate(members)]
        self._pool = (
            DataOrder(sum(len(m.rows) for m in members), seed) if self.weights is None and not infinite else None
        )
        self._slots: list[tuple[int, int]] = []
        self._credit = [0.0] * len(members)
        self._counts = [0] * len(members)

    def __len__(self) -> int:
        return len(self.members)

    def pick(self, cursor: int) -> tuple[int, dict[str, Any]]:
        """The member index and row of example ``cursor``."""
        if len(self.members) == 1:
            member = self.members[0]
            return 0, member.row(cursor if member.infinite else self._orders[0].index(cursor))
        if self._pool is not None:
            return self._pooled(self._pool.index(cursor))
        k, local = self._slot(cursor)
        order = self._orders[k]
        return k, self.members[k].row(local if order is None else order.index(local))

    def _pooled(self, index: int) -> tuple[int, dict[str, Any]]:
        for k, member in enumerate(self.members):
            if index < len(member.rows):
                return k, member.rows[index]
            index -= len(member.rows)
        raise IndexError(index)

    def _slot(self, cursor: int) -> tuple[int, int]:
        """Smooth weighted round-robin, replayed from slot 0 and memoized: (member, how many slots it had before)."""
        weights = self.weights or []
        while len(self._slots) <= cursor:
            for k, weight in enumerate(weights):
                self._credit[k] += weight
            k = max(range(len(weights)), key=lambda i: (self._credit[i], -i))
            self._credit[k] -= 1.0
            self._slots.append((k, self._counts[k]))
            self._counts[k] += 1
        return self._slots[cursor]

def _normalized(ratios: list[float]) -> list[float]:
    total = sum(ratios)
    return [ratio / total for ratio in ratios]


def mixture_line(specs: list[EnvConfig], ratios: list[float] | None) -> str:
    """``pooled rows`` or ``70% arithmetic, 30% reverse-text of every step's examples``."""
    if len(specs) == 1:
        return "one environment"
    if ratios is None:
        return "rows of all environments pooled, every example equally likely"
    weights = _normalized(ratios)
    return ", ".join(f"{w:.0%} {s.label}" for s, w in zip(specs, weights)) + " of the examples (buffer.env_ratios)"

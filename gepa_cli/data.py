"""Train and validation examples for GEPA, drawn equally from each environment.

Training rows come from an environment's ``dataset`` and validation rows from its ``eval_dataset``;
an environment with only one split is split disjointly (validation first), so a prompt is never
validated on the examples it was reflected on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.core.errors import UserError
from evalkit.envs.base import Environment


@dataclass
class Example:
    """One GEPA data instance: which environment, which row, and a stable id within its split."""

    uid: int
    """Position in its split (train or val); the validation frontier is keyed by it."""
    split: str
    env_idx: int
    env_id: str
    row: dict[str, Any] = field(repr=False)
    row_idx: int = 0
    """Index of the row in the environment's sampled list (the rollout's ``example_id``)."""


def shares(total: int, parts: int) -> list[int]:
    """``total`` split as evenly as possible over ``parts`` (earlier parts take the remainder)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def build_examples(
    envs: list[Environment], env_ids: list[str], num_train: int, num_val: int, seed: int
) -> tuple[list[Example], list[Example]]:
    """Sample ``num_train`` / ``num_val`` examples uniformly by environment; interleave them."""
    per_env_train: list[list[dict[str, Any]]] = []
    per_env_val: list[list[dict[str, Any]]] = []
    for env, env_id, n_train, n_val in zip(envs, env_ids, shares(num_train, len(envs)), shares(num_val, len(envs))):
        if env.dataset is not None and env.eval_dataset is not None:
            train_rows = env.get_dataset(n=n_train, seed=seed, shuffle=True)
            val_rows = env.get_eval_dataset(n=n_val, seed=seed, shuffle=True)
        else:
            pool = env.get_dataset(n=-1, seed=seed, shuffle=True)
            val_rows, train_rows = pool[:n_val], pool[n_val : n_val + n_train]
        if n_train and not train_rows:
            raise UserError(
                f"environment '{env_id}' has too few examples for a training split after taking {n_val} for "
                f"validation; lower --num-val or give it a larger dataset"
            )
        if n_val and not val_rows:
            raise UserError(f"environment '{env_id}' has no evaluation examples; give it an eval_dataset")
        per_env_train.append(train_rows)
        per_env_val.append(val_rows)
    return _interleave(per_env_train, env_ids, "train"), _interleave(per_env_val, env_ids, "val")


def _interleave(per_env: list[list[dict[str, Any]]], env_ids: list[str], split: str) -> list[Example]:
    examples: list[Example] = []
    longest = max((len(rows) for rows in per_env), default=0)
    for row_idx in range(longest):
        for env_idx, rows in enumerate(per_env):
            if row_idx < len(rows):
                examples.append(Example(len(examples), split, env_idx, env_ids[env_idx], rows[row_idx], row_idx))
    return examples

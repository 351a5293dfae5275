"""Small helpers the built-in environments share: seeded splits and sequence similarity."""

from __future__ import annotations

import random

EVAL_SEED_OFFSET = 1_000_003
"""Eval rows come from ``seed + EVAL_SEED_OFFSET`` so that the splits differ for every seed."""


def split_rng(seed: int, split: str) -> random.Random:
    """An independent generator per split, so train and eval never share a random stream."""
    return random.Random(seed if split == "train" else seed + EVAL_SEED_OFFSET)


def lcs_length(a: list | str, b: list | str) -> int:
    """Length of the longest common subsequence (O(len(a)*len(b)), fine for short answers)."""
    if not a or not b:
        return 0
    if len(a) < len(b):  # the shorter sequence as the row: fewer list entries to build
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for item in a:
        current = [0]
        left = 0
        for j, other in enumerate(b):
            if item == other:
                left = previous[j] + 1
            else:
                up = previous[j + 1]
                left = up if up > left else left
            current.append(left)
        previous = current
    return previous[-1]


def lcs_ratio(got: list | str, want: list | str) -> float:
    """``2*LCS/(len(got)+len(want))``: 1.0 only for an exact match, partial credit otherwise.

    Symmetric in length, so padding the answer with extra text lowers the score instead of being free.
    """
    if not got and not want:
        return 1.0
    return 2.0 * lcs_length(got, want) / (len(got) + len(want))


def check_counts(num_train_examples: int, num_eval_examples: int) -> None:
    """Reject negative sizes with a message that names the argument (called by every loader)."""
    from evalkit.core.errors import UserError

    for name, value in (("num_train_examples", num_train_examples), ("num_eval_examples", num_eval_examples)):
        if not isinstance(value, int) or value < 0:
            raise UserError(f"{name} must be a non-negative integer, got {value!r}")
    if num_train_examples == 0 and num_eval_examples == 0:
        raise UserError("num_train_examples and num_eval_examples cannot both be 0")

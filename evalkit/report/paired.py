"""Paired statistics for two runs on the same examples: is a difference real, and where did it come from?

Two runs of one environment score the same examples, so the comparison is example by example: the
difference of each example's mean reward (B - A), a percentile bootstrap confidence interval for the mean
of those differences (examples resampled with replacement), the same for pass@k (each example's unbiased
pass@k estimate from its rollouts), an exact two-sided sign test on the examples that changed, and the
examples that flipped (solved in one run, not the other; "solved": at least one rollout at or above the
pass threshold). Pairing is checked, never assumed: examples match by ``example_id`` *and* by their question
(the user messages; a different system prompt, as GEPA's, keeps them paired). Runs with no example in
common are :attr:`Paired.paired` False and carry the reason, so no caller compares them by accident.

The verdict (:attr:`Paired.verdict`) is one the numbers printed beside it support: below
:data:`MIN_PAIRED_EXAMPLES` paired examples there is none (one or two differences give a bootstrap interval of no
width, which excludes 0 by construction); "a real difference" needs both the interval to exclude 0 and the sign
test to reject at the same level, and when the two disagree it says so. An example both runs hold but whose every
rollout errored in one of them has no mean to pair: it is left out and counted (``unscored_a``/``unscored_b``),
and the sentence says how many. numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.core.errors import is_scored
from evalkit.core.types import ExampleId, id_order

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
BOOTSTRAP_SEED = 0
"""Fixed: the same two runs always print the same interval."""
MIN_PAIRED_EXAMPLES = 6
"""Fewer paired examples get no verdict: with 5 or fewer, even every example moving the same way leaves the exact
two-sided sign test at p >= 0.0625, and the bootstrap interval of one or two differences has (almost) no width."""


@dataclass
class Interval:
    """An estimate and its bootstrap interval."""

    estimate: float
    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


@dataclass
class Flip:
    example_id: ExampleId
    question: str
    mean_a: float
    mean_b: float
    solved_by: str
    """``"B"`` (solved in B only) or ``"A"`` (solved in A only)."""


@dataclass
class Paired:
    """Run B against run A, example by example (``paired`` False: ``reason`` says why not)."""

    paired: bool
    reason: str = ""
    examples: int = 0
    only_a: int = 0
    only_b: int = 0
    mean_a: float = 0.0
    mean_b: float = 0.0
    difference: Interval | None = None
    pass_at_k: dict[int, Interval] = field(default_factory=dict)
    better: int = 0
    worse: int = 0
    same: int = 0
    sign_p: float = 1.0
    flips: list[Flip] = field(default_factory=list)
    unscored_a: int = 0
    """Examples in both runs whose every rollout errored in A (no mean to pair): left out, counted here (one that
    errored everywhere in both runs counts in both)."""
    unscored_b: int = 0
    """The same for B."""

    @property
    def verdict(self) -> str:
        """What the interval and the sign test say together (module docstring); never more than both support."""
        if self.examples < MIN_PAIRED_EXAMPLES:
            return f"too few paired examples for a verdict (at least {MIN_PAIRED_EXAMPLES} needed)"
        interval = bool(self.difference and self.difference.excludes_zero())
        test = self.sign_p < 1 - CONFIDENCE
        if interval and test:
            return "a real difference"
        if interval or test:
            return (f"inconclusive: the interval {'excludes' if interval else 'includes'} 0 but the sign test "
                    f"{'does not reject' if interval else 'rejects'} at p < {1 - CONFIDENCE:.2g}")
        return "no clear difference"

    def to_dict(self) -> dict[str, Any]:
        return {
            "paired": self.paired, "reason": self.reason, "examples": self.examples, "only_a": self.only_a,
            "only_b": self.only_b, "mean_a": self.mean_a, "mean_b": self.mean_b,
            "difference": self.difference.to_dict() if self.difference else None,
            "pass_at_k": {str(k): v.to_dict() for k, v in self.pass_at_k.items()},
            "better": self.better, "worse": self.worse, "same": self.same, "sign_p": self.sign_p,
            "flips": [vars(f) for f in self.flips], "unscored_a": self.unscored_a, "unscored_b": self.unscored_b,
            "verdict": self.verdict if self.paired else None,
        }


def sign_test(better: int, worse: int) -> float:
    """Exact two-sided sign test (ties dropped): P(a split at least this uneven | no difference)."""
    n = better + worse
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(better, worse) + 1)) / 2**n
    return min(1.0, 2 * tail)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one example with ``c`` passing rollouts out of ``n``: 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def bootstrap_mean(values: Sequence[float], samples: int = BOOTSTRAP_SAMPLES, confidence: float = CONFIDENCE,
                   seed: int = BOOTSTRAP_SEED) -> Interval:
    """The mean of ``values`` and its percentile bootstrap interval (values resampled with replacement)."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(samples, 2_000_000 // max(1, len(data))))  # at most ~16 MB of indices at a time
    means = np.concatenate([data[rng.integers(0, len(data), size=(min(chunk, samples - done), len(data)))].mean(axis=1)
                            for done in range(0, samples, chunk)])
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(data.mean()), float(low), float(high))


@dataclass
class _Example:
    question: str
    rewards: list[float]
    passes: int


def _examples(rows: Sequence[dict[str, Any]], threshold: float) -> dict[ExampleId, _Example]:
    out: dict[ExampleId, _Example] = {}
    for row in rows:
        example = out.setdefault(row["example_id"], _Example(_question(row), [], 0))
        if is_scored(row):
            reward = float(row.get("reward") or 0.0)
            example.rewards.append(reward)
            example.passes += reward >= threshold
    return out


def _question(row: dict[str, Any]) -> str:
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        return prompt
    texts = []
    for message in prompt or []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            texts.append(content if isinstance(content, str) else str(content))
    return "\n".join(texts)


def compare(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]], threshold: float = 1.0) -> Paired:
    """Run B's rows against run A's (``results.jsonl`` rows); see the module docstring."""
    a, b = _examples(rows_a, threshold), _examples(rows_b, threshold)
    common = sorted(set(a) & set(b), key=id_order)
    differ = [eid for eid in common if a[eid].question != b[eid].question]
    if differ:
        return Paired(
            False,
            f"example {differ[0]} asks a different question in each run ({len(differ)} of "
            f"{len(common)} shared ids differ): these runs are unpaired, not compared example by example",
        )
    unscored_a = sum(1 for eid in common if not a[eid].rewards)
    unscored_b = sum(1 for eid in common if not b[eid].rewards)
    common = [eid for eid in common if a[eid].rewards and b[eid].rewards]
    if not common:
        return Paired(False, "no example was scored in both runs: unpaired, not compared example by example",
                      only_a=len(a), only_b=len(b), unscored_a=unscored_a, unscored_b=unscored_b)
    diffs = [_mean(b[e].rewards) - _mean(a[e].rewards) for e in common]
    result = Paired(True, examples=len(common), only_a=len(set(a) - set(b)), only_b=len(set(b) - set(a)),
                    unscored_a=unscored_a, unscored_b=unscored_b,
                    mean_a=float(np.mean([_mean(a[e].rewards) for e in common])),
                    mean_b=float(np.mean([_mean(b[e].rewards) for e in common])), difference=bootstrap_mean(diffs))
    result.better = sum(1 for d in diffs if d > 0)
    result.worse = sum(1 for d in diffs if d < 0)
    result.same = len(diffs) - result.better - result.worse
    result.sign_p = sign_test(result.better, result.worse)
    for k in sorted({1, min(len(a[e].rewards) for e in common), min(len(b[e].rewards) for e in common)}):
        if all(len(a[e].rewards) >= k and len(b[e].rewards) >= k for e in common):
            result.pass_at_k[k] = bootstrap_mean([pass_at_k(len(b[e].rewards), b[e].passes, k)
                                                  - pass_at_k(len(a[e].rewards), a[e].passes, k) for e in common])
    result.flips = [Flip(e, a[e].question, _mean(a[e].rewards), _mean(b[e].rewards), "B" if b[e].passes else "A")
                    for e in common if bool(a[e].passes) != bool(b[e].passes)]
    return result


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def summary_line(result: Paired, label_a: str = "A", label_b: str = "B") -> str:
    """One sentence for a terminal or a page: the verdict, with its interval and test."""
    if not result.paired:
        return f"{label_b} vs {label_a}: {result.reason}"
    d = result.difference or Interval(0.0, 0.0, 0.0)  # a paired result always has one
    conf = f"{CONFIDENCE:.0%}"
    return (f"{label_b} vs {label_a} on {result.examples} paired examples{left_out(result, label_a, label_b)}: "
            f"mean reward {d.estimate:+.4f} [{conf} CI {d.low:+.4f}, {d.high:+.4f}], {result.verdict}; better on "
            f"{result.better}, worse on {result.worse}, same on {result.same} (sign test p = {result.sign_p:.3g}); "
            f"{len(result.flips)} flipped")


def left_out(result: Paired, label_a: str = "A", label_b: str = "B") -> str:
    """`` (…, left out)`` naming the examples not paired and why, or nothing."""
    parts = [f"{count} {what}" for count, what in (
        (result.only_a, f"only in {label_a}"), (result.only_b, f"only in {label_b}"),
        (result.unscored_a, f"with every rollout errored in {label_a}"),
        (result.unscored_b, f"with every rollout errored in {label_b}")) if count]
    return f" ({', '.join(parts)}, left out)" if parts else ""

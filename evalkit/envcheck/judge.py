"""The checks on what scripted policies were paid: one :class:`Check` each, pass / warn / fail.

The rules (docs/env-check.md has the reasoning):

- ``gold``: the best rendering of each gold answer scores the range's top; below it is a warning (the
  rubric may want a format the check cannot guess), never a fail.
- one check per floor policy (empty, echo, format-only, rubric-quote, huge, all-answers): paying more than
  the floor on some example warns (partial-credit rewards pay a little for an echo); paying at least half
  the range on average fails: that reward can be farmed without solving anything.
- ``deterministic``: the same completion scored twice gets the same reward and metrics.
- ``finite``: no reward function raised or returned NaN/infinity; other rollout errors under a scripted
  policy warn (except kind ``model``: the library refused the reply itself, as verifiers refuses an empty one).
- ``range``: every reward lies within the declared range.
- ``no-mutation``: no reward function changed its inputs in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.core.errors import MODEL, REWARD
from evalkit.envcheck.probe import Outcome

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
TOLERANCE = 1e-6
FARMABLE_SHARE = 0.5
"""A floor policy whose mean reward reaches this share of the range fails (below it, above the floor, warns)."""


@dataclass
class Check:
    """One row of the report: the check, its verdict, what it saw, and the example that decided it."""

    name: str
    status: str
    detail: str
    example_id: int | None = None
    example: str | None = None
    """What the failing example sent (the reply, clipped), for the table and ``--json``."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "example_id": self.example_id, "example": self.example}


def clip(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} chars)"


def gold_check(best: dict[int, Outcome], low: float, high: float, rows: int) -> Check:
    """``best``: the best-scoring gold rendering of each example that has an answer."""
    if not best:
        return Check("gold", SKIP, f"no gold answers in the {rows} examples checked")
    scored = [o for o in best.values() if o.reward is not None]
    short = sorted(scored, key=lambda o: o.reward or 0.0)
    missing = [o for o in best.values() if o.reward is None]
    if missing:
        return _about("gold", WARN, f"gold rollout errored: {clip(missing[0].error or '')}", missing[0])
    if short and short[0].reward is not None and short[0].reward < high - TOLERANCE:
        reached = sum(1 for o in scored if (o.reward or 0.0) >= high - TOLERANCE)
        return _about("gold", WARN, f"gold reaches the top ({high:g}) on {reached}/{len(scored)} examples; lowest "
                      f"{short[0].reward:.3f} (does the rubric expect another format?)", short[0])
    return Check("gold", PASS, f"gold scores {high:g} on all {len(scored)} examples with an answer")


def floor_check(name: str, outcomes: Sequence[Outcome], low: float, high: float, describe: str) -> Check:
    scored = [o for o in outcomes if o.reward is not None]
    if not scored:
        why = next((o.error for o in outcomes if o.error), "no example to play it on")
        return Check(name, SKIP, f"{describe}: nothing scored ({clip(why, 160)})")
    mean = sum(o.reward or 0.0 for o in scored) / len(scored)
    worst = max(scored, key=lambda o: o.reward or 0.0)
    if (worst.reward or 0.0) <= low + TOLERANCE:
        return Check(name, PASS, f"{describe}: {low:g} on all {len(scored)} examples")
    share = (mean - low) / (high - low) if high > low else 1.0
    status = FAIL if share >= FARMABLE_SHARE - TOLERANCE else WARN
    paid = sum(1 for o in scored if (o.reward or 0.0) > low + TOLERANCE)
    return _about(name, status, f"{describe} is paid: mean {mean:.3g}, above the floor on {paid}/{len(scored)} "
                  f"examples (up to {worst.reward:.3g})", worst)


def deterministic_check(first: Sequence[Outcome], second: Sequence[Outcome]) -> Check:
    again = {(o.policy, o.example_id): o for o in second}
    compared = 0
    for one in first:
        two = again.get((one.policy, one.example_id))
        if two is None:
            continue
        compared += 1
        if not _same(one.reward, two.reward) or set(one.metrics) != set(two.metrics) or any(
                not _same(v, two.metrics[k]) for k, v in one.metrics.items()):
            return _about("deterministic", FAIL, f"policy {one.policy}: reward {one.reward} then {two.reward} "
                          f"(metrics {_short(one.metrics)} then {_short(two.metrics)}) for the same completion", one)
    return Check("deterministic", PASS, f"{compared} completions scored twice, identically")


def finite_check(outcomes: Sequence[Outcome]) -> Check:
    broken = [o for o in outcomes if o.error_kind == REWARD]
    if broken:
        return _about(
            "finite",
            FAIL,
            f"{len(broken)} scorings with a reward-function error: {clip(broken[0].error or '', 200)}",
            broken[0],
        )
    # kind "model": the library refused the scripted reply itself (verifiers: an empty one); no reward ran
    other = [o for o in outcomes if o.error and o.error_kind != MODEL]
    if other:
        return _about("finite", WARN, f"{len(other)} scripted rollouts errored ({other[0].error_kind}): "
                      f"{clip(other[0].error or '', 200)}", other[0])
    return Check("finite", PASS, f"{len(outcomes)} scorings, all finite, no reward function raised")


def range_check(outcomes: Sequence[Outcome], low: float, high: float) -> Check:
    outside = [o for o in outcomes if o.reward is not None and not low - TOLERANCE <= o.reward <= high + TOLERANCE]
    if outside:
        worst = max(outside, key=lambda o: abs(o.reward or 0.0))
        return _about("range", FAIL, f"{len(outside)} rewards outside [{low:g}, {high:g}], e.g. {worst.reward:g} "
                      f"(policy {worst.policy})", worst)
    return Check("range", PASS, f"every reward within [{low:g}, {high:g}]")


def mutation_check(outcomes: Sequence[Outcome]) -> Check:
    changed = [o for o in outcomes if o.mutated]
    if changed:
        return _about("no-mutation", FAIL, f"a reward function changed its {', '.join(changed[0].mutated)} in place "
                      f"(policy {changed[0].policy}; {len(changed)} rollouts)", changed[0])
    return Check("no-mutation", PASS, f"prompt, completion, answer and info unchanged after {len(outcomes)} scorings")


def _about(name: str, status: str, detail: str, outcome: Outcome) -> Check:
    return Check(name, status, detail, outcome.example_id, clip(outcome.reply))


def _same(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and abs(a - b) <= TOLERANCE)


def _short(metrics: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:.4g}" for k, v in list(metrics.items())[:4]) + "}"

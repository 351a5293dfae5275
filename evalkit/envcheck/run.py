"""``prime env check`` as one function: load the environment, play the policies, judge, optionally a model.

:func:`check_environment` takes an :class:`EnvCheckOptions` and returns an :class:`EnvCheckReport`
(a list of :class:`~evalkit.envcheck.judge.Check`); the CLI renders it, ``prime rl run`` refuses to train
on a failed one when ``[baseline] check = true``. Offline unless ``model`` names a remote model.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.clients.scripted import ReplyFn
from evalkit.core.defaults import RolloutLimits
from evalkit.core.errors import UserError
from evalkit.core.types import SamplingArgs
from evalkit.envcheck import judge
from evalkit.envcheck.policies import answer_of, floor_policies, gold_renderings, shotgun
from evalkit.envcheck.probe import Outcome, play
from evalkit.envs.base import Environment


@dataclass
class EnvCheckOptions:
    """What to check and how hard (the CLI's flags)."""

    env_id: str
    env_args: dict[str, Any] = field(default_factory=dict)
    num_examples: int = 8
    reward_range: tuple[float, float] = (0.0, 1.0)
    model: str | None = None
    """A model for the rules of thumb (``None``: scripted policies only)."""
    rollouts_per_example: int = 4
    sampling: dict[str, Any] = field(default_factory=lambda: {"temperature": 1.0})
    environments_dir: Path = Path("environments")
    limits: RolloutLimits = RolloutLimits()


@dataclass
class EnvCheckReport:
    env_id: str
    reward_range: tuple[float, float]
    checks: list[judge.Check]

    @property
    def failed(self) -> bool:
        return any(c.status == judge.FAIL for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "reward_range": list(self.reward_range), "passed": not self.failed,
                "checks": [c.to_dict() for c in self.checks]}


def check_environment(options: EnvCheckOptions, env: Environment | None = None) -> EnvCheckReport:
    """Every check on ``options.env_id`` (or on ``env`` when the caller loaded it already)."""
    low, high = options.reward_range
    if not low < high:
        raise UserError(f"--range needs LOW < HIGH, got {low:g} {high:g}")
    if env is None:
        from evalkit.loading.resolve import load_environment

        env = load_environment(options.env_id, options.env_args, options.environments_dir)
    return asyncio.run(_check(env, options))


async def _check(env: Environment, options: EnvCheckOptions) -> EnvCheckReport:
    low, high = options.reward_range
    rows = list(enumerate(env.get_eval_dataset(options.num_examples)))
    if not rows:
        raise UserError(f"environment '{options.env_id}' has no examples to check")
    async with env.serving():  # held once: a v1 taskset's shared servers then start once, not per row
        first, second, best, describe = await _scripted(env, rows, options)
        model = await _model_checks(env, rows, options, high) if options.model is not None else []
    checks = [judge.gold_check(best, low, high, len(rows))]
    for policy in _floor_names(first):
        checks.append(judge.floor_check(policy, [o for o in first if o.policy == policy], low, high, describe[policy]))
    everything = first + second
    checks += [judge.deterministic_check(first, second), judge.finite_check(everything),
               judge.range_check(everything, low, high), judge.mutation_check(everything)]
    return EnvCheckReport(options.env_id, options.reward_range, checks + model)


async def _scripted(
    env: Environment, rows: list[tuple[int, dict[str, Any]]], options: EnvCheckOptions
) -> tuple[list[Outcome], list[Outcome], dict[int, Outcome], dict[str, str]]:
    """Each policy played twice (the second pass for determinism); the best gold rendering per example;
    what each floor policy sends, in words."""
    first: list[Outcome] = []
    second: list[Outcome] = []

    async def twice(name: str, replies: dict[int, ReplyFn]) -> None:
        first.extend(await play(env, name, rows, replies, options.limits))
        second.extend(await play(env, name, rows, replies, options.limits))

    parser, rubric = getattr(env, "parser", None), getattr(env, "rubric", None)  # a v1 taskset has neither
    gold: dict[str, dict[int, ReplyFn]] = {}
    for example_id, row in rows:
        answer = answer_of(row)
        for label, text in gold_renderings(answer, parser) if answer is not None else []:
            gold.setdefault(f"gold:{label}", {})[example_id] = _fixed(text)
    for name, replies in gold.items():
        await twice(name, replies)
    best = _best_gold(first)
    policies = floor_policies(parser, rubric)
    for policy in policies:
        await twice(policy.name, {eid: fn for eid, row in rows if (fn := policy.reply_for(row)) is not None})
    await twice(ALL_ANSWERS, _all_answers(rows, best, parser))
    return (
        first,
        second,
        best,
        {**{p.name: p.describe for p in policies}, ALL_ANSWERS: "every plausible answer in one reply"},
    )


ALL_ANSWERS = "all-answers"


def _all_answers(rows: list[tuple[int, dict[str, Any]]], best: dict[int, Outcome], parser: Any) -> dict[int, ReplyFn]:
    """Every answer of the checked rows in one reply, in the gold rendering that scored best on that row."""
    answers = [a for _, row in rows if (a := answer_of(row)) is not None]
    out = {}
    for eid, row in rows:
        own = answer_of(row)
        if own is None or eid not in best or len(set(answers)) < 2:
            continue
        label = best[eid].policy.split(":", 1)[1]
        listed = shotgun(own, answers)
        out[eid] = _fixed(dict(gold_renderings(listed, parser)).get(label, listed))
    return out


def _best_gold(outcomes: list[Outcome]) -> dict[int, Outcome]:
    best: dict[int, Outcome] = {}
    for o in outcomes:
        if o.policy.startswith("gold:"):
            held = best.get(o.example_id)
            if held is None or (o.reward is not None and (held.reward is None or o.reward > held.reward)):
                best[o.example_id] = o
    return best


def _floor_names(outcomes: list[Outcome]) -> list[str]:
    return list(dict.fromkeys(o.policy for o in outcomes if not o.policy.startswith("gold:")))


def _fixed(text: str) -> ReplyFn:
    return lambda messages: text


async def _model_checks(env: Environment, rows: list[tuple[int, dict[str, Any]]], options: EnvCheckOptions,
                        high: float) -> list[judge.Check]:
    from evalkit.clients.factory import make_client
    from evalkit.clients.spec import ClientSpec
    from evalkit.envcheck.model_rules import model_checks
    from evalkit.eval.rollouts import run_groups

    client = make_client(ClientSpec(model=options.model))
    try:
        groups = await run_groups(env, client, [row for _, row in rows], example_ids=[eid for eid, _ in rows],
                                  rollouts_per_example=options.rollouts_per_example,
                                  sampling=SamplingArgs.from_dict(options.sampling), limits=options.limits)
    finally:
        await client.aclose()
    threshold = env.pass_threshold if env.pass_threshold is not None else high
    return model_checks(groups, threshold, options.model)

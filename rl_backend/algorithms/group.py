"""Algorithms whose action tokens feed the ``rl`` component with a scalar advantage per rollout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rl_backend.advantages import AdvantageRule, GroupRelative
from rl_backend.algorithms.base import Algorithm, Trace


@dataclass(frozen=True)
class LengthPenalty:
    """prime-rl's linear length penalty: each reward loses
    ``pass_rate * (w_out * out / max_out + w_in * in / max_in + w_turns * turns / max_turns)`` before the baseline,
    the maxima over the group and ``pass_rate`` its mean reward."""

    num_output_tokens_weight: float = 0.25
    num_input_tokens_weight: float = 0.1
    num_turns_weight: float = 0.1

    def shaped(self, group: Sequence[Trace]) -> list[float]:
        rewards = [t.reward for t in group]
        pass_rate = sum(rewards) / len(rewards)
        top_out = max(1, max(t.output_tokens for t in group))
        top_in = max(1, max(t.input_tokens for t in group))
        top_turns = max(1, max(t.turns for t in group))
        return [t.reward - pass_rate * (self.num_output_tokens_weight * t.output_tokens / top_out
                                        + self.num_input_tokens_weight * t.input_tokens / top_in
                                        + self.num_turns_weight * t.turns / top_turns) for t in group]


class GRPO(Algorithm):
    """Group-relative credit: the reward (length-shaped when a penalty is set) minus the group's baseline, by
    ``[trainer.advantage]``'s rule (``grpo``: the mean, Dr. GRPO's unnormalised default; ``rloo``: leave-one-out)."""

    name = "grpo"
    paper = "Shao et al. 2024, DeepSeekMath (arXiv:2402.03300)"

    def __init__(self, rule: AdvantageRule | None = None, length_penalty: LengthPenalty | None = None):
        self.rule = rule or GroupRelative()
        self.length_penalty = length_penalty

    def credit(self, group: Sequence[Trace]) -> list[float]:
        if not group:
            return []
        rewards = self.length_penalty.shaped(group) if self.length_penalty else [t.reward for t in group]
        return self.rule(rewards)


class MaxRL(Algorithm):
    """MaxRL: ``(reward - mean) / mean`` over the group, unbiased for the order-``group_size`` truncation of the
    maximum-likelihood objective (a hard example, pass rate p, weighs ~1/p). Rewards are meant to be >= 0; a group
    whose mean is <= 0 carries no signal and gets zeros."""

    name = "max_rl"
    paper = "MaxRL (arXiv:2602.02710)"

    def credit(self, group: Sequence[Trace]) -> list[float]:
        if not group:
            return []
        mean = sum(t.reward for t in group) / len(group)
        if mean <= 0:
            return [0.0] * len(group)
        return [(t.reward - mean) / mean for t in group]


class RAE(Algorithm):
    """Role-conditioned advantage estimation: the reward minus its agent's exponential moving average of that
    agent's earlier rewards, read before this reward updates it (``b <- decay * b + (1 - decay) * r``, from 0).
    One instance per environment, so baselines are per (environment, agent). Needs no sibling rollouts, so a
    group of equal rewards still carries signal (the difficulty filter keeps it)."""

    name = "rae"
    paper = "SPIRAL (arXiv:2506.24119)"
    group_relative = False

    def __init__(self, decay: float = 0.95):
        self.decay = decay
        self.baselines: dict[str, float] = {}

    def credit(self, group: Sequence[Trace]) -> list[float]:
        out = []
        for trace in group:
            baseline = self.baselines.get(trace.agent, 0.0)
            out.append(trace.reward - baseline)
            self.baselines[trace.agent] = self.decay * baseline + (1 - self.decay) * trace.reward
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"baselines": dict(self.baselines)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.baselines = {str(k): float(v) for k, v in state.get("baselines", {}).items()}


class HierarchicalGRPO(GRPO):
    """GRPO for proposer-solver environments: solvers compared within one proposed problem, proposers across
    proposals. primekit has no proposer-solver episodes, so it is refused."""

    name = "hierarchical_grpo"
    paper = "prime-rl's docs/algorithms.md (Hierarchical GRPO)"
    missing = ("a proposer-solver environment (prime-rl's proposer-solver taskset: each episode a proposed problem "
               "with nested solver attempts, seats 'proposer' and 'solver'), which primekit has no built-in of and "
               "does not run (for multi-agent self-play use 'rae')")

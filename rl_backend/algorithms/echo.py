"""ECHO: GRPO on the model's tokens plus weighted cross-entropy on environment-provided tokens, by role."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rl_backend.algorithms.group import GRPO


@dataclass(frozen=True)
class Span:
    """One message's tokens in a training sequence: its role, whether the policy sampled it, its length."""

    role: str
    sampled: bool
    tokens: int


def observation_weights(spans: Sequence[Span], roles: Mapping[str, float]) -> list[float]:
    """The ``ce`` weight of each token: a role's ``alpha`` on environment-provided messages that come after the
    first sampled one (the initial prompt is not a consequence of any action), 0 elsewhere (sampled tokens
    feed ``rl``, not ``ce``)."""
    weights: list[float] = []
    seen_response = False
    for span in spans:
        weight = roles.get(span.role, 0.0) if seen_response and not span.sampled else 0.0
        weights.extend([weight] * span.tokens)
        seen_response = seen_response or span.sampled
    return weights


class Echo(GRPO):
    """GRPO credit on action tokens (``rl``) and ``alpha``-weighted ``ce`` on the environment's later messages of
    the chosen roles (default: tool responses at 0.1). The samples carry those tokens with their roles
    (:mod:`rl_backend.observations`); the chat template's scaffold around them is not trained."""

    name = "echo"
    paper = "ECHO (prime-rl's docs/algorithms.md); alpha is ECHO's lambda"
    observation_component = "ce"
    DEFAULT_ROLES = {"tool": 0.1}

    def __init__(self, *args, roles: Mapping[str, float] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.roles = dict(roles) if roles else dict(self.DEFAULT_ROLES)

    def weights(self, spans: Sequence[Span]) -> list[float]:
        return observation_weights(spans, self.roles)

"""Multi-turn rollouts as training samples, and the chat-template check ``interleaved`` needs.

A multi-turn rollout has one :class:`~evalkit.core.types.Completion` per model turn, each with the prompt
ids the sampler conditioned on (the model's tokenizer rendered the conversation so far through its
chat template) and the ids it drew. Two ways to train on them (``trajectory_strategy``):

* ``branching`` (:func:`rl_backend.collect.to_samples`): every turn is its own sample after its own
  prompt. Exact for any chat template; every turn re-reads the conversation in the trainer.
* ``interleaved`` (:func:`interleave`): the turns of a rollout are one sequence, environment and
  tool tokens between them masked out of the loss. That is the same data only when each turn's
  prompt starts with the previous turn's prompt and completion, token for token (the *prefix
  property*). Templates that rewrite earlier turns break it: Qwen3-style templates drop the
  reasoning of earlier assistant turns, so the next prompt no longer holds what was sampled.

:func:`check_prefix_property` looks at a few real rollouts' turn prompts (before any optimizer step:
the baseline's rollouts, else the first batch) and says where the first one breaks. With
``interleaved`` a break is refused with that position and what to do, unless ``retokenize`` is set:
then a rollout's sample ends where the conversation was re-rendered, and a new one starts from that
turn's own prompt (the whole conversation tokenized afresh), which is exact again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.types import RolloutState
from rl_backend.collect import checked_sample
from rl_backend.policy import Sample

CHECKED_ROLLOUTS = 8
"""Multi-turn rollouts the check looks at (the template, not the rollout, decides; a few suffice)."""


@dataclass(frozen=True)
class PrefixBreak:
    """Where turn ``turn``'s prompt stops extending turn ``turn - 1``'s prompt + completion (1-based turns)."""

    example_id: int
    rollout_idx: int
    turn: int
    position: int
    expected: int | None
    """The token the previous turn left at ``position`` (None: the new prompt is longer than nothing there)."""
    got: int | None
    """The token the new prompt has there (None: it is shorter)."""


def first_break(state: RolloutState) -> PrefixBreak | None:
    """The first turn of ``state`` whose prompt does not extend the previous turn, token for token."""
    turns = [r for r in state.responses if r.prompt_token_ids is not None and r.completion_token_ids is not None]
    for index in range(1, len(turns)):
        before, now = turns[index - 1], turns[index]
        prefix = list(before.prompt_token_ids or []) + list(before.completion_token_ids or [])
        prompt = list(now.prompt_token_ids or [])
        position = _diverges_at(prefix, prompt)
        if position is not None:
            expected = prefix[position] if position < len(prefix) else None
            got = prompt[position] if position < len(prompt) else None
            return PrefixBreak(state.example_id, state.rollout_idx, index + 1, position, expected, got)
    return None


def _diverges_at(prefix: Sequence[int], prompt: Sequence[int]) -> int | None:
    for position, token in enumerate(prefix):
        if position >= len(prompt) or prompt[position] != token:
            return position
    return None


def check_prefix_property(
    states: Iterable[RolloutState], limit: int = CHECKED_ROLLOUTS
) -> tuple[int, PrefixBreak | None]:
    """How many multi-turn rollouts were checked (at most ``limit``) and the first break among them."""
    checked = 0
    for state in states:
        if sum(1 for r in state.responses if r.prompt_token_ids is not None) < 2:
            continue
        checked += 1
        found = first_break(state)
        if found is not None or checked >= limit:
            return checked, found
    return checked, None


def describe_break(found: PrefixBreak, tokenizer: Any, model: str) -> str:
    """One sentence: which rollout, which turn, which token, and what the two sides read there."""
    def show(token: int | None) -> str:
        return "nothing" if token is None else f"{token} {tokenizer.decode([token])!r}"

    return (f"the chat template of {model} does not extend turn {found.turn - 1}'s prompt and completion into turn "
            f"{found.turn}'s prompt (example {found.example_id}, rollout {found.rollout_idx}): they first differ at "
            f"token {found.position}, where the sampled conversation has {show(found.expected)} and the re-rendered "
            f"prompt {show(found.got)}")


def refusal(found: PrefixBreak, tokenizer: Any, model: str) -> UserError:
    return UserError(
        describe_break(found, tokenizer, model)
        + ". A template that rewrites earlier turns (e.g. drops their reasoning) "
        "cannot be trained with trajectory_strategy = 'interleaved': use 'branching' (each turn trained after the "
        "prompt it saw), set retokenize = true (a new sample starts where the conversation was re-rendered), or use a "
        "chat template that keeps earlier turns as they were sampled"
    )


def interleave(kept: Iterable[list[RolloutState]], advantages: dict[tuple[int, int], float], *, retokenize: bool,
               tokenizer: Any = None, model: str = "the model", env_of: dict[int, str] | None = None,
               echo_roles: dict[str, dict[str, float]] | None = None) -> list[Sample]:
    """One sample per rollout (several with ``retokenize`` where its turns break the prefix property); ``env_of``
    labels each with its example's environment. In an environment of ``echo_roles`` (``echo``: alpha per role),
    the environment's tokens between the turns carry their roles and ``ce`` weights
    (:mod:`rl_backend.observations`)."""
    samples: list[Sample] = []
    for group in kept:
        for state in group:
            advantage = advantages.get((state.example_id, state.rollout_idx))
            if advantage is None:
                continue
            env = (env_of or {}).get(state.example_id)
            alphas = (echo_roles or {}).get(env) if env is not None and tokenizer is not None else None
            current: Sample | None = None
            prefix: list[int] = []
            for index, response in enumerate(state.responses):
                turn = checked_sample(response, advantage, env)
                if current is not None and turn.prompt_ids[: len(prefix)] == prefix:
                    between = len(turn.prompt_ids) - len(prefix)
                    _extend(current, turn, len(prefix))
                    if alphas:
                        _observe(current, turn, between, state, index, alphas, tokenizer)
                else:
                    if current is not None and not retokenize:
                        raise refusal(first_break(state) or _unknown(state, index), tokenizer, model)
                    current = turn
                    samples.append(current)
                prefix = turn.prompt_ids + turn.completion_ids
    return samples


def _extend(sample: Sample, turn: Sample, shared: int) -> None:
    """Append ``turn`` to ``sample``: the new prompt tokens (environment, tool) untrained, then the reply."""
    between = turn.prompt_ids[shared:]
    sample.loss_mask = sample.mask() + [False] * len(between) + [True] * len(turn.completion_ids)
    sample.completion_ids = sample.completion_ids + between + turn.completion_ids
    sample.sampler_logprobs = sample.sampler_logprobs + [0.0] * len(between) + turn.sampler_logprobs


def _observe(sample: Sample, turn: Sample, between: int, state: RolloutState, index: int, alphas: dict[str, float],
             tokenizer: Any) -> None:
    """The roles and ``ce`` weights of what :func:`_extend` just appended: the ``between`` tokens at the end of turn
    ``index``'s prompt, then its reply."""
    from rl_backend.observations import between_roles, role_weights

    added = between_roles(state, index, turn.prompt_ids, between, tokenizer) + ["assistant"] * len(turn.completion_ids)
    size = len(sample.completion_ids) - len(added)
    sample.roles = (sample.roles or ["assistant"] * size)[:size] + added
    sample.ce_weights = role_weights(sample.roles, sample.mask(), alphas)


def _unknown(state: RolloutState, index: int) -> PrefixBreak:
    return PrefixBreak(state.example_id, state.rollout_idx, index + 1, 0, None, None)

"""Environment-provided tokens of multi-turn rollouts and their message roles: what ``echo`` trains with ``ce``.

Turn k's prompt ends with what the environment said since reply k-1 (tool results, user feedback) and the
generation prompt, all under the chat template. :func:`tail_roles` finds those tokens at the end of the prompt by
rendering the conversation's prefixes with the policy's chat template (the span each message takes), and gives
each its message's role; the generation prompt and other scaffold get ``None`` and are never trained. Only the
end of the prompt is compared, so a template that rewrites earlier turns, or tools folded into the system
message, do not matter; a prompt whose end is not that rendering gets no roles (nothing is attributed).

:func:`carry_observations` moves those tokens out of a branching sample's prompt into its trained region (loss
mask 0, ``ce`` weight by role); the reply is still scored after exactly the tokens it was sampled after.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalkit.core.types import RolloutState
from evalkit.model.chat_format import encode_chat


def tail_roles(state: RolloutState, turn: int, prompt_ids: Sequence[int], tokenizer: Any) -> list[str | None]:
    """The roles of the last tokens of turn ``turn``'s prompt (0-based, >= 1) that the environment's messages since
    reply ``turn - 1`` and the generation prompt take: one per token, ``None`` for scaffold. Empty when the
    prompt does not end with that rendering."""
    replies = [i for i, message in enumerate(state.completion) if message.get("role") == "assistant"]
    if turn < 1 or len(replies) <= turn:
        return []
    before = [*state.prompt, *state.completion[: replies[turn - 1] + 1]]
    added = list(state.completion[replies[turn - 1] + 1 : replies[turn]])
    full = encode_chat(tokenizer, before + added)
    ends = [len(encode_chat(tokenizer, before + added[:i], generation_prompt=False)) for i in range(len(added) + 1)]
    tail = full[ends[0]:]
    if not added or any(b < a for a, b in zip(ends, ends[1:])) or len(tail) > len(prompt_ids) \
            or list(prompt_ids[len(prompt_ids) - len(tail):]) != tail \
            or encode_chat(tokenizer, before, generation_prompt=False) != full[: ends[0]]:
        return []
    roles: list[str | None] = []
    for message, start, end in zip(added, ends, ends[1:]):
        roles += [message.get("role")] * (end - start)
    return roles + [None] * (len(full) - ends[-1])


def between_roles(state: RolloutState, turn: int, prompt_ids: Sequence[int], count: int,
                  tokenizer: Any) -> list[str | None]:
    """The roles of the last ``count`` tokens of turn ``turn``'s prompt (an interleaved sample's tokens between two
    replies): :func:`tail_roles` at their end, ``None`` before it (the end of the previous reply's turn)."""
    roles = tail_roles(state, turn, prompt_ids, tokenizer)
    if len(roles) > count:
        return [None] * count
    return [None] * (count - len(roles)) + roles


def role_weights(roles: Sequence[str | None], mask: Sequence[bool], alphas: Mapping[str, float]) -> list[float]:
    """``echo``'s ``ce`` weight of each position: its role's ``alpha`` where the policy did not sample it (the mask
    is 0) and the role is one of ``alphas``; 0 elsewhere (sampled tokens feed ``rl``, scaffold never trains)."""
    return [0.0 if trained or role is None else float(alphas.get(role, 0.0)) for role, trained in zip(roles, mask)]


def carry_observations(sample: Any, state: RolloutState, turn: int, alphas: Mapping[str, float],
                       tokenizer: Any) -> None:
    """Turn ``turn``'s branching sample: the environment's messages at the end of its prompt move into its trained
    region with mask 0, their roles and ``ce`` weights, when any of them has a weight; else it stays as GRPO
    trains it."""
    tail = tail_roles(state, turn, sample.prompt_ids, tokenizer)
    roles = tail + ["assistant"] * len(sample.completion_ids)
    mask = [False] * len(tail) + sample.mask()
    weights = role_weights(roles, mask, alphas)
    if not any(weights):
        return
    cut = len(sample.prompt_ids) - len(tail)
    sample.roles, sample.ce_weights, sample.loss_mask = roles, weights, mask
    sample.completion_ids = sample.prompt_ids[cut:] + sample.completion_ids
    sample.prompt_ids = sample.prompt_ids[:cut]
    sample.sampler_logprobs = [0.0] * len(tail) + sample.sampler_logprobs

"""Rolling scripted policies through an environment and recording what each rollout was paid.

Every rollout goes through :func:`evalkit.eval.rollouts.run_groups` (the one rollout skeleton, group scoring
and the finite-score rule included), one row at a time so that each row gets its own reply. Each policy
runs twice: the second pass is the determinism check (same completion, scored again). What the reward
functions were given is compared, after scoring, with what the row and the policy supplied: a reward
function that edits the completion, the prompt, the answer or ``info`` in place shows up there.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from evalkit.clients.scripted import ReplyFn, ScriptedPolicyClient, message_text
from evalkit.core.defaults import RolloutLimits
from evalkit.core.types import Message, RolloutState
from evalkit.envs.base import Environment
from evalkit.eval.rollouts import run_groups


@dataclass
class Outcome:
    """One scripted rollout: what was sent, what it was paid, what it changed."""

    policy: str
    example_id: int
    reply: str
    reward: float | None
    """``None`` when the rollout errored before it was scored."""
    metrics: dict[str, float]
    error: str | None
    error_kind: str | None
    mutated: list[str] = field(default_factory=list)
    """Inputs a reward function changed in place (``completion``, ``prompt``, ``answer``, ``info``)."""


class _Recording:
    """A reply function that remembers what it answered, so the completion can be checked afterwards."""

    def __init__(self, reply: ReplyFn):
        self.reply, self.sent = reply, []

    def __call__(self, messages: list[Message]) -> str:
        text = self.reply(messages)
        self.sent.append(text)
        return text


async def play(env: Environment, policy: str, rows: list[tuple[int, dict[str, Any]]],
               replies: dict[int, ReplyFn], limits: RolloutLimits) -> list[Outcome]:
    """Roll ``policy`` out on each ``(example_id, row)`` that has a reply; one outcome per rollout."""
    outcomes = []
    for example_id, row in rows:
        if example_id not in replies:
            continue
        recording = _Recording(replies[example_id])
        before = _inputs(env, row)
        groups = await run_groups(env, ScriptedPolicyClient(recording, model=f"scripted:{policy}"), [row],
                                  example_ids=[example_id], max_concurrent=1, limits=limits)
        state = groups[0][0]
        outcomes.append(Outcome(
            policy=policy, example_id=example_id, reply=recording.sent[0] if recording.sent else "",
            reward=state.reward if state.scored else None, metrics=dict(state.metrics), error=state.error,
            error_kind=state.kind_of_error, mutated=_mutated(before, state, recording.sent, hasattr(env, "vf_env")),
        ))
    return outcomes


def _inputs(env: Environment, row: dict[str, Any]) -> dict[str, Any]:
    """What the reward functions will be given, copied before the rollout."""
    info = row.get("info") or {}
    return {
        "prompt": copy.deepcopy(env.format_prompt(row)),
        "answer": "" if row.get("answer") is None else str(row.get("answer")),
        "info": copy.deepcopy(info if isinstance(info, dict) else {"value": info}),
    }


def _mutated(before: dict[str, Any], state: RolloutState, sent: list[str], wrapped: bool) -> list[str]:
    """The inputs that differ, after scoring, from what the row and the policy supplied."""
    # a wrapped verifiers environment builds its own prompt (an opener's first message): only the others compare
    names = ("answer", "info") if wrapped else ("prompt", "answer", "info")
    changed = [name for name in names if _differs(before[name], getattr(state, name), name)]
    library_state = state.extra if isinstance(state.extra, dict) else {}
    completions = [state.completion]
    if isinstance(library_state.get("completion"), list):  # a wrapped verifiers rollout: its own copy was scored
        completions.append(library_state["completion"])
    if any(_assistant_texts(c) != sent[: len(_assistant_texts(c))] for c in completions) and sent:
        changed.insert(0, "completion")
    return changed


def _differs(expected: Any, actual: Any, name: str) -> bool:
    if name == "prompt":  # only the text of each message: libraries may add keys of their own
        return [message_text(m) for m in expected] != [message_text(m) for m in actual or []]
    return expected != actual


def _assistant_texts(messages: list[Message]) -> list[str]:
    return [message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]

"""The skeleton shared by guessing games (the built-in wordle, the bench's mastermind): judge each model turn
once, answer with the judgement, stop when solved."""

from __future__ import annotations

from typing import Any

from evalkit.core.types import Message
from evalkit.envs import MultiTurnEnv
from evalkit.envs.parsers import last_assistant_text


class JudgedGameEnv(MultiTurnEnv):
    """A game whose every model turn is judged exactly once, by :meth:`judge`, which records the outcome in
    ``state`` (``state["solved"]`` ends the game) and returns the feedback the next user turn carries.

    The judging happens in ``is_completed``, which runs right after each model turn and before the
    ``max_turns`` check, so even the last turn's guess counts; ``judged_turn`` keeps a second call for the
    same turn from judging it again. Subclasses set ``solved`` and ``feedback`` in ``setup_state``.
    """

    def is_completed(self, messages: list[Message], state: dict[str, Any]) -> bool | str:
        last = messages[-1]
        if last.get("role") == "assistant" and state.get("judged_turn") != state["turn"]:
            state["judged_turn"] = state["turn"]
            state["feedback"] = self.judge(last_assistant_text([last]), state)
        return "solved" if state["solved"] else False

    def judge(self, text: str, state: dict[str, Any]) -> str:
        """The feedback for the model's reply ``text``, after recording its outcome in ``state``."""
        raise NotImplementedError

    def env_response(self, messages: list[Message], state: dict[str, Any]) -> Message:
        return {"role": "user", "content": state["feedback"]}

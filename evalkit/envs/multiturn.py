"""Multi-turn environments: the model and the environment take turns until a stop condition.

Subclasses implement ``env_response(messages, state)`` (sync or async) returning the environment's
next message(s), and optionally ``is_completed(messages, state)`` returning ``True`` or the name of
the stop condition, and ``setup_state(state)`` (sync or async, awaited before the first turn).
``state`` is the rollout's own dict (``RolloutState.extra``): keep game state there; it starts with
``answer``, ``info`` and ``turn``. The built-in stop conditions are ``max_turns`` (never with
``max_turns=-1``) and ``length`` (the model hit max_tokens, so the reply is cut).

Sync ``env_response`` and ``setup_state`` run on worker threads (:data:`ENV_THREADS`, like reward
functions): one that sleeps or hangs holds up only its own rollout, which the rollout timeout then
ends (:mod:`evalkit.core.defaults`); ``is_completed`` runs on the event loop and must return quickly. Each
message ``env_response`` returns keeps at most the run's ``max_message_chars`` characters, cut with a
marker (:func:`evalkit.core.untrusted.cap_message`), before the model sees it.
"""

from __future__ import annotations

import inspect
from typing import Any

from evalkit.clients.base import ModelClient
from evalkit.core.aio import DaemonThreadPool, call_user_code
from evalkit.core.types import Message, RolloutState, SamplingArgs
from evalkit.core.untrusted import cap_message
from evalkit.envs.base import Environment

ENV_THREADS = 64
"""Worker threads for sync environment code (``env_response``, ``setup_state``, tools), shared by the process."""
ENV_POOL = DaemonThreadPool(ENV_THREADS, "env")  # threads start on first use


class MultiTurnEnv(Environment):
    def __init__(self, *args: Any, max_turns: int = 10, **kwargs: Any):
        """``max_turns`` caps model turns; ``-1`` (or any value below 1, as in verifiers) means no cap."""
        super().__init__(*args, **kwargs)
        self.max_turns = max_turns

    def setup_state(self, state: dict[str, Any]) -> Any:
        """Hook (sync or async) to initialise per-rollout game state before the first model turn."""

    def is_completed(self, messages: list[Message], state: dict[str, Any]) -> bool | str:
        """Checked after each model turn and after each environment response; False to go on."""
        return False

    def env_response(self, messages: list[Message], state: dict[str, Any]) -> Message | list[Message]:
        raise NotImplementedError

    async def generate(self, client: ModelClient, state: RolloutState, sampling: SamplingArgs) -> None:
        game = state.extra
        game.update({"answer": state.answer, "info": state.info, "turn": 0})
        await call_user_code(ENV_POOL, self.setup_state, game)
        messages = list(state.prompt)
        while True:
            response = await client.chat(messages, sampling, self.tools_for(game))
            state.responses.append(response)
            reply = response.to_message()
            messages.append(reply)
            state.completion.append(reply)
            state.turns += 1
            game["turn"] = state.turns
            if response.finish_reason == "length":
                state.stop_condition, state.is_truncated = "length", True
                return
            done = await _maybe_await(self.is_completed(messages, game))
            if done:
                state.stop_condition = done if isinstance(done, str) else "completed"
                return
            if 0 < self.max_turns <= state.turns:
                state.stop_condition = "max_turns"
                return
            new = await call_user_code(ENV_POOL, self.env_response, messages, game)
            new_messages = [
                cap_message(m, state.max_message_chars) for m in ([new] if isinstance(new, dict) else list(new))
            ]
            messages.extend(new_messages)
            state.completion.extend(new_messages)
            done = await _maybe_await(self.is_completed(messages, game))
            if done:
                state.stop_condition = done if isinstance(done, str) else "completed"
                return

    def tools_for(self, state: dict[str, Any]) -> list[dict[str, Any]] | None:
        """OpenAI tool schemas offered on each model turn (None: no tools)."""
        return None


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value

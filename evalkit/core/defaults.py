"""The defaults every part shares (eval, GEPA, RL, the CLI's ``--help``), each written once.

A bottom module: it imports nothing, so the client layer, the engine, the configs and the CLI can all
read it without an import going upward, and building the command line stays instant.

The bounds every rollout runs under (:class:`RolloutLimits`) have the same names everywhere:
``--rollout-timeout`` / ``rollout_timeout``, ``--score-timeout`` / ``score_timeout``,
``--max-message-chars`` / ``max_message_chars`` in ``prime eval run``, ``prime gepa run`` and RL configs.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MODEL = "local/smollm2-135m"
"""The embedded model used when no model and no base URL are given (the only copy of this name)."""

DEFAULT_MAX_CONCURRENT = 32
"""Rollouts in flight at once in ``prime eval run`` and ``prime gepa run`` (``-c/--max-concurrent``): one
bound shared by all of a run's environments, as vf-eval's ``-c`` (RL's ``max_concurrent`` means the same)."""

DEFAULT_RL_MAX_CONCURRENT = 256
"""RL's ``max_concurrent``: higher than eval's and GEPA's because a training step's batch is generated at once."""

DEFAULT_TIMEOUT_S = 600.0
"""Seconds one model request may take, the whole reply included (the ``openai`` SDK's default)."""

DEFAULT_MAX_RETRIES = 3
"""Retries of a model request that failed with 429, 5xx, a timeout or a dropped connection."""

DEFAULT_SCORE_TIMEOUT_S = 120.0
"""Seconds the scoring of one rollout (all its reward functions) may take before it records an error."""
DEFAULT_ROLLOUT_TIMEOUT_S = 3600.0
"""Seconds, wall clock, the conversation of one rollout (model calls, ``env_response``, tools) may take."""

DEFAULT_MAX_MESSAGE_CHARS = 100_000
"""Characters kept of one message an environment adds (a tool result, an ``env_response``), and of each stored
message."""


@dataclass(frozen=True)
class RolloutLimits:
    """What bounds one rollout: its conversation's wall-clock time, its scoring time, and the size of each
    message the environment adds to it (``None``: no bound). A conversation past ``rollout_timeout`` ends
    as an error of kind ``timeout``; a longer message is cut with a marker saying how much was left out."""

    rollout_timeout: float | None = DEFAULT_ROLLOUT_TIMEOUT_S
    score_timeout: float | None = DEFAULT_SCORE_TIMEOUT_S
    max_message_chars: int | None = DEFAULT_MAX_MESSAGE_CHARS

"""One error class per boundary, and the kinds of a failed rollout.

The CLI catches :class:`UserError` once at the top and prints ``error: <message>`` with exit code 2.
Everything else that goes wrong *inside a rollout* (model call, environment code, reward function)
is data: it is recorded on the rollout's row and never crashes a run.

A row's ``error_kind`` says whose fault a failure was and whether the row still holds a score:

============  =====================================================  ==========  ==================
kind          what failed                                            scored?     ``-R`` re-runs it
============  =====================================================  ==========  ==================
model         the model request, after its retries (HTTP status,      no          yes (default)
              timeout, closed connection, malformed reply)
environment   environment code during the conversation               no          yes (default)
              (``env_response``, a tool, ``setup_state``)
timeout       scoring took longer than the score timeout              no          yes (default)
reward        a reward function raised: it scored 0, the others       yes         no (it would
              counted                                                             repeat)
============  =====================================================  ==========  ==================

Rows that are not scored are left out of reward means, std, pass@k and reward diversity, and are
counted in ``num_errors`` / ``avg_error`` instead (:mod:`evalkit.eval.summary`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalkit.clients.redact import redact

MODEL, ENVIRONMENT, REWARD, TIMEOUT = "model", "environment", "reward", "timeout"
ERROR_KINDS = (MODEL, ENVIRONMENT, REWARD, TIMEOUT)
UNSCORED_KINDS = frozenset({MODEL, ENVIRONMENT, TIMEOUT})
"""Error kinds after which a rollout has no reward (it is not a 0)."""

_PREFIXES = (("model call failed", MODEL), ("reward function", REWARD), ("scoring timed out", TIMEOUT))


def classify_error(message: str | None) -> str | None:
    """The kind of an error message written without one (older rows, wrapped environments).

    Messages start the way :meth:`evalkit.envs.base.Environment.rollout` writes them; anything
    else was raised by environment code.
    """
    if not message:
        return None
    text = str(message)
    for prefix, kind in _PREFIXES:
        if text.startswith(prefix):
            return kind
    return ENVIRONMENT


def error_kind(row: Mapping[str, Any]) -> str | None:
    """A results row's error kind: its ``error_kind`` column, else classified from ``error``."""
    if not row.get("error"):
        return None
    kind = row.get("error_kind")
    return kind if kind in ERROR_KINDS else classify_error(row["error"])


def is_scored(row: Mapping[str, Any]) -> bool:
    """Whether a row's reward is a score (no error, or only reward-function errors)."""
    return error_kind(row) not in UNSCORED_KINDS


class UserError(Exception):
    """Something the user can fix (bad flag, bad config, unknown env, unreachable endpoint).

    The message must say what is wrong and what to do; it is printed as one line without a traceback.
    """


class ConfigError(UserError):
    """A config file or config value is invalid (unknown key, wrong type, inconsistent values)."""


class ModelCallError(Exception):
    """A model request failed after the client's retries (HTTP error, timeout, malformed reply).

    ``retryable`` tells a caller that owns its own retry loop whether trying again could help.
    The message is scrubbed of API keys and auth header values on the way in (servers echo
    request headers in error bodies), so no row, log or terminal line built from it carries one.
    """

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None):
        super().__init__(redact(str(message)))
        self.retryable = retryable
        self.status = status


class EnvironmentCodeError(Exception):
    """User environment code (``env_response``, a tool, ``load_environment``) raised."""


class RewardFunctionError(Exception):
    """A reward function raised; the rubric records it and scores that function 0."""

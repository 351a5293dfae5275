"""The error classes that cross primekit's boundaries (user input, config, model call), and the kinds of a failed
rollout.

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
timeout       the conversation took longer than the rollout timeout, no          yes (default)
              or scoring longer than the score timeout
reward        a reward function raised: it scored 0, the others       yes         no (it would
              counted                                                             repeat)
============  =====================================================  ==========  ==================

Rows that are not scored are left out of reward means, std, pass@k and reward diversity, and are
counted in ``num_errors`` / ``avg_error`` instead (:mod:`evalkit.eval.summary`). A row read back
without ``error_kind`` has kind ``unknown`` and counts as not scored (:func:`error_kind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalkit.core.redact import redact

MODEL, ENVIRONMENT, REWARD, TIMEOUT = "model", "environment", "reward", "timeout"
ERROR_KINDS = (MODEL, ENVIRONMENT, REWARD, TIMEOUT)
UNKNOWN = "unknown"
"""The kind of a row read back with an ``error`` but no ``error_kind`` (see :func:`error_kind`)."""
UNSCORED_KINDS = frozenset({MODEL, ENVIRONMENT, TIMEOUT, UNKNOWN})
"""Error kinds after which a rollout has no reward (it is not a 0)."""


def error_kind(row: Mapping[str, Any]) -> str | None:
    """A results row's error kind: ``None`` without an error, else its ``error_kind`` column.

    Every rollout records its kind where the failure happens, so a row with an ``error`` and no known
    ``error_kind`` (a file from a primekit that predates kinds, or from another tool) is :data:`UNKNOWN`:
    not a score (its reward is left out of the reward numbers), counted with the errors, and re-run by
    ``-R``. The message is never parsed for a kind.
    """
    if not row.get("error"):
        return None
    kind = row.get("error_kind")
    return kind if kind in ERROR_KINDS else UNKNOWN


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

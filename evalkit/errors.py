"""One error class per boundary.

The CLI catches :class:`UserError` once at the top and prints ``error: <message>`` with exit code 2.
Everything else that goes wrong *inside a rollout* (model call, environment code, reward function)
is data: it is recorded on the rollout's row and never crashes a run.
"""

from __future__ import annotations

from evalkit.clients.redact import redact


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

"""The one retry policy of the remote clients (HTTP and litellm).

A client's single attempt raises :class:`Retryable` for a failure that trying again could cure
(429 honouring ``Retry-After``, 408/409/425/5xx, timeouts, dropped connections, malformed replies)
and :class:`~evalkit.core.errors.ModelCallError` for one it could not (other 4xx). :func:`with_retries`
turns the first into exponential backoff with full jitter, up to ``max_retries`` more attempts, and
finally a ModelCallError that says how many attempts were made. Messages leave redacted
(ModelCallError scrubs its own message; the debug log line is scrubbed here).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from evalkit.core.errors import ModelCallError
from evalkit.core.redact import redact

logger = logging.getLogger(__name__)
T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
MAX_RETRY_AFTER_S = 60.0


class Retryable(Exception):
    """One attempt failed in a way another attempt could fix.

    ``connect``: the server could not be reached at all (a preflight does not wait for it).
    ``timeout``: the attempt ran out of time (a preflight does not retry it either).
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None,
                 connect: bool = False, timeout: bool = False):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.connect = connect
        self.timeout = timeout


@dataclass(frozen=True)
class RetryPolicy:
    """How many retries, and how long to wait before each."""

    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with full jitter; a server's Retry-After is a floor, capped at 60 s."""
        backoff = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        delay = random.uniform(backoff / 2, backoff)
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER_S))
        return delay


async def with_retries(attempt: Callable[[], Awaitable[T]], policy: RetryPolicy, *, preflight: bool = False) -> T:
    """``attempt()`` until it succeeds or the retries are spent; then a redacted ModelCallError.

    With ``preflight=True`` an unreachable server or a timeout fails at once: a check that should
    take a second must not wait out retries against a server that is not answering.
    """
    tries = 0
    while True:
        try:
            return await attempt()
        except Retryable as exc:
            give_up = tries >= policy.max_retries or (preflight and (exc.connect or exc.timeout))
            if give_up:
                plural = "s" if tries else ""
                raise ModelCallError(
                    f"{exc} (after {tries + 1} attempt{plural})", retryable=True, status=exc.status
                ) from None
            delay = policy.delay(tries, exc.retry_after)
            logger.debug("retry %d/%d in %.2f s: %s", tries + 1, policy.max_retries, delay, redact(str(exc)))
            await asyncio.sleep(delay)
            tries += 1


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())

"""``litellm/<provider>/<model>``: any provider litellm speaks, as a :class:`~evalkit.clients.base.ModelClient`.

For models no OpenAI-compatible URL serves (Anthropic, Gemini, Bedrock...), most often GEPA's
reflection model (``-M litellm/anthropic/claude-sonnet-4-5``). litellm is an optional extra
(``pip install 'primekit[litellm]'``, pinned ``>=1.83``: earlier releases were compromised) and is
imported only when such a client is built, never at start-up.

Same contract as the HTTP client: one ``litellm.acompletion`` per attempt with litellm's own retries
off, so :mod:`evalkit.clients.retry` applies the project's policy (429/408/5xx/timeouts/connection
errors retried with backoff, other errors at once); each attempt is bounded by ``timeout``; the
reply is parsed by the wire module's parser (:func:`evalkit.clients.wire.parse_completion`) (text, tool calls,
usage, finish reason, logprobs).
Keys: litellm reads the provider's env var (``ANTHROPIC_API_KEY``...) unless ``-k VAR`` names one;
every credential-like env value is registered with :mod:`evalkit.core.redact`, so a key a
provider echoes back never reaches an error, a log line or a row.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from evalkit.clients.openai_client import PREFLIGHT_MESSAGES
from evalkit.clients.retry import RETRYABLE_STATUS, Retryable, RetryPolicy, parse_retry_after, with_retries
from evalkit.clients.spec import LITELLM_PREFIX, PREFLIGHT_TIMEOUT_S
from evalkit.clients.wire import parse_completion, sampling_fields
from evalkit.core.defaults import DEFAULT_TIMEOUT_S
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.redact import redact, register_env_secrets, register_secret, register_secret_headers
from evalkit.core.types import Completion, Message, SamplingArgs

INSTALL_HINT = "pip install 'primekit[litellm]'"


def import_litellm() -> Any:
    """litellm, configured to stay quiet and offline at import; UserError with the install line when absent."""
    # the bundled model-cost map, not a download at import time
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise UserError(f"litellm/... models need the litellm extra: {INSTALL_HINT}") from None
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on stdout
    return litellm


class LiteLLMClient:
    """Chat through ``litellm.acompletion``; ``model`` keeps the ``litellm/`` name the user typed."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout: float = DEFAULT_TIMEOUT_S,
        backoff_base_s: float = 0.5,
        extra_headers: dict[str, str] | None = None,
    ):
        self._litellm = import_litellm()
        self.model = model if model.startswith(LITELLM_PREFIX) else LITELLM_PREFIX + model
        self.provider_model = self.model[len(LITELLM_PREFIX):]
        self.base_url: str | None = base_url
        self.timeout = timeout
        self.policy = RetryPolicy(max(0, int(max_retries)), backoff_base_s)
        self._api_key = api_key
        self._headers = dict(extra_headers or {})
        register_env_secrets()
        register_secret(api_key)
        register_secret_headers(extra_headers)

    def __repr__(self) -> str:  # never the key
        return f"LiteLLMClient(model={self.model!r})"

    def request_kwargs(self, messages: list[Message], sampling: SamplingArgs,
                       tools: list[dict[str, Any]] | None, timeout: float) -> dict[str, Any]:
        """``acompletion`` keyword arguments: set sampling keys, ``sampling.extra`` passed through."""
        kwargs: dict[str, Any] = {"model": self.provider_model, "messages": messages, "timeout": timeout,
                                  "num_retries": 0, "max_retries": 0, **sampling_fields(sampling)}
        if tools:
            kwargs["tools"] = tools
        if self.base_url:
            kwargs["api_base"] = self.base_url
        if self._api_key:
            kwargs["api_key"] = self._api_key
        if self._headers:
            kwargs["extra_headers"] = self._headers
        kwargs.update(sampling.extra)
        return kwargs

    async def chat(self, messages: list[Message], sampling: SamplingArgs,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        kwargs = self.request_kwargs(messages, sampling, tools, self.timeout)
        return await with_retries(lambda: self._attempt(kwargs, self.timeout), self.policy)

    async def preflight(self) -> None:
        """One tiny request, bounded by ``min(timeout, 60 s)``: a missing or rejected key fails now."""
        bound = min(self.timeout, PREFLIGHT_TIMEOUT_S)
        kwargs = self.request_kwargs(PREFLIGHT_MESSAGES, SamplingArgs(max_tokens=1), None, bound)
        await with_retries(lambda: self._attempt(kwargs, bound), self.policy, preflight=True)

    async def _attempt(self, kwargs: dict[str, Any], limit_s: float) -> Completion:
        litellm = self._litellm
        try:
            response = await asyncio.wait_for(litellm.acompletion(**kwargs), timeout=limit_s)
        except (TimeoutError, litellm.Timeout):
            raise Retryable(
                f"request to {self.model} timed out after {limit_s:g} s", status=408, timeout=True
            ) from None
        except litellm.APIConnectionError as exc:
            raise Retryable(f"{self.model}: connection failed: {_message(exc)}", connect=True) from None
        except Exception as exc:  # litellm maps provider errors to exceptions with a status_code
            raise _classify(exc, self.model) from None
        data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
        if not data.get("choices"):
            raise Retryable(f"reply from {self.model} has no choices")
        try:
            return parse_completion(data)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise Retryable(f"unexpected reply shape from {self.model}: {type(exc).__name__}: {exc}") from None

    async def aclose(self) -> None:
        """Nothing to release: litellm owns its HTTP clients."""
        return None


def _classify(exc: Exception, model: str) -> Exception:
    """A litellm exception as :class:`Retryable` (429/408/5xx) or a final ModelCallError (other errors)."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    message = f"{model}: {type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {_message(exc)}"
    if status in RETRYABLE_STATUS:
        return Retryable(message, status=status, retry_after=parse_retry_after(_retry_after_header(exc)))
    return ModelCallError(message, retryable=False, status=status)


def _message(exc: Exception) -> str:
    """The exception's text, scrubbed before it is cut (a cut key would no longer match)."""
    return redact(str(getattr(exc, "message", None) or exc))[:300]


def _retry_after_header(exc: Exception) -> str | None:
    try:
        headers = getattr(exc, "headers", None) or getattr(exc, "response").headers
        return headers.get("retry-after") or headers.get("Retry-After")
    except Exception:  # no response, or one without headers: nothing to honour
        return None

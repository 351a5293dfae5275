"""The model bridge for legacy verifiers environments: a ``verifiers`` client backed by a primekit ModelClient.

A legacy verifiers environment asks its client for each model turn through ``Client.get_response``
(``verifiers/legacy/clients/client.py``): the client converts the prompt and tools to its native format,
sends the request, validates the native reply and converts it to a ``vf.Response``. :class:`ModelClientBridge`
implements those steps over :meth:`ModelClient.chat`, so every request goes through primekit's client layer
(embedded engine, HTTP endpoint, endpoint replicas, the scripted test client).

Contract kept with verifiers:

- a failed request (:class:`~evalkit.core.errors.ModelCallError`) is raised as ``vf.ModelError``, which verifiers
  records on the rollout's state and stops on, exactly as with its own OpenAI client;
- a reply with no text and no tool calls is ``vf.EmptyModelResponseError`` (what verifiers' OpenAI client does);
  a reply that only calls tools has ``content=None``, not ``""`` (what that client gives the environment);
- when the client reports token ids and logprobs (the embedded engine always does) they ride on
  ``Response.message.tokens``, so verifiers' trajectory carries them like it does for vLLM.

One bridge serves one rollout: it remembers the primekit :class:`Completion` behind each response id so the
wrapper can hand RL the exact per-turn token ids (``completion_for``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from verifiers.legacy.clients.client import Client
from verifiers.legacy.errors import EmptyModelResponseError, ModelError
from verifiers.legacy.types import Response, ResponseMessage, ResponseTokens
from verifiers.legacy.types import ToolCall as VfToolCall
from verifiers.legacy.types import Usage as VfUsage

from evalkit.clients.base import ModelClient
from evalkit.core.errors import ModelCallError
from evalkit.core.types import Completion
from evalkit.verifiers_compat.convert import to_openai_messages, to_openai_tool, to_sampling_args

_FINISH_REASONS = {"stop", "length", "tool_calls"}


class ModelClientBridge(Client):
    """A verifiers ``Client`` whose requests go to a primekit :class:`ModelClient` (see the module docstring)."""

    def __init__(self, model_client: ModelClient):
        super().__init__(model_client)
        self._completions: dict[str, Completion] = {}

    def setup_client(self, config: Any) -> Any:
        raise TypeError("ModelClientBridge wraps a primekit ModelClient; it is never built from a ClientConfig")

    def completion_for(self, response_id: str) -> Completion | None:
        """The primekit Completion behind a ``vf.Response`` this bridge returned (None for others)."""
        return self._completions.get(response_id)

    async def to_native_tool(self, tool: Any) -> dict[str, Any]:
        return to_openai_tool(tool)

    async def to_native_prompt(self, messages: Any) -> tuple[list[dict[str, Any]], dict]:
        return to_openai_messages(messages), {}

    async def get_native_response(
        self, prompt: list[dict[str, Any]], model: str, sampling_args: Any,
        tools: list[dict[str, Any]] | None = None, **kwargs: Any,
    ) -> Completion:
        try:
            return await self.client.chat(prompt, to_sampling_args(sampling_args), tools or None)
        except ModelCallError as exc:
            raise ModelError(str(exc)) from exc

    async def raise_from_native_response(self, response: Completion) -> None:
        if not response.text and not response.tool_calls:
            raise EmptyModelResponseError("Model returned no content and did not call any tools")

    async def from_native_response(self, response: Completion) -> Response:
        response_id = f"primekit-{uuid.uuid4().hex}"
        self._completions[response_id] = response
        finish = response.finish_reason if response.finish_reason in _FINISH_REASONS else None
        usage = response.usage
        return Response(
            id=response_id,
            created=int(time.time()),
            model=str(getattr(self.client, "model", "")),
            usage=VfUsage(
                prompt_tokens=usage.input_tokens,
                reasoning_tokens=0,
                completion_tokens=usage.output_tokens,
                total_tokens=usage.input_tokens + usage.output_tokens,
            ),
            message=ResponseMessage(
                content=response.text or None,  # a reply that only calls tools has no content, as in verifiers' client
                finish_reason=finish,
                is_truncated=response.finish_reason == "length",
                tokens=_tokens(response),
                tool_calls=[VfToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in response.tool_calls]
                or None,
            ),
        )

    async def close(self) -> None:
        """The ModelClient belongs to whoever made it (the eval runner, GEPA, RL); nothing to close here."""


def _tokens(response: Completion) -> ResponseTokens | None:
    if response.prompt_token_ids is None or response.completion_token_ids is None or response.logprobs is None:
        return None
    return ResponseTokens(
        prompt_ids=list(response.prompt_token_ids),
        prompt_mask=[0] * len(response.prompt_token_ids),
        completion_ids=list(response.completion_token_ids),
        completion_mask=[1] * len(response.completion_token_ids),
        completion_logprobs=list(response.logprobs),
    )

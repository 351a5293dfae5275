"""The OpenAI chat-completions wire format, written once: requests, responses and SSE stream chunks.

Every part of primekit that speaks the format goes through here: the HTTP client builds request bodies
and parses replies (:func:`request_body`, :func:`parse_completion`), ``prime serve`` and the verifiers
bridge parse requests (:func:`parse_request`) and answer with a ``chat.completion`` body
(:func:`completion_body`) or, for ``stream: true``, a ``chat.completion.chunk`` SSE stream
(:class:`ChunkWriter`). Plain dicts and bytes in and out, no pydantic and no SDK: the client's cost per
request is part of the eval harness's ceiling (``bench/eval_harness.py``).

Conventions kept on both sides, as OpenAI and vLLM have them:

* An assistant reply with tool calls and no text has ``content: null`` (not ``""``) in a response body.
  A stream opens every choice with ``{"role": "assistant", "content": ""}``, as vLLM does, so a client
  that assembles the deltas holds ``content: ""`` for such a reply: verifiers' chat programs send that
  back in the next request, and primekit's bridge must stream what a vLLM server streams for the
  conversation to go on exactly as it does against vLLM.
* vLLM's extensions ride along when known: ``prompt_token_ids`` (top level; on a stream's first chunk)
  and each choice's ``token_ids`` (on a stream, each chunk's own tokens).
* A stream is ``data: {json}\\n\\n`` events ending with ``data: [DONE]``; per choice a role delta (with
  ``content: ""``), then content deltas, then tool-call deltas (header with index, id and name; then the arguments),
  then a delta with ``finish_reason``; with ``stream_options.include_usage`` one more chunk with empty
  ``choices`` and the usage. An error after the stream began is an ``{"error": ...}`` event.

Error policy: :func:`parse_request` raises :class:`WireError` (with the offending field) for a request
that is not a chat request; servers answer it 400. :func:`parse_completion` raises ``KeyError``,
``TypeError``, ``ValueError`` or ``IndexError`` on a reply of the wrong shape; the client retries those.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.core.errors import ConfigError
from evalkit.core.sampling_rules import sampling_problems
from evalkit.core.types import Completion, Message, SamplingArgs, ToolCall, Usage

CHAT_COMPLETION = "chat.completion"
CHAT_COMPLETION_CHUNK = "chat.completion.chunk"
SSE_MEDIA_TYPE = "text/event-stream"
SSE_DONE = b"data: [DONE]\n\n"

_NOT_SAMPLING = frozenset({"model", "messages", "tools", "tool_choice", "stream", "stream_options", "n", "user",
                           "top_logprobs", "prompt_logprobs", "prompt", "echo"})
"""Request keys that are not sampling settings (``top_logprobs`` is accepted and not served)."""


class WireError(ValueError):
    """A request body that is not a valid chat-completions request; ``param`` names the field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


# ----- requests ---------------------------------------------------------------------------------

def sampling_fields(sampling: SamplingArgs) -> dict[str, Any]:
    """The chat-completions keys of ``sampling`` that are set (``extra`` not included)."""
    fields: dict[str, Any] = {}
    for key in ("max_tokens", "temperature", "top_p", "top_k", "seed"):
        value = getattr(sampling, key)
        if value is not None:
            fields[key] = value
    if sampling.stop:
        fields["stop"] = sampling.stop
    if sampling.logprobs:
        fields["logprobs"] = True
    return fields


def request_body(model: str, messages: list[Message], sampling: SamplingArgs,
                 tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A non-streaming request: standard keys when set, ``sampling.extra`` passed through (vLLM extras)."""
    body: dict[str, Any] = {"model": model, "messages": messages, **sampling_fields(sampling)}
    if tools:
        body["tools"] = tools
    body.update(sampling.extra)
    return body


@dataclass
class ChatRequest:
    """A parsed chat request. ``tools`` is what the body listed; ``tool_choice`` is passed on as sent."""

    model: str | None
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    n: int
    sampling: SamplingArgs
    stream: bool
    include_usage: bool
    prompt_logprobs: int | None = None
    """vLLM's extension: score the prompt's tokens too, with this many alternatives at each (``None``: do not)."""


MAX_PROMPT_LOGPROBS = 20
"""The most alternatives per prompt position (vLLM's default ``--max-logprobs``)."""


def parse_request(body: Any, *, max_choices: int = 1) -> ChatRequest:
    """Check a request body's shape and split it into messages, tools, ``n``, streaming and sampling.

    Sampling keys are every key that is not structural (unknown ones land in ``SamplingArgs.extra``);
    known keys are range-checked (:mod:`evalkit.core.sampling_rules`). Raises :class:`WireError`.
    """
    if not isinstance(body, dict):
        raise WireError("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise WireError(f"model must be a string, got {type(model).__name__}", "model")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise WireError("stream_options must be an object", "stream_options")
    return ChatRequest(
        model=model,
        messages=_messages(body.get("messages")),
        tools=_tools(body.get("tools")),
        tool_choice=body.get("tool_choice"),
        n=_choices(body.get("n"), max_choices),
        sampling=_sampling(body),
        stream=bool(body.get("stream")),
        include_usage=bool((options or {}).get("include_usage")),
        prompt_logprobs=_prompt_logprobs(body),
    )


@dataclass
class CompletionRequest:
    """A parsed ``/v1/completions`` request: a text prompt or the prompt's token ids (vLLM accepts both)."""

    model: str | None
    prompt: str | list[int]
    sampling: SamplingArgs
    prompt_logprobs: int | None


def parse_completions_request(body: Any) -> CompletionRequest:
    """A ``/v1/completions`` body: ``prompt`` a string or a list of token ids (one prompt), ``n`` 1, no stream
    and no ``echo``; ``max_tokens`` defaults to 16 as OpenAI's. Raises :class:`WireError`."""
    if not isinstance(body, dict):
        raise WireError("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise WireError(f"model must be a string, got {type(model).__name__}", "model")
    prompt = body.get("prompt")
    ids = isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    if not (isinstance(prompt, str) and prompt) and not ids:
        raise WireError("prompt must be a non-empty string or a non-empty list of token ids (one prompt)", "prompt")
    for key in ("stream", "echo"):
        if body.get(key):
            raise WireError(f"{key} is not served on /v1/completions here", key)
    _choices(body.get("n"), 1)
    values = {"max_tokens": 16, **{k: v for k, v in body.items() if k not in _NOT_SAMPLING and k != "logprobs"
                                   and v is not None}}
    try:
        sampling = SamplingArgs.from_dict(values)
    except ConfigError as exc:
        raise WireError(str(exc).removeprefix("sampling args: ")) from None
    return CompletionRequest(model=model, prompt=prompt, sampling=sampling, prompt_logprobs=_prompt_logprobs(body))


def _prompt_logprobs(body: dict[str, Any]) -> int | None:
    value = body.get("prompt_logprobs")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PROMPT_LOGPROBS:
        raise WireError(f"prompt_logprobs must be an integer from 0 to {MAX_PROMPT_LOGPROBS}", "prompt_logprobs")
    return value


def _messages(messages: Any) -> list[Message]:
    if not isinstance(messages, list) or not messages:
        raise WireError("messages must be a non-empty list", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise WireError(f"messages[{index}] must be an object with a role", "messages")
        if not isinstance(message.get("content"), (str, list, type(None))):
            raise WireError(f"messages[{index}].content must be a string, a list of parts or null", "messages")
    return messages


def _tools(tools: Any) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise WireError("tools must be a list of objects", "tools")
    return tools or None


def _choices(n: Any, max_choices: int) -> int:
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= max_choices:
        raise WireError(
            "n must be 1 here" if max_choices == 1 else f"n must be an integer from 1 to {max_choices}", "n"
        )
    return n


def _sampling(body: dict[str, Any]) -> SamplingArgs:
    if body.get("top_logprobs") is not None:  # not served, but range-checked like the sampling keys
        problems = sampling_problems({"top_logprobs": body["top_logprobs"]})
        if problems:
            raise WireError(problems[0], "top_logprobs")
    values = {k: v for k, v in body.items() if k not in _NOT_SAMPLING and v is not None}
    try:
        return SamplingArgs.from_dict(values)
    except ConfigError as exc:
        raise WireError(str(exc).removeprefix("sampling args: ")) from None


# ----- responses --------------------------------------------------------------------------------

def usage_body(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens}


def assistant_message(text: str, tool_calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The reply's message; ``content`` is ``null`` for a tool-call reply without text (see the module docstring)."""
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not tool_calls else None}
    if tool_calls:
        message["tool_calls"] = [call.to_message_dict() for call in tool_calls]
    return message


def logprob_entry(token: str, logprob: float) -> dict[str, Any]:
    """One ``choices[i].logprobs.content`` item (no alternatives are reported)."""
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8")), "top_logprobs": []}


def prompt_logprobs_body(scores: Sequence[Any], decode: Any) -> list[dict[str, Any] | None]:
    """vLLM's ``prompt_logprobs``: per prompt position ``None`` (the first) or ``{"<token id>": {"logprob", "rank",
    "decoded_token"}}``, the given token first, then the ``top`` alternatives. ``scores`` are
    :class:`evalkit.model.scoring.TokenScore`-shaped; ``decode(id)`` is a token's text."""
    out: list[dict[str, Any] | None] = []
    for score in scores:
        if score is None:
            out.append(None)
            continue
        entry = {str(score.token_id): {"logprob": score.logprob, "rank": score.rank,
                                       "decoded_token": decode(score.token_id)}}
        for rank, (token, logprob) in enumerate(score.top, start=1):
            entry.setdefault(str(token), {"logprob": logprob, "rank": rank, "decoded_token": decode(token)})
        out.append(entry)
    return out


def given_logprobs(entries: Any, token_ids: Sequence[int]) -> list[float | None]:
    """The given tokens' log-probabilities read back from a ``prompt_logprobs`` list (``None`` where the
    position has none: the first). Raises ``ValueError`` when its length or a position's token does not match."""
    if not isinstance(entries, list) or len(entries) != len(token_ids):
        size = len(entries) if isinstance(entries, list) else type(entries).__name__
        raise ValueError(f"prompt_logprobs has {size} positions for {len(token_ids)} tokens")
    out: list[float | None] = []
    for position, (entry, token) in enumerate(zip(entries, token_ids)):
        if entry is None:
            out.append(None)
            continue
        item = entry.get(str(token)) if isinstance(entry, dict) else None
        if not isinstance(item, dict) or not isinstance(item.get("logprob"), (int, float)):
            raise ValueError(f"prompt_logprobs[{position}] does not score the given token {token}")
        out.append(float(item["logprob"]))
    return out


def response_body(model: str, choices: list[dict[str, Any]], usage: Usage,
                  prompt_token_ids: list[int] | None = None) -> dict[str, Any]:
    """A ``chat.completion`` body around ready choices (``{"index", "message", "finish_reason", ...}``)."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": CHAT_COMPLETION,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage_body(usage),
    }
    if prompt_token_ids is not None:
        body["prompt_token_ids"] = prompt_token_ids
    return body


def completion_body(completion: Completion, model: str) -> dict[str, Any]:
    """A ``chat.completion`` body for one :class:`Completion`, with token ids when it has them."""
    choice: dict[str, Any] = {"index": 0, "message": assistant_message(completion.text, completion.tool_calls),
                              "finish_reason": completion.finish_reason or "stop"}
    prompt_ids = None
    if completion.prompt_token_ids is not None and completion.completion_token_ids is not None:
        prompt_ids = list(completion.prompt_token_ids)
        choice["token_ids"] = list(completion.completion_token_ids)
    return response_body(model, [choice], completion.usage, prompt_ids)


def error_body(message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape (``type``: ``invalid_request_error``, ``authentication_error``, ``server_error``...)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def parse_completion(data: dict[str, Any]) -> Completion:
    """Turn a chat-completions JSON reply into a Completion, keeping token ids/logprobs when present.

    Token ids follow vLLM: ``prompt_token_ids`` at the top level (or on the choice) and
    ``token_ids`` on the choice when the request set ``return_token_ids``; logprobs come from
    ``choices[0].logprobs.content[*].logprob``.
    """
    choice = data["choices"][0]
    message = choice.get("message") or {}
    text = message.get("content") or ""
    if not isinstance(text, str):  # some servers send content parts
        text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
    tool_calls = [
        ToolCall(
            id=str(call.get("id") or f"call_{i}"),
            name=str((call.get("function") or {}).get("name", "")),
            arguments=_arguments_text((call.get("function") or {}).get("arguments")),
        )
        for i, call in enumerate(message.get("tool_calls") or [])
    ]
    finish = choice.get("finish_reason") or ("tool_calls" if tool_calls else "stop")
    usage_data = data.get("usage") or {}
    usage = Usage(
        input_tokens=int(usage_data.get("prompt_tokens") or 0),
        output_tokens=int(usage_data.get("completion_tokens") or 0),
    )
    logprobs = None
    content = (choice.get("logprobs") or {}).get("content")
    if content:
        logprobs = [float(item["logprob"]) for item in content]
    prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids")
    completion_ids = choice.get("token_ids")
    return Completion(
        text=text,
        tool_calls=tool_calls,
        finish_reason=str(finish),
        usage=usage,
        prompt_token_ids=list(prompt_ids) if prompt_ids else None,
        completion_token_ids=list(completion_ids) if completion_ids is not None else None,
        logprobs=logprobs,
    )


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


# ----- streams ----------------------------------------------------------------------------------

def sse_event(data: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``data``."""
    return b"data: " + json.dumps(data).encode() + b"\n\n"


class ChunkWriter:
    """The SSE events of one streamed reply (one ``id``/``created``/``model`` for all its chunks).

    Per choice, call :meth:`start` once, :meth:`content` for each increment, :meth:`end` once; then
    :meth:`usage` (``None`` unless the request asked for it) and send :data:`SSE_DONE`.
    """

    def __init__(self, model: str, *, include_usage: bool = False):
        self.model = model
        self.include_usage = include_usage
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def chunk(self, choices: list[dict[str, Any]], **top: Any) -> bytes:
        """A ``chat.completion.chunk`` event; ``top`` adds top-level keys (``usage``, ``prompt_token_ids``)."""
        return sse_event({"id": self.id, "object": CHAT_COMPLETION_CHUNK, "created": self.created,
                          "model": self.model, "choices": choices, **top})

    def start(self, index: int, prompt_token_ids: list[int] | None = None) -> bytes:
        """The role delta that opens choice ``index``, with vLLM's empty content (see the module docstring)
        and the prompt's token ids, when given."""
        top = {"prompt_token_ids": prompt_token_ids} if prompt_token_ids is not None else {}
        return self.chunk([_choice(index, {"role": "assistant", "content": ""})], **top)

    def content(self, index: int, text: str, *, token_ids: list[int] | None = None,
                logprobs: list[dict[str, Any]] | None = None) -> bytes:
        """A content delta (an empty ``text`` sends only the tokens and logprobs of this increment)."""
        delta = {"content": text} if text else {}
        extra: dict[str, Any] = {}
        if token_ids is not None:
            extra["token_ids"] = token_ids
        if logprobs is not None:
            extra["logprobs"] = {"content": logprobs}
        return self.chunk([_choice(index, delta, **extra)])

    def end(self, index: int, tool_calls: Sequence[ToolCall], finish_reason: str) -> list[bytes]:
        """The closing events of choice ``index``: each tool call as a header delta and an arguments
        delta, then the finish reason."""
        events = []
        for position, call in enumerate(tool_calls):
            header = {"index": position, "id": call.id, "type": "function",
                      "function": {"name": call.name, "arguments": ""}}
            events.append(self.chunk([_choice(index, {"tool_calls": [header]})]))
            arguments = {"index": position, "function": {"arguments": call.arguments}}
            events.append(self.chunk([_choice(index, {"tool_calls": [arguments]})]))
        events.append(self.chunk([_choice(index, {}, finish_reason=finish_reason)]))
        return events

    def usage(self, usage: Usage) -> bytes | None:
        """The usage chunk (empty ``choices``) when the request set ``stream_options.include_usage``."""
        return self.chunk([], usage=usage_body(usage)) if self.include_usage else None


def _choice(index: int, delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": extra.pop("logprobs", None), "finish_reason": finish_reason,
            **extra}


def completion_events(completion: Completion, model: str, *, include_usage: bool = False) -> list[bytes]:
    """One finished :class:`Completion` as a whole SSE stream, ``[DONE]`` included."""
    writer = ChunkWriter(model, include_usage=include_usage)
    tokens = completion.prompt_token_ids is not None and completion.completion_token_ids is not None
    events = [writer.start(0, list(completion.prompt_token_ids) if tokens else None)]  # type: ignore[arg-type]
    if completion.text or tokens:
        ids = list(completion.completion_token_ids) if tokens else None  # type: ignore[arg-type]
        events.append(writer.content(0, completion.text, token_ids=ids))
    events += writer.end(0, completion.tool_calls, completion.finish_reason or "stop")
    usage = writer.usage(completion.usage)
    return events + ([usage] if usage else []) + [SSE_DONE]


def error_event(message: str, kind: str = "server_error") -> bytes:
    """An error reported inside a stream that has already begun (its HTTP status was 200)."""
    return sse_event(error_body(message, kind))

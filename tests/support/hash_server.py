"""A deterministic model on 127.0.0.1: an OpenAI-compatible server whose reply is a pure function of the request.

Run as a script (``python tests/support/hash_server.py [--log FILE]``); it prints ``PORT <n>`` once listening.
:class:`HashServer` starts it as a subprocess, keeps its PID and stops exactly that process.

Why: to compare two harnesses on the same environment (primekit and verifiers' own ``vf-eval``), both must
meet the same model. Here the reply depends only on the conversation (roles, texts, tool calls, tool call
ids), the offered tool names and ``max_tokens``, never on timing, order or which client asked; a harness
that sends a different conversation gets a different reply, so a difference shows up in the rows instead of
being hidden by a fixed answer. Only the standard library and aiohttp are imported, so it runs from any venv.

Replies (chosen by a SHA-256 of the canonical conversation):

- tools offered: usually one (sometimes two) tool calls with arguments built from each tool's JSON schema,
  at most three tool-calling turns per conversation; ``content`` is null on such replies, as OpenAI sends;
- otherwise a text in one of several styles built from the last user/tool text: echo, reversed,
  ``<think>..</think><answer>..</answer>``, ``\\boxed{..}``, "The answer is ..", a bare guess, hash words;
  half the time the answer goes in a ``<tag>`` the system prompt or the text names, or in ``\\boxed{}`` when
  they mention it. The guess is the sum of the first two integers of the text (right for "What is A+B?"),
  else its last integer, else its last word, so rewards vary between 0 and 1 across rows;
- ``max_tokens``/``max_completion_tokens``: the reply is cut to that many whitespace tokens, finish ``length``;
  ``stop`` strings end it earlier.

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (a text ``prompt``, as verifiers'
completion-mode environments send), both with ``stream: true`` as server-sent events (content deltas,
tool-call deltas with the arguments in two pieces, a usage chunk when ``stream_options.include_usage``);
``logprobs`` and vLLM's ``return_token_ids`` are answered with word-level stand-ins. ``GET /requests``
returns every request body seen; ``--log FILE`` also appends each as one JSON line (``{"path", "body"}``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from aiohttp import web

if __package__:  # imported by a test
    from support.fault_server import ScriptServer, serve_forever
else:  # run as a script: its own folder is on sys.path
    from fault_server import ScriptServer, serve_forever

WORDS = ("alpha", "bravo", "delta", "echo", "kilo", "lima", "nova", "oscar", "quartz", "sierra", "tango", "zulu")
MAX_TOOL_TURNS = 3


def text_of(content: Any) -> str | None:
    """A message content as text (parts joined); ``None`` stays ``None`` so null and "" differ."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def canonical(messages: list[dict[str, Any]]) -> list[list[Any]]:
    """What the reply depends on: role, text, tool calls (name, arguments, id) and tool_call_id of each message."""
    out = []
    for m in messages:
        calls = [[(c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"), c.get("id")]
                 for c in m.get("tool_calls") or []]
        out.append([m.get("role"), text_of(m.get("content")), calls, m.get("tool_call_id")])
    return out


def digest(*parts: Any) -> int:
    return int(hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest(), 16)


def guess(text: str) -> str:
    numbers = re.findall(r"-?\d+", text)
    if len(numbers) >= 2:
        return str(int(numbers[0]) + int(numbers[1]))
    if numbers:
        return numbers[-1]
    words = re.findall(r"\w+", text)
    return words[-1] if words else "none"


def styled_text(text: str, h: int, hints: str = "") -> str:
    """One of the reply styles (see the module docstring) for the source ``text``; ``hints`` (the system
    prompt and the source) make the answer tags or ``\\boxed{}`` they mention more likely, so rewards vary."""
    answer = guess(text)
    filler = " ".join(WORDS[(h >> (16 + 4 * i)) % len(WORDS)] for i in range(2 + (h >> 60) % 6))
    tags = [t for t in re.findall(r"<([a-z][a-z_]*)>", hints) if t != "think"]
    if tags and h % 2 == 0:
        body = text[::-1] if "revers" in hints.lower() and (h >> 3) % 2 else answer
        return f"<think>\n{filler}\n</think>\n<{tags[(h >> 5) % len(tags)]}>\n{body}\n</{tags[(h >> 5) % len(tags)]}>"
    if "boxed" in hints and h % 2 == 0:
        return f"Let me see: {filler}. The answer is \\boxed{{{answer}}}."
    style = (h >> 8) % 7
    if style == 0:
        return text
    if style == 1:
        return text[::-1]
    if style == 2:
        return f"<think>\n{filler}\n</think>\n<answer>\n{answer}\n</answer>"
    if style == 3:
        return f"Let me see: {filler}. The answer is \\boxed{{{answer}}}."
    if style == 4:
        return f"The answer is {answer}."
    if style == 5:
        return answer
    return filler.capitalize() + "."


def schema_value(schema: dict[str, Any], text: str, h: int) -> Any:
    """A value of the JSON-schema type ``schema`` drawn from ``text`` and ``h``."""
    if schema.get("enum"):
        return schema["enum"][h % len(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None and schema.get("anyOf"):
        return schema_value(next((s for s in schema["anyOf"] if s.get("type") != "null"), {}), text, h)
    numbers = re.findall(r"-?\d+", text)
    if kind == "integer":
        return int(numbers[h % len(numbers)]) if numbers else h % 10
    if kind == "number":
        return float(numbers[h % len(numbers)]) if numbers else float(h % 10) / 2
    if kind == "boolean":
        return h % 2 == 0
    if kind == "array":
        return [schema_value(schema.get("items") or {"type": "string"}, text, h >> 3)]
    if kind == "object":
        return tool_arguments(schema, text, h >> 3)
    words = re.findall(r"[A-Za-z]\w+", text)
    return words[h % len(words)] if words else WORDS[h % len(WORDS)]


def tool_arguments(parameters: dict[str, Any], text: str, h: int) -> dict[str, Any]:
    """Required properties always, optional ones now and then."""
    required = set(parameters.get("required") or [])
    args = {}
    for i, (name, schema) in enumerate((parameters.get("properties") or {}).items()):
        if name in required or (h >> i) % 2:
            args[name] = schema_value(schema or {}, text, h >> (5 * i + 1))
    return args


def source_text(messages: list[dict[str, Any]]) -> str:
    """The text a reply is built from: the last user or tool message's."""
    for m in reversed(messages):
        if m.get("role") in ("user", "tool", "text"):
            return text_of(m.get("content")) or ""
    return ""


def chat_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The assistant message for this conversation (before any ``max_tokens`` cut)."""
    names = sorted(str((t.get("function") or t).get("name")) for t in tools or [])
    h = digest(canonical(messages), names)
    text = source_text(messages)
    tool_turns = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    last_is_tool = bool(messages) and messages[-1].get("role") == "tool"
    wants_tool = h % 3 != 0 if not last_is_tool else h % 3 == 0
    if tools and wants_tool and tool_turns < MAX_TOOL_TURNS:
        count = 2 if (h >> 4) % 5 == 0 else 1
        calls = []
        for i in range(count):
            tool = tools[(h >> (6 + i)) % len(tools)]
            function = tool.get("function") or tool
            arguments = tool_arguments(function.get("parameters") or {}, text, h >> (12 + 7 * i))
            calls.append({"id": f"call_{(h >> (40 + i)) % 16**8:08x}{i}", "type": "function",
                          "function": {"name": function.get("name"), "arguments": json.dumps(arguments)}})
        return {"role": "assistant", "content": None, "tool_calls": calls}
    hints = " ".join(text_of(m.get("content")) or "" for m in messages if m.get("role") == "system") + " " + text
    return {"role": "assistant", "content": styled_text(text, h, hints)}


def cut(text: str, max_tokens: int | None) -> tuple[str, bool]:
    """``text`` cut to ``max_tokens`` whitespace tokens; whether it was cut."""
    pieces = re.findall(r"\s*\S+", text)
    if max_tokens is None or len(pieces) <= max_tokens:
        return text, False
    return "".join(pieces[: max(0, max_tokens)]), True


def apply_stop(text: str, stop: Any) -> tuple[str, bool]:
    """``text`` up to the first of the request's ``stop`` strings; whether one was found."""
    for item in [stop] if isinstance(stop, str) else stop or []:
        if item and item in text:
            return text[: text.index(item)], True
    return text, False


def token_count(text: str | None) -> int:
    return len((text or "").split())


def stand_in_ids(text: str) -> list[int]:
    return [digest(word) % 50000 for word in (text or "").split()]


def limit_of(body: dict[str, Any]) -> int | None:
    value = body.get("max_tokens", body.get("max_completion_tokens"))
    return int(value) if isinstance(value, (int, float)) else None


def answer_chat(body: dict[str, Any], reply_for: Any = None) -> dict[str, Any]:
    """A chat.completion body for ``body``; ``reply_for(messages, tools)`` picks the message (default
    :func:`chat_reply`)."""
    messages = body.get("messages") or []
    message = (reply_for or chat_reply)(messages, body.get("tools"))
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    if message.get("content") is not None:
        message["content"], was_cut = cut(message["content"], limit_of(body))
        message["content"], stopped = apply_stop(message["content"], body.get("stop"))
        finish = "length" if was_cut and not stopped else finish
    out_text = message.get("content") or json.dumps(message.get("tool_calls") or [])
    prompt_tokens = sum(token_count(text_of(m.get("content"))) for m in messages)
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    data: dict[str, Any] = {"id": f"chatcmpl-{digest(canonical(messages)) % 16**12:012x}", "object": "chat.completion",
                            "created": 0, "model": body.get("model"), "choices": [choice],
                            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": token_count(out_text),
                                      "total_tokens": prompt_tokens + token_count(out_text)}}
    if body.get("logprobs"):
        choice["logprobs"] = {"content": [{"token": w, "logprob": -0.125 * (i % 4), "bytes": None, "top_logprobs": []}
                                          for i, w in enumerate(out_text.split())]}
    if body.get("return_token_ids"):
        data["prompt_token_ids"] = stand_in_ids(" ".join(text_of(m.get("content")) or "" for m in messages))
        choice["token_ids"] = stand_in_ids(out_text)
    return data


def answer_completion(body: dict[str, Any]) -> dict[str, Any]:
    """A text_completion body for ``body`` (``prompt`` a string, or a list whose first item is used)."""
    prompt = body.get("prompt")
    prompt = prompt[0] if isinstance(prompt, list) and prompt else prompt
    prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)
    h = digest([["text", prompt, [], None]], [])
    text, was_cut = cut(styled_text(prompt, h, prompt), limit_of(body))
    text, stopped = apply_stop(text, body.get("stop"))
    was_cut = was_cut and not stopped
    choice: dict[str, Any] = {
        "index": 0,
        "text": text,
        "finish_reason": "length" if was_cut else "stop",
        "logprobs": None,
    }
    return {"id": f"cmpl-{h % 16**12:012x}", "object": "text_completion", "created": 0, "model": body.get("model"),
            "choices": [choice], "usage": {"prompt_tokens": token_count(prompt), "completion_tokens": token_count(text),
                                           "total_tokens": token_count(prompt) + token_count(text)}}


def chat_chunks(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply ``data`` as chat.completion.chunk objects (role, content words, tool-call pieces, finish)."""
    choice = data["choices"][0]
    message = choice["message"]
    base = {"id": data["id"], "object": "chat.completion.chunk", "created": 0, "model": data["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in re.findall(r"\s*\S+\s*", message.get("content") or "")]
    for i, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        chunks.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        for piece in (arguments[:half], arguments[half:]):
            chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    return chunks


def completion_chunks(data: dict[str, Any]) -> list[dict[str, Any]]:
    choice = data["choices"][0]
    base = {"id": data["id"], "object": "text_completion", "created": 0, "model": data["model"]}
    pieces = re.findall(r"\s*\S+\s*", choice["text"]) or [""]
    chunks = [{**base, "choices": [{"index": 0, "text": p, "finish_reason": None, "logprobs": None}]} for p in pieces]
    chunks[-1]["choices"][0]["finish_reason"] = choice["finish_reason"]
    return chunks


async def stream(
    request: web.Request, chunks: list[dict[str, Any]], usage: dict[str, Any] | None
) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for item in chunks:
        await response.write(f"data: {json.dumps(item)}\n\n".encode())
    if usage is not None:
        tail = {**{k: chunks[-1][k] for k in ("id", "object", "created", "model")}, "choices": [], "usage": usage}
        await response.write(f"data: {json.dumps(tail)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def make_app(log: Path | None = None, reply_for: Any = None) -> web.Application:
    """The server's app; ``reply_for(messages, tools)`` replaces :func:`chat_reply` (another scripted model on
    the same wire: streaming, usage, logging)."""
    seen: list[dict[str, Any]] = []

    def record(path: str, body: dict[str, Any]) -> None:
        seen.append(body)
        if log is not None:
            with log.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"path": path, "body": body}, ensure_ascii=False) + "\n")

    async def reply(request: web.Request, answer: Any, chunker: Any) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError as exc:
            return web.json_response({"error": {"message": f"bad JSON: {exc}"}}, status=400)
        record(request.path, body)
        data = answer(body)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await stream(request, chunker(data), data["usage"] if include_usage else None)
        return web.json_response(data)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await reply(request, lambda body: answer_chat(body, reply_for), chat_chunks)

    async def completions(request: web.Request) -> web.StreamResponse:
        return await reply(request, answer_completion, completion_chunks)

    async def requests(request: web.Request) -> web.Response:
        return web.json_response(seen)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "hash-model", "object": "model"}]})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/requests", requests)
    return app


class HashServer(ScriptServer):
    """This file's deterministic server, started as a subprocess (see :class:`fault_server.ScriptServer`)."""

    SCRIPT = Path(__file__).resolve()


def main(reply_for: Any = None) -> None:
    """Serve from the command line (``--port``, ``--log``); ``reply_for`` as in :func:`make_app`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, default=None, help="append each request as a JSON line here")
    args = parser.parse_args()
    serve_forever(make_app(args.log, reply_for), args.port)


if __name__ == "__main__":
    main()

"""A scripted OpenAI-compatible chat server on 127.0.0.1 that answers the test environments' questions right.

Run as a script (``python tests/support/solver_server.py``); it prints ``PORT <n>`` once listening.
:class:`SolverServer` starts it as a subprocess, keeps its PID and stops exactly that process.

It reads the conversation and answers the way a model that always knows the answer would:

- a judge prompt (verifiers' ``JudgeRubric`` template mentions the "ground truth") -> ``yes``; started with
  ``--grade``, a judge that reads the response: ``yes`` only when it states one number, the ground truth;
- a GEPA reflection request (it shows the current instruction in a ```-fenced block) -> that instruction
  plus " Double-check the sum." in a fenced block; for a JSON object of tool descriptions (GEPA's ``tools``
  component), the object with that sentence added to each description;
- tools offered and the last message is the user's ``What is A+B?`` -> one call of the tool named ``add``
  (or ``<server>_add``, an MCP server's prefixed name); started with ``--call-only-if WORD``, only when a
  tool's description holds WORD ("No idea." otherwise: a model that needs to be told to use the tool);
- the last message is a tool result -> ``The answer is <result>.``;
- ``next number after N`` -> ``N+1``;
- ``What is A+B?`` -> the sum, in the format the system prompt asks for: ``<answer>`` tags when it says
  "answer tags", ``\\boxed{}`` when it says "boxed", the bare number otherwise.

Every request is appended to ``GET /requests`` so a test can check what verifiers sent.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from aiohttp import web

if __package__:  # imported by a test
    from support.fault_server import ScriptServer, serve_forever
else:  # run as a script: its own folder is on sys.path
    from fault_server import ScriptServer, serve_forever


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def grade(prompt: str) -> str:
    """A judge's verdict on verifiers' template (fenced ground truth, then the fenced response): the response
    must state exactly one number, the ground truth's, so an echoed question or a list of answers is a no."""
    truth = re.search(r"Ground truth answer:\s*```\s*(.*?)\s*```", prompt, re.DOTALL)
    response = re.search(r"Response:\s*```\s*(.*?)\s*```", prompt, re.DOTALL)
    numbers = re.findall(r"-?\d+", response.group(1)) if response else []
    return "yes" if truth and numbers == [truth.group(1).strip()] else "no"


def reflect(instruction: str) -> str:
    """A teacher's rewrite of a fenced instruction: one more sentence (to each description of a tools object)."""
    more = " Double-check the sum."
    try:
        described = json.loads(instruction)
    except json.JSONDecodeError:
        described = None
    if isinstance(described, dict):
        return json.dumps({name: f"{text}{more}" for name, text in described.items()})
    return f"{instruction}{more}"


def solve(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, grading: bool = False,
          call_only_if: str = "") -> dict[str, Any]:
    """The assistant message a correct model sends next."""
    system = " ".join(_text(m) for m in messages if m.get("role") == "system").lower()
    last = messages[-1] if messages else {"role": "user", "content": ""}
    text = _text(last)
    if any("ground truth" in _text(m).lower() for m in messages):
        return {"role": "assistant", "content": grade(text) if grading else "yes"}
    fenced = re.search(r"```[^\n`]*\n(.*?)```", text, re.DOTALL)
    if last.get("role") == "user" and fenced:
        return {"role": "assistant", "content": f"```\n{reflect(fenced.group(1).strip())}\n```"}
    if last.get("role") == "tool":
        return {"role": "assistant", "content": f"The answer is {text.strip()}."}
    follow = re.search(r"next number after (-?\d+)", text)
    if follow:
        return {"role": "assistant", "content": str(int(follow.group(1)) + 1)}
    match = re.search(r"What is (-?\d+)\s*\+\s*(-?\d+)", text)
    if match is None:
        return {"role": "assistant", "content": "I do not know."}
    a, b = int(match.group(1)), int(match.group(2))
    if tools and call_only_if and not any(call_only_if in str(t.get("function", {}).get("description")) for t in tools):
        return {"role": "assistant", "content": "No idea."}
    if tools:
        names = [str(t.get("function", {}).get("name")) for t in tools]
        name = next((n for n in names if n == "add" or n.endswith("_add")), "add")
        call = {"id": f"call_{a}_{b}", "type": "function",
                "function": {"name": name, "arguments": json.dumps({"a": a, "b": b})}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if "answer tags" in system:
        return {"role": "assistant", "content": f"<think>\nadd them\n</think>\n<answer>\n{a + b}\n</answer>"}
    if "boxed" in system:
        return {"role": "assistant", "content": f"The sum is \\boxed{{{a + b}}}."}
    return {"role": "assistant", "content": str(a + b)}


def make_app(grading: bool = False, call_only_if: str = "") -> web.Application:
    seen: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        message = solve(body.get("messages") or [], body.get("tools"), grading, call_only_if)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        words = len(str(message.get("content") or "").split()) or 1
        return web.json_response({
            "id": f"chatcmpl-{len(seen)}", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 9, "completion_tokens": words, "total_tokens": 9 + words},
        })

    async def requests(request: web.Request) -> web.Response:
        return web.json_response(seen)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/requests", requests)
    return app


class SolverServer(ScriptServer):
    """This file's solving server, started as a subprocess (see :class:`fault_server.ScriptServer`)."""

    SCRIPT = Path(__file__).resolve()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--grade", action="store_true", help="judge prompts get a verdict that reads the response")
    parser.add_argument("--call-only-if", default="", help="call a tool only when a tool description holds this text")
    args = parser.parse_args()

    serve_forever(make_app(args.grade, args.call_only_if), args.port)


if __name__ == "__main__":
    main()

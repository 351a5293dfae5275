"""A scripted agent model on 127.0.0.1: it answers each user turn by running one ``bash`` command, then says
what the command printed. For comparing verifiers' ``bash`` harness runs (primekit's and verifiers' own).

Run as a script (``python tests/support/bash_server.py [--log FILE]``); it prints ``PORT <n>`` once listening.
:class:`BashServer` starts it as a subprocess, keeps its PID and stops exactly that process. The wire (streaming,
usage, ``GET /requests``, ``--log``) is :mod:`hash_server`'s; only the reply differs:

- a ``bash`` tool is offered and no tool result follows the last user message -> one ``bash`` call whose
  command computes the answer: a command in backquotes in the text -> that command; ``What is A+B?`` ->
  ``python3 -c 'print(A+B)'``; ``next number after N`` ->
  ``python3 -c 'print(N+1)'``; ``The word is: W`` -> ``echo '<word>W</word>'``; anything else -> ``echo`` of the text's
  length. The call id is a hash of the conversation, so it is the same on both sides;
- a tool result follows the last user message -> the result's text, stripped (what the command printed);
- no ``bash`` tool offered -> ``no bash tool``.

An agent that ends a task by running a submit command (mini-swe-agent: its prompt asks for
``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``, and its tool results are JSON ``{"returncode": .., "output": ..}``)
gets, after the first command's result, what it printed as text with one more ``bash`` call: that submit command.

A ``browser`` tool offered and no ``bash`` (verifiers' browser_use) -> the same, with the text in backquotes as the
call's ``code`` (Python for browser-harness).

An agent that asks for JSON keystrokes and no tools (harbor's Terminus 2: ``"keystrokes"`` and ``"task_complete"``
in its prompt) gets that JSON: first the command as keystrokes, then ``task_complete`` (twice, as Terminus asks to
confirm) with the terminal screen shown after the command as the ``analysis``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

if __package__:  # imported by a test
    from support.fault_server import ScriptServer
    from support.hash_server import canonical, digest, text_of
else:  # run as a script: its own folder is on sys.path
    from fault_server import ScriptServer
    from hash_server import canonical, digest, text_of
    from hash_server import main as serve


def command_for(text: str) -> str:
    """The shell command that answers ``text`` (see the module docstring)."""
    quoted = re.search(r"`([^`]+)`", text)
    if quoted:
        return quoted.group(1)
    follow = re.search(r"next number after (-?\d+)", text)
    if follow:
        return f"python3 -c 'print({int(follow.group(1))}+1)'"
    add = re.search(r"What is (-?\d+)\s*\+\s*(-?\d+)", text)
    if add:
        return f"python3 -c 'print({int(add.group(1))}+{int(add.group(2))})'"
    word = re.search(r"The word is: (\w+)", text)
    if word:
        return f"echo '<word>{word.group(1)}</word>'"
    return f"echo {len(text)}"


def bash_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The assistant message for this conversation."""
    names = {str((t.get("function") or t).get("name")) for t in tools or []}
    first = next((text_of(m.get("content")) or "" for m in messages if m.get("role") == "user"), "")
    if not names and '"keystrokes"' in first and '"task_complete"' in first:
        return _keystrokes_reply(messages, first)
    tool = "bash" if "bash" in names else "browser" if "browser" in names else None
    if tool is None:
        return {"role": "assistant", "content": "no bash tool"}
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    results = [m for m in messages[last_user + 1:] if m.get("role") == "tool"]
    text = text_of(messages[last_user].get("content")) or "" if last_user >= 0 else ""
    if results:
        printed = (text_of(results[-1].get("content")) or "").strip()
        if SUBMIT in text:
            submit = _call(messages, f"echo {SUBMIT}")
            return {"role": "assistant", "content": _observed(printed), "tool_calls": [submit]}
        return {"role": "assistant", "content": printed}
    if tool == "browser":
        return {"role": "assistant", "content": None, "tool_calls": [_call(messages, command_for(text), "browser")]}
    return {"role": "assistant", "content": None, "tool_calls": [_call(messages, command_for(text))]}


SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""What mini-swe-agent's prompt asks an agent to echo to end its task."""


def _call(messages: list[dict[str, Any]], command: str, tool: str = "bash") -> dict[str, Any]:
    """A ``bash`` call (or a ``browser`` one, the command as its ``code``) whose id is a hash of the conversation
    (the same on every runtime)."""
    arguments = {"code": command} if tool == "browser" else {"command": command}
    return {"id": f"call_{digest(canonical(messages)) % 16**8:08x}", "type": "function",
            "function": {"name": tool, "arguments": json.dumps(arguments)}}


def _keystrokes_reply(messages: list[dict[str, Any]], first: str) -> dict[str, Any]:
    """Terminus 2's JSON answer: the task's command as keystrokes, then (on later turns) the task marked complete
    with the screen shown right after the command."""
    users = [text_of(m.get("content")) or "" for m in messages if m.get("role") == "user"]
    task = first.split("Task Description:", 1)[-1]
    if len(users) == 1:
        answer = {"analysis": "start", "plan": "run the command",
                  "commands": [{"keystrokes": command_for(task) + "\n", "duration": 0.5}], "task_complete": False}
    else:
        screen = users[1].strip()  # the screen right after the command ran
        answer = {"analysis": screen, "plan": "done", "commands": [], "task_complete": True}
    return {"role": "assistant", "content": json.dumps(answer)}


def _observed(printed: str) -> str:
    """What a command printed, from a tool result that is mini-swe-agent's JSON observation (else the text)."""
    try:
        return str(json.loads(printed).get("output", printed)).strip()
    except (ValueError, AttributeError):
        return printed


class BashServer(ScriptServer):
    """This file's scripted agent model, started as a subprocess (see :class:`fault_server.ScriptServer`)."""

    SCRIPT = Path(__file__).resolve()


if __name__ == "__main__":
    serve(bash_reply)

"""A native tool environment and scripted models for GEPA's components (tool descriptions beside the prompt).

The task model calls the tool only when the tool's description says ``CALL ME`` (and answers easy questions only
when the system prompt holds ``KEYWORD``); the teacher adds what is missing to the component it is asked to rewrite.
"""

from __future__ import annotations

import json
import re

from evalkit.envs import Rubric, ToolEnv
from support.scripted_client import tool_call_reply

SEED_PROMPT = "Answer the question."


def lookup(key: str) -> str:
    """Does something.

    Args:
        key: the question's number.
    """
    return f"a{key}"


def exact(completion, answer) -> float:
    return float(completion[-1].get("content", "").strip() == answer)


def tool_env(n: int = 40) -> ToolEnv:
    rows = [{"question": f"{'hard ' if i % 3 == 0 else ''}q{i}", "answer": f"a{i}"} for i in range(n)]
    return ToolEnv(dataset=rows[: n // 2], eval_dataset=rows[n // 2:], system_prompt=SEED_PROMPT,
                   rubric=Rubric([exact]), tools=[lookup], max_turns=3)


def tool_task(messages, sampling, tools):
    """Hard questions: call ``lookup`` when its description says CALL ME, then answer with its result.
    Easy questions: answer when the system prompt holds KEYWORD."""
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    number = re.search(r"q(\d+)", messages[-1]["content"]).group(1)
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    described = {t["function"]["name"]: t["function"]["description"] for t in tools or []}
    if "hard" in messages[-1]["content"]:
        called = "CALL ME" in described.get("lookup", "")
        return tool_call_reply("lookup", json.dumps({"key": number})) if called else "dunno"
    return f"a{number}" if "KEYWORD" in system else "dunno"


def component_teacher(messages, sampling, tools):
    current = messages[0]["content"].split("```")[1].strip()
    if current.startswith("{"):
        described = json.loads(current)
        return "```\n" + json.dumps({k: v + " CALL ME for hard questions." for k, v in described.items()}) + "\n```"
    return f"```\n{current} Use KEYWORD.\n```"


def merge_task(messages, sampling, tools):
    """Four groups of questions by n % 4: one needs CALL ME in the tool description, one is lost with it, one
    needs KEYWORD in the system prompt, one is lost with it. Each one-component child of the seed trades a
    group for another, so the seed and both children stay on the frontier: siblings a merge can join."""
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    n = int(re.search(r"q(\d+)", messages[-1]["content"]).group(1))
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    called = "CALL ME" in " ".join(t["function"]["description"] for t in tools or [])
    ok = {0: called, 1: not called, 2: "KEYWORD" in system, 3: "KEYWORD" not in system}[n % 4]
    return f"a{n}" if ok else "dunno"

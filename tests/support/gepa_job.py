"""A GEPA job on scripted models, shared by the GEPA tests.

The task model answers correctly only when its system prompt holds the keyword ``KEYWORD`` (and, for "hard"
questions, also ``HARDWORD``); the scripted teacher adds the next missing keyword inside a fenced block, so
progress is deterministic.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from evalkit.envs import Rubric, SingleTurnEnv
from gepa_cli.config import EnvSpec, GepaJobConfig
from gepa_cli.runner import run_gepa
from support import TESTS
from support.scripted_client import ScriptedClient

SEED_PROMPT = "Answer the question."


def exact(completion, answer) -> float:
    return float(bool(completion) and completion[-1]["content"].strip() == answer)


def make_env(n: int = 40, hard_every: int = 0) -> SingleTurnEnv:
    """Questions ``q<i>``, answers ``a<i>``; with ``hard_every``, every such question is 'hard'."""
    rows = []
    for i in range(n):
        hard = bool(hard_every) and i % hard_every == 0
        rows.append({"question": f"{'hard ' if hard else ''}q{i}", "answer": f"a{i}"})
    return SingleTurnEnv(dataset=rows[: n // 2], eval_dataset=rows[n // 2 :], system_prompt=SEED_PROMPT,
                         rubric=Rubric([exact]))


def task_model(messages, sampling, tools):
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    question = messages[-1]["content"]
    number = re.search(r"q(\d+)", question).group(1)
    ok = "KEYWORD" in system and ("hard" not in question or "HARDWORD" in system)
    return f"a{number}" if ok else "dunno"


def teacher(messages, sampling, tools):
    prompt = messages[0]["content"]
    current = prompt.split("```")[1].strip()
    addition = "HARDWORD" if "KEYWORD" in current else "KEYWORD"
    return f"Here is a better one:\n```\n{current} Use {addition}.\n```"


def config(tmp_path: Path, **overrides) -> GepaJobConfig:
    fields = {
        "envs": [EnvSpec(id="toy")],
        "model": "scripted",
        "max_calls": 60,
        "num_train": 10,
        "num_val": 6,
        "minibatch_size": 3,
        "max_concurrent": 4,
        "run_dir": str(tmp_path / "run"),
        "reflection_sampling": {"max_tokens": 64},
    }
    fields.update(overrides)
    return GepaJobConfig(**fields)


def run(cfg, env=None, task=None, teach=None, **kwargs):
    task = task or ScriptedClient(task_model)
    teach = teach or ScriptedClient(teacher, model="teacher")
    outcome = run_gepa(cfg, clients=(task, teach), envs=[env or make_env()], show_progress=False, **kwargs)
    return outcome, task, teach


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def spawn_child(tmp_path: Path, source: str) -> subprocess.Popen:
    """Start ``source`` (with ``{tests}`` and ``{tmp}`` filled in) as a child Python process; keep its PID."""
    script = tmp_path / "child.py"
    script.write_text(source.format(tests=str(TESTS), tmp=str(tmp_path)))
    return subprocess.Popen([sys.executable, str(script)], cwd=os.getcwd())


def gepa_run(*args: str) -> tuple[int, str]:
    """``prime gepa run ARGS`` in this process: its exit code and output."""
    from support.cli import prime

    result = prime("gepa", "run", *args)
    return result.exit_code, result.output

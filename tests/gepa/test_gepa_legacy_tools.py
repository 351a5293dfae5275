"""``--components tools`` and ``--tools-file`` for a legacy verifiers (0.3.x) ``vf.ToolEnv``: its tools'
descriptions are a component, and a candidate's (or the file's) descriptions reach the model's requests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import VERIFIERS_ENVS
from support.scripted_client import ScriptedClient, tool_call_reply

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")

from evalkit.envs.tool_descriptions import TOOL_DESCRIPTIONS, apply_descriptions  # noqa: E402
from evalkit.loading.resolve import load_environment  # noqa: E402
from gepa_cli.components import available, seed_candidate  # noqa: E402


@pytest.fixture
def env(tmp_path: Path, monkeypatch):
    shutil.copytree(
        VERIFIERS_ENVS, tmp_path / "environments", ignore=shutil.ignore_patterns("README.md", "__pycache__")
    )
    monkeypatch.chdir(tmp_path)
    return load_environment("vf-tools", {"num_examples": 1})


def sent(client: ScriptedClient) -> set[str]:
    return {tool["function"]["description"] for request in client.requests for tool in request["tools"] or []}


async def rollout(env) -> ScriptedClient:
    client = ScriptedClient([tool_call_reply("add", '{"a": 3, "b": 4}'), "The answer is 7."])
    state = await env.rollout(client, env.get_eval_dataset(n=1)[0])
    assert state.error is None and state.reward == 1.0  # the tool still runs
    return client


def test_a_legacy_tool_env_offers_its_tool_descriptions(env):
    offered = available([env])
    assert json.loads(offered["tools"]) == {"add": "Add two integers."}
    assert set(seed_candidate([env], ["system_prompt", "tools"])) == {"system_prompt", "tools"}


async def test_a_candidates_descriptions_reach_the_requests(env):
    assert sent(await rollout(env)) == {"Add two integers."}
    token = TOOL_DESCRIPTIONS.set({"add": "Add two integers. CALL ME for sums."})  # what the GEPA adapter sets
    try:
        assert sent(await rollout(env)) == {"Add two integers. CALL ME for sums."}
    finally:
        TOOL_DESCRIPTIONS.reset(token)
    assert sent(await rollout(env)) == {"Add two integers."}  # only the rollouts started in that context


async def test_tools_file_descriptions_hold_for_the_whole_run(env):
    apply_descriptions(env, {"add": "Sums two numbers."}, "--tools-file tools.json")
    assert sent(await rollout(env)) == {"Sums two numbers."}
    assert json.loads(available([env])["tools"]) == {"add": "Sums two numbers."}


def test_gepa_rewrites_a_legacy_tool_envs_descriptions(tmp_path, monkeypatch):
    """A whole run: the task model calls ``add`` only when its description says CALL ME; the teacher adds that."""
    from support.gepa_job import config

    from gepa_cli.runner import run_gepa

    shutil.copytree(
        VERIFIERS_ENVS, tmp_path / "environments", ignore=shutil.ignore_patterns("README.md", "__pycache__")
    )
    monkeypatch.chdir(tmp_path)
    env = load_environment("vf-tools", {"num_examples": 12})

    def task(messages, sampling, tools):
        if messages[-1]["role"] == "tool":
            return f"The answer is {messages[-1]['content']}."
        a, b = messages[-1]["content"].split("What is ")[1].split("?")[0].split("+")
        called = "CALL ME" in " ".join(t["function"]["description"] for t in tools or [])
        return tool_call_reply("add", json.dumps({"a": int(a), "b": int(b)})) if called else "No idea."

    def teacher(messages, sampling, tools):
        current = messages[0]["content"].split("```")[1].strip()
        if current.startswith("{"):
            return "```\n" + json.dumps({k: v + " CALL ME." for k, v in json.loads(current).items()}) + "\n```"
        return f"```\n{current} Think.\n```"

    client = ScriptedClient(task)
    outcome = run_gepa(config(tmp_path, max_calls=40, num_train=6, num_val=4, components=["system_prompt", "tools"],
                              envs=[{"id": "vf-tools"}]),
                       clients=(client, ScriptedClient(teacher, model="teacher")), envs=[env], show_progress=False)
    assert outcome.seed_val_score == 0.0 and outcome.best_val_score == 1.0
    assert json.loads((outcome.run_dir / "tools.json").read_text()) == {"add": "Add two integers. CALL ME."}
    assert {"Add two integers.", "Add two integers. CALL ME."} <= sent(client)  # the seed's, then the candidate's

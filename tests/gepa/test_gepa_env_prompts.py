"""Per-environment system prompts in a multi-environment run: ``--components system_prompt,system_prompt:a,...``.

Environment ``a``'s questions are answered only under a prompt holding ALPHA and not BETA, ``b``'s only under
BETA and not ALPHA, so no shared prompt scores 1.0 and each environment's own prompt must differ. The scripted
teacher adds the keyword of the questions it is shown.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.gepa_job import config, exact
from support.scripted_client import ScriptedClient

from evalkit.envs import Rubric, SingleTurnEnv
from gepa_cli.components import available, listing
from gepa_cli.config import EnvSpec
from gepa_cli.runner import run_gepa

KEYWORD = {"a": "ALPHA", "b": "BETA"}


def env(tag: str, prompt: str = "Answer the question.", n: int = 24) -> SingleTurnEnv:
    rows = [{"question": f"{tag}{i}", "answer": f"ok{i}"} for i in range(n)]
    return SingleTurnEnv(
        dataset=rows[: n // 2], eval_dataset=rows[n // 2 :], system_prompt=prompt, rubric=Rubric([exact])
    )


def task(messages, sampling, tools):
    tag, number = re.fullmatch(r"([ab])(\d+)", messages[-1]["content"]).groups()
    system = messages[0]["content"]
    other = KEYWORD["b" if tag == "a" else "a"]
    return f"ok{number}" if KEYWORD[tag] in system and other not in system else "no"


def teacher(messages, sampling, tools):
    prompt = messages[0]["content"]
    current = prompt.split("```")[1].strip()
    shown = set(re.findall(r"\b([ab])\d+\b", prompt.split("```", 2)[2]))
    return (
        "```\n" + current + "".join(f" Use {KEYWORD[t]}." for t in sorted(shown) if KEYWORD[t] not in current) + "\n```"
    )


def test_each_environment_offers_its_own_prompt():
    offered = available([env("a", "Prompt A."), env("b", "")], ["a", "b"])
    assert offered["system_prompt"] == "Prompt A."
    assert (
        offered["system_prompt:a"] == "Prompt A." and offered["system_prompt:b"] == "Prompt A."
    )  # b has none: the shared seed
    assert "system_prompt:a" not in available([env("a")], ["a"])  # one environment: the shared prompt is its own
    assert "system_prompt:b:" in listing([env("a"), env("b")], ["a", "b"])


def test_unknown_environment_prompt_is_refused(tmp_path):
    from evalkit.core.errors import UserError

    with pytest.raises(
        UserError, match=r"no system_prompt:c component \(it offers: system_prompt, system_prompt:a, system_prompt:b"
    ):
        run_gepa(
            config(tmp_path, envs=[EnvSpec(id="a"), EnvSpec(id="b")], components=["system_prompt", "system_prompt:c"]),
            clients=(ScriptedClient(task), ScriptedClient(teacher)),
            envs=[env("a"), env("b")],
            show_progress=False,
        )


def test_per_environment_prompts_reach_their_environments_requests(tmp_path: Path):
    client = ScriptedClient(task)
    outcome = run_gepa(
        config(
            tmp_path,
            envs=[EnvSpec(id="a"), EnvSpec(id="b")],
            components=["system_prompt", "system_prompt:a", "system_prompt:b"],
            max_calls=120,
            num_train=12,
            num_val=8,
            seed=0,
        ),
        clients=(client, ScriptedClient(teacher, model="teacher")),
        envs=[env("a"), env("b")],
        show_progress=False,
    )
    assert outcome.seed_val_score == 0.0 and outcome.best_val_score == 1.0
    # every request of environment a under a winning prompt carried a's own prompt, and b's carried b's
    systems = {(r["messages"][-1]["content"][0], r["messages"][0]["content"]) for r in client.requests}
    assert ("a", "Answer the question. Use ALPHA.") in systems and ("b", "Answer the question. Use BETA.") in systems
    assert not any("ALPHA" in s and "BETA" in s for _, s in systems)  # the teacher never saw both kinds for one prompt


def test_a_secret_in_an_environments_own_prompt_stays_away_from_the_teacher(tmp_path: Path):
    from evalkit.core.redact import register_secret

    secret = "envprompt-SECRET-value-4411"
    register_secret(secret)
    client, teacher_client = ScriptedClient(task), ScriptedClient(teacher, model="teacher")
    run_gepa(config(tmp_path, envs=[EnvSpec(id="a"), EnvSpec(id="b")], components=["system_prompt", "system_prompt:b"],
                    max_calls=60, num_train=12, num_val=8, seed=0),
             clients=(client, teacher_client), envs=[env("a"), env("b", f"Answer the question. Token {secret}.")],
             show_progress=False)
    assert teacher_client.requests and not any(secret in str(r["messages"]) for r in teacher_client.requests)
    assert any(
        secret in r["messages"][0]["content"] for r in client.requests if r["messages"][-1]["content"].startswith("b")
    )
    assert not any(secret in p.read_text(errors="replace") for p in (tmp_path / "run").rglob("*") if p.is_file())

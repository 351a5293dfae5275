"""Run dirs for the report tests, written by our own code (eval runner, GEPA job, RL trainer) with
scripted or tiny models, so the reports are tested against the files the jobs really write.

- :func:`make_eval_runs`: two eval runs of one tool-using environment. Model "tools" calls ``add``
  then answers with the tool's result, except q3 (wrong) and q5 (the model call fails: error rows);
  model "even" answers directly and is right on even questions only. 6 examples x 2 rollouts each.
- :func:`make_gepa_run`: a GEPA run whose teacher adds ``KEYWORD``, which the task model needs.
- :func:`make_rl_run`: two RL steps of a tiny random-weight Llama (``tests/support/tiny_model.py``) via `prime rl run`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from evalkit.core.errors import ModelCallError
from evalkit.envs import Rubric, SingleTurnEnv, ToolEnv
from evalkit.eval.config import EvalConfig
from evalkit.eval.runner import run_eval
from support.scripted_client import ScriptedClient, tool_call_reply

PAIRS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 1), (2, 2)]


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first number
        b: second number
    """
    return a + b


def exact(completion, answer) -> float:
    return float(bool(completion) and str(completion[-1].get("content") or "").strip() == answer)


def tool_env() -> ToolEnv:
    rows = [{"question": f"q{i}: what is {a} + {b}?", "answer": str(a + b)} for i, (a, b) in enumerate(PAIRS)]
    return ToolEnv(
        eval_dataset=rows, tools=[add], rubric=Rubric([exact]), system_prompt="Use the add tool.", max_turns=4
    )


def tools_model(messages, sampling, tools):
    last = messages[-1]
    if last["role"] == "tool":
        return str(last["content"]) if "q3:" not in messages[1]["content"] else "41"
    number = int(re.match(r"q(\d+)", last["content"]).group(1))
    if number == 5:
        return ModelCallError("server gone (HTTP 503)")
    a, b = PAIRS[number]
    return tool_call_reply("add", json.dumps({"a": a, "b": b}), f"call_{number}")


def even_model(messages, sampling, tools):
    number = int(re.match(r"q(\d+)", messages[-1]["content"]).group(1))
    a, b = PAIRS[number]
    return str(a + b) if number % 2 == 0 else "no idea"


def make_eval_runs(out: Path) -> tuple[Path, Path]:
    """Returns (tools run, even run); expected avg rewards 8/10 (the 2 failed model calls are errors, not
    scores) and 6/12."""
    dirs = []
    for model, reply in (("tools", tools_model), ("even", even_model)):
        config = EvalConfig(
            env_id="toy-tools", model=model, output_dir=str(out), num_examples=6, rollouts_per_example=2, max_retries=0
        )
        dirs.append(run_eval(config, client=ScriptedClient(reply, model=model), env=tool_env()).run_dir)
    return dirs[0], dirs[1]


SEED_PROMPT = "Answer the question."


def gepa_env() -> SingleTurnEnv:
    rows = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(20)]
    return SingleTurnEnv(dataset=rows[:10], eval_dataset=rows[10:], system_prompt=SEED_PROMPT, rubric=Rubric([exact]))


def gepa_task(messages, sampling, tools):
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    number = re.search(r"q(\d+)", messages[-1]["content"]).group(1)
    return f"a{number}" if "KEYWORD" in system else "dunno"


def gepa_teacher(messages, sampling, tools):
    current = messages[0]["content"].split("```")[1].strip()
    return f"Better:\n```\n{current} Use KEYWORD.\n```"


def make_gepa_run(out: Path) -> Path:
    """Seed scores 0.0; candidate 1 (seed + ' Use KEYWORD.') scores 1.0 and ends the run."""
    from gepa_cli.config import EnvSpec, GepaJobConfig
    from gepa_cli.runner import run_gepa

    config = GepaJobConfig(envs=[EnvSpec(id="toy")], model="scripted", max_calls=40, num_train=6, num_val=4,
                           minibatch_size=2, max_concurrent=4, run_dir=str(out / "gepa" / "toy--scripted" / "run1"),
                           stop_at_score=1.0,
                           reflection_sampling={"max_tokens": 64})
    clients = (ScriptedClient(gepa_task), ScriptedClient(gepa_teacher, model="teacher"))
    return run_gepa(config, clients=clients, envs=[gepa_env()], show_progress=False).run_dir


RL_ENV = '''
from evalkit.envs import Rubric, SingleTurnEnv


def digit_fraction(completion) -> float:
    text = completion[-1]["content"] if completion else ""
    return sum(c.isdigit() for c in text) / max(1, len(text))


def load_environment(**kwargs):
    rows = [{"question": f"Say a number like {i}", "answer": str(i)} for i in range(24)]
    return SingleTurnEnv(dataset=rows, eval_dataset=rows[:4], rubric=Rubric([digit_fraction]))
'''


def make_rl_run(tmp: Path, env_code: str = RL_ENV) -> Path:
    """Two LoRA steps on a tiny random Llama, eval at every step (and at the start); returns the run dir."""
    from typer.testing import CliRunner

    from primekit_cli.app import app

    config = write_rl_project(tmp, env_code)
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp / "out")])
    assert result.exit_code == 0, result.output
    return tmp / "out" / "rl" / "viewtest"


QUICK_RL = [
    "--trainer.on_policy",
    "true",
    "--baseline.enabled",
    "false",
    "--eval.interval",
    "2",
    "--eval.at_start",
    "false",
    "--eval.rollouts_per_example",
    "2",
]
"""`prime rl run` overrides of :func:`write_rl_project`'s config for a quick run: on-policy, no baseline, one eval at
the end (step 2) with groups of 2."""


def write_rl_project(tmp: Path, env_code: str = RL_ENV) -> Path:
    """A tiny random Llama, the environment folder ``digits`` and :func:`make_rl_run`'s config over them (run
    ``viewtest``); returns the config (dotted overrides on `prime rl run` change the rest)."""
    from support.tiny_model import write_tiny_model

    model = write_tiny_model(tmp / "tiny")
    env_dir = tmp / "environments" / "digits"
    env_dir.mkdir(parents=True)
    (env_dir / "digits.py").write_text(env_code)
    config = tmp / "rl.toml"
    config.write_text(f'''model = "{model}"
run_name = "viewtest"
max_steps = 2
batch_size = 4
rollouts_per_example = 2
[sampling]
max_tokens = 8
[[env]]
id = "{env_dir}"
[trainer]
lr = 1e-3
micro_batch_size = 2
[ckpt]
interval = 0
save_weights = false
[eval]
interval = 1
num_examples = 2
at_start = true
[baseline]
num_examples = 4
min_reward = 0.0
max_reward = 1.0
min_diverse_groups = 0.0
''')
    return config


def write_big_run(source: Path, big: Path, n: int) -> Path:
    """A run dir of ``n`` rollouts made of ``source``'s rows (an eval run dir), two per example."""
    rows = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]
    big.mkdir()
    metadata = json.loads((source / "metadata.json").read_text())
    metadata["rollouts_per_example"] = 2
    (big / "metadata.json").write_text(json.dumps(metadata))
    with (big / "results.jsonl").open("w") as handle:
        for k in range(n):
            handle.write(json.dumps(dict(rows[k % len(rows)], example_id=k // 2, rollout_idx=k % 2)) + "\n")
    return big

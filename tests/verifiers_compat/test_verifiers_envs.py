"""Environments written for verifiers, run unchanged: `prime eval run` / `prime gepa run` in real subprocesses
against a real HTTP server on 127.0.0.1 (tests/support/solver_server.py, a scripted model that answers right), and the
embedded model.

The environments are in tests/verifiers_envs/ (verifiers code as its users write it); each test copies them
into a fresh project's `environments/` folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import prime_process

pytest.importorskip(
    "verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]' (make test installs it)"
)


@pytest.fixture
def project(verifiers_project: Path) -> Path:
    return verifiers_project


def run_rows(project: Path, env_id: str, model: str = "solver") -> tuple[list[dict], dict]:
    # a local environment's runs go to its own outputs/ folder, as verifiers puts them
    outputs = project / "environments" / env_id.replace("-", "_") / "outputs"
    (run_dir,) = (outputs / "evals" / f"{env_id}--{model.replace('/', '--')}").iterdir()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    rows.sort(key=lambda r: (r["example_id"], r["rollout_idx"]))  # groups are written as they finish
    return rows, json.loads((run_dir / "metadata.json").read_text())


EVAL_TOML = """\
# verifiers' spellings: env_id / env_args, and sampling keys at the top level
model = "solver"
base_url = "{url}"
num_examples = 2
rollouts_per_example = 2
max_tokens = 64

[[eval]]
env_id = "vf-single"

[[eval]]
env_id = "vf-counter"
state_columns = ["target"]

[[eval]]
env_id = "vf-tools"
env_args = {{ num_examples = 2 }}

[[eval]]
env_id = "vf-group"
rollouts_per_example = 3

[[eval]]
env_id = "vf-math"

[[eval]]
env_id = "vf-judge"
env_args = {{ judge_base_url = "{url}" }}
"""


def test_legacy_verifiers_envs_run_unchanged_through_prime_eval_run(project, solver):
    (project / "eval.toml").write_text(EVAL_TOML.format(url=solver.base_url))
    done = prime_process("eval", "run", "eval.toml", project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr

    rows, meta = run_rows(project, "vf-single")
    assert len(rows) == 4 and all(r["error"] is None for r in rows)
    assert {r["reward"] for r in rows} == {1.5}  # correct (weight 1.0) + XML format (weight 0.5)
    assert set(rows[0]["metrics"]) == {"correct_answer", "format_reward_func", "answer_length", "num_turns"}
    assert rows[0]["prompt"][0]["role"] == "system" and rows[0]["prompt"][2]["content"].startswith("<think>")
    assert rows[0]["stop_condition"] == "max_turns_reached" and meta["avg_metrics"]["num_turns"] == 1.0

    rows, _ = run_rows(project, "vf-counter")
    assert all(r["reward"] == 1.0 and r["stop_condition"] == "reached_target" for r in rows)
    assert sorted(r["metrics"]["num_turns"] for r in rows) == [2.0, 2.0, 3.0, 3.0]
    assert {r["target"] for r in rows} == {2, 3}  # -C picks keys of verifiers' own state
    assert rows[0]["completion"][1] == {"role": "user", "content": "Good. Now say the next number after 1."}

    rows, _ = run_rows(project, "vf-tools")
    assert all(r["reward"] == 1.0 and r["error"] is None for r in rows)
    assert rows[0]["metrics"] == {"correct": 1.0, "num_turns": 2.0, "total_tool_calls": 1.0, "add_calls": 1.0}
    call = rows[0]["completion"][0]["tool_calls"][0]
    assert call["function"]["name"] == "add" and rows[0]["completion"][1]["role"] == "tool"

    rows, _ = run_rows(project, "vf-group")
    assert len(rows) == 6 and all(r["reward"] == 1.5 for r in rows)
    assert {r["metrics"]["group_size"] for r in rows} == {3.0}  # the group-level function saw the whole group

    for env_id in ("vf-math", "vf-judge"):
        rows, _ = run_rows(project, env_id)
        assert len(rows) == 4 and all(r["reward"] == 1.0 and r["error"] is None for r in rows), env_id

    sent = solver.requests()
    few_shot = [r for r in sent if any("one plus one" in str(m.get("content")) for m in r["messages"])]
    assert few_shot and all(r["max_tokens"] == 64 for r in few_shot)
    tools = next(r["tools"] for r in sent if r.get("tools"))
    assert tools[0]["function"]["name"] == "add"
    assert tools[0]["function"]["parameters"]["properties"]["a"]["type"] == "integer"


@pytest.mark.verifiers
def test_v1_taskset_runs_offline_through_prime_eval_run(project, solver):
    done = prime_process("eval", "run", "vf-v1-math", "-m", "solver", "-b", solver.base_url, "-n", "2", "-r", "2",
                         project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    rows, meta = run_rows(project, "vf-v1-math")
    assert len(rows) == 4 and all(r["reward"] == 1.0 and r["error"] is None for r in rows)
    assert rows[0]["metrics"] == {"correct": 1.0, "reply_chars": 1.0}
    assert rows[0]["prompt"] == [{"role": "system", "content": "Reply with the number only."},
                                 {"role": "user", "content": "What is 0+1?"}]
    assert rows[0]["completion"] == [{"role": "assistant", "content": "1"}]
    assert rows[0]["stop_condition"] == "agent_completed" and meta["avg_reward"] == 1.0
    # offline: nothing was installed into the (test's) home, no uv, no hosted sandbox
    assert not (project / "home" / ".local").exists()


def test_buggy_reward_function_gives_error_rows_not_a_crash(project, solver):
    done = prime_process("eval", "run", "vf-buggy", "-m", "solver", "-b", solver.base_url, "-n", "2", "-r", "1",
                         project=project)
    assert "Traceback" not in done.stderr
    assert (
        done.returncode == 1 and "error: every rollout of vf-buggy errored (2/2); first error: [reward]" in done.stderr
    )
    rows, meta = run_rows(project, "vf-buggy")
    assert len(rows) == 2 and meta["num_errors"] == 2 and meta["status"] == "complete_with_errors"
    assert meta["errors_by_kind"] == {"reward": 2} and meta["num_scored"] == 2  # scored, the raising function 0
    for row in rows:
        assert row["error"] == "reward function broken raised ZeroDivisionError: float division by zero"
        assert row["error_kind"] == "reward"
        assert row["metrics"]["broken"] == 0.0 and row["metrics"]["length"] == 1.0


GEPA_TOML = """\
model = "solver"
base_url = "{url}"

[[env]]
env_id = "vf-single"
env_args = {{ num_examples = 6 }}

[gepa]
max_calls = 14
num_train = 4
num_val = 2
minibatch_size = 2
perfect_score = 9.0

[sampling]
max_tokens = 64
"""


def test_gepa_optimizes_the_verifiers_system_prompt_and_keeps_few_shot(project, solver):
    (project / "gepa.toml").write_text(GEPA_TOML.format(url=solver.base_url))
    done = prime_process("gepa", "run", "gepa.toml", "-o", str(project / "gepa-run"), project=project)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    candidates = [json.loads(line) for line in (project / "gepa-run" / "results.jsonl").read_text().splitlines()]
    seed = "Think step by step, then give the final number in answer tags."
    assert candidates[0]["info"]["system_prompt"] == seed
    proposed = f"{seed} Double-check the sum."
    tried = [r["messages"] for r in solver.requests() if r["messages"][0]["content"] == proposed]
    assert tried, "the proposed prompt was never tried"
    assert all(m[1]["content"] == "What is 1+1?" and "one plus one" in m[2]["content"] for m in tried)


@pytest.mark.slow
def test_embedded_model_runs_a_verifiers_env_through_prime_eval_run(project):
    done = prime_process("eval", "run", "vf-tools", "-n", "1", "-r", "1", "-t", "8", project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    rows, meta = run_rows(project, "vf-tools", "local/smollm2-135m")
    assert len(rows) == 1 and rows[0]["error"] is None and meta["usage"]["output_tokens"] > 0
    assert rows[0]["metrics"]["num_turns"] >= 1

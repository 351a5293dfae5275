"""Errors are not scores: error kinds, honest summaries, `complete_with_errors`, exit 1 when every
rollout errored, and `-R` retrying errored rollouts. Misbehaving servers are real HTTP servers on
127.0.0.1 (tests/support/fault_server.py), the CLI runs in-process through typer's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import prime
from support.fault_server import FaultServer
from support.scripted_client import ScriptedClient

from evalkit.core.errors import ModelCallError, error_kind
from evalkit.envs import Rubric, SingleTurnEnv
from evalkit.eval.config import EvalConfig
from evalkit.eval.runner import run_eval
from evalkit.eval.summary import summarize


def rows_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def only_run_dir(out: Path, slug: str = "reverse-text--stub") -> Path:
    (run_dir,) = (out / "evals" / slug).iterdir()
    return run_dir


@pytest.mark.parametrize("fault", ["503", "401"])
def test_server_failing_after_first_request_exits_1_and_is_not_a_score(fault, tmp_path):
    """The issue's case: the preflight passes, then every request fails; before, 60/60 error rows
    were saved as reward 0 with status `complete` and exit 0."""
    server = FaultServer("--always", fault)
    try:
        result = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-n", "4", "-r", "2",
                       "--max-retries", "0", "-o", str(tmp_path))
    finally:
        server.stop()
    assert result.exit_code == 1, result.output
    error_lines = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(error_lines) == 1 and "every rollout of reverse-text errored (8/8)" in error_lines[0]
    assert "first error: [model] model call failed" in error_lines[0] and f"HTTP {fault}" in error_lines[0]
    assert "Traceback" not in result.output
    meta = json.loads((only_run_dir(tmp_path) / "metadata.json").read_text())
    assert meta["status"] == "complete_with_errors"
    assert meta["avg_reward"] is None and meta["num_scored"] == 0  # not "reward 0"
    assert meta["num_errors"] == 8 and meta["avg_error"] == 1.0 and meta["errors_by_kind"] == {"model": 8}
    assert {row["error_kind"] for row in rows_of(only_run_dir(tmp_path))} == {"model"}
    assert "n/a (no rollout was scored)" in result.output


def test_some_errors_are_left_out_of_the_reward_and_counted_apart(tmp_path):
    server = FaultServer("--fail-every", "3")  # every third rollout request fails: 2 of 6
    try:
        result = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-n", "3", "-r", "2",
                       "--max-retries", "0", "-c", "1", "-o", str(tmp_path))
    finally:
        server.stop()
    assert result.exit_code == 0, result.output  # some rollouts were scored: a finished run with errors
    meta = json.loads((only_run_dir(tmp_path) / "metadata.json").read_text())
    assert meta["num_errors"] == 2 and meta["num_scored"] == 4 and meta["avg_error"] == pytest.approx(2 / 6, abs=1e-6)
    assert meta["avg_reward"] == 1.0  # the echo server reverses correctly; counting errors as 0 would give 0.667
    assert meta["status"] == "complete_with_errors"
    assert "status: complete_with_errors" in result.output
    assert "4 (2 errored, not scored)" in result.output and "model 2" in result.output
    view = prime("eval", "view", str(only_run_dir(tmp_path)), "-s", "3")
    assert view.exit_code == 0 and "4 (2 errored, not scored)" in view.output and "1.0000 ± 0.0000" in view.output
    assert "reward: none (errored before it was scored)" in view.output and "error (model)" in view.output


def test_resume_retries_errored_rollouts_and_no_retry_errors_keeps_them(tmp_path):
    args = [
        "eval",
        "run",
        "reverse-text",
        "-m",
        "stub",
        "-n",
        "3",
        "-r",
        "2",
        "--max-retries",
        "0",
        "-o",
        str(tmp_path),
    ]
    broken = FaultServer("--always", "503")
    try:
        first = prime(*args, "-b", broken.base_url)
    finally:
        broken.stop()
    assert first.exit_code == 1
    run_dir = only_run_dir(tmp_path)
    healthy = FaultServer()
    try:
        kept = prime(*args, "-b", healthy.base_url, "-R", "--no-retry-errors")
        assert kept.exit_code == 1 and "nothing left to run" in kept.output
        assert all(row["error"] for row in rows_of(run_dir))
        resumed = prime(*args, "-b", healthy.base_url, "-R")
    finally:
        healthy.stop()
    assert resumed.exit_code == 0, resumed.output
    assert "running again 6 rollouts that errored" in resumed.output
    rows = rows_of(run_dir)
    assert sorted((r["example_id"], r["rollout_idx"]) for r in rows) == [(e, i) for e in range(3) for i in range(2)]
    assert not any(row["error"] for row in rows)
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["avg_reward"] == 1.0 and meta["num_errors"] == 0
    assert [p.name for p in (tmp_path / "evals" / "reverse-text--stub").iterdir()] == [run_dir.name]


ROWS = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(3)]


def test_reward_function_errors_stay_scored_rows_and_are_not_retried(tmp_path):
    def exact(completion, answer) -> float:
        return float(completion[-1]["content"] == answer)

    def fragile(completion) -> float:
        if completion[-1]["content"] == "a1":
            raise KeyError("missing field")
        return 1.0

    env = SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([exact, fragile]))
    config = EvalConfig(env_id="t", model="scripted", output_dir=str(tmp_path), num_examples=3, rollouts_per_example=1)
    client = ScriptedClient(lambda messages, sampling, tools: "a" + messages[-1]["content"][1:])
    result = run_eval(config, client=client, env=env)
    bad = result.rows[1]
    assert bad["error_kind"] == "reward" and "fragile raised KeyError" in bad["error"]
    assert bad["reward"] == 1.0 and bad["metrics"] == {"exact": 1.0, "fragile": 0.0}  # scored, that function 0
    assert result.summary["num_scored"] == 3 and result.summary["avg_reward"] == pytest.approx(5 / 3)
    assert result.metadata["status"] == "complete_with_errors" and not result.all_errored
    again = run_eval(config.model_copy(update={"resume": str(result.run_dir)}), client=client, env=env)
    assert again.states == [] and len(again.rows) == 3  # a raising reward function would only raise again


def test_all_rows_errored_with_any_kind_is_all_errored(tmp_path):
    def broken(completion) -> float:
        raise ValueError("bug")

    env = SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([broken]))
    config = EvalConfig(env_id="t", model="scripted", output_dir=str(tmp_path), num_examples=3, rollouts_per_example=1)
    result = run_eval(config, client=ScriptedClient(["x"]), env=env)
    assert result.all_errored and result.first_error.startswith("[reward] reward function broken raised ValueError")


def test_rows_without_error_kind_are_unknown_errors_whatever_the_message_says():
    """Older files have no ``error_kind``: such an error is ``unknown`` and not a score; the message
    (even one worded like a reward-function error) decides nothing."""
    rows = [
        {"example_id": 0, "rollout_idx": 0, "reward": 1.0, "error": None},
        {"example_id": 0, "rollout_idx": 1, "reward": 0.0, "error": "model call failed: HTTP 503"},
        {
            "example_id": 1,
            "rollout_idx": 0,
            "reward": 0.0,
            "error": "environment raised RuntimeError: x",
            "error_kind": "model",
        },
        {"example_id": 1, "rollout_idx": 1, "reward": 0.5, "error": "reward function f raised ValueError: y"},
        {
            "example_id": 2,
            "rollout_idx": 0,
            "reward": 0.5,
            "error": "model call failed: HTTP 503",
            "error_kind": "reward",
        },
    ]
    assert [error_kind(row) for row in rows] == [None, "unknown", "model", "unknown", "reward"]
    summary = summarize(rows, 2)
    assert summary["errors_by_kind"] == {"model": 1, "reward": 1, "unknown": 2} and summary["num_errors"] == 4
    assert summary["num_scored"] == 2 and summary["avg_reward"] == 0.75 and summary["avg_error"] == 0.8


def test_model_and_environment_errors_carry_their_kind(tmp_path):
    def reply(messages, sampling, tools):
        return ModelCallError("gone") if messages[-1]["content"] == "q0" else "ok"

    env = SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([lambda completion: 1.0]))
    config = EvalConfig(env_id="t", model="scripted", output_dir=str(tmp_path), num_examples=3, rollouts_per_example=1)
    result = run_eval(config, client=ScriptedClient(reply), env=env)
    assert [r["error_kind"] for r in result.rows] == ["model", None, None]
    assert result.summary["avg_reward"] == 1.0 and result.summary["num_scored"] == 2

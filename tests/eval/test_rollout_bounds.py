"""Every rollout is bounded: its conversation by `--rollout-timeout` (wall clock), each message an
environment adds by `--max-message-chars`. Before: an `env_response` or tool that slept an hour, or
`max_turns=-1` with no stop condition, hung the run forever; a tool that returned 50 MB was kept whole
(a 100 MB results file, 690 MB of memory).

The CLI runs as a real subprocess against a real HTTP server on 127.0.0.1 (tests/support/fault_server.py)
where the run's end matters; in-process with the scripted model otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.fault_server import FaultServer
from support.scripted_client import ScriptedClient, tool_call_reply

from evalkit.envs import MultiTurnEnv, Rubric, ToolEnv
from evalkit.eval.config import EvalConfig
from evalkit.eval.runner import run_eval

ENDLESS = '''
from evalkit.envs import MultiTurnEnv, Rubric


class Endless(MultiTurnEnv):
    """max_turns=-1 and no stop condition: only the rollout timeout ends it."""

    def env_response(self, messages, state):
        return {"role": "user", "content": "again"}


def load_environment(**kwargs):
    return Endless(eval_dataset=[{"question": "go", "answer": "x"}], rubric=Rubric([lambda completion: 1.0]),
                   max_turns=-1)
'''


def test_endless_conversation_ends_at_the_rollout_timeout_as_a_timeout_row(tmp_path):
    env_dir = tmp_path / "environments" / "endless"
    env_dir.mkdir(parents=True)
    (env_dir / "endless.py").write_text(ENDLESS)
    server = FaultServer()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "primekit_cli", "eval", "run", str(env_dir), "-m", "stub", "-b", server.base_url,
             "-n", "1", "-r", "2", "-o", str(tmp_path / "out"), "--rollout-timeout", "1"],
            capture_output=True, text=True, timeout=240, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    finally:
        server.stop()
    assert done.returncode == 1, done.stderr  # every rollout errored
    assert "first error: [timeout] rollout timed out after 1 s" in done.stderr and "Traceback" not in done.stderr
    (run_dir,) = (tmp_path / "out" / "evals" / "endless--stub").iterdir()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert [row["error_kind"] for row in rows] == ["timeout", "timeout"]
    assert all(row["completion"] and row["stop_condition"] == "error" for row in rows)  # its turns so far are kept


class Sleeper(MultiTurnEnv):
    """A sync env_response that sleeps "an hour" (until the test releases it) for the example "sleep"."""

    release = threading.Event()

    def env_response(self, messages, state):
        if state["answer"] == "sleep":
            self.release.wait(600)
        return {"role": "user", "content": "next"}

    def is_completed(self, messages, state):
        return state["turn"] >= 2


def hang(seconds: int) -> str:
    """Sleep (a tool whose server never answers).

    Args:
        seconds: how long
    """
    Sleeper.release.wait(600)
    return "done"


def test_a_sleeping_env_response_or_tool_ends_its_own_rollout_only(tmp_path):
    rows = [{"question": f"q{i}", "answer": "sleep" if i == 0 else "fine"} for i in range(4)]
    config = EvalConfig(env_id="t", model="scripted", output_dir=str(tmp_path), num_examples=4, rollouts_per_example=1,
                        rollout_timeout=1.0)
    tool_env = ToolEnv(eval_dataset=rows[:1], tools=[hang], rubric=Rubric([lambda completion: 1.0]))
    try:
        result = run_eval(
            config,
            client=ScriptedClient(["ok"]),
            env=Sleeper(eval_dataset=rows, rubric=Rubric([lambda completion: 1.0])),
        )
        kinds = [row["error_kind"] for row in sorted(result.rows, key=lambda r: r["example_id"])]
        assert kinds == ["timeout", None, None, None]  # the others finished and were scored
        tools = run_eval(config.model_copy(update={"num_examples": 1, "output_dir": str(tmp_path / "tools")}),
                         client=ScriptedClient([tool_call_reply("hang", '{"seconds": 3600}', "c1")]), env=tool_env)
        assert (
            tools.rows[0]["error_kind"] == "timeout"
            and "rollout timed out after 1 s (1 model turn done" in tools.rows[0]["error"]
        )
    finally:
        Sleeper.release.set()


def test_rollout_timeout_is_a_flag_and_a_key_in_eval_gepa_and_rl(tmp_path):
    from evalkit.core.tomlio import validate
    from gepa_cli.config import GepaToml, build_job_config, toml_to_job_fields
    from rl_backend.config import RLConfig

    assert EvalConfig(env_id="x").limits().rollout_timeout == 3600.0
    gepa = validate(
        GepaToml, {"env": [{"id": "x"}], "gepa": {"rollout_timeout": 30, "max_message_chars": 500}}, "g.toml"
    )
    job = build_job_config(toml_to_job_fields(gepa, tmp_path), "g.toml")
    assert (job.limits().rollout_timeout, job.limits().max_message_chars) == (30, 500)
    rl = validate(RLConfig, {"env": [{"id": "x"}], "rollout_timeout": 45, "max_message_chars": 900}, "rl.toml")
    assert (rl.limits().rollout_timeout, rl.limits().max_message_chars) == (45, 900)
    for args in (
        ["eval", "run", "reverse-text", "--rollout-timeout", "0"],
        ["gepa", "run", "reverse-text", "--rollout-timeout", "-1"],
        ["rl", "run", str(_rl_toml(tmp_path)), "--rollout-timeout", "0", "--dry-run"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "primekit_cli", *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert done.returncode == 2 and "rollout_timeout" in done.stderr and "Traceback" not in done.stderr, done.stderr


def _rl_toml(tmp_path: Path) -> Path:
    path = tmp_path / "rl.toml"
    path.write_text('[[env]]\nid = "reverse-text"\n')
    return path


def big(n: int) -> str:
    """Return n characters.

    Args:
        n: how many
    """
    return "x" * n


def test_a_huge_tool_result_is_cut_with_a_marker_before_the_model_sees_it(tmp_path):
    size = 20_000_000
    client = ScriptedClient(lambda messages, sampling, tools: "done" if messages[-1]["role"] == "tool"
                            else tool_call_reply("big", json.dumps({"n": size}), "c1"))
    env = ToolEnv(eval_dataset=[{"question": "q", "answer": "a"}], tools=[big], rubric=Rubric([lambda completion: 1.0]))
    config = EvalConfig(env_id="t", model="scripted", output_dir=str(tmp_path), num_examples=1, rollouts_per_example=1)
    result = run_eval(config, client=client, env=env)
    tool_message = result.rows[0]["completion"][1]
    marker = f"\n[... {size - 100_000:,} more characters cut: max_message_chars is 100,000]"
    assert tool_message["role"] == "tool" and tool_message["content"] == "x" * 100_000 + marker
    assert client.requests[-1]["messages"][-1]["content"] == tool_message["content"]  # what the model saw
    assert (result.run_dir / "results.jsonl").stat().st_size < 300_000
    small = run_eval(config.model_copy(update={"max_message_chars": 1000, "output_dir": str(tmp_path / "small")}),
                     client=client, env=env)
    assert small.rows[0]["completion"][1]["content"].startswith("x" * 1000 + "\n[... 19,999,000 more characters cut")


class Wrapped(MultiTurnEnv):
    """Like a library-run environment (a verifiers wrapper): it appends to the completion itself."""

    async def generate(self, client, state, sampling):
        state.completion.append({"role": "assistant", "content": "y" * 300_000})
        state.completion.append({"role": "tool", "content": [{"type": "text", "text": "z" * 300_000}]})
        state.stop_condition = "completed"


@pytest.mark.parametrize("limit", [100_000, 50])
def test_every_stored_message_is_capped_whatever_the_environment(tmp_path, limit):
    env = Wrapped(eval_dataset=[{"question": "q", "answer": "a"}], rubric=Rubric([lambda completion: 1.0]))
    config = EvalConfig(env_id="t", model="scripted", output_dir=str(tmp_path), num_examples=1, rollouts_per_example=1,
                        max_message_chars=limit)
    completion = run_eval(config, client=ScriptedClient(["x"]), env=env).rows[0]["completion"]
    assert completion[0]["content"].startswith("y" * limit + f"\n[... {300_000 - limit:,} more characters cut")
    assert completion[1]["content"][0]["text"].startswith("z" * limit + "\n[... ")

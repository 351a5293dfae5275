"""A reward function, tool or environment hook that calls ``sys.exit()`` or raises ``KeyboardInterrupt`` is user
code failing: a row with its error, never the end of the run; a real Ctrl-C (SIGINT to the process) still stops it.

Before, ``SystemExit``/``KeyboardInterrupt`` passed every ``except Exception`` and ended `prime eval run` with no
rows (exit 3 or "interrupted") and `prime env check` with no report at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import REPO, with_pythonpath
from support.report_runs import PAIRS, exact, tools_model
from support.scripted_client import ScriptedClient

from evalkit.envs import Rubric, ToolEnv
from evalkit.eval.config import EvalConfig
from evalkit.eval.runner import run_eval

ENV = '''
import sys
import time
from evalkit.envs import Rubric, SingleTurnEnv


def load_environment(how: str = "exit", slow: float = 0.0, **kwargs):
    def quits(completion, info) -> float:
        if info["i"] == 1:
            if how == "exit":
                sys.exit(3)
            raise KeyboardInterrupt
        time.sleep(slow)
        return 1.0

    async def quits_async(completion, info) -> float:
        if info["i"] == 2:
            sys.exit("bye")
        return 1.0

    rows = [{"question": f"q{i}", "answer": "a", "info": {"i": i}} for i in range(40)]
    return SingleTurnEnv(dataset=rows, eval_dataset=rows, rubric=Rubric([quits, quits_async]))
'''


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "environments" / "exiter").mkdir(parents=True)
    (tmp_path / "environments" / "exiter" / "exiter.py").write_text(ENV)
    return tmp_path


def prime(project: Path, *args: str, **popen: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "primekit_cli", *args], cwd=project, env=with_pythonpath(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.parametrize("how", ["exit", "interrupt"])
def test_a_reward_that_exits_is_a_reward_error(project, how):
    child = prime(project, "eval", "run", "exiter", "-a", json.dumps({"how": how}), "-m", "mock/echo", "-n", "4",
                  "-r", "2", "-o", "out")
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    [results] = list((project / "out").glob("evals/*/*/results.jsonl"))
    rows = {(r["example_id"], r["rollout_idx"]): r for r in map(json.loads, results.read_text().splitlines())}
    assert len(rows) == 8
    said = "sys.exit(3) called" if how == "exit" else "KeyboardInterrupt raised"
    assert all(f"reward function quits raised ExitRequested: {said}" in rows[1, i]["error"] for i in (0, 1))
    exits_async = "reward function quits_async raised ExitRequested: sys.exit('bye')"
    assert all(exits_async in rows[2, i]["error"] for i in (0, 1))
    assert all(rows[e, i]["error"] is None and rows[e, i]["reward"] == 2.0 for e in (0, 3) for i in (0, 1))
    assert "complete_with_errors" in out


def test_env_check_reports_a_reward_that_exits(project):
    child = prime(project, "env", "check", "exiter", "--no-model")
    out, err = child.communicate(timeout=300)
    assert child.returncode == 1, err  # a check failed: the report says which
    assert "FAILED:" in out and "ExitRequested" in " ".join(out.split())


def test_a_tool_that_exits_is_a_tool_failure_the_model_sees(tmp_path):
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: first number
            b: second number
        """
        if a == 3:
            sys.exit(0)
        if a == 5:
            raise KeyboardInterrupt
        return a + b

    rows = [{"question": f"q{i}: what is {a} + {b}?", "answer": str(a + b)} for i, (a, b) in enumerate(PAIRS)]
    env = ToolEnv(eval_dataset=rows, tools=[add], rubric=Rubric([exact]), max_turns=4)
    config = EvalConfig(env_id="toy-tools", model="tools", output_dir=str(tmp_path), num_examples=5, max_retries=0)
    result = run_eval(config, client=ScriptedClient(tools_model, model="tools"), env=env)
    by_id = {row["example_id"]: row for row in result.rows}
    assert len(by_id) == 5 and by_id[0]["reward"] == 1.0
    for example in (1, 2):  # a = 3 and a = 5: the tool's reply says what happened, the rollout goes on
        tool_reply = next(m["content"] for m in by_id[example]["completion"] if m["role"] == "tool")
        assert "ExitRequested" in tool_reply and "user code may not end the run" in tool_reply


def test_a_real_ctrl_c_still_stops_the_run(project):
    child = prime(project, "eval", "run", "exiter", "-a", json.dumps({"how": "interrupt", "slow": 0.5}), "-m",
                  "mock/echo", "-n", "40", "-r", "2", "-c", "2", "-o", "out")
    try:
        deadline = time.monotonic() + 120
        results = None
        while time.monotonic() < deadline and child.poll() is None:
            found = list((project / "out").glob("evals/*/*/results.jsonl"))
            if found and found[0].read_text().count("\n") >= 2:
                results = found[0]
                break
            time.sleep(0.05)
        assert results is not None and child.poll() is None, "the run did not start writing rows"
        os.kill(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert child.returncode == 130, err
    assert "interrupted" in err
    meta = json.loads((results.parent / "metadata.json").read_text())
    assert meta["status"] == "incomplete" and meta["num_rollouts"] < 80

"""Reward functions cannot stall a run: sync ones run on worker threads, scoring has a timeout, and a
function that never returns does not keep the process from exiting."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import TESTS
from support.scripted_client import ScriptedClient
from typer.testing import CliRunner

from evalkit.envs import Rubric, SingleTurnEnv
from evalkit.eval.config import EvalConfig
from evalkit.eval.runner import run_eval
from primekit_cli.app import app

ROWS = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(8)]
SLEEP_S = 1.0


def config(tmp_path: Path, **kwargs) -> EvalConfig:
    return EvalConfig(env_id="t", model="scripted", output_dir=str(tmp_path), num_examples=8, rollouts_per_example=1,
                      max_concurrent=8, **kwargs)


@pytest.mark.timing
def test_sleeping_sync_reward_function_does_not_block_other_rollouts(tmp_path):
    """8 rollouts whose reward function sleeps 1 s: on the event loop that is 8 s one after the
    other (the issue measured 122 s for 2 x 60 s); on worker threads about 1 s."""

    def slow(completion) -> float:
        time.sleep(SLEEP_S)
        return 1.0

    env = SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([slow]))
    started = time.perf_counter()
    result = run_eval(config(tmp_path), client=ScriptedClient(["x"]), env=env)
    wall = time.perf_counter() - started
    assert result.summary["avg_reward"] == 1.0 and result.summary["num_errors"] == 0
    assert wall < 4 * SLEEP_S, f"8 rollouts with a {SLEEP_S} s reward function took {wall:.1f} s"


@pytest.mark.timing
def test_async_reward_functions_still_run_on_the_loop(tmp_path):
    async def slow(completion) -> float:
        import asyncio

        await asyncio.sleep(SLEEP_S)
        return 0.5

    env = SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([slow]))
    started = time.perf_counter()
    result = run_eval(config(tmp_path), client=ScriptedClient(["x"]), env=env)
    assert time.perf_counter() - started < 4 * SLEEP_S and result.summary["avg_reward"] == 0.5


@pytest.mark.timing
def test_scoring_past_the_timeout_records_an_error_and_the_run_goes_on(tmp_path):
    def quick(completion) -> float:
        return 1.0

    def stuck_on_q3(completion, answer) -> float:
        if answer == "a3":
            time.sleep(5)
        return 1.0

    env = SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([quick, stuck_on_q3]))
    started = time.perf_counter()
    result = run_eval(config(tmp_path, score_timeout=0.5), client=ScriptedClient(["x"]), env=env)
    assert time.perf_counter() - started < 4
    late = result.rows[3]
    assert (
        late["error_kind"] == "timeout"
        and "scoring timed out after 0.5 s in reward function stuck_on_q3" in late["error"]
    )
    assert late["reward"] == 0.0 and late["metrics"] == {"quick": 1.0, "stuck_on_q3": 0.0}
    assert result.summary["num_scored"] == 7 and result.summary["avg_reward"] == 2.0  # the timeout is not a score
    assert result.metadata["status"] == "complete_with_errors" and result.metadata["errors_by_kind"] == {"timeout": 1}


def test_score_timeout_flag_is_validated():
    result = CliRunner().invoke(app, ["eval", "run", "reverse-text", "--score-timeout", "0"], catch_exceptions=False)
    assert result.exit_code == 2 and "error: command line: 'score_timeout': must be a positive number" in result.output


HUNG = textwrap.dedent("""
    import sys
    import time
    sys.path.insert(0, TESTS)  # the scripted test client lives beside the tests
    from support.scripted_client import ScriptedClient
    from evalkit.envs import Rubric, SingleTurnEnv
    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import run_eval

    def forever(completion) -> float:
        while True:
            time.sleep(0.1)

    env = SingleTurnEnv(eval_dataset=[{"question": "q", "answer": "a"}], rubric=Rubric([forever]))
    config = EvalConfig(env_id="t", model="scripted", output_dir=OUT, num_examples=1, rollouts_per_example=1,
                        score_timeout=0.3)
    result = run_eval(config, client=ScriptedClient(["x"]), env=env)
    print(result.rows[0]["error_kind"])
""")


def test_a_reward_function_that_never_returns_does_not_keep_the_process_alive(tmp_path):
    script = f"OUT = {str(tmp_path)!r}\nTESTS = {str(TESTS)!r}\n" + HUNG
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "timeout"
    (run_dir,) = (tmp_path / "evals" / "t--scripted").iterdir()
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "complete_with_errors"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_raising_reward_function_in_a_thread_is_still_a_row(kind, tmp_path):
    def boom(completion) -> float:
        raise RuntimeError("nope")

    async def aboom(completion) -> float:
        raise RuntimeError("nope")

    env = SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([boom if kind == "sync" else aboom]))
    result = run_eval(config(tmp_path), client=ScriptedClient(["x"]), env=env)
    assert all(row["error_kind"] == "reward" and "raised RuntimeError: nope" in row["error"] for row in result.rows)


def test_sync_callable_returning_a_coroutine_is_awaited_on_the_run_loop(tmp_path):
    import asyncio

    loops = []

    async def inner(completion) -> float:
        loops.append(asyncio.get_running_loop())
        return 0.25

    def wrapper(completion):  # not a coroutine function, but returns a coroutine
        return inner(completion)

    env = SingleTurnEnv(eval_dataset=ROWS[:2], rubric=Rubric([wrapper]))

    async def main():
        from evalkit.eval.runner import arun_eval

        result = await arun_eval(
            config(tmp_path).model_copy(update={"num_examples": 2}), client=ScriptedClient(["x"]), env=env
        )
        return result, asyncio.get_running_loop()

    result, loop = asyncio.run(main())
    assert result.summary["avg_reward"] == 0.25 and loops and all(seen is loop for seen in loops)


def test_hung_sync_reward_calls_do_not_starve_healthy_rollouts(tmp_path):
    """70 rollouts, 66 of whose reward function hangs, more than the 64 scoring threads. Before: the
    healthy rollouts queued behind the hung ones timed out too (70/70 timeouts), their queue wait
    counted against their time, and the stuck threads stayed counted against the pool."""
    import threading

    from evalkit.envs.rubric import _POOL, SCORING_THREADS

    release = threading.Event()
    rows = [{"question": f"q{i}", "answer": "hang" if i < SCORING_THREADS + 2 else "ok"} for i in range(70)]

    def judge(answer) -> float:
        if answer == "hang":
            release.wait(60)  # a judge whose server never answers
        return 1.0

    env = SingleTurnEnv(eval_dataset=rows, rubric=Rubric([judge]))
    cfg = EvalConfig(env_id="t", model="scripted", output_dir=str(tmp_path), num_examples=70, rollouts_per_example=1,
                     max_concurrent=70, score_timeout=1.0)
    try:
        result = run_eval(cfg, client=ScriptedClient(["x"]), env=env)
        kinds = {row["example_id"]: row["error_kind"] for row in result.rows}
        assert [kinds[i] for i in range(SCORING_THREADS + 2)] == ["timeout"] * (SCORING_THREADS + 2)
        assert [kinds[i] for i in range(SCORING_THREADS + 2, 70)] == [None] * 4  # healthy ones scored
        assert _POOL.abandoned >= SCORING_THREADS  # still stuck, and no longer counted against the pool
        again = run_eval(
            cfg.model_copy(update={"num_examples": 4}),
            client=ScriptedClient(["x"]),
            env=SingleTurnEnv(eval_dataset=rows[-4:], rubric=Rubric([judge])),
        )
        assert again.summary["num_scored"] == 4  # capacity is back for the next run in this process
    finally:
        release.set()

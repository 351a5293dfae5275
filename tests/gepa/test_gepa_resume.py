"""Kill a GEPA run with SIGKILL mid-flight, resume it, and check the budget held across both runs.

The child process runs the job on scripted models (slowed down so the kill lands mid-iteration);
the test keeps the child's PID and kills exactly that process.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path

from support.gepa_job import spawn_child
from support.scripted_client import ScriptedClient

from gepa_cli.runner import run_gepa

CHILD = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{tests!r}]
    from support.gepa_job import config, make_env, task_model
    from support.scripted_client import ScriptedClient
    from gepa_cli.runner import run_gepa
    from pathlib import Path

    # a teacher that never helps, so only the budget ends the run
    useless = ScriptedClient(lambda m, s, t: "```\\nSomething else.\\n```", model="teacher")
    task = ScriptedClient(task_model, delay_s=0.05)
    run_gepa(config(Path({tmp!r}), max_calls=150, max_concurrent=1), clients=(task, useless), envs=[make_env()],
             show_progress=False)
    """
)


def _used(run_dir: Path) -> int:
    """What a resume counts as spent: the rollouts used, or the reservation beyond them when it is larger."""
    try:
        saved = json.loads((run_dir / "budget.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return 0
    return max(saved.get("used", 0), saved.get("reserved", 0))


def test_kill_and_resume_stays_within_budget(tmp_path):
    from support.gepa_job import config, make_env, task_model

    run_dir = tmp_path / "run"
    child = spawn_child(tmp_path, CHILD)
    try:
        deadline = time.monotonic() + 60
        # past the seed pass (6) and into the second iteration's minibatches
        # (the seed pass reserves the first iteration too, so wait for the state the seed pass saves)
        state = run_dir / "state" / "gepa_state.bin"
        while (_used(run_dir) < 15 or not state.is_file()) and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.02)
        time.sleep(0.1)  # into the iteration's rollouts
        assert child.poll() is None, "the child finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)

    used_at_kill = _used(run_dir)
    assert 15 <= used_at_kill < 150
    assert (run_dir / "state" / "gepa_state.bin").is_file()

    useless = ScriptedClient(lambda m, s, t: "```\nSomething else.\n```", model="teacher")
    task = ScriptedClient(task_model)
    outcome = run_gepa(
        config(tmp_path, max_calls=150), resume=run_dir, clients=(task, useless), envs=[make_env()], show_progress=False
    )
    # every rollout the resumed run made is counted on top of what the killed run reserved (several iterations'
    # worth: budget.py), the seed is not re-run, and the run goes on to spend the rest
    assert task.requests and outcome.total_metric_calls == used_at_kill + len(task.requests) <= 150
    assert outcome.status == "budget_exhausted"
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["total_metric_calls"] == outcome.total_metric_calls <= 150
    assert meta["started_at"] and meta["status"] == "budget_exhausted"

    # resuming a finished run spends nothing
    again = ScriptedClient(task_model)
    outcome2 = run_gepa(
        config(tmp_path, max_calls=150),
        resume=run_dir,
        clients=(again, useless),
        envs=[make_env()],
        show_progress=False,
    )
    assert again.requests == [] and outcome2.total_metric_calls == outcome.total_metric_calls

"""Each GEPA stopper ends a run on scripted models, says so (status, ``stopped_by``), and the run resumes.

Stoppers: no improvement for N proposals, wall-clock time, the teacher's cost in USD, a stop file, and
SIGTERM (a real signal to a child process, handled like Ctrl-C). After each, ``--resume`` (``resume=``)
continues the same run dir under a looser setting until the budget ends it, never re-running the seed.
"""

from __future__ import annotations

import json
import signal
import textwrap
import time
from pathlib import Path

import pytest
from support.gepa_job import config, make_env, run, spawn_child, task_model
from support.scripted_client import ScriptedClient

from evalkit.core.errors import UserError
from gepa_cli.runner import run_gepa
from gepa_cli.stoppers import STOP_FILE_EVERY_S


def useless():
    return ScriptedClient(lambda m, s, t: "```\nSomething else.\n```", model="teacher")


def metadata(run_dir: Path) -> dict:
    return json.loads((run_dir / "metadata.json").read_text())


def resume(tmp_path: Path, **overrides):
    """Continue the run in tmp_path/run until its budget (60) is spent; returns (outcome, task client)."""
    task = ScriptedClient(task_model)
    outcome = run_gepa(config(tmp_path, max_calls=60, **overrides), resume=tmp_path / "run",
                       clients=(task, useless()), envs=[make_env()], show_progress=False)
    return outcome, task


def check_resumed(tmp_path: Path, stopped, **overrides) -> None:
    outcome, task = resume(tmp_path, **overrides)
    assert outcome.status == "budget_exhausted" and metadata(tmp_path / "run")["stopped_by"] == "budget_exhausted"
    assert (
        len(task.requests) > 0 and outcome.total_metric_calls == stopped.total_metric_calls + len(task.requests) <= 60
    )


def test_no_improvement_stops_after_n_proposals_and_resumes(tmp_path):
    outcome, task, teach = run(config(tmp_path, max_calls=60, no_improvement_stop=2), teach=useless())
    assert outcome.status == "no_improvement" and metadata(tmp_path / "run")["stopped_by"] == "no_improvement"
    assert len(teach.requests) == 2 and outcome.total_metric_calls == 6 + 2 * 6 == len(task.requests)
    check_resumed(tmp_path, outcome)


def test_max_time_stops_and_counts_earlier_time_on_resume(tmp_path):
    slow = ScriptedClient(task_model, delay_s=0.05)
    outcome, _, teach = run(config(tmp_path, max_calls=60, max_concurrent=1, max_time=0.5), task=slow, teach=useless())
    assert outcome.status == "timeout" and outcome.total_metric_calls < 60 and outcome.duration_s >= 0.5
    # the same limit again: the earlier invocation's time already used it up, so nothing more is spent
    again, task = resume(tmp_path, max_concurrent=1, max_time=0.5)
    assert again.status == "timeout" and task.requests == []
    check_resumed(tmp_path, again, max_time=600)


def test_reflection_cost_cap_stops_and_carries_the_spend(tmp_path):
    # $1 per input token (scripted usage counts whitespace words); one reflection request is a few hundred words
    prices = {"teacher": (1e6, 0.0)}
    outcome, _, teach = run(config(tmp_path, max_calls=60, reflection_model="teacher", max_reflection_cost=50,
                                   reflection_prices=prices), teach=useless())
    meta = metadata(tmp_path / "run")
    asked = sum(len(r["messages"][0]["content"].split()) for r in teach.requests)
    assert outcome.status == "reflection_cost" and len(teach.requests) == 1
    assert meta["reflection_cost_usd"] == pytest.approx(asked) and meta["stopped_by"] == "reflection_cost"
    again, task = resume(tmp_path, reflection_model="teacher", max_reflection_cost=50, reflection_prices=prices)
    assert again.status == "reflection_cost" and task.requests == []  # the carried spend is still over the cap
    check_resumed(tmp_path, again, reflection_model="teacher", max_reflection_cost=1e9, reflection_prices=prices)
    assert metadata(tmp_path / "run")["reflection_cost_usd"] > asked


def test_unpriced_teacher_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(UserError, match="no price for teacher 'mystery-model'.*reflection_prices"):
        run(config(tmp_path, reflection_model="mystery-model", max_reflection_cost=1.0))
    assert not (tmp_path / "run").exists()


def test_stop_file_stops_after_the_current_proposal_and_is_cleared_on_resume(tmp_path):
    stop_file = tmp_path / "run" / "gepa.stop"

    def touching(messages, sampling, tools):
        stop_file.touch()
        return "```\nSomething else.\n```"

    # the proposal ends more than STOP_FILE_EVERY_S after the last look (after the seed's validation)
    teacher = ScriptedClient(touching, model="teacher", delay_s=STOP_FILE_EVERY_S + 0.05)
    outcome, _, teach = run(config(tmp_path, max_calls=60), teach=teacher)
    assert outcome.status == "stop_file" and len(teach.requests) == 1
    assert outcome.total_metric_calls == 6 + 6
    check_resumed(tmp_path, outcome)
    assert not stop_file.exists() and "removed" in (tmp_path / "run" / "gepa.log").read_text()



def test_a_stop_file_that_is_a_folder_is_named_at_resume_before_anything_is_rewritten(tmp_path):
    outcome, _, _ = run(config(tmp_path, max_calls=60, no_improvement_stop=1), teach=useless())
    assert outcome.status == "no_improvement"
    run_dir = tmp_path / "run"
    (run_dir / "gepa.stop").mkdir()
    kept = {name: ((run_dir / name).read_bytes(), (run_dir / name).stat().st_mtime_ns)
            for name in ("budget.json", "metadata.json")}
    with pytest.raises(UserError) as refused:
        resume(tmp_path)
    assert str(refused.value) == (f"{run_dir / 'gepa.stop'} is a folder, not a stop file; remove it "
                                  f"(`rm -r {run_dir / 'gepa.stop'}`), then resume")
    assert kept == {name: ((run_dir / name).read_bytes(), (run_dir / name).stat().st_mtime_ns) for name in kept}

CHILD = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{tests!r}]
    from pathlib import Path
    from support.gepa_job import config, make_env, task_model
    from support.scripted_client import ScriptedClient
    from gepa_cli.runner import run_gepa
    from primekit_cli.errors import sigterm_as_interrupt

    useless = ScriptedClient(lambda m, s, t: "```\\nSomething else.\\n```", model="teacher")
    task = ScriptedClient(task_model, delay_s=0.05)
    try:
        with sigterm_as_interrupt():
            run_gepa(config(Path({tmp!r}), max_calls=60, max_concurrent=1), clients=(task, useless),
                     envs=[make_env()], show_progress=False)
    except KeyboardInterrupt:
        sys.exit(143)
    """
)


def test_sigterm_ends_the_run_with_everything_written_and_it_resumes(tmp_path):
    run_dir = tmp_path / "run"
    child = spawn_child(tmp_path, CHILD)
    try:
        deadline = time.monotonic() + 60
        while not (run_dir / "results.jsonl").exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.02)
        assert child.poll() is None, "the child finished before the signal"
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 143
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    meta = metadata(run_dir)
    assert meta["status"] == "interrupted" == meta["stopped_by"]
    assert meta["completed_at"] and (run_dir / "system_prompt.txt").is_file()
    assert not (run_dir / ".lock").exists()
    stopped = type("Stopped", (), {"total_metric_calls": json.loads((run_dir / "budget.json").read_text())["used"]})
    check_resumed(tmp_path, stopped)

"""Run dirs (evalkit.core.runs), the one ``--resume [VALUE]`` option, the event-loop helper, and the run-dir lock
between real processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import REPO
from support.fault_server import FaultServer
from typer.testing import CliRunner

from evalkit.core import runs
from evalkit.core.aio import LoopThread
from evalkit.core.errors import UserError
from primekit_cli.app import app
from primekit_cli.argv import LATEST, is_step_or_folder, with_default_values

HOLD_LOCK = (
    "import sys, time\nfrom evalkit.core.runs import RunLock\nRunLock(sys.argv[1]).acquire()\n"
    "print('locked', flush=True)\ntime.sleep(120)\n"
)


def test_slugs_are_one_form_for_every_job():
    assert runs.run_slug("primeintellect/reverse-text", "local/smollm2-135m") == "reverse-text--local--smollm2-135m"
    assert runs.run_slug("./environments/my_env/", "Qwen/Qwen3-8B") == "my_env--Qwen--Qwen3-8B"
    assert runs.run_slug(["arithmetic", "owner/wordle"], "gpt-4.1-mini") == "arithmetic+wordle--gpt-4.1-mini"
    assert runs.model_slug("/abs/weights/step_2") == "abs--weights--step_2"
    assert runs.model_slug("qwen3:8b") == "qwen3-8b"  # no characters a file system or shell trips on
    assert runs.runs_parent("out", "gepa", "arithmetic", "m") == Path("out/gepa/arithmetic--m")


def test_newest_run_is_by_run_id_and_filtered(tmp_path):
    for name in ("20260101-000000-aaaaaa", "20260102-000000-bbbbbb", "20260103-000000-cccccc"):
        (tmp_path / name).mkdir()
    (tmp_path / "20260102-000000-bbbbbb" / "metadata.json").write_text("{}")
    assert runs.newest_in(tmp_path).name == "20260103-000000-cccccc"
    assert runs.newest_in(tmp_path, runs.has_metadata).name == "20260102-000000-bbbbbb"
    assert runs.newest_in(tmp_path / "missing") is None
    assert not runs.new_run_dir(tmp_path).exists()


def test_resume_checks_name_the_differing_keys(tmp_path):
    saved = {"model": "a", "seed": 1}
    assert (
        runs.mismatches(
            saved, {"model": "a", "seed": 1, "split": "eval"}, ["model", "seed", "split"], {"split": "eval"}
        )
        == []
    )
    with pytest.raises(UserError, match=r"different settings \(seed=1\)"):
        runs.require_same(tmp_path, saved, {"model": "a", "seed": 2}, ["model", "seed"])


def test_resume_values_parse_to_one_request():
    parse = runs.ResumeRequest.parse
    assert parse(None) == parse(False) == runs.ResumeRequest()
    assert parse(runs.LATEST) == parse(True) == runs.ResumeRequest(resume=True)
    assert parse("12", steps=True) == parse(12) == runs.ResumeRequest(resume=True, step=12)
    assert parse("12") == runs.ResumeRequest(resume=True, run_dir=Path("12"))  # eval and GEPA take no steps
    assert parse("~/r").run_dir == Path.home() / "r"


def _dirs(parent: Path, **rules):
    def check(run_dir: Path) -> None:
        if not runs.has_metadata(run_dir):
            raise UserError(f"{run_dir} is not a run")

    return runs.RunDirs(parent=parent, holds_run=runs.has_metadata, check=check, **rules)


def _run(parent: Path, name: str, **meta) -> Path:
    (parent / name).mkdir(parents=True)
    (parent / name / runs.METADATA).write_text(json.dumps(meta))
    return parent / name


def test_resolve_run_new_named_and_bare(tmp_path):
    """The one rule every job's --resume goes through: a new dir, a checked named one, or the newest run."""
    new = runs.resolve_run(_dirs(tmp_path), runs.ResumeRequest())
    assert new.run_dir.parent == tmp_path and not new.resuming and not new.run_dir.exists() and new.metadata is None
    old = _run(tmp_path, "20260101-000000-aaaaaa", status="complete", seed=1)
    newer = _run(tmp_path, "20260102-000000-bbbbbb", status="incomplete", seed=2)
    named = runs.resolve_run(_dirs(tmp_path), runs.ResumeRequest.parse(str(old)))
    assert (named.run_dir, named.resuming, named.metadata) == (old, True, {"status": "complete", "seed": 1})
    with pytest.raises(UserError, match="is not a run"):
        runs.resolve_run(_dirs(tmp_path), runs.ResumeRequest.parse(str(tmp_path / "nope")))
    bare = runs.resolve_run(_dirs(tmp_path), runs.ResumeRequest(resume=True, step=3))
    assert (bare.run_dir, bare.step, bare.notes) == (newer, 3, [f"resuming {newer}"])
    seed_1 = _dirs(tmp_path, fits=lambda d: json.loads((d / runs.METADATA).read_text())["seed"] == 1,
                   done=lambda d: json.loads((d / runs.METADATA).read_text())["status"] == "complete", flag="-R")
    finished = runs.resolve_run(seed_1, runs.ResumeRequest(resume=True))
    assert finished.run_dir == old and "nothing to resume" in finished.notes[0] and "drop -R" in finished.notes[0]


def test_resolve_run_refusals_and_fixed_dirs(tmp_path):
    taken = _run(tmp_path, "fixed", status="running")
    refuse = _dirs(tmp_path, fixed=taken, taken=lambda d: f"{d} is taken",
                   none_found=lambda where: f"nothing in {where}")
    with pytest.raises(UserError, match="fixed is taken"):
        runs.resolve_run(refuse, runs.ResumeRequest())
    assert (
        runs.resolve_run(refuse, runs.ResumeRequest(resume=True)).run_dir == taken
    )  # a bare --resume looks only there
    continued = runs.resolve_run(_dirs(tmp_path, fixed=taken), runs.ResumeRequest())  # eval: continue it (checked)
    assert continued.resuming and continued.run_dir == taken
    again = runs.resolve_run(_dirs(tmp_path, fixed=taken, taken=lambda d: None), runs.ResumeRequest())  # RL, untrained
    assert not again.resuming and again.run_dir == taken
    empty = _dirs(tmp_path / "none", none_found=lambda where: f"nothing in {where}")
    with pytest.raises(UserError, match="nothing in .*none"):
        runs.resolve_run(empty, runs.ResumeRequest(resume=True))
    started = runs.resolve_run(_dirs(tmp_path / "none"), runs.ResumeRequest(resume=True))
    assert not started.resuming and started.notes == [
        "no earlier run with these settings to resume; starting a new one"
    ]


def test_run_file_names_are_spelled_in_one_module():
    """Every writer and reader imports the names from evalkit.core.runs (tests may keep literals)."""
    names = [runs.METADATA, runs.RESULTS, runs.METRICS, runs.RESOLVED_CONFIG, runs.PARETO_FRONTIER, runs.SYSTEM_PROMPT,
             runs.BASELINE, runs.BUDGET]
    pattern = "\\|".join(f'"{name}"' for name in names)
    found = subprocess.run(["git", "grep", "-n", pattern, "--", "evalkit", "gepa_cli", "rl_backend", "primekit_cli"],
                           capture_output=True, text=True, cwd=REPO).stdout
    assert {line.split(":")[0] for line in found.splitlines()} == {"evalkit/core/runs.py"}, found


def test_lock_is_exclusive_records_the_pid_and_cleans_an_unused_dir(tmp_path):
    run_dir = tmp_path / "a" / "b" / "run"
    with runs.RunLock(run_dir):
        assert (run_dir / ".lock").read_text().strip() == str(os.getpid())
        with pytest.raises(UserError, match=f"run dir {run_dir} is in use by pid {os.getpid()}"):
            runs.RunLock(run_dir).acquire()
    assert not (tmp_path / "a").exists()  # nothing was written: the folders it made are gone
    with runs.RunLock(run_dir):
        (run_dir / "results.jsonl").write_text("")
    with runs.RunLock(run_dir):  # released on exit, so it can be taken again
        pass
    assert (run_dir / "results.jsonl").exists() and not (
        run_dir / ".lock"
    ).exists()  # a finished run leaves no lock file


def test_resume_option_takes_a_value_only_when_it_is_one(tmp_path):
    flags = ("-R", "--resume")
    assert with_default_values(["env", "-R"], flags, Path.is_dir) == ["env", "-R", LATEST]
    assert with_default_values(["-R", "env", "-n", "3"], flags, lambda t: Path(t).is_dir()) == [
        "-R",
        LATEST,
        "env",
        "-n",
        "3",
    ]
    assert with_default_values(["env", "-R", str(tmp_path)], flags, lambda t: Path(t).is_dir()) == [
        "env",
        "-R",
        str(tmp_path),
    ]
    assert with_default_values(["c.toml", "--resume", "12"], ["--resume"], is_step_or_folder) == [
        "c.toml",
        "--resume",
        "12",
    ]
    assert with_default_values(["c.toml", "--resume", "--max-steps", "3"], ["--resume"], is_step_or_folder) == [
        "c.toml", "--resume", LATEST, "--max-steps", "3"]


def test_loop_thread_runs_coroutines_from_many_threads_on_one_loop():
    loops = set()

    async def which(delay: float) -> int:
        await asyncio.sleep(delay)
        loops.add(id(asyncio.get_running_loop()))
        return threading.get_ident()

    with LoopThread() as loop:
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(loop.run(which(0.01)))) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(loops) == 1 and len(set(results)) == 1 and threading.get_ident() not in results
        with pytest.raises(ZeroDivisionError):
            loop.run(_fail())


async def _fail() -> None:
    raise ZeroDivisionError


def _start_holder(run_dir: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def test_two_eval_processes_on_one_run_dir(tmp_path):
    """`prime eval run -R DIR` while another `prime` runs DIR: refused, nothing duplicated; after a kill -9 it
    resumes."""
    # 40 x 2 rollouts, 2 at a time, 0.3 s each: the first run lasts ~12 s, long enough for the second
    # process to start even on a loaded 2-core machine (with -n 8 it sometimes finished first).
    slow = FaultServer("--latency", "0.3")
    args = ["eval", "run", "reverse-text", "-m", "stub", "-b", slow.base_url, "-n", "40", "-r", "2", "-c", "2",
            "-o", str(tmp_path)]
    first = subprocess.Popen(
        [sys.executable, "-m", "primekit_cli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 60
        found: list[Path] = []
        while time.time() < deadline and not found:
            found = [p for p in tmp_path.glob("evals/*/*/results.jsonl") if p.read_text().count("\n") >= 2]
            time.sleep(0.05)
        assert found, "the first run wrote no rows in time"
        run_dir = found[0].parent
        second = subprocess.run([sys.executable, "-m", "primekit_cli", *args, "-R", str(run_dir)],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"error: run dir {run_dir} is in use by pid {first.pid}" in second.stderr
        assert "Traceback" not in second.stderr
        _stop(first)
        resumed = subprocess.run([sys.executable, "-m", "primekit_cli", *args, "-R", str(run_dir)],
                                 capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    finally:
        _stop(first)
        slow.stop()
    keys = [
        (row["example_id"], row["rollout_idx"])
        for row in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    ]
    assert sorted(keys) == [(e, i) for e in range(40) for i in range(2)]  # every rollout exactly once


def test_gepa_and_rl_run_dirs_are_locked(tmp_path):
    from gepa_cli.config import GepaJobConfig

    gepa_dir = tmp_path / "gepa-run"
    gepa_dir.mkdir()
    config = GepaJobConfig(envs=[{"id": "arithmetic"}], num_train=4, num_val=2, max_calls=10)
    (gepa_dir / "metadata.json").write_text(json.dumps({"status": "interrupted", "config": config.model_dump()}))
    rl_dir = tmp_path / "out" / "rl" / "t"
    (rl_dir / "checkpoints" / "step_1").mkdir(parents=True)
    (rl_dir / "checkpoints" / "step_1" / "state.json").write_text('{"step": 1, "cursor": 0}')
    rl_config = tmp_path / "rl.toml"
    rl_config.write_text(
        'run_name = "t"\nmax_steps = 3\nbatch_size = 4\nrollouts_per_example = 2\n[[env]]\nid = "arithmetic"\n'
    )
    holders = [_start_holder(gepa_dir), _start_holder(rl_dir)]
    try:
        result = CliRunner().invoke(app, ["gepa", "run", "--resume", str(gepa_dir)])
        assert result.exit_code == 2 and f"error: run dir {gepa_dir} is in use by pid {holders[0].pid}" in result.output
        result = CliRunner().invoke(app, ["rl", "run", str(rl_config), "-o", str(tmp_path / "out"), "--resume"])
        assert result.exit_code == 2 and f"error: run dir {rl_dir} is in use by pid {holders[1].pid}" in result.output
    finally:
        for holder in holders:
            _stop(holder)


def test_rl_resume_refuses_another_model_or_environment(tmp_path):
    from rl_backend.config import load_rl_config, to_toml

    rl_dir = tmp_path / "out" / "rl" / "t"
    (rl_dir / "checkpoints" / "step_1").mkdir(parents=True)
    config = tmp_path / "rl.toml"
    config.write_text(
        'run_name = "t"\nmax_steps = 3\nbatch_size = 4\nrollouts_per_example = 2\n[[env]]\nid = "arithmetic"\n'
    )
    (rl_dir / "config.resolved.toml").write_text(to_toml(load_rl_config(config)))
    other = tmp_path / "other.toml"
    other.write_text(config.read_text().replace('"arithmetic"', '"reverse-text"'))
    result = CliRunner().invoke(app, ["rl", "run", str(other), "-o", str(tmp_path / "out"), "--resume"])
    assert (
        result.exit_code == 2
        and f"error: cannot resume {rl_dir}: it was run with different settings (env=" in result.output
    )
    assert not (rl_dir / ".lock").exists() and "reverse-text" not in (rl_dir / "config.resolved.toml").read_text()

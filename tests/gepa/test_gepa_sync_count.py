"""What a run writes, and where (a file sync or a rewrite on the search thread waits between waves of rollouts):
budget.json a few times a run (it reserves several iterations ahead), queued on the writer thread before it is
needed; the start's metadata.json made durable by that thread before the first rollout; gepa's state and the
candidate files at most once a second."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from support.gepa_job import config, make_env, task_model, teacher  # noqa: E402
from support.scripted_client import ScriptedClient

from gepa_cli.budget import RESERVE_AHEAD, saved_usage
from gepa_cli.runner import run_gepa

USELESS = "```\nSomething else.\n```"
"""A teacher reply that never helps: every iteration spends its two minibatches (no acceptance), so only the
budget ends the run."""


def _synced(monkeypatch) -> list[tuple[str, bool]]:
    """Record (file name, on the main thread) for each fsync/fdatasync the run makes."""
    calls: list[tuple[str, bool]] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def sync(fd: int, real=real) -> None:
            calls.append(
                (Path(os.readlink(f"/proc/self/fd/{fd}")).name, threading.current_thread() is threading.main_thread())
            )
            real(fd)

        monkeypatch.setattr(os, name, sync)
    return calls


def test_budget_json_is_synced_once_per_reservation_of_several_iterations(tmp_path, monkeypatch):
    synced = _synced(monkeypatch)
    teacher = ScriptedClient(lambda m, s, t: USELESS, model="teacher")
    outcome = run_gepa(config(tmp_path, max_calls=120), clients=(ScriptedClient(task_model), teacher),
                       envs=[make_env()], show_progress=False)

    assert outcome.status == "budget_exhausted" and outcome.total_metric_calls <= 120
    iterations = outcome.num_reflection_calls
    assert iterations >= 15  # the seed pass (6), then 6 per iteration
    budget_syncs = [main for name, main in synced if name == "budget.json"]
    # one iteration's most is 12 (two minibatches of 3, a validation pass of 6); a write reserves RESERVE_AHEAD of
    # them past the rollouts used, queued when fewer than two are left, so each adds at least RESERVE_AHEAD - 2;
    # with the start's and the end's, 120 rollouts take at most 120 / 24 + 2 (the code before synced once per
    # iteration: 19 times, on the search thread), and the search never waits on one
    assert 1 <= len(budget_syncs) <= 120 // ((RESERVE_AHEAD - 2) * 12) + 2 < iterations
    assert not any(budget_syncs)
    # the end's exact count is synced with the run's last files
    assert saved_usage(tmp_path / "run" / "budget.json") == (outcome.total_metric_calls, iterations)


def test_the_start_is_durable_before_the_first_rollout_without_a_sync_on_the_search_thread(tmp_path, monkeypatch):
    synced = _synced(monkeypatch)
    seen: list[tuple[dict, list[tuple[str, bool]]]] = []

    def first_looks(messages, sampling, tools):
        if not seen:  # the first rollout: what is on disk, and what was synced, by then
            seen.append((json.loads((tmp_path / "run" / "metadata.json").read_text()), list(synced)))
        return task_model(messages, sampling, tools)

    teacher = ScriptedClient(lambda m, s, t: USELESS, model="teacher")
    outcome = run_gepa(
        config(tmp_path, max_calls=30),
        clients=(ScriptedClient(first_looks), teacher),
        envs=[make_env()],
        show_progress=False,
    )

    assert outcome.status == "budget_exhausted"
    metadata, before = seen[0]
    assert metadata["status"] == "running" and metadata["job_config"]["max_calls"] == 30
    # metadata.json's data, then budget.json's first reservation, were synced before the first rollout, by the
    # writer thread, none on the search thread (the code before synced both on it)
    assert [name.split(".")[1] if name.startswith(".") else name for name, _ in before] == ["metadata", "budget.json"]
    assert not any(main for _, main in before)


def test_a_fast_run_saves_its_state_at_most_once_a_second_and_always_its_final_state(tmp_path, monkeypatch):
    import time

    from gepa.core.state import GEPAState

    import gepa_cli.outputs as outputs
    from gepa_cli.background import SAVE_EVERY_S

    saves: list[int] = []  # iterations of the states saved
    candidate_writes: list[int] = []
    real_save, real_write = GEPAState.save, outputs.write_candidates

    def save(self, run_dir, **kwargs):
        if run_dir is not None:
            saves.append(self.i)
        real_save(self, run_dir, **kwargs)

    def write_candidates(run_dir, candidates):
        candidate_writes.append(len(candidates.program_candidates))
        real_write(run_dir, candidates)

    monkeypatch.setattr(GEPAState, "save", save)
    monkeypatch.setattr(outputs, "write_candidates", write_candidates)
    started = time.monotonic()
    outcome = run_gepa(config(tmp_path, max_calls=120), clients=(ScriptedClient(task_model), ScriptedClient(teacher)),
                       envs=[make_env()], show_progress=False)
    took = time.monotonic() - started

    iterations = outcome.num_reflection_calls
    assert outcome.status == "budget_exhausted" and iterations >= 8 and outcome.num_candidates >= 2
    # a save point after the seed and after every iteration, but one save a second at most, and the last state
    # (the code before saved each: iterations + 1); likewise the candidate files (the end writes them all)
    allowed = int(took / SAVE_EVERY_S) + 2
    assert len(saves) <= allowed < iterations + 1 and len(candidate_writes) <= allowed
    saved = GEPAState.load(str(tmp_path / "run" / "state"))
    assert saves[-1] == saved.i and len(saved.program_candidates) == outcome.num_candidates
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == outcome.num_candidates


def test_a_failed_queued_write_stops_the_evaluation_that_needs_it(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    import pytest

    import gepa_cli.budget as budget_module
    from gepa_cli.budget import RolloutBudget

    def no_space(path, record, sync=True):
        raise OSError(28, "No space left on device")

    with ThreadPoolExecutor(1) as pool:
        # the start's metadata.json failed: the first reservation is not written, and nothing runs
        budget = RolloutBudget(60, tmp_path / "a.json", chunk=12, submit=pool.submit,
                               before_sync=lambda: no_space(None, None))
        budget.prefetch(18, first=6)
        with pytest.raises(OSError, match="No space"):
            budget.reserve(6)
        assert not (tmp_path / "a.json").exists()
        # the record itself failed
        monkeypatch.setattr(budget_module, "write_record", no_space)
        budget = RolloutBudget(60, tmp_path / "b.json", chunk=12, submit=pool.submit)
        budget.prefetch(18, first=6)
        with pytest.raises(OSError, match="No space"):
            budget.reserve(6)


def test_gepa_log_lines_are_written_together_redacted_and_all_at_the_end(tmp_path, monkeypatch):
    import time

    import gepa_cli.progress as progress
    from evalkit.core.redact import register_secret

    register_secret("log-SECRET-value-4242")
    log = progress.FileLogger(tmp_path / "gepa.log")
    log.log("Iteration 1: selected program 0")
    log.log("teacher said: use log-SECRET-value-4242\nand more")
    # a burst of lines waits in memory (the code before wrote and flushed each line as it came)
    assert (tmp_path / "gepa.log").read_text() == ""
    monkeypatch.setattr(progress, "FLUSH_EVERY_S", 0.0)
    log.log("Iteration 2: selected program 1")  # past the interval: every line so far, in one write
    text = (tmp_path / "gepa.log").read_text()
    lines = text.splitlines()
    assert [line[20:] for line in lines] == ["Iteration 1: selected program 0", "teacher said: use [redacted]",
                                             "and more", "Iteration 2: selected program 1"]
    assert all(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S") for line in lines)
    monkeypatch.setattr(progress, "FLUSH_EVERY_S", 60.0)
    log.log("finished")
    log.close()  # the run's end writes what is left
    assert (tmp_path / "gepa.log").read_text().splitlines()[-1].endswith(" finished")
    assert "log-SECRET" not in (tmp_path / "gepa.log").read_text()


def test_a_fast_run_looks_for_its_stop_files_at_most_every_quarter_second(tmp_path, monkeypatch):
    import time

    from gepa_cli.stoppers import STOP_FILE_EVERY_S

    looks: list[str] = []
    real_exists = os.path.exists

    def exists(path) -> bool:
        if str(path).endswith("gepa.stop"):
            looks.append(str(path))
        return real_exists(path)

    monkeypatch.setattr(os.path, "exists", exists)
    teacher = ScriptedClient(lambda m, s, t: USELESS, model="teacher")
    started = time.monotonic()
    outcome = run_gepa(config(tmp_path, max_calls=120), clients=(ScriptedClient(task_model), teacher),
                       envs=[make_env()], show_progress=False)
    took = time.monotonic() - started

    assert outcome.status == "budget_exhausted" and outcome.num_reflection_calls >= 15
    # the run dir's and the state dir's stop file, at one look in STOP_FILE_EVERY_S (the code before looked for
    # both at every iteration's end: 2 x 18)
    assert len(looks) <= 2 * (int(took / STOP_FILE_EVERY_S) + 1) < 2 * outcome.num_reflection_calls

"""The per-iteration files of a GEPA run are written beside the search, not inside it, and still count:
gepa's state and the candidate files are written by another thread, a failed write fails the run, and the
last files are synced together."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from gepa.core.state import GEPAState
from support.gepa_job import config, make_env, task_model, teacher  # noqa: E402
from support.scripted_client import ScriptedClient

import evalkit.core.fileio as fileio
from evalkit.core.errors import UserError
from gepa_cli.runner import run_gepa


def run(tmp_path: Path, **overrides):
    return run_gepa(
        config(tmp_path, **overrides),
        clients=(ScriptedClient(task_model), ScriptedClient(teacher, model="teacher")),
        envs=[make_env()],
        show_progress=False,
    )


def test_gepa_state_is_saved_off_the_search_thread_and_resumes(tmp_path, monkeypatch):
    threads: list[str] = []
    real_save = GEPAState.save

    def save(self, run_dir, **kwargs):
        if run_dir is not None:  # gepa itself calls it with none: it writes nothing then
            threads.append(threading.current_thread().name)
        real_save(self, run_dir, **kwargs)

    monkeypatch.setattr(GEPAState, "save", save)
    outcome = run(tmp_path, max_calls=40)
    assert outcome.status == "budget_exhausted"
    # at gepa's save points (at most once a second: this run is faster, so its final state), none of them on the
    # thread that runs the search
    assert len(threads) >= 1 and threading.main_thread().name not in threads
    saved = GEPAState.load(str(tmp_path / "run" / "state"))
    assert len(saved.program_candidates) == outcome.num_candidates
    assert saved.adapter_state["discovered_at_calls"]  # the adapter's state, as gepa would have stored it
    # the saved state is the final one: a resume with a larger budget goes on from it without re-scoring the seed
    resumed = run_gepa(config(tmp_path, max_calls=80), resume=tmp_path / "run",
                       clients=(ScriptedClient(task_model), ScriptedClient(teacher, model="teacher")),
                       envs=[make_env()], show_progress=False)
    assert resumed.seed_val_score == outcome.seed_val_score and resumed.total_metric_calls <= 80
    assert resumed.num_candidates >= outcome.num_candidates


def test_a_failed_background_write_fails_the_run(tmp_path, monkeypatch):
    def save(self, run_dir, **kwargs):
        if run_dir is not None:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(GEPAState, "save", save)
    with pytest.raises(OSError, match="No space left"):
        run(tmp_path, max_calls=40)
    metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert metadata["status"] == "failed" and "No space left" in metadata["error"]
    assert "stopped_by" not in metadata


def test_the_last_files_are_synced_together_before_any_is_renamed(tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        time.sleep(0.05)
        events.append("sync")
        real_fsync(fd)

    def replace(src, dst):
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    monkeypatch.setattr(fileio.os, "replace", replace)
    (tmp_path / "in-place").write_bytes(b"x")
    started = time.perf_counter()
    fileio.write_files_atomic({tmp_path / f"f{i}": b"%d" % i for i in range(4)}, sync_too=[tmp_path / "in-place"])
    assert events == ["sync"] * 5 + ["rename"] * 4
    assert time.perf_counter() - started < 0.2  # five 50 ms syncs at once, not one after another
    assert [(tmp_path / f"f{i}").read_bytes() for i in range(4)] == [b"0", b"1", b"2", b"3"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_damaged_saved_state_stops_the_resume(tmp_path):
    run(tmp_path, max_calls=40)
    (tmp_path / "run" / "state" / "gepa_state.bin").write_bytes(b"not a pickle")
    with pytest.raises(UserError, match="gepa_state.bin is damaged"):
        run_gepa(config(tmp_path, max_calls=80), resume=tmp_path / "run",
                 clients=(ScriptedClient(task_model), ScriptedClient(teacher, model="teacher")), envs=[make_env()],
                 show_progress=False)

"""`--resume` never runs code from a run dir: gepa's pickled state is read with a restricted unpickler first.

A run dir can come from anywhere (a colleague's archive, a download). The tests make a real run with mock models,
then replace its ``state/gepa_state.bin`` with a pickle whose ``__reduce__`` would call ``os.system`` to create a
marker file, and resume it in a child process: one ``error:`` line, exit 2, no marker.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, with_pythonpath
from typer.testing import CliRunner

from gepa_cli.saved_state import check_state_file
from primekit_cli.app import app

TEACHER = "mock/text:```\nReverse the text.\n```"


def _gepa_run(run_dir: Path, *extra: str) -> None:
    result = CliRunner().invoke(app, ["gepa", "run", "reverse-text", "-m", "mock/reverse", "-M", TEACHER, "-B", "30",
                                      "-n", "4", "--num-val", "3", "-o", str(run_dir), *extra])
    assert result.exit_code == 0, result.output


class _Marker:
    """Pickles as a call to ``os.system`` that creates ``path``."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _resume(run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "primekit_cli", "gepa", "run", "--resume", str(run_dir), "-B", "40"],
                          capture_output=True, text=True, timeout=300, env=with_pythonpath(REPO), cwd=run_dir.parent)


@pytest.fixture(scope="module")
def gepa_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("gepa") / "run"
    _gepa_run(run_dir, "--cache-evaluation")  # the cache puts gepa's data classes into the pickle
    return run_dir


def test_a_crafted_state_is_refused_and_runs_nothing(gepa_run, tmp_path):
    run_dir = tmp_path / "run"
    subprocess.run(["cp", "-r", str(gepa_run), str(run_dir)], check=True)
    marker = tmp_path / "PWNED"
    (run_dir / "state" / "gepa_state.bin").write_bytes(pickle.dumps({"program_candidates": _Marker(marker)}))

    result = _resume(run_dir)
    assert not marker.exists()
    assert result.returncode == 2, result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "names code (posix.system)" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_a_truncated_state_is_one_line(gepa_run, tmp_path):
    run_dir = tmp_path / "run"
    subprocess.run(["cp", "-r", str(gepa_run), str(run_dir)], check=True)
    state = run_dir / "state" / "gepa_state.bin"
    state.write_bytes(state.read_bytes()[:100])
    result = _resume(run_dir)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "gepa_state.bin is damaged" in result.stderr


def test_a_state_gepa_saved_passes_the_check_and_resumes(gepa_run, tmp_path):
    # with the evaluation cache on, the pickle names gepa's EvaluationCache, CachedEvaluation and type variables
    assert b"EvaluationCache" in (gepa_run / "state" / "gepa_state.bin").read_bytes()
    assert check_state_file(gepa_run / "state" / "gepa_state.bin")
    run_dir = tmp_path / "run"
    subprocess.run(["cp", "-r", str(gepa_run), str(run_dir)], check=True)
    result = CliRunner().invoke(app, ["gepa", "run", "--resume", str(run_dir), "-B", "40"])
    assert result.exit_code == 0, result.output


def test_a_fifo_in_place_of_the_state_is_refused_without_blocking(gepa_run, tmp_path):
    run_dir = tmp_path / "run"
    subprocess.run(["cp", "-r", str(gepa_run), str(run_dir)], check=True)
    state = run_dir / "state" / "gepa_state.bin"
    state.unlink()
    os.mkfifo(state)
    result = _resume(run_dir)
    assert result.returncode == 2 and "gepa_state.bin: it is a FIFO, not a regular file" in result.stderr

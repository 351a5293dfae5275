"""SIGTERM is handled like Ctrl-C, and `-R` on a finished eval says there is nothing to resume.

Signals are real signals to a real `prime` subprocess; the server is a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.cli import prime
from support.fault_server import FaultServer


def wait_for_rows(out: Path, at_least: int, timeout_s: float = 60) -> Path | None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        found = list(out.glob("evals/*/*/results.jsonl"))
        if found and found[0].read_text().count("\n") >= at_least:
            return found[0]
        time.sleep(0.05)
    return None


def test_sigterm_writes_metadata_like_ctrl_c_then_resume_finishes(tmp_path):
    slow = FaultServer("--latency", "0.25")
    try:
        args = ["eval", "run", "reverse-text", "-m", "stub", "-b", slow.base_url, "-n", "12", "-r", "2", "-c", "4",
                "-o", str(tmp_path)]
        process = subprocess.Popen([sys.executable, "-m", "primekit_cli", *args], env={**os.environ, "COLUMNS": "120"},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        results = wait_for_rows(tmp_path, 4)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
        assert results is not None, "the run wrote no rows in time"
        assert process.returncode == 143, stderr
        assert "terminated" in stderr and "Traceback" not in stderr
        lines = results.read_text().splitlines()
        meta = json.loads((results.parent / "metadata.json").read_text())
        # before: metadata still said what it said at the start (0 rollouts); now it matches the rows on disk
        assert meta["status"] == "incomplete" and meta["num_rollouts"] == len(lines) > 0
        assert meta["duration_s"] > 0 and not (results.parent / ".lock").exists()

        resumed = prime(*args, "-R")
        assert resumed.exit_code == 0, resumed.output
    finally:
        slow.stop()
    keys = sorted((json.loads(line)["example_id"], json.loads(line)["rollout_idx"])
                  for line in results.read_text().splitlines())
    assert keys == [(e, i) for e in range(12) for i in range(2)]


def test_resume_of_a_finished_run_says_so_and_starts_nothing(tmp_path):
    server = FaultServer()
    try:
        args = [
            "eval",
            "run",
            "reverse-text",
            "-m",
            "stub",
            "-b",
            server.base_url,
            "-n",
            "2",
            "-r",
            "1",
            "-o",
            str(tmp_path),
        ]
        assert prime(*args).exit_code == 0
        again = prime(*args, "-R")
    finally:
        server.stop()
    assert again.exit_code == 0, again.output
    text = " ".join(again.output.split())
    assert "nothing to resume: the newest run with these settings is complete" in text and "drop -R" in text
    assert len(list((tmp_path / "evals" / "reverse-text--stub").iterdir())) == 1  # no new full run


def test_resume_with_no_earlier_run_says_it_starts_one(tmp_path):
    server = FaultServer()
    try:
        result = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-n", "1", "-r", "1",
                       "-o", str(tmp_path), "-R")
    finally:
        server.stop()
    assert result.exit_code == 0
    assert "no earlier run with these settings to resume; starting a new one" in " ".join(result.output.split())

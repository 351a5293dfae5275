"""Input that cannot work is refused with one true `error:` line and exit 2, before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from support.cli import prime
from support.fault_server import FaultServer


def test_a_header_with_a_line_break_is_one_error_line(tmp_path):
    """Before: a traceback from aiohttp ("Forbidden control character detected in headers")."""
    server = FaultServer()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "primekit_cli", "eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url,
             "-n", "1", "-r", "1", "-o", str(tmp_path), "--header", "X-A: b\r\nX-B: 1"],
            capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        seen = json.loads(urllib.request.urlopen(server.base_url.removesuffix("/v1") + "/header_log").read())
    finally:
        server.stop()
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == ["error: --header 'X-A': its value holds a line break (CR/LF): one header per "
                                        "--header (or per table entry)"]
    assert seen == []  # refused before any request


@pytest.mark.parametrize("header", ["X A: b", "X-A: b\x00c", "Bad\nName: x"])
def test_headers_that_cannot_be_sent_are_refused(header, tmp_path):
    done = prime("eval", "run", "reverse-text", "-m", "stub", "-b", "http://127.0.0.1:9/v1", "-o", str(tmp_path),
                 "--header", header)
    assert done.exit_code == 2 and done.output.startswith("error: --header ")


def test_headers_from_a_toml_table_are_checked_too(tmp_path):
    config = tmp_path / "eval.toml"
    config.write_text('headers = {"X-A" = "b\\r\\nX-B: 1"}\n[[eval]]\nenv_id = "reverse-text"\nmodel = "stub"\n')
    done = prime("eval", "run", str(config), "-b", "http://127.0.0.1:9/v1", "-o", str(tmp_path))
    assert done.exit_code == 2 and "header 'X-A': its value holds a line break" in done.output


def test_gepa_into_an_eval_run_dir_says_what_is_there(tmp_path):
    """Before: "already holds a GEPA run; continue it with --resume", and --resume then refused."""
    server = FaultServer()
    try:
        made = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-n", "1", "-r", "1",
                     "-o", str(tmp_path))
    finally:
        server.stop()
    assert made.exit_code == 0, made.output
    (run_dir,) = (tmp_path / "evals" / "reverse-text--stub").iterdir()
    into = prime("gepa", "run", "reverse-text", "-m", "stub", "-b", "http://127.0.0.1:9/v1", "-o", str(run_dir),
                 "-B", "20", "-N", "2", "-n", "2")
    assert into.exit_code == 2
    assert into.output == (f"error: {run_dir} holds an eval run, not a GEPA run; -o names the GEPA run's own folder: "
                           "pick a new or empty one (or leave -o out)\n")
    resumed = prime("gepa", "run", "--resume", str(run_dir))
    assert resumed.exit_code == 2 and f"{run_dir} holds an eval run, not a GEPA run" in resumed.output

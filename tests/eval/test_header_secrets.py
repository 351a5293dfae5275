"""Every configured header value (but a few benign ones) is a secret: sent to the server as given, redacted in the
dry run, the terminal, rows and metadata, even when the server repeats the request's headers back.

Real parts: `prime` in a subprocess, tests/support/fault_server.py on 127.0.0.1 answering with the request's
headers (``--reply headers``) or failing with an error that repeats them (``echo500``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from support import REPO, with_pythonpath
from support.cli import prime_process
from support.fault_server import FaultServer

SECRETS = {"X-Custom-Auth": "custom-auth-value-1", "Cookie": "session=cookie-value-22", "X-Tenant": "tenant-value-333"}
"""A custom auth header, a cookie and a plain custom header: before, only Authorization/api-key/token/secret names
counted, so all three were printed and written as they were."""


def _prime(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """An eval of reverse-text with every header of SECRETS (and a benign one) set on the command line."""
    headers = [arg for name, value in SECRETS.items() for arg in ("--header", f"{name}: {value}")]
    return prime_process("eval", "run", "reverse-text", "-m", "stub", "-k", "STUB_KEY", "-n", "2", "-r", "1",
                         "--max-retries", "0", "-o", str(tmp_path / "out"), *headers,
                         "--header", "Accept: application/json", *args,
                         cwd=tmp_path, env={"STUB_KEY": "stub-key-4444"})


def _leaks(text: str) -> list[str]:
    return [value for value in (*SECRETS.values(), "cookie-value-22") if value in text]


def test_a_dry_run_prints_no_header_value(tmp_path):
    done = _prime(tmp_path, "-b", "http://127.0.0.1:9/v1", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert _leaks(done.stdout + done.stderr) == []
    headers = json.loads(done.stdout)["evals"][0]["headers"]
    assert headers == {**{name: "[redacted]" for name in SECRETS}, "Accept": "application/json"}


@pytest.mark.parametrize("fault", ["reply", "echo500"])
def test_headers_a_server_repeats_are_redacted_everywhere(tmp_path, fault):
    server = FaultServer("--reply", "headers", *(["--always", "echo500"] if fault == "echo500" else []))
    try:
        done = _prime(tmp_path, "-b", server.base_url)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/header_log", timeout=5) as response:
            sent = json.loads(response.read())
    finally:
        server.stop()
    assert sent and all(seen["X-Custom-Auth"] == SECRETS["X-Custom-Auth"] for seen in sent)  # sent as given
    [run_dir] = list((tmp_path / "out" / "evals").glob("*/*"))
    written = {path.name: path.read_text() for path in run_dir.rglob("*") if path.is_file()}
    assert written and {name: _leaks(text) for name, text in written.items() if _leaks(text)} == {}
    assert _leaks(done.stdout + done.stderr) == []
    rows = [json.loads(line) for line in written["results.jsonl"].splitlines()]
    shown = rows[0]["error"] if fault == "echo500" else rows[0]["completion"][-1]["content"]
    assert '"X-Custom-Auth": "[redacted]"' in shown or "'X-Custom-Auth': '[redacted]'" in shown, shown
    viewed = subprocess.run([sys.executable, "-m", "primekit_cli", "eval", "view", str(run_dir)], capture_output=True,
                            text=True, timeout=120, env=with_pythonpath(REPO), cwd=tmp_path)
    assert viewed.returncode == 0 and _leaks(viewed.stdout + viewed.stderr) == []

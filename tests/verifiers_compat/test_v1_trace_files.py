"""verifiers' ``traces.jsonl`` of a v1 taskset is primekit's file like ``results.jsonl``: the ``-k`` key, ``--env-file``
values and auth headers a tool printed are redacted, every message keeps at most ``max_message_chars`` characters
(cut with the results' marker), and a resumed run reads the file one line at a time.

Before: verifiers' own writer appended each episode as it was, so a tool's output kept the key in plain text and a
40,000-character tool result was written whole (twice: the tool message and the reply quoting it), and a resume
read the whole file into memory.

Real parts: `prime eval run` in a subprocess against tests/support/solver_server.py on 127.0.0.1, verifiers' shared tool
server (tests/verifiers_envs/vf_v1_shared, told to print the secrets) as a subprocess, the file read back with
verifiers' own reader.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tracemalloc

import pytest
from support import VERIFIERS_ENVS

KEY = "pk-live-0a1b2c3d4e5f60718293"
"""The value of the variable `-k` names (registered as a secret where the client reads it)."""
TOKEN = "tool-token-5e4d3c2b1a"
"""An --env-file value the tool reads from its environment."""
BEARER = "bearer-value-99aa88bb77"
"""A credential the tool prints in an auth header (redacted by pattern: nobody registered it)."""
BIG = 40_000


@pytest.mark.verifiers
def test_traces_are_redacted_and_capped_like_results(tmp_path):
    import shutil

    pytest.importorskip("verifiers.v1")
    from support.solver_server import SolverServer

    shutil.copytree(VERIFIERS_ENVS / "vf_v1_shared", tmp_path / "environments" / "vf_v1_shared")
    (tmp_path / "home").mkdir()
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"LEAK_TOOL_TOKEN={TOKEN}\n")
    secrets.chmod(0o600)
    server = SolverServer()
    try:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path / "home"), "LEAK_MODEL_KEY": KEY}
        done = subprocess.run(
            [sys.executable, "-m", "primekit_cli", "eval", "run", "vf-v1-shared", "-m", "solver", "-b", server.base_url,
             "-k", "LEAK_MODEL_KEY", "--env-file", str(secrets), "-n", "2", "-r", "1", "--max-message-chars", "1000",
             "-a", json.dumps({"tools": {"echo": f"{KEY} Authorization: Bearer {BEARER}", "echo_env": "LEAK_TOOL_TOKEN",
                                         "big": BIG}}), "-o", str(tmp_path / "out")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (tmp_path / "out").rglob("results.jsonl")
    traces = results.with_name("traces.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    # the tool's output (the sum, then the echoed text) reached the model and its reply; the reward is not read
    # here: verifiers 0.4 puts a truncation warning, with its own numbers, before the tool's output
    quoted = [re.search(r"(\d+) \[redacted\] Authorization", row["completion"][-1]["content"]) for row in rows]
    assert all(row["error"] is None for row in rows) and sorted(q.group(1) for q in quoted if q) == ["7", "9"]
    text = traces.read_text()
    for secret in (KEY, TOKEN, BEARER):
        assert secret not in text
        for file in (tmp_path / "out").rglob("*"):
            assert not file.is_file() or secret.encode() not in file.read_bytes(), file
    assert text.count("[redacted]") >= 2 * 3 * 2  # three secrets, in the tool message and the reply, per rollout
    assert "more characters cut: max_message_chars is 1,000]" in text
    assert traces.stat().st_size < 60_000  # before: over 160 kB (the tool result and the reply quoting it, per rollout)

    from evalkit.verifiers_compat.v1.api import read_episodes

    episodes = read_episodes(results.parent)  # verifiers' own reader still reads every line
    assert len(episodes) == 2 and all(e.ok for e in episodes)


def test_resume_reads_the_traces_file_one_line_at_a_time(tmp_path):
    """A resumed run keeps the lines of its kept rows and drops the rest without holding the file in memory."""
    from pydantic import BaseModel

    from evalkit.verifiers_compat.v1.traces import TraceFiles, episode_id

    class Config(BaseModel):
        id: str = "t"

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    line_size, lines = 1_000_000, 30
    with (run_dir / "traces.jsonl").open("w") as handle:
        for index in range(lines):
            handle.write(json.dumps({"id": episode_id(run_dir, index, 0), "pad": "y" * line_size}) + "\n")
        handle.write('{"id": "torn')  # a killed run's last line
    kept = {(index, 0) for index in range(0, lines, 3)}
    tracemalloc.start()
    try:
        TraceFiles(run_dir, kept, Config())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 6 * line_size, f"peak {peak:,} bytes for a {lines * line_size:,}-byte file"
    ids = [json.loads(line)["id"] for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert ids == [episode_id(run_dir, index, 0) for index in range(0, lines, 3)]


def test_a_trace_line_without_long_text_or_secrets_is_verifiers_own_bytes():
    from evalkit.verifiers_compat.v1.traces import trace_line

    data = json.dumps({"id": "a", "traces": [{"nodes": [{"message": {"role": "tool", "content": "42"}}]}]},
                      separators=(",", ":")).encode()
    assert trace_line(data, 1000) == data + b"\n"
    capped = json.loads(trace_line(data.replace(b'"42"', json.dumps("z" * 5000).encode()), 1000))
    content = capped["traces"][0]["nodes"][0]["message"]["content"]
    assert content.startswith("z" * 1000) and content.endswith("4,000 more characters cut: max_message_chars is 1,000]")

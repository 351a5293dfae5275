"""`prime eval run|view` as a user runs them: bad input, secrets, configs, kill -9 then --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from support import free_port
from support.cli import assert_user_error, prime
from support.fault_server import FaultServer

SECRET = "sk-cli-SECRET-9876543210"


@pytest.fixture(scope="module")
def server():
    started = FaultServer()
    yield started
    started.stop()


def test_run_against_server_writes_run_dir(server, tmp_path):
    result = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-n", "3", "-r", "2",
                   "-o", str(tmp_path), "-S", '{"top_p": 0.9}', "-t", "20")
    assert result.exit_code == 0, result.output
    assert "pass@2" in result.output and "reward diversity" in result.output and "results:" in result.output
    (run_dir,) = (tmp_path / "evals" / "reverse-text--stub").iterdir()
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["sampling_args"] == {"max_tokens": 20, "top_p": 0.9} and meta["avg_reward"] == 1.0
    assert meta["base_url"] == server.base_url and meta["num_rollouts"] == 6

    view = prime("eval", "view", str(run_dir))
    assert view.exit_code == 0, view.output
    assert "highest reward" in view.output and "completion/assistant" in view.output and "1.0000" in view.output
    newest = prime("eval", "view", "-o", str(tmp_path))
    assert newest.exit_code == 0 and str(run_dir) in newest.output.replace("\n", "")


def test_key_never_reaches_outputs_or_logs(tmp_path):
    server = FaultServer("--faults", "500")  # every prompt's first request fails: retry logs, key in play
    try:
        result = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-k", "MY_EVAL_KEY",
                       "-n", "2", "-r", "1", "-o", str(tmp_path), "-v", "--max-retries", "1",
                       env={"MY_EVAL_KEY": SECRET})
        seen = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/auth_log").read())
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    assert "error" not in result.output.replace("errors", "")  # every rollout recovered
    assert "retry 1/1" in result.output and "injected 500" in result.output  # the logs were really written
    assert SECRET not in result.output
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(SECRET not in p.read_text() for p in files)
    assert f"Bearer {SECRET}" in seen  # it was used, just never written down


def test_toml_config_runs_each_entry_into_its_own_dir(server, tmp_path):
    config = tmp_path / "cfg" / "eval.toml"
    config.parent.mkdir()
    config.write_text(f'model = "stub"\nbase_url = "{server.base_url}"\nnum_examples = 2\nrollouts_per_example = 1\n'
                      'output_dir = "../out"\n\n[[eval]]\nid = "reverse-text"\n\n[[eval]]\nid = "alphabet-sort"\n')
    result = prime("eval", "run", str(config))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out" / "evals").iterdir()) == [
        "alphabet-sort--stub",
        "reverse-text--stub",
    ]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["no-such-env", "-m", "x", "-b", "http://127.0.0.1:9/v1"], "unknown environment 'no-such-env'"),
        (
            ["reverse-text", "-m", "x", "-k", "UNSET_KEY_VAR_XYZ", "-b", "http://127.0.0.1:9/v1"],
            "UNSET_KEY_VAR_XYZ is not set",
        ),
        (["reverse-text", "-m", "x", "-b", "ftp://nowhere"], "not an http(s) URL"),
        (["reverse-text", "-m", "x", "-b", "http://127.0.0.1:9/v1", "-S", "{bad"], "--sampling-args is not valid JSON"),
        (["reverse-text", "-m", "x", "-b", "http://127.0.0.1:9/v1", "-n", "0"], "num_examples"),
        (["reverse-text", "-m", "x", "-b", "http://127.0.0.1:9/v1", "-a", '{"nope": 1}'], "does not accept env arg"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, fragment, tmp_path):
    assert_user_error(prime("eval", "run", *args, "-o", str(tmp_path)), fragment)
    assert not (tmp_path / "evals").exists() or not any((tmp_path / "evals").rglob("results.jsonl"))


def test_bad_toml_and_unknown_key_and_endpoint(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('model = "m"\n\n[[eval]\nid = "reverse-text"\n')
    assert_user_error(prime("eval", "run", str(bad)), "line 3")
    bad.write_text('model = "m"\nnum_exampels = 3\n[[eval]]\nid = "reverse-text"\n')
    assert_user_error(prime("eval", "run", str(bad)), "unknown key 'num_exampels'")
    endpoints = tmp_path / "endpoints.toml"
    endpoints.write_text('[[endpoint]]\nendpoint_id = "here"\nmodel = "m"\nurl = "http://127.0.0.1:9/v1"\n')
    assert_user_error(prime("eval", "run", "reverse-text", "-m", "missing", "-e", str(endpoints)),
                      "endpoint id 'missing' not found")


@pytest.mark.timing
def test_unreachable_base_url_fails_fast(tmp_path):
    started = time.perf_counter()
    result = prime("eval", "run", "reverse-text", "-m", "x", "-b", f"http://127.0.0.1:{free_port()}/v1",
                   "-n", "-1", "-r", "8", "-o", str(tmp_path))
    assert_user_error(result, "cannot connect")
    assert time.perf_counter() - started < 5
    assert not (tmp_path / "evals").exists()


def test_view_without_runs_is_a_user_error(tmp_path):
    assert_user_error(prime("eval", "view", "-o", str(tmp_path)), "no eval runs")


def test_kill_9_then_resume_has_every_rollout_exactly_once(tmp_path):
    slow = FaultServer("--latency", "0.25")
    try:
        args = ["eval", "run", "reverse-text", "-m", "stub", "-b", slow.base_url, "-n", "12", "-r", "2", "-c", "4",
                "-o", str(tmp_path)]
        env = {**os.environ, "COLUMNS": "120"}
        process = subprocess.Popen([sys.executable, "-m", "primekit_cli", *args], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results = None
        deadline = time.time() + 60
        while time.time() < deadline:
            found = list(tmp_path.glob("evals/*/*/results.jsonl"))
            if found and found[0].read_text().count("\n") >= 4:
                results = found[0]
                break
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        assert results is not None, "the run wrote no rows in time"
        before = results.read_text().splitlines()
        assert len(before) < 24
        meta = json.loads((results.parent / "metadata.json").read_text())
        assert meta["status"] == "incomplete"

        resumed = prime(*args, "-R")
        assert resumed.exit_code == 0, resumed.output
        assert "resuming" in resumed.output
    finally:
        slow.stop()
    lines = results.read_text().splitlines()
    keys = [(json.loads(line)["example_id"], json.loads(line)["rollout_idx"]) for line in lines]
    assert sorted(keys) == [(e, i) for e in range(12) for i in range(2)]
    assert lines[: len(before)] == before  # nothing already written was lost or rewritten
    meta = json.loads((results.parent / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["num_rollouts"] == 24

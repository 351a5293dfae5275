"""GEPA's task and reflection clients come from client specs that carry --max-retries and --timeout.

Against a real fault-injecting server on 127.0.0.1 (tests/support/fault_server.py): faults are counted per
prompt, so ``--faults 500,500`` means every prompt (the preflight's included) fails twice first.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest
from support.fault_server import FaultServer
from support.gepa_job import gepa_run

from evalkit.core.errors import ModelCallError
from evalkit.core.types import SamplingArgs
from gepa_cli.config import GepaJobConfig, build_job_config, load_gepa_toml, toml_to_job_fields
from gepa_cli.runner import open_clients


def config(server: FaultServer, **fields) -> GepaJobConfig:
    return GepaJobConfig(envs=[{"id": "arithmetic"}], model="m", base_url=server.base_url, **fields)


def ask(client, text: str = "hello") -> str:
    async def go():
        try:
            return (await client.chat([{"role": "user", "content": text}], SamplingArgs())).text
        finally:
            await client.aclose()

    return asyncio.run(go())


def requests_seen(server: FaultServer) -> int:
    return len(json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/auth_log").read()))


def test_task_client_honours_max_retries(fault_servers):
    srv = fault_servers("--faults", "500,500")
    task, _ = open_clients(config(srv, max_retries=2))
    assert ask(task) == "olleh" and requests_seen(srv) == 3
    task, _ = open_clients(config(srv, max_retries=1))
    with pytest.raises(ModelCallError, match=r"HTTP 500.*after 2 attempts"):
        ask(task, "other")


@pytest.mark.timing
def test_task_client_honours_timeout(fault_servers):
    srv = fault_servers("--faults", "timeout", "--timeout-sleep", "5")
    task, _ = open_clients(config(srv, timeout=0.5, max_retries=0))
    started = time.perf_counter()
    with pytest.raises(ModelCallError, match=r"timed out after 0.5 s \(after 1 attempt\)"):
        ask(task)
    assert time.perf_counter() - started < 2.5
    task, _ = open_clients(config(srv, timeout=0.5, max_retries=1))
    assert ask(task, "again") == "niaga"  # the second attempt is answered at once


def test_teacher_gets_the_same_limits_and_its_own_backend(fault_servers, monkeypatch, tmp_path):
    srv = fault_servers()
    (tmp_path / "endpoints.toml").write_text(
        f'[[endpoint]]\nendpoint_id = "teach"\nmodel = "big"\nurl = "{srv.base_url}"\n'
    )
    monkeypatch.setenv("TASK_KEY", "task-key-value-123")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base = dict(api_key_var="TASK_KEY", max_retries=4, timeout=7.0, endpoints_path=str(tmp_path / "endpoints.toml"))
    _, teacher = open_clients(config(srv, reflection_model="teach", **base))
    assert (teacher.model, teacher.max_retries, teacher.timeout) == ("big", 4, 7.0)
    assert "Authorization" not in teacher._headers  # the endpoint row names no key; -k was the task's
    plain = config(srv, reflection_model="bigger", **base)
    assert plain.teacher_spec().base_url == srv.base_url and plain.teacher_spec().api_key_var == "TASK_KEY"
    other = config(srv, reflection_model="litellm/anthropic/claude-test", **base).teacher_spec()
    assert (other.base_url, other.api_key_var, other.max_retries, other.timeout) == (None, None, 4, 7.0)


def test_cli_flags_reach_the_task_client(fault_servers, tmp_path):
    """--max-retries 1 cannot get past two 500s (the preflight fails); --max-retries 2 runs to the end."""
    srv = fault_servers("--faults", "500,500")
    # the smallest budget that buys a proposal: seed 2 + 2x1 + 2 on acceptance
    common = [
        "arithmetic",
        "-m",
        "m",
        "-b",
        srv.base_url,
        "-n",
        "2",
        "-N",
        "2",
        "-B",
        "6",
        "--minibatch-size",
        "1",
        "--timeout",
        "5",
    ]
    code, output = gepa_run(*common, "--max-retries", "1", "-o", str(tmp_path / "a"))
    assert code == 2 and "error: preflight request to model 'm' failed: HTTP 500" in output
    assert "(after 2 attempts)" in output
    code, output = gepa_run(*common, "--max-retries", "2", "-o", str(tmp_path / "b"))
    assert code == 0, output
    meta = json.loads((tmp_path / "b" / "metadata.json").read_text())
    assert (
        2 < meta["total_metric_calls"] <= 6
        and meta["job_config"]["max_retries"] == 2
        and meta["job_config"]["timeout"] == 5
    )


@pytest.mark.timing
def test_cli_timeout_reaches_the_task_client(fault_servers, tmp_path):
    srv = fault_servers("--faults", "silent")
    started = time.perf_counter()
    code, output = gepa_run("arithmetic", "-m", "m", "-b", srv.base_url, "--timeout", "0.5", "-o", str(tmp_path / "r"))
    assert code == 2 and "timed out after 0.5 s" in output and time.perf_counter() - started < 10


@pytest.mark.parametrize("value", ["0", "-3"])
def test_cli_rejects_non_positive_timeout(value):
    code, output = gepa_run("arithmetic", f"--timeout={value}")
    assert code == 2 and "error:" in output and "'timeout'" in output and "Traceback" not in output


def test_toml_keys_max_retries_and_timeout(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text('model = "m"\nmax_retries = 5\ntimeout = 30\n\n[[env]]\nid = "arithmetic"\n')
    parsed, base = load_gepa_toml(path)
    job = build_job_config(toml_to_job_fields(parsed, base), str(path))
    assert (job.task_spec().max_retries, job.task_spec().timeout) == (5, 30)
    path.write_text('timeout = 0\n\n[[env]]\nid = "arithmetic"\n')
    code, output = gepa_run(str(path))
    assert code == 2 and "'timeout'" in output

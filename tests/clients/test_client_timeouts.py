"""Every request is bounded in time: a default, no "forever" values, a bounded preflight.

Misbehaving servers are real (tests/support/fault_server.py on 127.0.0.1): ``silent`` never answers,
``drip`` sends headers at once and then one body byte every 0.1 s, which no read timeout catches.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalkit.clients import openai_client
from evalkit.clients.factory import preflight
from evalkit.clients.openai_client import OpenAIClient
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import SamplingArgs
from evalkit.eval.config import EvalConfig
from primekit_cli.app import app

PRIME = str(Path(sys.executable).parent / "prime")


def chat(client: OpenAIClient) -> None:
    async def go():
        try:
            await client.chat([{"role": "user", "content": "hi"}], SamplingArgs())
        finally:
            await client.aclose()

    asyncio.run(go())


def test_default_timeout_is_600_s_everywhere():
    assert OpenAIClient("m", "http://127.0.0.1:9/v1").timeout == 600
    assert EvalConfig(env_id="x").timeout == 600
    assert EvalConfig(env_id="x").client_spec().timeout == 600


@pytest.mark.timing
@pytest.mark.parametrize("fault", ["silent", "drip"])
def test_silent_and_slow_drip_servers_time_out(fault_servers, fault):
    srv = fault_servers("--faults", f"{fault},{fault},{fault}")
    started = time.perf_counter()
    with pytest.raises(ModelCallError, match=r"timed out after 0.5 s \(after 2 attempts\)"):
        chat(OpenAIClient("m", srv.base_url, timeout=0.5, max_retries=1, backoff_base_s=0.01))
    assert time.perf_counter() - started < 3


@pytest.mark.timing
def test_preflight_is_bounded_even_with_a_long_request_timeout(fault_servers, monkeypatch):
    monkeypatch.setattr(openai_client, "PREFLIGHT_TIMEOUT_S", 0.5)
    srv = fault_servers("--faults", "silent")
    client = OpenAIClient("m", srv.base_url, timeout=600, max_retries=3)

    async def check():
        try:
            await preflight(client)
        finally:
            await client.aclose()

    started = time.perf_counter()
    with pytest.raises(
        UserError, match=r"preflight request to model 'm' failed: .*timed out after 0.5 s \(after 1 attempt\)"
    ):
        asyncio.run(check())
    assert time.perf_counter() - started < 3


@pytest.mark.parametrize("value", ["0", "-1", "inf"])
def test_non_positive_timeout_flag_is_an_error_line(value):
    result = CliRunner().invoke(app, ["eval", "run", "reverse-text", "-m", "m", "-b", "http://127.0.0.1:9/v1",
                                      f"--timeout={value}"], catch_exceptions=False)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "error: command line: 'timeout': must be a positive number of seconds" in result.output


def test_zero_timeout_in_an_eval_toml_is_an_error_line(tmp_path):
    config = tmp_path / "eval.toml"
    config.write_text('timeout = 0\n\n[[eval]]\nid = "reverse-text"\n')
    result = CliRunner().invoke(app, ["eval", "run", str(config)], catch_exceptions=False)
    assert result.exit_code == 2 and "'timeout': must be a positive number of seconds" in result.output


@pytest.mark.timing
def test_silent_server_cannot_hang_prime_eval_run(fault_servers, tmp_path):
    """Preflight passes (one-token requests are answered); every rollout meets a silent server."""
    srv = fault_servers("--always", "silent")
    started = time.perf_counter()
    done = subprocess.run([PRIME, "eval", "run", "reverse-text", "-m", "m", "-b", srv.base_url, "-n", "2", "-r", "1",
                           "--timeout", "0.5", "--max-retries", "0", "-o", str(tmp_path)],
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert time.perf_counter() - started < 60, "the run should end soon after its requests time out"
    rows = list(tmp_path.glob("evals/*/*/results.jsonl"))
    assert rows, done.stderr
    assert rows[0].read_text().count("timed out after 0.5 s") == 2, done.stdout + done.stderr

"""API keys and auth headers never leave the client layer, even when a server echoes them back.

The servers are real (tests/support/fault_server.py on 127.0.0.1): ``echo401``/``echo500`` answer with an
error whose message repeats the request's headers, as some proxies and gateways do.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os

import pytest
from support.cli import prime_process

from evalkit.clients.factory import make_client
from evalkit.clients.spec import ClientSpec
from evalkit.core.errors import ModelCallError
from evalkit.core.redact import REDACTED, RedactingFilter, redact, register_secret
from evalkit.core.types import SamplingArgs

KEY = "zq7-PRIVATE-key-value-4242"  # not shaped like any known key: only the registered value can catch it
HEADER_SECRET = "hdr-PRIVATE-token-9898"


def test_patterns_scrub_header_values_tokens_and_url_credentials():
    text = ("{'Authorization': 'Bearer abcdefghijkl', 'x-api-key': 'xyzxyzxyz', \"api-key\": \"q1w2e3r4\"} "
            "Proxy-Authorization: Basic dXNlcjpw https://bob:pw@host/v1 sk-ant-api03-abcdefghijklmnopqrstu")
    out = redact(text)
    for secret in ("abcdefghijkl", "xyzxyzxyz", "q1w2e3r4", "dXNlcjpw", "bob:pw", "abcdefghijklmnopqrstu"):
        assert secret not in out
    assert out.count(REDACTED) == 6 and "Authorization" in out and "host/v1" in out


def test_registered_values_are_scrubbed_wherever_they_appear():
    register_secret("plain-PRIVATE-value-77")
    assert redact('{"key_used": "plain-PRIVATE-value-77"}') == f'{{"key_used": "{REDACTED}"}}'
    assert redact("check the API key variable (-k)") == "check the API key variable (-k)"


def test_log_filter_scrubs_arguments_and_tracebacks():
    register_secret(KEY)
    record = logging.LogRecord("evalkit.x", logging.DEBUG, __file__, 1, "retry: %s", (f"Bearer {KEY}",), None)
    RedactingFilter().filter(record)
    assert KEY not in record.getMessage() and REDACTED in record.getMessage()


@pytest.mark.parametrize("fault", ["echo401", "echo500"])
def test_client_errors_and_retry_logs_do_not_carry_the_key(fault_servers, monkeypatch, caplog, fault):
    srv = fault_servers("--faults", ",".join([fault] * 4))
    monkeypatch.setenv("REDACT_TEST_KEY", KEY)
    client = make_client(ClientSpec("m", srv.base_url, "REDACT_TEST_KEY", max_retries=1, backoff_base_s=0.01,
                                    headers={"X-Api-Key": HEADER_SECRET}))

    async def go():
        try:
            await client.chat([{"role": "user", "content": "hi"}], SamplingArgs())
        finally:
            await client.aclose()

    with caplog.at_level(logging.DEBUG, logger="evalkit"), pytest.raises(ModelCallError) as info:
        asyncio.run(go())
    message = str(info.value)
    assert "request headers were" in message and REDACTED in message  # the echo did arrive, scrubbed
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (KEY, HEADER_SECRET):
        assert secret not in message and secret not in logged and secret not in repr(client)


def test_key_never_reaches_terminal_results_metadata_or_view(fault_servers, tmp_path):
    srv = fault_servers("--always", "echo500")
    env = {**os.environ, "REDACT_TEST_KEY": KEY, "HF_HUB_OFFLINE": "1"}
    base = ["reverse-text", "-m", "m", "-b", srv.base_url, "-k", "REDACT_TEST_KEY", "-n", "2", "-r", "1",
            "--max-retries", "1", "-o", str(tmp_path / "out")]
    quiet = prime_process("eval", "run", *base, env=env, cwd=tmp_path)
    loud = prime_process("eval", "run", *base, "-v", env=env, cwd=tmp_path)
    runs = sorted((tmp_path / "out" / "evals").glob("*/*"))
    assert len(runs) == 2, quiet.stderr + loud.stderr
    view = prime_process("eval", "view", str(runs[0]), env=env, cwd=tmp_path)
    rows = [json.loads(line) for line in (runs[0] / "results.jsonl").read_text().splitlines()]
    assert rows and all("request headers were" in row["error"] and REDACTED in row["error"] for row in rows)
    assert "retry 1/1" in loud.stderr  # -v did log the failing attempts
    outputs = {
        "eval stdout/stderr": quiet.stdout + quiet.stderr,
        "eval -v stdout/stderr": loud.stdout + loud.stderr,
        "view": view.stdout + view.stderr,
        **{str(f.relative_to(tmp_path)): f.read_text() for run in runs for f in run.iterdir() if f.is_file()},
    }
    leaked = [where for where, text in outputs.items() if KEY in text]
    assert not leaked, leaked


def test_failed_preflight_error_line_does_not_carry_the_key(fault_servers, tmp_path):
    srv = fault_servers("--faults", "echo401")
    env = {**os.environ, "REDACT_TEST_KEY": KEY, "HF_HUB_OFFLINE": "1"}
    done = prime_process("eval", "run", "reverse-text", "-m", "m", "-b", srv.base_url, "-k", "REDACT_TEST_KEY",
                         "-n", "1", "-r", "1", "-o", str(tmp_path / "out"), env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: preflight request to model 'm' failed: HTTP 401") and REDACTED in done.stderr
    assert KEY not in done.stdout + done.stderr and "Traceback" not in done.stderr

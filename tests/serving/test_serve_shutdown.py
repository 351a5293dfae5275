"""`prime serve` stopped by SIGTERM or Ctrl-C (SIGINT) while the model is inside a long prefill: the
process exits 0 within seconds (no abort, no "terminate called without an active exception") and
the client waiting on that prefill gets a 503, as README says. A real subprocess, signalled by its PID."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from support import free_port

pytestmark = pytest.mark.slow
LONG_PROMPT = {"messages": [{"role": "user", "content": "word " * 7000}], "max_tokens": 4}
"""About 7,000 prompt tokens: a prefill of many seconds on a CPU."""


def _health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
            return json.loads(answer.read())
    except OSError:
        return None


@pytest.mark.timing
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_long_prefill_exits_cleanly_and_answers_503(tmp_path: Path, sig: signal.Signals) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "primekit_cli", "serve", "--port", str(port), "--device", "cpu", "--dtype", "fp32"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    try:
        deadline = time.monotonic() + 180
        while _health(port) is None:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        body = json.dumps(LONG_PROMPT).encode()
        client = socket.create_connection(("127.0.0.1", port), timeout=60)
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)
        while (_health(port) or {}).get("requests_running") != 1:  # tokenized, admitted: prefilling now
            assert time.monotonic() < deadline, "the request never started"
            time.sleep(0.05)
        time.sleep(0.5)
        started = time.monotonic()
        server.send_signal(sig)
        code = server.wait(timeout=60)
        took = time.monotonic() - started
        client.settimeout(10)
        answer = client.recv(4096)
        client.close()
        text = log.read_text()
        assert code == 0 and took < 10, f"exit {code} after {took:.1f} s: {text[-2000:]}"
        assert answer.startswith(b"HTTP/1.1 503") and b"the engine was closed" in answer, answer
        assert "terminate called" not in text and "Traceback" not in text, text
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)

"""A verifiers 0.4 run config's secrets: ``[client] headers`` values and the credential-named values of
``[env.agent.harness] env`` are redacted in the dry run, ``configs/eval.toml``, ``configs/resolved/eval.json``,
``metadata.json``, rows, traces, the log and the terminal, while a plain setting stays readable.

Real parts: `prime` in a subprocess under verifiers 0.4, tests/support/fault_server.py on 127.0.0.1 answering with
the request's headers (so the rows and traces would hold them), the v1 taskset ``vf-v1-chat``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fault_server import FaultServer

verifiers = pytest.importorskip("verifiers", reason="needs a verifiers extra (make test installs both generations)")

pytestmark = [pytest.mark.verifiers,
              pytest.mark.skipif(not str(verifiers.__version__).startswith("0.4."),
                                 reason=f"verifiers 0.4 reads the dialect; {verifiers.__version__} is installed")]

from support.cli import prime_process  # noqa: E402


@pytest.fixture
def project(verifiers_project: Path) -> Path:
    return verifiers_project


SECRETS = ("custom-auth-value-1", "cookie-value-22", "hunter2-password-3", "tok-service-4444")
CONFIG = """\
model = "hash"
num_tasks = 2
num_rollouts = 1
shuffle = false

[sampling]
max_tokens = 24

[client]
base_url = "{url}"
api_key_var = "HASH_KEY"
headers = {{ X-Custom-Auth = "custom-auth-value-1", Cookie = "session=cookie-value-22" }}

[env.taskset]
id = "vf-v1-chat"

[env.agent.harness]
id = "null"
env = {{ MY_PASSWORD = "hunter2-password-3", SERVICE_TOKEN = "tok-service-4444", PLAIN_SETTING = "plain-visible" }}

[env.agent.runtime]
type = "subprocess"
"""


def _leaks(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def test_config_secrets_are_redacted_in_every_file_and_line(project, monkeypatch):  # noqa: F811 (the fixture)
    monkeypatch.setenv("HASH_KEY", "x")
    server = FaultServer("--reply", "headers")
    try:
        (project / "c.toml").write_text(CONFIG.format(url=server.base_url))
        planned = prime_process("eval", "run", "@", "c.toml", "--dry-run", project=project)
        done = prime_process("eval", "run", "@", "c.toml", "-o", "out", project=project)
    finally:
        server.stop()
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert _leaks(planned.stdout + planned.stderr) == [] and "plain-visible" in planned.stdout
    assert json.loads(planned.stdout)["evals"][0]["headers"] == {"X-Custom-Auth": "[redacted]", "Cookie": "[redacted]"}
    assert done.returncode == 0, done.stderr[-2000:]
    assert _leaks(done.stdout + done.stderr) == []
    [run_dir] = list((project / "out" / "evals").glob("*/*"))
    written = {str(p.relative_to(run_dir)): p.read_text() for p in run_dir.rglob("*")
               if p.is_file() and not p.is_symlink()}
    for name in ("configs/eval.toml", "configs/resolved/eval.json", "metadata.json", "results.jsonl", "traces.jsonl"):
        assert name in written, sorted(written)
    assert {name: _leaks(text) for name, text in written.items() if _leaks(text)} == {}
    assert "your request headers" in written["results.jsonl"] and "[redacted]" in written["results.jsonl"]

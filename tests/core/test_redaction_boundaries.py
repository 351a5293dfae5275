"""Keys never reach a file, a log or the terminal, whatever raised the text: an environment's
``env_response``, a tool, a reward function (a judge whose server answers 401 echoing the request
headers). Before, redaction ran on model errors only, and the raw key landed in ``results.jsonl``,
the console summary and ``prime eval view``.

The judge's server is real (tests/support/fault_server.py ``--always echo401`` on 127.0.0.1), so is the model's,
and ``prime`` runs as a subprocess.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from support import TESTS
from support.cli import prime_process
from support.fault_server import FaultServer

from evalkit.core.redact import REDACTED

KEY = "jdg-PRIVATE-key-value-5151"  # not key-shaped: only the header it travelled in gives it away

ENV = '''
import json
import os
import urllib.error
import urllib.request

from evalkit.envs import Rubric, ToolEnv


def ask_judge(text):
    """POST to the judge with the key; its 401 body echoes the request headers."""
    request = urllib.request.Request(
        os.environ["JUDGE_URL"] + "/chat/completions",
        data=json.dumps({{"q": text}}).encode(),
        headers={{"Authorization": "Bearer " + os.environ["JUDGE_KEY"], "Content-Type": "application/json"}},
    )
    try:
        urllib.request.urlopen(request, timeout=30)
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"judge failed: {{exc.read().decode()}}") from None
    return 1.0


def judge(completion) -> float:
    return ask_judge(str(completion))


def lookup(q: str) -> str:
    """Look something up (with the judge's key).

    Args:
        q: what
    """
    return ask_judge(q)


class Env(ToolEnv):
    def env_response(self, messages, state):
        if state["answer"] == "env":
            ask_judge("env")
        return super().env_response(messages, state)


def load_environment(**kwargs):
    rows = [
        {{"question": "q0", "answer": "reward"}},
        {{"question": "q1", "answer": "env"}},
        {{"question": "q2", "answer": "tool"}},
    ]
    return Env(eval_dataset=rows, tools=[lookup], rubric=Rubric([judge]), max_turns={max_turns})
'''


def tool_calling_server_script(tmp_path: Path) -> Path:
    """A model server that calls `lookup` on the first turn of q1/q2 and answers after the tool."""
    script = tmp_path / "model_server.py"
    script.write_text(f'''
import sys
sys.path.insert(0, {str(TESTS)!r})
from aiohttp import web
from support.fault_server import serve_forever


async def chat(request):
    body = await request.json()
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "user" and last["content"] in ("q1", "q2"):
        call = {{"id": "c1", "type": "function", "function": {{"name": "lookup", "arguments": '{{"q": "x"}}'}}}}
        message = {{"role": "assistant", "content": "", "tool_calls": [call]}}
        reason = "tool_calls"
    else:
        message, reason = {{"role": "assistant", "content": "done"}}, "stop"
    return web.json_response({{"id": "x", "object": "chat.completion", "model": "m",
                              "choices": [{{"index": 0, "message": message, "finish_reason": reason}}],
                              "usage": {{"prompt_tokens": 1, "completion_tokens": 1}}}})


app = web.Application()
app.router.add_post("/v1/chat/completions", chat)
serve_forever(app, int(sys.argv[sys.argv.index("--port") + 1]))
''')
    return script


def test_a_key_echoed_by_a_judge_tool_or_env_response_reaches_no_file_log_or_terminal(tmp_path):
    env_dir = tmp_path / "environments" / "leaky"
    env_dir.mkdir(parents=True)
    (env_dir / "leaky.py").write_text(ENV.format(max_turns=3))
    judge = FaultServer("--always", "echo401")

    class ModelServer(FaultServer):
        SCRIPT = tool_calling_server_script(tmp_path)

    model = ModelServer()
    try:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "JUDGE_URL": judge.base_url, "JUDGE_KEY": KEY}
        out = tmp_path / "out"
        ran = prime_process("eval", "run", str(env_dir), "-m", "m", "-b", model.base_url, "-n", "3", "-r", "1",
                            "-o", str(out), "-v", env=env, cwd=tmp_path)
        (run_dir,) = (out / "evals" / "leaky--m").iterdir()
        view = prime_process("eval", "view", str(run_dir), "-s", "3", env=env, cwd=tmp_path)
        html = prime_process("eval", "view", str(run_dir), "--html", env=env, cwd=tmp_path)
    finally:
        judge.stop()
        model.stop()
    assert ran.returncode == 1, ran.stderr  # the judge fails every rollout: each row is an error
    assert "first error: [reward] reward function judge raised RuntimeError: judge failed" in ran.stderr
    rows = {row["example_id"]: row for row in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert rows[0]["error_kind"] == "reward" and "judge failed" in rows[0]["error"] and REDACTED in rows[0]["error"]
    assert rows[1]["error_kind"] == "environment" and "judge failed" in rows[1]["error"]
    tool_message = next(m for m in rows[2]["completion"] if m["role"] == "tool")
    assert (
        "judge failed" in tool_message["content"] and REDACTED in tool_message["content"]
    )  # the tool's error, scrubbed
    outputs = {
        "eval run": ran.stdout + ran.stderr,
        "view": view.stdout + view.stderr,
        "html": html.stdout + html.stderr,
        **{f.name: f.read_text() for f in run_dir.iterdir() if f.is_file()},
    }
    assert "request headers were" in outputs["results.jsonl"] and "report.html" in outputs
    assert [where for where, text in outputs.items() if KEY in text] == []

"""The report of a GEPA run killed with ``kill -9`` and never resumed says its rollout count is a lower bound.

``budget.json`` holds ``used`` as of its last write; the iteration the run was in when killed may be uncounted
(its ``reserved`` bounds it from above). Real parts: the run in a child process on scripted models, slowed so the
kill lands mid-run, SIGKILL to that PID, then `prime eval view` and `--html` on what it left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from support import REPO, TESTS, with_pythonpath
from typer.testing import CliRunner

from primekit_cli.app import app

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from support.report_runs import gepa_env, gepa_task
    from support.scripted_client import ScriptedClient
    from gepa_cli.config import EnvSpec, GepaJobConfig
    from gepa_cli.runner import run_gepa

    useless = ScriptedClient(lambda m, s, t: "```\\nSomething else.\\n```", model="teacher")
    config = GepaJobConfig(envs=[EnvSpec(id="toy")], model="scripted", max_calls=400, num_train=6, num_val=4,
                           minibatch_size=2, max_concurrent=1, run_dir={run_dir!r},
                           reflection_sampling={{"max_tokens": 64}})
    run_gepa(config, clients=(ScriptedClient(gepa_task, delay_s=0.05), useless), envs=[gepa_env()], show_progress=False)
    """
)


def test_a_killed_runs_rollouts_are_shown_as_at_least(tmp_path):
    run_dir = tmp_path / "run"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(TESTS), run_dir=str(run_dir)))
    child = subprocess.Popen([sys.executable, str(script)], env=with_pythonpath(REPO))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            try:
                if json.loads((run_dir / "budget.json").read_text()).get("used", 0) >= 8:
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.05)
        assert child.poll() is None, "the child finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
    budget = json.loads((run_dir / "budget.json").read_text())
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "running"

    viewed = CliRunner().invoke(app, ["eval", "view", str(run_dir)], env={"COLUMNS": "250"})  # the row unwrapped
    assert viewed.exit_code == 0, viewed.output
    text = " ".join(viewed.output.split())
    assert f"at least {budget['used']} / 400 (the run did not finish: its last iteration may be uncounted" in text
    page = tmp_path / "killed.html"
    assert CliRunner().invoke(app, ["eval", "view", str(run_dir), "--html", str(page)]).exit_code == 0
    assert f"at least {budget['used']} / 400" in page.read_text()

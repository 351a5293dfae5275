"""The ``sandbox`` runtime in the jobs beside eval: ``prime gepa run`` on a v1 taskset with the ``bash`` harness and
``[env.agent.runtime] type = "sandbox"``, as a user types it, played by the scripted model of
tests/support/bash_server.py (which also plays the teacher). Every task's command prints a word only when it runs
inside a sandbox (its private folder is mounted at ``/run/primekit`` there), and the taskset rewards that word, so
the scores show where the commands ran. (``prime rl run`` on the same runtime: docs/verifiers.md.)

Not marked ``verifiers``: the subject is primekit's GEPA job handing the runtime choice to the taskset's env, which
does not differ between verifiers 0.3.1 and 0.4 (that 0.4's bash program runs in the sandbox is
test_sandbox_parity.py's, under both); it runs once, under 0.3.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")

from support import REPO, with_pythonpath  # noqa: E402  (after the importorskip above)
from support.bash_server import BashServer  # noqa: E402  (after the importorskip above)

from evalkit.sandbox import bwrap  # noqa: E402  (after the importorskip above)

WHY_NOT = bwrap.unavailable()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(WHY_NOT is not None, reason=f"needs bubblewrap: {WHY_NOT}")]

KEY_VAR = "BASH_SERVER_KEY"
INSIDE = f"test -d {bwrap.INSIDE} && echo inside-sandbox"


@pytest.fixture(scope="module")
def server():
    started = BashServer()
    yield started
    started.stop()


def gepa(project: Path, server: BashServer, runtime: str, out: str) -> dict:
    """``prime gepa run vf-v1-shell`` on ``runtime`` (tiny budget); its best candidate's row."""
    args = {"commands": [INSIDE] * 6, "expect": "inside-sandbox", "harness": {"id": "bash"},
            "runtime": {"type": runtime}}
    cli = [sys.executable, "-m", "primekit_cli", "gepa", "run", "vf-v1-shell", "-m", "hash-model", "-M", "hash-model",
           "-b", server.base_url, "-k", KEY_VAR, "-B", "8", "--minibatch-size", "1", "-n", "3", "-N", "3", "-o", out,
           "-a", json.dumps(args)]
    env = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1", "HOME": str(project / "home"), KEY_VAR: "test-key"}
    done = subprocess.run(cli, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    rows = [json.loads(line) for line in (project / out / "results.jsonl").read_text().splitlines()]
    return next(row for row in rows if row["info"]["is_best"])


def test_gepa_runs_the_bash_harness_in_the_sandbox(verifiers_project, server):
    best = gepa(verifiers_project, server, "sandbox", "gepa-sandbox")
    assert best["score"] == 1.0 and set(best["info"]["val_subscores"].values()) == {1.0}, best  # ran inside
    rollouts = verifiers_project / "home" / ".cache" / "verifiers" / "runtimes" / "subprocess"
    assert not rollouts.exists() or list(rollouts.iterdir()) == []  # every rollout folder removed
    plain = gepa(verifiers_project, server, "subprocess", "gepa-subprocess")
    assert plain["score"] == 0.0, plain  # the same commands as the user: no sandbox there

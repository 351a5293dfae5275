"""Same rows as verifiers with its ``bash`` harness: v1 tasksets run by verifiers 0.4's own ``vf-eval`` and by
``prime eval run``, both with ``--env.agent.harness.id bash --env.agent.runtime.type subprocess``, against one
scripted agent model (tests/support/bash_server.py: it answers each user turn with one ``bash`` call, then with
what the command printed), compared episode by episode from the ``traces.jsonl`` both write with verifiers'
writer: rewards, metrics, stop condition, errors, every message (tool calls and tool output included), the tools
offered, the model calls and token counts. The ``null`` harness (primekit's default) gets the same comparison.

verifiers prepares the harness program with uv (``pip install --user uv``, then ``uv sync`` from PyPI): its side
needs the package index, so these tests are marked ``network``; ``HOME`` is a folder of the test's, so nothing is
installed into the user's. primekit's side runs the same program offline with its own interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

verifiers = pytest.importorskip(
    "verifiers", reason="needs the verifiers extra (0.4): pip install 'primekit[verifiers]'"
)

from support import REPO  # noqa: E402  (after the importorskip above)
from support.bash_server import BashServer  # noqa: E402  (after the importorskip above)

pytestmark = [pytest.mark.verifiers, pytest.mark.network,
              pytest.mark.skipif(not str(verifiers.__version__).startswith("0.4."),
                                 reason="compares with verifiers 0.4's own eval (run under .venv-vf04)")]

TASKSETS = ("vf_v1_math", "vf_v1_chat", "vf_v1_shared", "vf_v1_pkg")
KEY_VAR = "BASH_SERVER_KEY"
VOLATILE = {"id", "timestamp", "time", "timing", "start", "end", "run", "runtime", "key", "hash", "workdir"}
"""Keys whose values differ between any two runs (ids, clocks, the run's folders)."""


@pytest.fixture(scope="module")
def server():
    started = BashServer()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """One HOME for verifiers' runs (its uv install lands here once)."""
    return tmp_path_factory.mktemp("home")


def run(project: Path, argv: list[str], pythonpath: list[Path], home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(home), "PYTHONUNBUFFERED": "1", KEY_VAR: "test-key",
           "PYTHONPATH": os.pathsep.join(str(p) for p in pythonpath)}
    return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=600)


def stable(value: Any) -> Any:
    """``value`` without the keys that differ between any two runs."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def episodes(traces: Path) -> list[dict[str, Any]]:
    """The episodes of a traces.jsonl, reduced to what they mean, in task order."""
    found = []
    for line in traces.read_text().splitlines():
        episode = json.loads(line)
        found.append({
            "task": episode["task"]["data"]["idx"], "ok": episode["ok"], "errors": stable(episode["errors"]),
            "traces": [{
                "agent": trace["agent"]["name"], "rewards": trace["rewards"], "metrics": trace["metrics"],
                "stop": trace["stop_condition"], "errors": stable(trace["errors"]), "tools": stable(trace["tools"]),
                "messages": [stable(node) for node in trace["nodes"]], "calls": stable(trace["calls"]),
                "tokens": [trace["num_input_tokens"], trace["num_output_tokens"]],
            } for trace in episode["traces"]],
        })
    return sorted(found, key=lambda e: e["task"])


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """Where two values first differ (a path and both values), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = first_difference(a.get(key), b.get(key), f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := first_difference(x, y, f"{where}[{i}]"))), None)
    return None if a == b else f"{where}: {json.dumps(a)[:300]} != {json.dumps(b)[:300]}"


def rows_of_both(project: Path, server: BashServer, home: Path, taskset: str, harness: str) -> tuple[list, list]:
    """The episodes of ``taskset`` run by verifiers' own ``vf-eval`` and by ``prime eval run``, both with
    ``harness`` on the subprocess runtime against ``server``, each asserted to exit 0."""
    client = ["-m", "hash-model", "--client.base-url", server.base_url, "--client.api-key-var", KEY_VAR]
    flags = ["--env.agent.harness.id", harness, "--env.agent.runtime.type", "subprocess"]
    theirs = run(project, [str(Path(sys.executable).with_name("vf-eval")), taskset, *client, *flags, "--no-push",
                           "-o", str(project / f"vf-{harness}")], [project / "environments" / taskset], home)
    assert theirs.returncode == 0, theirs.stdout[-3000:] + theirs.stderr[-3000:]
    ours = run(project, [sys.executable, "-m", "primekit_cli", "eval", "run", taskset, *client, *flags,
                         "-o", str(project / f"pk-{harness}")], [REPO], project / "home")
    assert ours.returncode == 0, ours.stdout[-3000:] + ours.stderr[-3000:]
    (vf_traces,) = (project / f"vf-{harness}").glob("*/traces.jsonl")
    (pk_traces,) = (project / f"pk-{harness}").glob("evals/*/*/traces.jsonl")
    vf_rows, pk_rows = episodes(vf_traces), episodes(pk_traces)
    assert len(vf_rows) == len(pk_rows) > 0
    return vf_rows, pk_rows


@pytest.mark.parametrize("taskset", TASKSETS)
def test_bash_harness_gives_the_rows_verifiers_eval_gives(verifiers_project, server, home, taskset):
    vf_rows, pk_rows = rows_of_both(verifiers_project, server, home, taskset, "bash")
    calls = [c for m in vf_rows[0]["traces"][0]["messages"] for c in m.get("message", {}).get("tool_calls") or []]
    assert calls and {c["name"] for c in calls} == {"bash"}  # the model ran commands (vf_v1_pkg stops right there)
    rewards = [[sum(r["score"] * r["weight"] for r in t["rewards"].values()) for t in e["traces"]] for e in pk_rows]
    print(f"PARITY {taskset}: rows {len(vf_rows)}/{len(pk_rows)}, rewards {rewards}, "
          f"first difference: {first_difference(vf_rows, pk_rows)}")  # the table in the docs
    assert first_difference(vf_rows, pk_rows) is None, first_difference(vf_rows, pk_rows)


@pytest.mark.parametrize("taskset", [t for t in TASKSETS if t != "vf_v1_pkg"])
def test_null_harness_gives_the_rows_verifiers_eval_gives(verifiers_project, server, home, taskset):
    """primekit's default seat program (verifiers' ``null`` chat program, run offline) against verifiers' own eval
    with ``--env.agent.harness.id null``: the same comparison, no shell. Not on ``vf_v1_pkg``: what it adds (a
    packaged taskset) does not depend on the program, and the bash comparison above runs it."""
    vf_rows, pk_rows = rows_of_both(verifiers_project, server, home, taskset, "null")
    print(
        f"PARITY null {taskset}: rows {len(vf_rows)}/{len(pk_rows)}, "
        f"first difference: {first_difference(vf_rows, pk_rows)}"
    )
    assert first_difference(vf_rows, pk_rows) is None, first_difference(vf_rows, pk_rows)

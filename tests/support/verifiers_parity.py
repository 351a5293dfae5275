"""Running verifiers' own evaluator and `prime eval run` side by side on one deterministic model (the hash server),
and reducing their rows to what a row means, so the parity tests compare them example by example."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

KEY_VAR = "HASH_SERVER_KEY"
"""The key variable both harnesses name (the hash server takes any key)."""

TOML = """\
model = "hash-model"
{url_key} = "{url}"
api_key_var = "{key}"
num_examples = 3
rollouts_per_example = 2
max_tokens = 24
output_dir = "{out}"
{extra}
"""


def run(project: Path, args: list[str], pythonpath: list[Path], timeout: float = 600) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``project`` (HOME at its ``home/``) with exactly ``pythonpath``: each harness sees only the
    environment folders it is given, as a user's install would."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(project / "home"), "PYTHONUNBUFFERED": "1",
           KEY_VAR: "test-key", "PYTHONPATH": os.pathsep.join(str(p) for p in pythonpath)}
    return subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout)


def rows_of(out: Path, env: str) -> list[dict[str, Any]]:
    (results,) = sorted(out.glob(f"evals/{env}*--hash-model/*/results.jsonl"))
    return [json.loads(line) for line in results.read_text().splitlines()]


def message(m: Any) -> dict[str, Any]:
    """A message as both harnesses write it, reduced to what a row means: role, text, tool calls."""
    calls = [json.loads(c) if isinstance(c, str) else c for c in m.get("tool_calls") or []]
    calls = [[(c.get("function") or c).get("name"), (c.get("function") or c).get("arguments")] for c in calls]
    return {"role": m["role"], "content": m.get("content") or "", "tool_calls": calls}


def comparable(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Rows per example: prompt, completion, reward, metrics, whether it errored (rollouts sorted)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["example_id"], []).append({
            "prompt": [message(m) for m in r["prompt"]], "completion": [message(m) for m in r["completion"]],
            "reward": round(r["reward"], 6), "metrics": {k: round(v, 6) for k, v in r["metrics"].items()},
            "error": r.get("error") is not None,
        })
    return {k: sorted(v, key=lambda row: json.dumps(row, sort_keys=True)) for k, v in out.items()}

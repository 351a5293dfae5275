"""A GEPA lineage thousands of generations deep is shown by `prime eval view` and `--html` (before: RecursionError).

A real GEPA run (scripted models) whose results.jsonl is then rewritten as a chain of 1,500 candidates (past
Python's recursion limit of 1,000), each the child of the one before, in the schema the run wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.report_runs import make_gepa_run
from typer.testing import CliRunner

from evalkit.report.lineage import MAX_INDENT
from primekit_cli.app import app

DEPTH = 1500


def _deep(run_dir: Path) -> Path:
    first = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    rows = []
    for i in range(DEPTH):
        info = {**first["info"], "candidate_idx": i, "parent_candidate_idxs": [i - 1] if i else [],
                "system_prompt": f"prompt {i}", "is_best": i == DEPTH - 1, "discovered_at_calls": i}
        rows.append({**first, "example_id": i, "reward": i / DEPTH, "score": i / DEPTH, "info": info})
    (run_dir / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run_dir


def test_a_lineage_1500_deep_is_viewed_and_drawn(tmp_path):
    run_dir = _deep(make_gepa_run(tmp_path))
    viewed = CliRunner().invoke(app, ["eval", "view", str(run_dir)])
    assert viewed.exit_code == 0, viewed.output[-2000:]
    last = next(line for line in viewed.output.splitlines() if f"#{DEPTH - 1} " in line)
    assert f"[generation {DEPTH - 1}]" in last and len(last) < 2 * MAX_INDENT + 80
    page = tmp_path / "deep.html"
    drawn = CliRunner().invoke(app, ["eval", "view", str(run_dir), "--html", str(page)])
    assert drawn.exit_code == 0, drawn.output[-2000:]
    assert f'data-idx="{DEPTH - 1}"' in page.read_text()

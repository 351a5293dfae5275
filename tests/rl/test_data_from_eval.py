"""`prime data from-eval`: real eval runs (scripted models, report_runs) -> a chat dataset with provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.report_runs import make_eval_runs
from typer.testing import CliRunner

from primekit_cli.app import app


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    return make_eval_runs(tmp_path_factory.mktemp("evals"))


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rollouts_that_scored_become_chat_rows_with_tools_and_provenance(runs, tmp_path: Path):
    tools_run, even_run = runs
    out = tmp_path / "sft.jsonl"
    result = CliRunner().invoke(app, ["data", "from-eval", str(tools_run), str(even_run), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 14 of 24 rollouts" in result.output and "2 errored, 0 truncated, 8 below 1" in result.output
    rows = _rows(out)
    first = rows[0]
    assert first["prompt"][-1]["role"] == "user" and first["completion"][-1]["role"] == "assistant"
    assert any(m.get("tool_calls") for m in first["completion"]) and any(
        m["role"] == "tool" for m in first["completion"]
    )
    assert [tool["function"]["name"] for tool in first["tools"]] == ["add"]
    assert first["provenance"] == {"run": str(tools_run), "env_id": "toy-tools", "model": "tools", "example_id": 0,
                                   "rollout_idx": 0, "reward": 1.0}
    assert {
        (r["provenance"]["model"], r["provenance"]["example_id"]) for r in rows if r["provenance"]["model"] == "even"
    } == {("even", 0), ("even", 2), ("even", 4)}  # the "even" model answers only even-numbered questions


def test_best_of_group_keeps_one_rollout_per_example(runs, tmp_path: Path):
    out = tmp_path / "best.jsonl"
    result = CliRunner().invoke(app, ["data", "from-eval", *map(str, runs), "-o", str(out), "--best-of-group"])
    assert result.exit_code == 0 and "7 not best of their group" in result.output
    rows = _rows(out)
    keys = [(r["provenance"]["run"], r["provenance"]["example_id"]) for r in rows]
    assert len(rows) == 7 and len(set(keys)) == 7 and all(r["provenance"]["rollout_idx"] == 0 for r in rows)


def test_refusals_are_one_line(runs, tmp_path: Path):
    none = CliRunner().invoke(
        app, ["data", "from-eval", str(runs[0]), "-o", str(tmp_path / "x.jsonl"), "--min-reward", "2"]
    )
    assert none.exit_code == 2 and "error: no rollout of 1 run(s) scored at least 2" in none.output
    assert not (tmp_path / "x.jsonl").exists()
    bad = CliRunner().invoke(app, ["data", "from-eval", str(tmp_path), "-o", str(tmp_path / "x.jsonl")])
    assert bad.exit_code == 2 and "is not an eval run dir" in bad.output and "Traceback" not in bad.output

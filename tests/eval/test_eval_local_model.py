"""End to end on the embedded model (slow): `prime eval run` with no -m uses local/smollm2-135m."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from primekit_cli.app import app

pytestmark = pytest.mark.slow


def test_default_model_runs_offline(tmp_path, monkeypatch):
    pytest.importorskip("evalkit.clients.local", reason="the embedded engine has not landed in this tree")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = CliRunner().invoke(app, ["eval", "run", "reverse-text", "-n", "2", "-r", "1", "-t", "16",
                                      "-o", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "evals" / "reverse-text--local--smollm2-135m").iterdir()
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["num_rollouts"] == 2 and meta["base_url"] is None
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert all(row["error"] is None and row["completion"][0]["content"] for row in rows)
    assert meta["usage"]["output_tokens"] > 0

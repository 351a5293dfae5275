"""`[baseline] check = true`: `prime rl run` runs `prime env check`'s scripted policies before the baseline eval
and refuses to train on a reward that pays for degenerate replies."""

from __future__ import annotations

import json

import pytest
from support.rl_project import rl_project
from typer.testing import CliRunner

from primekit_cli.app import app


@pytest.mark.slow
def test_env_check_gate_refuses_a_gameable_reward(tmp_path, tiny_model):
    config = rl_project(tmp_path, tiny_model, extra="check = true\n")
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    # the digits environment pays the fraction of digits: a reply listing every answer is all digits
    assert "error: env check failed: " in result.output and "all-answers" in result.output
    run_dir = tmp_path / "out" / "rl" / "t"
    report = json.loads((run_dir / "env_check.json").read_text())
    statuses = {c["name"]: c["status"] for c in next(iter(report.values()))["checks"]}
    assert statuses["all-answers"] == "fail" and statuses["deterministic"] == "pass"
    assert not (run_dir / "baseline.json").exists()  # refused before any model rollout


def test_check_is_off_by_default():
    from rl_backend.config import BaselineConfig

    assert BaselineConfig().check is False

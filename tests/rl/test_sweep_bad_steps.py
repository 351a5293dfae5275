"""A checkpoint sweep skips a step whose export cannot load (empty: the export never finished; corrupt:
a damaged weights file) with one warning line, and evaluates the steps after it. The exports are tiny
random-weight models (tests/support/tiny_model.py) laid out as an RL run's ``weights/step_N``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.tiny_model import write_tiny_model
from typer.testing import CliRunner

from primekit_cli.app import app


@pytest.mark.slow
def test_empty_and_corrupt_steps_are_skipped_with_one_line_each(tmp_path: Path) -> None:
    weights = tmp_path / "run" / "weights"
    good = write_tiny_model(weights / "step_1")
    shutil.copytree(good, weights / "step_4")
    (weights / "step_2").mkdir()  # the export never finished
    shutil.copytree(good, weights / "step_3")
    for damaged in (weights / "step_3").glob("*.safetensors"):
        damaged.write_bytes(b"\x00not a safetensors file" * 10)
    result = CliRunner().invoke(app, ["eval", "run", "reverse-text", "-m", str(weights), "--steps", "all", "-n", "2",
                                      "-r", "1", "-t", "4", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2 and warnings[0].startswith("warning: step 2 skipped") and "step 3 skipped" in warnings[1]
    folder = tmp_path / "out" / "sweeps" / "run" / "reverse-text"
    for step in (1, 4):
        meta = json.loads((folder / f"step_{step}" / "metadata.json").read_text())
        assert meta["num_rollouts"] == 2 and meta["num_errors"] == 0, meta
    assert not (folder / "step_2").exists() and not (folder / "step_3").exists()  # no rollout was tried

"""RL runs stopped at awkward moments can be finished, dry runs check the model, exports are readable.

A kill while the final weights are being exported leaves exactly this on disk: the checkpoint of
step ``max_steps`` and no ``weights/step_N`` (the export is built under a temporary name and renamed
only when complete); a kill before the first checkpoint leaves a run dir with metrics and no
checkpoints. The tests make those states from a real run and resume them.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from support.rl_project import read_metrics, rl_project
from typer.testing import CliRunner

from primekit_cli.app import app


def rl(*args: str):
    return CliRunner().invoke(app, ["rl", "run", *args], catch_exceptions=False)


@pytest.mark.slow
def test_killed_while_exporting_final_weights_then_resume_finishes_the_export(tmp_path, tiny_model):
    config = rl_project(tmp_path, tiny_model)
    out = tmp_path / "out"
    assert rl(str(config), "-o", str(out)).exit_code == 0
    run_dir = out / "rl" / "t"
    final = run_dir / "weights" / "step_2"
    assert final.is_dir()
    # exported weights are readable by others (they came out 0700/0600 from a private temp folder)
    mode = stat.S_IMODE(final.stat().st_mode)
    assert mode & 0o055 == 0o055, oct(mode)
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o044 == 0o044 for p in final.iterdir())
    checkpoint = run_dir / "checkpoints" / "step_2"
    assert stat.S_IMODE(checkpoint.stat().st_mode) & 0o055 == 0o055

    shutil.rmtree(final)  # what a kill -9 during the final export leaves
    (run_dir / "weights" / ".step_2.tmp-killed").mkdir()
    steps_before = [m["step"] for m in read_metrics(run_dir) if "loss" in m]
    result = rl(str(config), "-o", str(out), "--resume")
    assert result.exit_code == 0, result.output
    assert "finishing the final eval/weight export only" in " ".join(result.output.split())
    assert (final / "config.json").is_file() and not (run_dir / "weights" / ".step_2.tmp-killed").exists()
    assert [m["step"] for m in read_metrics(run_dir) if "loss" in m] == steps_before  # no training step redone
    assert [m["step"] for m in read_metrics(run_dir) if "eval_reward" in m] == [1, 2]  # the final eval was recorded

    again = rl(str(config), "-o", str(out), "--resume")
    assert again.exit_code == 2
    assert "already at max_steps (2) and its final eval and weights are done" in " ".join(again.output.split())


@pytest.mark.slow
def test_killed_before_the_first_checkpoint_then_resume_starts_it_over(tmp_path, tiny_model):
    config = rl_project(tmp_path, tiny_model)
    out = tmp_path / "out"
    assert rl(str(config), "-o", str(out)).exit_code == 0
    run_dir = out / "rl" / "t"
    shutil.rmtree(run_dir / "checkpoints")  # as if killed during step 1: metrics and a baseline, no checkpoint
    shutil.rmtree(run_dir / "weights")
    refused = rl(str(config), "-o", str(out))
    assert refused.exit_code == 2 and "use --resume" in refused.output
    result = rl(str(config), "-o", str(out), "--resume")
    assert result.exit_code == 0, result.output
    assert "stopped before its first checkpoint; starting it over from step 0" in " ".join(result.output.split())
    assert [m["step"] for m in read_metrics(run_dir) if "loss" in m] == [1, 2]  # the old lines went, not doubled
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_1", "step_2"]


def test_dry_run_refuses_an_unknown_model(tmp_path):
    config = tmp_path / "rl.toml"
    config.write_text('model = "no-such-org/no-such-model"\n[[env]]\nid = "reverse-text"\n')
    result = rl(str(config), "--dry-run", "-o", str(tmp_path / "o"))
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and "no-such-org/no-such-model" in result.output
    assert not (tmp_path / "o").exists()


def test_exports_get_ordinary_permissions(tmp_path):
    from rl_backend.checkpoints import export_weights

    class Model:
        def save_pretrained(self, folder):
            Path(folder, "weights.bin").write_bytes(b"w")
            Path(folder, "sub").mkdir()
            Path(folder, "sub", "x.json").write_text(json.dumps({}))

    class Tokenizer:
        def save_pretrained(self, folder):
            Path(folder, "tokenizer.json").write_text("{}")

    final = export_weights(tmp_path, 3, Model(), Tokenizer())
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(final.stat().st_mode) == 0o777 & ~umask  # 0755 under the usual umask, not mkdtemp's 0700
    assert stat.S_IMODE((final / "sub").stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((final / "weights.bin").stat().st_mode) == 0o666 & ~umask

"""Names from configs are names, not paths, and a command deletes only inside the run dir it owns.

Before: RL ``run_name = "/some/abs/path"`` or ``"../../x"`` wrote outside ``outputs/rl`` and removed
``<run_name>/baseline`` (a user's files there were deleted, exit 0).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evalkit.core.errors import UserError
from evalkit.core.fileio import remove_inside
from evalkit.core.tomlio import validate
from evalkit.core.untrusted import name_problem
from rl_backend.config import RLConfig

CONFIG = '''model = "local/smollm2-135m"
run_name = "{run_name}"
[[env]]
id = "reverse-text"
'''


@pytest.mark.parametrize("run_name", ["{victim}", "../../victim"])
def test_rl_run_name_that_is_a_path_is_refused_and_nothing_is_deleted(tmp_path, run_name):
    victim = tmp_path / "victim"
    (victim / "baseline").mkdir(parents=True)
    (victim / "baseline" / "keep.txt").write_text("a user's file")
    project = tmp_path / "a" / "b"
    project.mkdir(parents=True)
    (project / "rl.toml").write_text(CONFIG.format(run_name=run_name.format(victim=victim)))
    done = subprocess.run([sys.executable, "-m", "primekit_cli", "rl", "run", "rl.toml", "-o", "."], cwd=project,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        done.stderr.startswith("error: rl.toml: 'run_name': ")
        and "is not a folder name (it holds a path separator)" in done.stderr
    )
    assert (victim / "baseline" / "keep.txt").read_text() == "a user's file"
    assert not (project / "rl").exists()


@pytest.mark.parametrize("name", ["..", ".", "a/b", "a\\b", "", "x\0y"])
def test_names_that_are_not_one_folder(name):
    assert name_problem(name)
    with pytest.raises(UserError, match="run_name"):
        validate(RLConfig, {"run_name": name, "env": [{"id": "reverse-text"}]}, "rl.toml")


def test_env_labels_cannot_climb_out_of_the_eval_folders():
    with pytest.raises(UserError, match="may not be '.' or '..'"):
        validate(RLConfig, {"env": [{"id": "reverse-text", "name": ".."}, {"id": "arithmetic"}]}, "rl.toml")
    assert validate(RLConfig, {"run_name": "my run.v2", "env": [{"id": "reverse-text"}]}, "x").run_name == "my run.v2"


def test_remove_inside_never_leaves_the_run_dir(tmp_path):
    run_dir, victim = tmp_path / "run", tmp_path / "victim"
    (run_dir / "evals" / "step_1").mkdir(parents=True)
    victim.mkdir()
    (victim / "keep.txt").write_text("x")
    (run_dir / "baseline").symlink_to(victim, target_is_directory=True)
    remove_inside(run_dir / "baseline", run_dir)  # the link goes, not what it points to
    assert not (run_dir / "baseline").exists() and (victim / "keep.txt").is_file()
    for outside in (run_dir / ".." / "victim", run_dir, run_dir / "evals" / ".." / ".."):
        with pytest.raises(UserError, match="refusing to delete"):
            remove_inside(outside, run_dir)
    assert (victim / "keep.txt").is_file()
    remove_inside(run_dir / "evals" / "step_1", run_dir)
    assert not (run_dir / "evals" / "step_1").exists() and (run_dir / "evals").is_dir()

"""`prime env list|init|install` as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.scripted_client import ScriptedClient
from typer.testing import CliRunner

from evalkit.loading.resolve import load_environment
from primekit_cli.app import app

runner = CliRunner()
BUILTINS = ["reverse-text", "alphabet-sort", "arithmetic", "wordle", "fact-search"]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _lines(output: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split(None, 2) for line in output.splitlines() if line.strip()}


def test_env_list_shows_builtins_with_descriptions(workdir):
    result = runner.invoke(app, ["env", "list"])
    assert result.exit_code == 0, result.output
    rows = _lines(result.stdout)
    for env_id in BUILTINS:
        assert rows[env_id][1] == "builtin" and len(rows[env_id][2]) > 20
    assert rows["wordle"][2].startswith("Wordle as a multi-turn game")


def test_env_init_then_list_then_load_and_run(workdir):
    result = runner.invoke(app, ["env", "init", "my-env"])
    assert result.exit_code == 0, result.output
    folder = workdir / "environments" / "my_env"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "my_env.py", "pyproject.toml"]
    assert "created environments/my_env/" in result.stdout
    assert 'name = "my-env"' in (folder / "pyproject.toml").read_text()
    assert 'py-modules = ["my_env"]' in (folder / "pyproject.toml").read_text()

    listed = _lines(runner.invoke(app, ["env", "list"]).stdout)
    assert listed["my-env"][1] == "local" and listed["my-env"][2].startswith("my-env: describe your task")

    env = load_environment("my-env", {"num_examples": 4})
    rows = env.get_eval_dataset()
    assert len(rows) == 4 and env.env_id == "my-env"


async def test_env_init_template_scores_reference_answers(workdir):
    assert runner.invoke(app, ["env", "init", "caps"]).exit_code == 0
    env = load_environment("caps", {})
    row = env.get_dataset(1)[0]
    state = await env.rollout(ScriptedClient([row["answer"]]), row)
    assert state.reward == 1.0 and state.error is None
    wrong = await env.rollout(ScriptedClient(["nope"]), row)
    assert wrong.reward == pytest.approx(0.2)  # the format's share only
    echoed = await env.rollout(ScriptedClient([row["question"]]), row)
    assert echoed.reward == 0.0  # an echo of the prompt holds the word, and is paid nothing


def test_env_init_refuses_to_overwrite(workdir):
    assert runner.invoke(app, ["env", "init", "my-env"]).exit_code == 0
    module = workdir / "environments" / "my_env" / "my_env.py"
    module.write_text("# my edits\n")
    result = runner.invoke(app, ["env", "init", "my-env"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: environments/my_env already exists; pick another name or delete that folder first"
    )
    assert module.read_text() == "# my edits\n"


@pytest.mark.parametrize("name", ["My Env", "1env", "bad--name", "with space", "json", "class"])
def test_env_init_validates_name(workdir, name):
    result = runner.invoke(app, ["env", "init", name])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (workdir / "environments").exists() or not any((workdir / "environments").iterdir())


def test_env_init_warns_when_shadowing_a_builtin(workdir):
    result = runner.invoke(app, ["env", "init", "arithmetic"])
    assert result.exit_code == 0 and "warning: ./environments/arithmetic will shadow the built-in" in result.stdout


def test_env_install_errors_are_one_line(workdir):
    result = runner.invoke(app, ["env", "install", "./nowhere"])
    assert result.exit_code == 2 and result.stderr.startswith("error: nowhere is not a folder")
    (workdir / "empty").mkdir()
    result = runner.invoke(app, ["env", "install", "empty"])
    assert result.exit_code == 2 and "has no pyproject.toml or setup.py" in result.stderr


def test_unknown_env_exits_2_with_one_error_line(workdir):
    """Through a real process: exit code 2, one `error:` line on stderr, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "primekit_cli", "eval", "run", "no-such-env"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown environment 'no-such-env'")
    assert "prime env init no-such-env" in lines[0] and "Traceback" not in proc.stderr


def test_env_help_has_examples():
    for command in ("list", "init", "install"):
        result = runner.invoke(app, ["env", command, "--help"])
        assert result.exit_code == 0 and "Examples" in result.stdout, command

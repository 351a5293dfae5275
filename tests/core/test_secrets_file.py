"""Secrets files (``env_file`` / ``--env-file``): loaded for the run, scrubbed everywhere, never written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.fault_server import FaultServer

from evalkit.core.errors import UserError
from evalkit.core.secrets_file import check_permissions, load_env_files, parse_env_file

KEY = "judge-secret-8c1f0e77b2"

ENV_CODE = f'''
import os

from evalkit.envs import Rubric, SingleTurnEnv


def judge_has_key(completion) -> float:
    return 1.0 if os.environ.get("JUDGE_API_KEY") == "{KEY}" else 0.0


def judge_complains(prompt) -> float:
    if "abc0" in str(prompt):
        raise RuntimeError("judge rejected key " + os.environ.get("JUDGE_API_KEY", "?"))
    return 0.0


def load_environment(**kwargs):
    rows = [{{"question": f"reverse abc{{i}}", "answer": "x"}} for i in range(4)]
    return SingleTurnEnv(
        dataset=rows, eval_dataset=rows, rubric=Rubric([judge_has_key, judge_complains], weights=[1.0, 0.0])
    )
'''


def test_parse_reads_export_quotes_and_comments(tmp_path):
    path = tmp_path / "secrets.env"
    path.write_text("# judge keys\n\nexport A_KEY=abc\nB='x y # not a comment'\nC=\"q\"\nD=plain # comment\n")
    assert parse_env_file(path) == {"A_KEY": "abc", "B": "x y # not a comment", "C": "q", "D": "plain"}


def test_a_bad_line_names_the_line_not_the_value(tmp_path):
    path = tmp_path / "secrets.env"
    path.write_text("GOOD=1\nthis is sk-not-a-pair\n")
    with pytest.raises(UserError) as err:
        parse_env_file(path)
    assert "line 2: expected KEY=VALUE" in str(err.value) and "sk-not" not in str(err.value)
    with pytest.raises(UserError, match="does not exist"):
        load_env_files([tmp_path / "missing.env"])


def test_a_file_others_can_read_gets_a_warning(tmp_path, capsys, monkeypatch):
    path = tmp_path / "secrets.env"
    path.write_text(f"WARN_TEST_KEY={KEY}\n")
    path.chmod(0o644)
    assert "chmod 600" in (check_permissions(path) or "")
    monkeypatch.delenv("WARN_TEST_KEY", raising=False)
    assert load_env_files([path, str(path)], apply=False) == ["WARN_TEST_KEY"] and "WARN_TEST_KEY" not in os.environ
    assert capsys.readouterr().err.count("can be read by other users") == 1  # each file once
    path.chmod(0o600)
    assert check_permissions(path) is None
    load_env_files([path])
    assert os.environ["WARN_TEST_KEY"] == KEY and capsys.readouterr().err == ""
    from evalkit.core.redact import redact

    assert redact(f"the judge said {KEY}") == "the judge said [redacted]"


def _files_under(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_eval_config_env_file_reaches_the_judge_and_no_output(tmp_path):
    env_dir = tmp_path / "environments" / "judged"
    env_dir.mkdir(parents=True)
    (env_dir / "judged.py").write_text(ENV_CODE)
    (tmp_path / "configs").mkdir()
    secrets = tmp_path / "configs" / "secrets.env"
    secrets.write_text(f"JUDGE_API_KEY={KEY}\n")
    secrets.chmod(0o600)
    server = FaultServer()
    try:
        (tmp_path / "configs" / "eval.toml").write_text(
            f'model = "m"\nbase_url = "{server.base_url}"\napi_key_var = "NO_KEY_NEEDED"\nenv_file = "secrets.env"\n'
            'num_examples = 2\nrollouts_per_example = 1\noutput_dir = "../out"\n[[eval]]\nid = "judged"\n'
        )
        env = {k: v for k, v in os.environ.items() if k != "JUDGE_API_KEY"} | {"NO_KEY_NEEDED": "x"}
        result = subprocess.run(
            [sys.executable, "-m", "primekit_cli", "eval", "run", "configs/eval.toml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    import json

    (results,) = (tmp_path / "out").rglob("results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [row["metrics"]["judge_has_key"] for row in rows] == [1.0, 1.0]  # the environment saw the key
    assert sum("judge rejected key [redacted]" in (row["error"] or "") for row in rows) == 1
    assert KEY not in _files_under(tmp_path / "out") and KEY not in result.stdout + result.stderr


def test_rl_env_file_is_recorded_by_name_only(tmp_path):
    from support.tiny_model import write_tiny_model

    model = write_tiny_model(tmp_path / "model")
    env_dir = tmp_path / "environments" / "judged"
    env_dir.mkdir(parents=True)
    (env_dir / "judged.py").write_text(ENV_CODE)
    (tmp_path / "secrets.env").write_text(f"JUDGE_API_KEY={KEY}\n")
    (tmp_path / "secrets.env").chmod(0o600)
    (tmp_path / "rl.toml").write_text(
        f'model = "{model}"\nrun_name = "r"\nmax_steps = 1\nbatch_size = 2\nrollouts_per_example = 2\n'
        'env_file = "secrets.env"\n'
        f'[sampling]\nmax_tokens = 4\n[[env]]\nid = "{env_dir}"\n[baseline]\nenabled = false\n'
        "[ckpt]\nsave_weights = false\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JUDGE_API_KEY"}
    from typer.testing import CliRunner

    from primekit_cli.app import app

    dry = CliRunner().invoke(app, ["rl", "run", str(tmp_path / "rl.toml"), "--dry-run"])  # sets nothing in os.environ
    assert dry.exit_code == 0 and f"secrets      {tmp_path / 'secrets.env'}" in dry.output, dry.output
    assert "JUDGE_API_KEY" not in os.environ
    result = subprocess.run([sys.executable, "-m", "primekit_cli", "rl", "run", "rl.toml", "-o", "out"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "out" / "rl" / "r"
    assert f'env_file = ["{tmp_path / "secrets.env"}"]' in (run_dir / "config.resolved.toml").read_text()
    import json

    rows = [json.loads(line) for line in (run_dir / "rollouts" / "step_1.jsonl").read_text().splitlines()]
    assert rows and all(row["metrics"].get("judge_has_key") == 1.0 for row in rows)
    assert KEY not in _files_under(run_dir) and KEY not in result.stdout + result.stderr


def test_gepa_dry_run_checks_the_env_file(tmp_path):
    (tmp_path / "gepa.toml").write_text('env_file = "nope.env"\n[[env]]\nid = "arithmetic"\n')
    result = subprocess.run(
        [sys.executable, "-m", "primekit_cli", "gepa", "run", "gepa.toml", "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and f"env file {tmp_path / 'nope.env'} does not exist" in result.stderr

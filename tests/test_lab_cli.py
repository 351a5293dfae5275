"""`prime lab setup`, and the shipped example configs staying valid and in step with ./configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from prime_cli.app import app
from prime_cli.commands.lab_cmd import lab_config_files

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
EXPECTED = {
    "endpoints.toml",
    "eval/arithmetic.toml",
    "eval/reverse-text.toml",
    "gepa/arithmetic.toml",
    "gepa/reverse-text.toml",
    "rl/arithmetic.toml",
    "rl/reverse-text.toml",
    "rl/mixed.toml",
    "rl/digit-sums.toml",
    "rl/digit-sums-vf.toml",
}
N = len(EXPECTED)


def test_shipped_configs_match_repo_configs():
    shipped = lab_config_files()
    assert set(shipped) == EXPECTED
    repo = {str(p.relative_to(REPO / "configs")): p.read_text() for p in (REPO / "configs").rglob("*.toml")}
    assert repo == shipped, "configs/ and prime_cli/lab_configs/ differ: edit one, copy it to the other"


def test_lab_setup_writes_then_refuses_then_forces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = runner.invoke(app, ["lab", "setup"])
    assert first.exit_code == 0, first.output
    assert {str(p.relative_to(tmp_path / "configs")) for p in (tmp_path / "configs").rglob("*.toml")} == EXPECTED
    assert f"{N} written, 0 skipped" in first.stdout and "wrote    configs/endpoints.toml" in first.stdout

    mine = tmp_path / "configs" / "eval" / "reverse-text.toml"
    mine.write_text("# mine\n")
    second = runner.invoke(app, ["lab", "setup"])
    assert second.exit_code == 0
    assert f"0 written, {N} skipped" in second.stdout
    assert "skipped  configs/eval/reverse-text.toml (exists; --force to overwrite)" in second.stdout
    assert mine.read_text() == "# mine\n"

    forced = runner.invoke(app, ["lab", "setup", "--force"])
    assert forced.exit_code == 0 and f"{N} written, 0 skipped" in forced.stdout
    assert mine.read_text() == lab_config_files()["eval/reverse-text.toml"]
    assert not list((tmp_path / "configs").rglob(".*"))  # no temp files left behind


def test_lab_setup_partial_folder_writes_only_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "endpoints.toml").write_text("# keep\n")
    result = runner.invoke(app, ["lab", "setup"])
    assert result.exit_code == 0 and f"{N - 1} written, 1 skipped" in result.stdout
    assert (tmp_path / "configs" / "endpoints.toml").read_text() == "# keep\n"


def test_lab_setup_unwritable_target_is_one_error_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").write_text("a file, not a folder")
    result = runner.invoke(app, ["lab", "setup"])
    assert result.exit_code == 2 and result.stderr.startswith("error: could not write configs/")


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.startswith("eval/")))
def test_eval_examples_validate(name):
    from evalkit.eval.config import load_eval_file

    configs = load_eval_file(REPO / "configs" / name)
    assert configs and all(c.env_id in ("arithmetic", "reverse-text") for c in configs)


def test_endpoint_gepa_rl_examples_validate():
    from evalkit.endpoints import load_endpoints
    from evalkit.tomlio import load_toml, validate
    from gepa_cli.config import build_job_config, load_gepa_toml, toml_to_job_fields
    from rl_backend.config import RLConfig

    assert "smollm2-135m" in load_endpoints(REPO / "configs" / "endpoints.toml")
    for name in ("arithmetic", "reverse-text"):
        parsed, base = load_gepa_toml(REPO / "configs" / "gepa" / f"{name}.toml")
        assert build_job_config(toml_to_job_fields(parsed, base), name).num_val == 20
        rl = validate(RLConfig, load_toml(REPO / "configs" / "rl" / f"{name}.toml"), name)
        assert rl.model == "local/smollm2-135m" and rl.batch_size % rl.rollouts_per_example == 0


def test_lab_help_has_examples():
    result = runner.invoke(app, ["lab", "setup", "--help"])
    assert result.exit_code == 0 and "Examples" in result.stdout

"""`prime lab setup`, and the shipped example configs staying valid and in step with ./configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import REPO
from support.cli import prime
from typer.testing import CliRunner

from primekit_cli.app import app
from primekit_cli.commands.lab_cmd import lab_config_files

runner = CliRunner()
FAMILIES = {  # the training docs' layout: one file per model family in each of eval/, gepa/, rl/
    "qwen-3-5": "Qwen/Qwen3.5-4B",
    "qwen-3-5-moe": "Qwen/Qwen3.5-35B-A3B",
    "nemotron-3": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "llama-3": "meta-llama/Llama-3.2-1B-Instruct",
}
EXPECTED = {
    "endpoints.toml",
    "endpoints.py",
    "eval/arithmetic.toml",
    "eval/reverse-text.toml",
    "gepa/arithmetic.toml",
    "gepa/reverse-text.toml",
    "rl/arithmetic.toml",
    "rl/reverse-text.toml",
    "rl/mixed.toml",
    "rl/digit-sums.toml",
    "rl/digit-sums-vf.toml",
    *(f"{job}/{family}.toml" for job in ("eval", "gepa", "rl") for family in FAMILIES),
}
N = len(EXPECTED)


PRIME_RL = {"prime-rl/reverse-text.toml", "prime-rl/wiki-search.toml", "prime-rl/digit-sums.toml"}


def test_shipped_configs_match_repo_configs():
    shipped = lab_config_files(prime_rl=True)
    assert set(lab_config_files()) == EXPECTED and set(shipped) == EXPECTED | PRIME_RL
    repo = {
        str(p.relative_to(REPO / "configs")): p.read_text()
        for p in (REPO / "configs").rglob("*")
        if p.suffix in (".toml", ".py")
    }
    assert repo == shipped, "the lab_configs link no longer reaches configs/"
    assert (REPO / "primekit_cli" / "lab_configs").resolve() == (REPO / "configs").resolve()


def test_lab_setup_writes_then_refuses_then_forces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = runner.invoke(app, ["lab", "setup"])
    assert first.exit_code == 0, first.output
    assert {
        str(p.relative_to(tmp_path / "configs")) for p in (tmp_path / "configs").rglob("*") if p.is_file()
    } == EXPECTED
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
    assert configs and all(c.env_id in ("arithmetic", "reverse-text", "primeintellect/reverse-text") for c in configs)


def test_endpoint_gepa_rl_examples_validate():
    from evalkit.clients.endpoints import load_endpoints
    from evalkit.core.tomlio import load_toml, validate
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


def _prime(monkeypatch, tmp_path: Path, *args: str):
    """`prime ...` in-process, with an empty Hugging Face cache and no OpenAI server configured."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    return prime(*args)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_files_name_the_docs_models_and_stop_on_the_uncached_model(tmp_path, monkeypatch, family):
    """Without the model in the local Hugging Face cache, each job stops on that one line (exit 2)."""
    from evalkit.clients.endpoints import load_endpoints

    hub_id = FAMILIES[family]
    for job, args in (("rl", ["rl", "run"]), ("eval", ["eval", "run"])):
        path = REPO / "configs" / job / f"{family}.toml"
        assert f'\nmodel = "{hub_id}"' in path.read_text()
        result = _prime(monkeypatch, tmp_path, *args, str(path), *(["--dry-run"] if job == "rl" else []))
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith(f"error: model {hub_id} is not in the local Hugging Face cache")
    gepa = _prime(monkeypatch, tmp_path, "gepa", "run", str(REPO / "configs" / "gepa" / f"{family}.toml"), "--dry-run")
    assert gepa.exit_code == 0 and hub_id in gepa.output, gepa.output
    assert "qwen3.5-4b" in load_endpoints(REPO / "configs" / "endpoints.py")


def test_prime_rl_flag_adds_prime_rl_configs_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["lab", "setup"]).exit_code == 0
    assert not (tmp_path / "configs" / "prime-rl").exists()
    result = runner.invoke(app, ["lab", "setup", "--prime-rl"])
    assert result.exit_code == 0 and f"3 written, {N} skipped" in result.stdout
    import tomllib

    for name in PRIME_RL:
        data = tomllib.loads((tmp_path / "configs" / name).read_text())
        assert data["model"]["name"] and data["orchestrator"]["train"]["source"][0]["env"]["taskset"]["id"]
        assert (
            data["deployment"]["num_train_gpus"] >= 1
            and "[orchestrator.renderer]" in (tmp_path / "configs" / name).read_text()
        )


@pytest.mark.verifiers
def test_the_prime_rl_example_of_a_shipped_config_is_its_export(monkeypatch):
    """prime-rl/digit-sums.toml is `prime rl export configs/rl/digit-sums.toml --target prime-rl`, kept in step
    (the export loads the environment, a verifiers v1 taskset)."""
    pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")
    from rl_backend.config import load_rl_config
    from rl_backend.export import export_config

    monkeypatch.chdir(REPO)  # the config names ./environments/digit_sums
    exported = export_config(load_rl_config(REPO / "configs" / "rl" / "digit-sums.toml"), "prime-rl")
    assert exported.text == lab_config_files(prime_rl=True)["prime-rl/digit-sums.toml"], (
        "re-export it: prime rl export configs/rl/digit-sums.toml --target prime-rl -o configs/prime-rl/digit-sums.toml"
    )

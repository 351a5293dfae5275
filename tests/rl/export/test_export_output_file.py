"""`prime rl export -o`: never the input config, never an existing file without --force, and with a
symlink the file written is the one it points to, which is also the path the printed command names."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from support import REPO
from typer.testing import CliRunner

from primekit_cli.app import app

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None,
                                reason="needs the verifiers extra: pip install 'primekit[verifiers]'")


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(REPO)  # the shipped config names ./environments/digit_sums
    return Path(shutil.copy(REPO / "configs" / "rl" / "digit-sums.toml", tmp_path / "digit-sums.toml"))


def _export(*args: str) -> object:
    return CliRunner().invoke(app, ["rl", "export", *args, "--target", "prime-rl"])


def test_output_naming_the_input_config_is_refused_even_with_force(config: Path) -> None:
    before = config.read_text()
    for extra in ([], ["--force"]):
        result = _export(str(config), "-o", str(config.parent / "." / config.name), *extra)
        assert result.exit_code == 2 and "error: -o" in result.output and "config being exported" in result.output
        assert config.read_text() == before


def test_an_existing_output_is_replaced_only_with_force(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine.toml"
    out.write_text("# someone's file\n")
    result = _export(str(config), "-o", str(out))
    assert result.exit_code == 2 and "--force" in result.output and out.read_text() == "# someone's file\n"
    result = _export(str(config), "-o", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert "someone" not in out.read_text() and "orchestrator" in out.read_text()


def test_a_symlink_output_writes_its_target_and_the_command_names_it(config: Path, tmp_path: Path) -> None:
    real = tmp_path / "real" / "export.toml"
    real.parent.mkdir()
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    result = _export(str(config), "-o", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and real.is_file() and link.read_text() == real.read_text()
    assert f"wrote {real}" in result.output and f"rl @ {real}\n" in result.output

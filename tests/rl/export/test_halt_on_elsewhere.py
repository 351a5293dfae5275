"""`--halt-on` (health.halt_on) cannot carry to prime-rl, Tinker or SkyRL: refused in one line, never silently
dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import REPO
from typer.testing import CliRunner

from primekit_cli.app import app

needs_verifiers = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("verifiers") is None,
    reason="needs the verifiers extra: pip install 'primekit[verifiers]'",
)


def _error_line(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    return line


@needs_verifiers
def test_backend_prime_rl_refuses_halt_on_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    line = _error_line(["rl", "run", "configs/rl/digit-sums.toml", "--backend", "prime-rl", "--dry-run", "--halt-on",
                        "reward_spread", "-o", str(tmp_path)])
    assert "health.halt_on = ['reward_spread'] has no prime-rl equivalent (--halt-on:" in line
    assert "--backend primekit" in line
    assert not (tmp_path / "rl").exists()


@needs_verifiers
@pytest.mark.parametrize(
    ("config", "target"), [("digit-sums", "prime-rl"), ("digit-sums-vf", "tinker"), ("digit-sums-vf", "skyrl")]
)
def test_exports_refuse_halt_on(monkeypatch: pytest.MonkeyPatch, config: str, target: str) -> None:
    monkeypatch.chdir(REPO)
    line = _error_line(["rl", "export", f"configs/rl/{config}.toml", "--target", target, "--health.halt_on", '["all"]'])
    assert (
        "health.halt_on = ['reward_spread', 'entropy_collapse'" in line
        and f"has no {target} equivalent (--halt-on" in line
    )

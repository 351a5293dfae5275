"""`--device` reaches the in-process engine from every command (eval, GEPA, RL), and typos are one error line."""

from __future__ import annotations

import pytest
from support import REPO
from typer.testing import CliRunner

from evalkit.core.errors import UserError
from primekit_cli.app import app

CONFIGS = REPO / "configs"


def test_eval_config_carries_the_device_into_the_client_spec():
    from evalkit.eval.config import EvalConfig

    assert EvalConfig(env_id="arithmetic", device="CPU").client_spec().device == "cpu"
    assert EvalConfig(env_id="arithmetic").client_spec().device is None  # the engine's own default (auto)


def test_gepa_task_and_teacher_specs_carry_the_device():
    from gepa_cli.config import GepaJobConfig

    config = GepaJobConfig(envs=[{"id": "arithmetic"}], device="cpu", reflection_model="local/smollm2-135m")
    assert config.task_spec().device == "cpu" and config.teacher_spec().device == "cpu"


def test_the_local_client_is_built_for_the_device(monkeypatch):
    """The spec's device is what the embedded client gets (nothing is loaded until the first request)."""
    from evalkit.clients.factory import make_client
    from evalkit.clients.spec import ClientSpec

    client = make_client(ClientSpec(model="local/smollm2-135m", device="cpu"))
    assert client._device == "cpu"


@pytest.mark.parametrize("command", [["eval", "run", "arithmetic"], ["gepa", "run", "arithmetic", "--dry-run"]])
def test_a_misspelt_device_is_one_error_line(command):
    result = CliRunner().invoke(app, [*command, "--device", "gpu0"])
    assert result.exit_code == 2, result.output
    assert "unknown device 'gpu0'" in result.output and "Traceback" not in result.output


def test_rl_device_flag_sets_trainer_device_and_cpu_wins_over_cuda(tmp_path):
    from rl_backend.config import load_rl_config
    from rl_backend.plan import trainer_device

    config = load_rl_config(CONFIGS / "rl" / "arithmetic.toml", ["--trainer.device", "cpu"])
    assert config.trainer.device == "cpu" and trainer_device(config) == "cpu"
    result = CliRunner().invoke(
        app, ["rl", "run", str(CONFIGS / "rl" / "arithmetic.toml"), "--dry-run", "--device", "cpu", "-o", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    with pytest.raises(UserError, match="contradicts trainer.gpus"):
        load_rl_config(CONFIGS / "rl" / "arithmetic.toml", ["--trainer.device", "cpu", "--trainer.gpus", "[1]"])

"""Config validation (one `error:` line, exit 2), overrides, dry-run, and the shipped configs."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support import REPO
from typer.testing import CliRunner

from evalkit.core.errors import ConfigError
from primekit_cli.app import app
from rl_backend.config import RLConfig, load_rl_config, parse_overrides, to_toml

ROOT = REPO
BASE = """
model = "local/smollm2-135m"
max_steps = 3
batch_size = 8
rollouts_per_example = 4
[sampling]
max_tokens = 16
[[env]]
id = "arithmetic"
args = { difficulty = "easy" }
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rl.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "extra, needle",
    [
        ("batch_size = 10\n", "batch_size (10) must be divisible by rollouts_per_example (4)"),
        ("bogus = 1\n", "unknown key 'bogus'"),
        ("[trainer]\nlrr = 1\n", "unknown key 'trainer.lrr'"),
        ("[trainer]\nmax_seq_len = 16\n", "sampling.max_tokens (16) must be below trainer.max_seq_len (16)"),
        ("[inference]\nbackend = 'vllm'\n[trainer]\nlora = false\n", "needs LoRA"),
        ("[trainer.loss]\ntype = 'nope'\n", "trainer.loss.type 'nope' is unknown"),
        ("[inference]\nmax_model_len = 8\n", "inference.max_model_len (8)"),
    ],
)
def test_validation_errors_name_the_key(tmp_path, extra, needle):
    text = BASE.replace("batch_size = 8\n", "") if extra.startswith("batch_size") else BASE
    path = _write(tmp_path, extra + text if not extra.startswith("[") else text + extra)
    with pytest.raises(ConfigError) as err:
        load_rl_config(path)
    assert needle in str(err.value)


def test_cli_config_error_is_one_line_exit_2(tmp_path):
    path = _write(tmp_path, BASE.replace("batch_size = 8", "batch_size = 6"))
    result = subprocess.run(
        [sys.executable, "-m", "primekit_cli", "rl", "run", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "divisible" in lines[0]
    assert "Traceback" not in result.stderr


def test_overrides_parse_toml_values():
    assert parse_overrides(["--trainer.lr", "5e-6", "--max-steps=3", "--trainer.lora", "false", "--run-name", "x"]) == {
        "trainer": {"lr": 5e-6, "lora": False},
        "max_steps": 3,
        "run_name": "x",
    }
    with pytest.raises(ConfigError):
        parse_overrides(["stray"])


def test_lora_false_means_full_finetuning_and_roundtrips(tmp_path):
    config = load_rl_config(_write(tmp_path, BASE), ["--trainer.lora", "false"])
    assert config.trainer.lora is None
    again = RLConfig.model_validate(tomllib.loads(to_toml(config)))
    assert again == config


def test_dry_run_prints_config_and_plan(tmp_path):
    path = _write(tmp_path, BASE)
    result = CliRunner().invoke(
        app, ["rl", "run", str(path), "--dry-run", "--trainer.lr", "1e-4", "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    assert "lr = 0.0001" in result.output and "# plan" in result.output
    assert "2 examples x 4" in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["arithmetic.toml", "reverse-text.toml", "mixed.toml"])
def test_shipped_configs_validate(name):
    path = ROOT / "configs" / "rl" / name
    assert path.is_file(), f"{path} is gone: the test names what configs/ ships"
    load_rl_config(path)


def test_config_module_imports_no_torch():
    code = "import sys, rl_backend.config, rl_backend.losses, rl_backend.advantages; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


TWO_ENVS = BASE.replace('[[env]]\nid = "arithmetic"', '[[env]]\nenv_id = "arithmetic"') + """
[[env]]
id = "reverse-text"
name = "rev"
[buffer]
env_ratios = [3, 1]
"""


def _plan(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["rl", "run", str(_write(tmp_path, text)), "--dry-run", "-o", str(tmp_path / "o")])
    lines = result.output.split("# plan\n", 1)[-1].splitlines()
    return result.exit_code, lines if result.exit_code == 0 else result.output.splitlines()


def test_dry_run_plans_the_mixture_the_vllm_command_and_the_gpus(tmp_path, monkeypatch):
    import torch

    vllm = f'[inference]\nvllm_command = ["{sys.executable}", "-m", "vllm.entrypoints.openai.api_server"]\ngpus = [0]\n'
    code, plan = _plan(tmp_path, TWO_ENVS + vllm)
    assert code == 0, plan
    assert "environments 2: 75% arithmetic, 25% rev of the examples (buffer.env_ratios)" in plan
    assert any(line.split() == ["rev", "reverse-text"] for line in plan)
    rollouts = next(line for line in plan if line.startswith("rollouts"))
    assert f"a server started with `{sys.executable} -m vllm.entrypoints.openai.api_server` on GPU 0" in rollouts
    if torch.cuda.is_available():  # the trainer takes GPU 0 too, so vLLM gets half of it
        assert "gpu_memory_utilization 0.5, shared with the trainer;" in rollouts and "trainer      GPU 0" in plan
    else:  # a CPU trainer leaves the GPU to vLLM
        assert "gpu_memory_utilization 0.9;" in rollouts and "trainer      CPU (no CUDA GPU here)" in plan
    assert "baseline     16 examples x 4 per environment" in " ".join(plan)
    assert not (tmp_path / "o").exists()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without CUDA
    code, out = _plan(tmp_path, TWO_ENVS + vllm + "[trainer]\ngpus = [1]\n")
    assert (
        code == 2
        and out[-1]
        == "error: trainer.gpus = [1] but torch sees no CUDA GPU here; remove trainer.gpus to train on the CPU"
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    code, plan = _plan(tmp_path, TWO_ENVS + vllm + "[trainer]\ngpus = [1]\n")
    assert code == 0, plan
    assert "trainer      GPU 1" in plan and "on GPU 0 (gpu_memory_utilization 0.9;" in " ".join(plan)
    code, plan = _plan(tmp_path, TWO_ENVS + vllm.replace("gpus = [0]", "gpus = [1]") + "[trainer]\ngpus = [1]\n")
    assert "on GPU 1 (gpu_memory_utilization 0.5, shared with the trainer;" in " ".join(plan)

    code, plan = _plan(tmp_path, BASE + '[inference]\nbase_url = "http://127.0.0.1:8000/v1"\n')
    assert code == 0 and "the running server at http://127.0.0.1:8000/v1" in " ".join(plan)
    code, out = _plan(
        tmp_path,
        BASE + '[inference]\nvllm_command = ["/no/such/env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]\n',
    )
    assert code == 2 and "inference.vllm_command: '/no/such/env/bin/python' is not an executable" in out[-1]

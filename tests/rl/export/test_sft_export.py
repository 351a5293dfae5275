"""`prime rl export SFT_CONFIG --target prime-rl`: prime-rl's `sft` config and its dataset folder.

The dataset comes from real eval runs (scripted models, one with tools) through `prime data from-eval`. The
golden file is the export of the config below with the temporary folder written as ``/OUT``; rewrite it with
``PRIMEKIT_UPDATE_GOLDEN=1`` after a deliberate change. prime-rl's own ``SFTConfig`` loads the written file
in the interpreter named by ``PRIME_RL_PYTHON`` (docs/cluster.md: how to make one); without it that test skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest
from support import TESTS
from support.prime_rl import prime_rl_python
from support.report_runs import make_eval_runs
from typer.testing import CliRunner

from primekit_cli.app import app
from rl_backend.export import prime_rl_sft
from rl_backend.export.common import covered, leaf_paths
from rl_backend.sft_config import SFTConfig

GOLDEN = TESTS / "golden" / "export" / "sft.prime-rl.toml"
CONFIG = """
model = "Qwen/Qwen3-0.6B"
data = "good.jsonl"
run_name = "try1"
epochs = 3
batch_size = 4
seed = 7
[trainer]
lr = 2e-4
weight_decay = 0.01
adam_beta2 = 0.95
max_grad_norm = 0.5
lr_scheduler_type = "linear"
warmup_steps = 2
min_lr = 1e-5
max_seq_len = 1024
micro_batch_size = 2
[trainer.lora]
rank = 8
alpha = 16
dropout = 0.05
target_modules = ["q_proj", "v_proj"]
[ckpt]
interval = 5
keep_last = 3
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`prime data from-eval` over two real eval runs: 14 rows, tool calls and tool results included."""
    folder = tmp_path_factory.mktemp("sft-export")
    runs = make_eval_runs(folder / "evals")
    out = folder / "good.jsonl"
    result = CliRunner().invoke(app, ["data", "from-eval", *map(str, runs), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _export(tmp_path: Path, dataset: Path, *args: str, config: str = CONFIG) -> tuple[int, str, Path]:
    (tmp_path / "good.jsonl").write_bytes(dataset.read_bytes())
    (tmp_path / "sft.toml").write_text(config)
    out = tmp_path / "sft.prime-rl.toml"
    result = CliRunner().invoke(
        app, ["rl", "export", str(tmp_path / "sft.toml"), "--target", "prime-rl", "-o", str(out), *args]
    )
    return result.exit_code, result.output, out


def test_every_sft_key_has_one_disposition() -> None:
    tables = [prime_rl_sft.MAPPING, prime_rl_sft.LOCAL_ONLY, prime_rl_sft.NO_MEANING, prime_rl_sft.NOTED]
    unclassified = [path for path in leaf_paths(SFTConfig) if sum(covered(path, table) for table in tables) != 1]
    assert unclassified == []


def test_the_export_matches_the_golden_file_and_carries_every_value(tmp_path: Path, dataset: Path) -> None:
    code, output, out = _export(tmp_path, dataset)
    assert code == 0, output
    assert f"sft @ {out}" in output.splitlines()
    text = out.read_text().replace(str(tmp_path), "/OUT")
    if os.environ.get("PRIMEKIT_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
    data = tomllib.loads(out.read_text())
    assert data["max_steps"] == 11  # ceil(3 epochs * 14 rows / 4), as `prime sft run` counts
    assert data["run"] == {"name": "try1"} and data["model"]["name"] == "Qwen/Qwen3-0.6B"
    assert data["model"]["lora"] == {"rank": 8, "alpha": 16.0, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}
    assert data["data"] == {
        "type": "sft",
        "name": str(tmp_path / "sft.prime-rl.data"),
        "batch_size": 4,
        "seq_len": 1024,
        "seed": 7,
        "shuffle": True,
    }
    assert data["optim"] == {
        "type": "adamw",
        "lr": 2e-4,
        "weight_decay": 0.01,
        "max_norm": 0.5,
        "betas1": 0.9,
        "betas2": 0.95,
    }
    assert data["scheduler"] == {"type": "linear", "warmup_steps": 2, "decay_steps": 9, "min_lr": 1e-5}
    assert data["ckpt"] == {"interval": 5, "keep_last": 3}
    copied = tmp_path / "sft.prime-rl.data" / "train.jsonl"
    assert copied.read_bytes() == dataset.read_bytes()
    assert "at least 4 rows" in output and "trainer.micro_batch_size" in output and "14 rows copied" in output


def test_prime_rls_loader_reads_the_dataset_folder(tmp_path: Path, dataset: Path) -> None:
    """prime-rl's SFT data loader calls ``datasets.load_dataset(data.name, None, split="train")``."""
    from datasets import load_dataset

    code, output, out = _export(tmp_path, dataset)
    assert code == 0, output
    rows = load_dataset(tomllib.loads(out.read_text())["data"]["name"], None, split="train")
    assert len(rows) == 14 and {"prompt", "completion", "tools"} <= set(rows.column_names)
    with_tools = [row for row in rows if row["tools"]]
    assert with_tools and with_tools[0]["tools"][0]["function"]["name"] == "add"
    assert any(m["role"] == "tool" for row in with_tools for m in row["completion"])


def test_what_cannot_carry_is_refused_in_one_line(tmp_path: Path, dataset: Path) -> None:
    code, output, _ = _export(tmp_path, dataset, "--model", "local/smollm2-135m")
    (line,) = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 2 and "embedded model 'local/smollm2-135m' has no typed renderer in renderers 0.1.9" in line
    code, output, _ = _export(tmp_path, dataset, "--model", "HuggingFaceTB/SmolLM2-135M-Instruct")
    assert code == 2 and "model 'HuggingFaceTB/SmolLM2-135M-Instruct' has no typed renderer" in output
    result = CliRunner().invoke(app, ["rl", "export", str(tmp_path / "sft.toml"), "--target", "tinker"])
    assert result.exit_code == 2 and "is an SFT config (`prime sft run`); it exports to prime-rl only" in result.output
    result = CliRunner().invoke(app, ["rl", "export", str(tmp_path / "sft.toml"), "--target", "prime-rl"])
    assert result.exit_code == 2 and "pass -o FILE" in result.output and "Traceback" not in result.output
    code, output, _ = _export(tmp_path, dataset)
    assert code == 0, output
    code, output, _ = _export(tmp_path, dataset)  # the files are there now
    assert code == 2 and "already exists; pass --force" in output


def test_assistant_turns_in_the_prompt_are_noted(tmp_path: Path, dataset: Path) -> None:
    shot = {"prompt": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"},
                       {"role": "user", "content": "2+2"}], "completion": [{"role": "assistant", "content": "4"}]}
    few = tmp_path / "few.jsonl"
    few.write_text(json.dumps(shot) + "\n")
    code, output, _ = _export(tmp_path, few)
    assert code == 0 and "1 row(s) have assistant messages in their prompt" in output


VALIDATE = """
import json, sys
from pydantic_config import cli
from prime_rl.configs.sft import SFTConfig
from renderers.base import MODEL_RENDERER_MAP
c = cli(SFTConfig, args=["@", sys.argv[1]])
lora = c.model.lora
print(json.dumps({
    "model": c.model.name, "max_steps": c.max_steps, "run": c.run.name, "data": c.data.model_dump(mode="json"),
    "lora": None if lora is None else [lora.rank, lora.alpha, lora.dropout, lora.target_modules],
    "optim": [c.optim.type, c.optim.lr, c.optim.weight_decay, c.optim.max_norm, c.optim.betas1, c.optim.betas2],
    "scheduler": c.scheduler.model_dump(mode="json"), "ckpt": [c.ckpt.interval, c.ckpt.keep_last],
    "renderer": c.renderer.name, "deployment": [c.deployment.type, c.deployment.num_train_gpus],
    "typed": sorted(MODEL_RENDERER_MAP),
}))
"""


@pytest.mark.parametrize("variant", ["golden", "full"])
def test_prime_rls_own_sft_config_accepts_the_export(tmp_path: Path, dataset: Path, variant: str) -> None:
    python = prime_rl_python("prime_rl.configs.sft")
    if python is None:
        pytest.skip("prime-rl's config package is not importable (set PRIME_RL_PYTHON; docs/cluster.md)")
    args = (
        []
        if variant == "golden"
        else [
            "--trainer.lora",
            "false",
            "--max-steps",
            "6",
            "--trainer.lr_scheduler_type",
            "cosine",
            "--ckpt.interval",
            "0",
            "--model",
            "meta-llama/Llama-3.2-1B-Instruct",
            "--trainer.max_grad_norm",
            "0",
        ]
    )
    code, output, out = _export(tmp_path, dataset, *args)
    assert code == 0, output
    result = subprocess.run(
        [python, "-c", VALIDATE, str(out)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(prime_rl_sft.TYPED_RENDERER_MODELS) == got["typed"]
    data = {k: got["data"][k] for k in ("type", "name", "batch_size", "seq_len", "seed", "shuffle", "micro_batch_size")}
    assert data == {"type": "sft", "name": str(tmp_path / "sft.prime-rl.data"), "batch_size": 4, "seq_len": 1024,
                    "seed": 7, "shuffle": True, "micro_batch_size": 1}
    assert got["data"]["loss_mask"] == {"system": False, "user": False, "assistant": True, "tool": False}
    max_norm = 0.5 if variant == "golden" else None  # primekit's 0 (no clipping) is prime-rl's None, never 0
    assert got["optim"] == ["adamw", 2e-4, 0.01, max_norm, 0.9, 0.95] and got["run"] == "try1"
    assert got["renderer"] == "auto" and got["deployment"] == ["single_node", 1]
    if variant == "golden":
        assert (got["model"], got["max_steps"]) == ("Qwen/Qwen3-0.6B", 11)
        assert got["lora"] == [8, 16.0, 0.05, ["q_proj", "v_proj"]] and got["ckpt"] == [5, 3]
        assert got["scheduler"] == {"type": "linear", "warmup_steps": 2, "decay_steps": 9, "min_lr": 1e-5}
    else:
        assert (got["model"], got["max_steps"], got["lora"]) == ("meta-llama/Llama-3.2-1B-Instruct", 6, None)
        assert got["scheduler"] == {"type": "cosine", "warmup_steps": 2, "min_lr": 1e-5} and got["ckpt"] == [None, 3]

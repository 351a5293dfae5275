"""Tiny models and a task for the distillation tests (opd, sft, the teacher's eval): a teacher that differs from
its student in a known way, a model that shares the characters but not the ids of the tokenizer, and the digits
environment in a folder of its own."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from primekit_cli.app import app
from support.report_runs import RL_ENV
from support.tiny_model import build_tokenizer, write_tiny_model


def sharpened_model(folder: Path, factor: float, seed: int = 0) -> Path:
    """A tiny model (``seed``'s random weights) whose logits are ``factor`` times sharper: its final norm scaled."""
    import torch
    from transformers import AutoModelForCausalLM

    folder = write_tiny_model(folder, seed=seed)
    net = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        net.model.norm.weight.mul_(factor)
    net.save_pretrained(folder)
    return folder


def model_of_another_tokenizer(folder: Path) -> Path:
    """A tiny model whose tokenizer has the same characters under other ids (the plain tokens' ids reversed): a
    teacher the tokenizer checks must refuse."""
    folder = write_tiny_model(folder)
    vocab = build_tokenizer().get_vocab()
    plain = sorted((t for t in vocab if not t.startswith("<")), key=vocab.get)
    swapped = json.loads((folder / "tokenizer.json").read_text())
    mapping = swapped["model"]["vocab"]
    ids = [mapping[t] for t in plain]
    for token, new_id in zip(plain, reversed(ids)):
        mapping[token] = new_id
    (folder / "tokenizer.json").write_text(json.dumps(swapped))
    return folder


def digits_env(root: Path) -> Path:
    """The digits RL environment (:data:`support.report_runs.RL_ENV`) as ``root/environments/digits``."""
    env_dir = root / "environments" / "digits"
    env_dir.mkdir(parents=True)
    (env_dir / "digits.py").write_text(RL_ENV)
    return env_dir


def distill_config(folder: Path, student: Path, env: Path, algo: str, *, run_name: str, steps: int, batch_size: int,
                   max_tokens: int, evals: str = "interval = 0", top: str = "") -> Path:
    """``folder/rl.toml`` for a distillation test: ``student`` fully fine-tuned on the digits environment ``env`` at a
    fixed rate, 4 rollouts an example, no checkpoints, no baseline checks. ``algo``: the algorithm's tables;
    ``evals``: the ``[eval]`` table's body; ``top``: more top-level keys."""
    config = folder / "rl.toml"
    config.write_text(f'''model = "{student}"
{top}
run_name = "{run_name}"
max_steps = {steps}
batch_size = {batch_size}
rollouts_per_example = 4
{algo}
[sampling]
max_tokens = {max_tokens}
[[env]]
id = "{env}"
[trainer]
lr = 3e-3
lora = false
on_policy = true
[ckpt]
interval = 0
save_weights = false
[eval]
{evals}
[baseline]
enabled = false
''')
    return config


def rl_run(config: Path, tmp_path: Path, *args: str):
    """``prime rl run CONFIG -o tmp_path/o ARGS`` in this process."""
    return CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "o"), *args])

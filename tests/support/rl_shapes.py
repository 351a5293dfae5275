"""The RL config shapes the training docs show, as data, and the helpers that write one and plan it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# hosted training (docs' advanced config reference): primekit's own top-level shape with its extra keys
HOSTED: dict[str, Any] = {
    "model": "Qwen/Qwen3-30B-A3B-Instruct-2507", "max_steps": 100, "batch_size": 256, "rollouts_per_example": 8,
    "learning_rate": 1e-4, "lora_alpha": 16, "oversampling_factor": 2.0, "max_async_level": 2,
    "trajectory_strategy": "interleaved", "env_file": ["secrets.env"],
    "sampling": {"max_tokens": 512, "temperature": 1.0, "top_k": 50, "min_p": 0.05, "repetition_penalty": 1.1,
                 "enable_thinking": False},
    "env": [{"id": "primeintellect/alphabet-sort", "args": {"min_turns": 3, "max_turns": 5}},
            {"id": "primeintellect/reverse-text"}],
    "buffer": {"online_difficulty_filtering": True, "env_ratios": [0.5, 0.5]},
    "eval": {"interval": 20, "num_examples": 64, "rollouts_per_example": 1, "eval_base_model": True,
             "env": [{"id": "primeintellect/reverse-text"}]},
    "wandb": {"project": "alphabet-sort", "name": "qwen3-30b-i-alphabet-sort"},
}


# prime-rl's single-file shape as the verifiers training guide showed it (late 2025)
PRIME_RL_GUIDE: dict[str, Any] = {
    "inference_gpu_ids": [0], "trainer_gpu_ids": [1], "max_steps": 500,
    "model": {"name": "Qwen/Qwen3-4B-Instruct-2507"},
    "wandb": {"project": "wiki-search", "name": "wiki-search-4b"},
    "trainer": {"optim": {"lr": 1e-5, "weight_decay": 0.0},
                "model": {"experimental": {"lora": {"rank": 8, "alpha": 32, "dropout": 0.0, "target_modules": [
                    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}}}},
    "orchestrator": {"batch_size": 512, "rollouts_per_example": 16, "seq_len": 4096,
                     "mask_truncated_completions": False, "zero_truncated_completions": True,
                     "sampling": {"max_tokens": 512},
                     "buffer": {"type": "online-difficulty", "oversampling_factor": 2.0},
                     "env": [{"id": "primeintellect/wiki-search"}]},
    "inference": {"model": {"enable_auto_tool_choice": True, "tool_call_parser": "hermes"}},
}


# prime-rl's example of the same era (examples/alphabet_sort/rl.toml): [ckpt], kernels, activation checkpointing
PRIME_RL_EXAMPLE: dict[str, Any] = {
    "max_steps": 200, "ckpt": {},
    "model": {"name": "Qwen/Qwen3-4B-Instruct-2507"},
    "wandb": {"project": "alphabet-sort", "name": "alphabet-sort"},
    "trainer": {"model": {"impl": "liger_kernel", "ac": {"freq": 1}, "lora": {"rank": 32, "alpha": 64}},
                "optim": {"lr": 1e-5}},
    "orchestrator": {"batch_size": 512, "rollouts_per_example": 8, "seq_len": 2048, "sampling": {"max_tokens": 768},
                     "env": [{"id": "primeintellect/alphabet-sort", "name": "alphabet-sort",
                              "args": {"min_turns": 3, "max_turns": 5, "power_per_turn": False}}]},
    "inference": {},
}


# verifiers' vf-rl trainer: GPU counts, vLLM args, transformers-style [trainer.args]
VF_RL: dict[str, Any] = {
    "model": "Qwen/Qwen3-4B-Instruct-2507",
    "env": {"id": "primeintellect/wiki-search", "args": {"max_turns": 10}},
    "inference": {"gpus": 1, "args": {"enable_auto_tool_choice": True, "tool_call_parser": "hermes"}},
    "trainer": {"gpus": 1, "args": {
        "run_name": "wiki-search", "micro_batch_size": 4, "rollouts_per_example": 16, "batch_size": 1024,
        "max_steps": 500, "max_tokens": 512, "max_seq_len": 4096,
        "learning_rate": 1e-5, "lr_scheduler_type": "cosine", "warmup_steps": 10, "max_grad_norm": 0.5,
        "gradient_checkpointing": True, "beta": 0.01, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0}},
}


# the self-hosted quick start
QUICK_START: dict[str, Any] = {
    "model_name": "Qwen/Qwen3-30B-A3B-Instruct-2507", "num_gpus": 8, "tensor_parallel_size": 4,
    "max_steps": 1000, "batch_size": 512, "rollouts_per_example": 16, "learning_rate": 1e-5,
    "env": {"id": "wiki-search", "args": {"max_turns": 10, "judge_model": "gpt-4.1-mini"}},
    "sampling": {"max_tokens": 1024, "temperature": 1.0},
    "wandb": {"project": "wiki-search", "name": "qwen3-30b-wiki"},
}


SHAPES = {"hosted": HOSTED, "prime-rl-guide": PRIME_RL_GUIDE, "prime-rl-example": PRIME_RL_EXAMPLE,
          "vf-rl": VF_RL, "quick-start": QUICK_START}


def toml_text(data: dict[str, Any]) -> str:
    """``data`` as TOML (nested tables, arrays of tables), the way the docs write it."""
    from evalkit.core.tomlio import dumps

    return dumps(data)


def shape_file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "rl.toml"
    path.write_text(toml_text(data))
    for name in data.get("env_file", []):  # the judge keys the hosted config points at
        (tmp_path / name).write_text("JUDGE_API_KEY=judge-key-for-tests\n")
        (tmp_path / name).chmod(0o600)
    return path


def dry_run(path: Path, *extra: str):
    from typer.testing import CliRunner

    from primekit_cli.app import app

    return CliRunner().invoke(app, ["rl", "run", str(path), "--dry-run", *extra])


def on_embedded_model(data: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k not in ("model_name", "env_file")}
    if isinstance(data.get("model"), dict):
        data["model"] = {"name": "local/smollm2-135m"}
    else:
        data["model"] = "local/smollm2-135m"
    return data

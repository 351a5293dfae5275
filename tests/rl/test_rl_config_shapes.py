"""The RL config shapes the training docs show, as data (keys and nesting), read by `prime rl run`.

Each shape either plans with ``--dry-run`` or stops on the one thing this machine lacks: the Hub model
it names is not in the local Hugging Face cache. The same shapes with the embedded model plan in full
(where they need no GPU), and every key that means the same as ours lands there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.core.errors import ConfigError
from rl_backend.config import RLConfig, load_rl_config

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


def _file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "rl.toml"
    path.write_text(toml_text(data))
    for name in data.get("env_file", []):  # the judge keys the hosted config points at
        (tmp_path / name).write_text("JUDGE_API_KEY=judge-key-for-tests\n")
        (tmp_path / name).chmod(0o600)
    return path


def _dry_run(path: Path, *extra: str):
    from typer.testing import CliRunner

    from primekit_cli.app import app

    return CliRunner().invoke(app, ["rl", "run", str(path), "--dry-run", *extra])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_doc_shape_stops_only_on_the_uncached_model(tmp_path, name):
    result = _dry_run(_file(tmp_path, SHAPES[name]))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and "is not in the local Hugging Face cache" in lines[0], result.output


def _embedded(data: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k not in ("model_name", "env_file")}
    if isinstance(data.get("model"), dict):
        data["model"] = {"name": "local/smollm2-135m"}
    else:
        data["model"] = "local/smollm2-135m"
    return data


@pytest.mark.parametrize("name", ["hosted", "prime-rl-example"])
def test_shapes_without_gpus_plan_in_full_on_the_embedded_model(tmp_path, name):
    result = _dry_run(_file(tmp_path, _embedded(SHAPES[name])))
    assert result.exit_code == 0, result.output
    assert "# plan" in result.stdout and "run dir" in result.stdout


def _load(tmp_path: Path, data: dict[str, Any]) -> RLConfig:
    return load_rl_config(_file(tmp_path, data))


def test_hosted_keys_land_on_ours(tmp_path):
    config = _load(tmp_path, HOSTED)
    assert (config.trainer.lr, config.trainer.lora.alpha, config.filter.oversampling_factor) == (1e-4, 16, 2.0)
    assert config.trainer.async_level == 2 and config.trajectory_strategy == "interleaved"
    assert (config.sampling.top_k, config.sampling.min_p, config.sampling.repetition_penalty) == (50, 0.05, 1.1)
    assert config.sampling.request_args()["chat_template_kwargs"] == {"enable_thinking": False}
    assert config.filter.enabled and config.buffer.env_ratios == [0.5, 0.5]
    assert config.eval.at_start and [e.id for e in config.eval.env] == ["primeintellect/reverse-text"]
    assert config.env_file == [str(tmp_path / "secrets.env")] and config.notes == []  # relative to the config


def test_prime_rl_guide_keys_land_on_ours(tmp_path):
    config = _load(tmp_path, PRIME_RL_GUIDE)
    assert config.model == "Qwen/Qwen3-4B-Instruct-2507" and config.max_steps == 500
    assert (config.inference.gpus, config.trainer.gpus) == ([0], [1])
    assert (config.trainer.lr, config.trainer.weight_decay) == (1e-5, 0.0)
    assert (config.trainer.lora.rank, config.trainer.lora.alpha, config.trainer.lora.dropout) == (8, 32, 0.0)
    assert (config.batch_size, config.rollouts_per_example, config.trainer.max_seq_len) == (512, 16, 4096)
    assert config.trainer.zero_truncated_completions and not config.trainer.mask_truncated_completions
    assert config.sampling.max_tokens == 512 and config.filter.enabled and config.filter.oversampling_factor == 2.0
    assert [e.id for e in config.env] == ["primeintellect/wiki-search"] and config.inference.tool_call_parser == "hermes"
    assert any("enable_auto_tool_choice" in note for note in config.notes)


def test_prime_rl_example_keys_land_on_ours(tmp_path):
    config = _load(tmp_path, PRIME_RL_EXAMPLE)
    assert config.ckpt.interval == 0  # prime-rl's bare [ckpt]: at the end only
    assert config.trainer.gradient_checkpointing and (config.trainer.lora.rank, config.trainer.lora.alpha) == (32, 64)
    assert config.env[0].label == "alphabet-sort" and config.env[0].args["max_turns"] == 5
    assert any(note.startswith("trainer.model.impl") for note in config.notes)


def test_vf_rl_keys_land_on_ours(tmp_path):
    config = _load(tmp_path, VF_RL)
    assert (config.inference.gpus, config.trainer.gpus, config.inference.tool_call_parser) == ([0], [1], "hermes")
    t = config.trainer
    assert (t.micro_batch_size, t.max_seq_len, t.lr, t.lr_scheduler_type, t.warmup_steps) == (4, 4096, 1e-5, "cosine", 10)
    assert (t.max_grad_norm, t.gradient_checkpointing, t.kl_coef) == (0.5, True, 0.01)
    assert (config.run_name, config.batch_size, config.rollouts_per_example, config.max_steps) == ("wiki-search", 1024, 16, 500)
    assert (config.sampling.max_tokens, config.sampling.top_k) == (512, 20)


def test_quick_start_keys_land_on_ours(tmp_path):
    config = _load(tmp_path, QUICK_START)
    assert config.model == "Qwen/Qwen3-30B-A3B-Instruct-2507" and config.trainer.lr == 1e-5
    assert (config.inference.gpus, config.trainer.gpus) == ([0, 1, 2, 3], [4])
    assert any("3 GPU(s) stay idle" in note for note in config.notes)


@pytest.mark.parametrize(
    "patch, needle",
    [
        ({"trainer_gpu_ids": [6, 7]}, "the trainer runs on one GPU"),
        ({"orchestrator": {"buffer": {"easy_threshold": 1.0}}}, "orchestrator.buffer.easy_threshold: prime-rl's buffer"),
        ({"trainer": {"optim": {"type": "muon"}}}, "trainer.optim.type = 'muon': primekit's trainer uses AdamW only"),
        ({"trainer": {"model": {"compile": {}}}}, "trainer.model.compile: prime-rl key with no primekit counterpart"),
        ({"trainer": {"model": {"tp": 2}}}, "trainer.model.tp: multi-GPU training"),
        ({"orchestrator": {"max_async_level": 2, "max_off_policy_steps": 1}}, "max_off_policy_steps = 1 is below the async level (2)"),
        ({"orchestrator": {"mask_env_responses": False}}, "primekit always masks environment responses"),
        ({"ckpt": {"resume_step": 10}}, "ckpt.resume_step: resume with `prime rl run CONFIG --resume STEP`"),
        ({"output_dir": "outputs/x"}, "output_dir: the output folder is `prime rl run -o DIR`"),
        ({"model": {"name": "Qwen/Qwen3-4B-Instruct-2507", "trust_remote_code": True}}, "model.trust_remote_code"),
        ({"trainer": {"optim": {"lr": 1e-5}, "lr": 2e-5}}, "trainer.optim.lr and trainer.lr set the same thing"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(tmp_path, patch, needle):
    from rl_backend.config import deep_merge

    data = deep_merge(PRIME_RL_EXAMPLE, patch)
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, data)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_vf_rl_multi_gpu_trainer_and_unknown_args_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="trainer.gpus = 2: multi-GPU"):
        _load(tmp_path, {**VF_RL, "trainer": {"gpus": 2, "args": {"max_steps": 5}}})
    with pytest.raises(ConfigError, match="trainer.args.num_generations: verifiers' vf-rl key"):
        _load(tmp_path, {**VF_RL, "trainer": {"gpus": 1, "args": {"num_generations": 8}}})


def test_translation_is_idempotent_on_the_resolved_config(tmp_path):
    """config.resolved.toml is in primekit's own shape and reloads to the same config."""
    from rl_backend.config import to_toml

    for data in SHAPES.values():
        config = _load(tmp_path, data)
        again = tmp_path / "again.toml"
        again.write_text(to_toml(config))
        assert load_rl_config(again).model_dump() == config.model_dump()

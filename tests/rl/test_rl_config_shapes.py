"""The RL config shapes the training docs show, as data (keys and nesting), read by `prime rl run`.

Each shape either plans with ``--dry-run`` or stops on the one thing this machine lacks: the Hub model
it names is not in the local Hugging Face cache. The same shapes with the embedded model plan in full
(where they need no GPU), and every key that means the same as ours lands there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.rl_shapes import (
    HOSTED,
    PRIME_RL_EXAMPLE,
    PRIME_RL_GUIDE,
    QUICK_START,
    SHAPES,
    VF_RL,
    dry_run,
    on_embedded_model,
    shape_file,
)

from evalkit.core.errors import ConfigError
from rl_backend.config import RLConfig, load_rl_config


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_doc_shape_stops_only_on_the_uncached_model(tmp_path, name):
    result = dry_run(shape_file(tmp_path, SHAPES[name]))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and "is not in the local Hugging Face cache" in lines[0], result.output


@pytest.mark.parametrize("name", ["hosted", "prime-rl-example"])
def test_shapes_without_gpus_plan_in_full_on_the_embedded_model(tmp_path, name):
    result = dry_run(shape_file(tmp_path, on_embedded_model(SHAPES[name])))
    assert result.exit_code == 0, result.output
    assert "# plan" in result.stdout and "run dir" in result.stdout


def _load(tmp_path: Path, data: dict[str, Any]) -> RLConfig:
    return load_rl_config(shape_file(tmp_path, data))


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
    assert [e.id for e in config.env] == [
        "primeintellect/wiki-search"
    ] and config.inference.tool_call_parser == "hermes"
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
    assert (t.micro_batch_size, t.max_seq_len, t.lr, t.lr_scheduler_type, t.warmup_steps) == (
        4,
        4096,
        1e-5,
        "cosine",
        10,
    )
    assert (t.max_grad_norm, t.gradient_checkpointing, t.kl_coef) == (0.5, True, 0.01)
    assert (config.run_name, config.batch_size, config.rollouts_per_example, config.max_steps) == (
        "wiki-search",
        1024,
        16,
        500,
    )
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
        (
            {"orchestrator": {"buffer": {"easy_threshold": 1.0}}},
            "orchestrator.buffer.easy_threshold: prime-rl's buffer",
        ),
        ({"trainer": {"optim": {"type": "muon"}}}, "trainer.optim.type = 'muon': primekit's trainer uses AdamW only"),
        ({"trainer": {"model": {"compile": {}}}}, "trainer.model.compile: prime-rl key with no primekit counterpart"),
        ({"trainer": {"model": {"tp": 2}}}, "trainer.model.tp: multi-GPU training"),
        (
            {"orchestrator": {"max_async_level": 2, "max_off_policy_steps": 1}},
            "max_off_policy_steps = 1 is below the async level (2)",
        ),
        ({"orchestrator": {"mask_env_responses": False}}, "primekit always masks environment responses"),
        ({"ckpt": {"resume_step": 10}}, "ckpt.resume_step: resume with `prime rl run CONFIG --resume STEP`"),
        ({"output_dir": "outputs/x"}, "output_dir: the output folder is `prime rl run -o DIR`"),
        ({"model": {"name": "Qwen/Qwen3-4B-Instruct-2507", "trust_remote_code": True}}, "model.trust_remote_code"),
        ({"trainer": {"optim": {"lr": 1e-5}, "lr": 2e-5}}, "trainer.optim.lr and trainer.lr set the same thing"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(tmp_path, patch, needle):
    from evalkit.core.dotted import deep_merge

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

"""primekit's RL config -> SkyRL's verifiers integration: the dataset step and the training overrides.

SkyRL (``examples/train_integrations/verifiers`` at commit ``a9564572``, after skyrl_train v0.4.0)
trains a legacy verifiers environment in two steps: ``prepare_dataset.py`` writes the environment's
rows to Parquet, then ``main_verifiers`` trains with ``key=value`` overrides of SkyRL's config
dataclasses. Both load the environment by id with no arguments, so ``[[env]] args`` cannot carry;
one environment per run. Batch sizes count prompts (``train_batch_size`` = primekit's examples per
step) and every value whose SkyRL default differs from primekit's run is written (Dr. GRPO
advantages, no KL loss, no weight decay, ...).
"""

from __future__ import annotations

import sys
from typing import Any

from rl_backend.config import RLConfig
from rl_backend.export.common import (
    AND_THEN,
    DPPO_ONLY,
    GRPO_ONLY,
    HALT_ON,
    NEWER_NOTED,
    NEWER_SAME_AT_DEFAULT,
    Expanded,
    Export,
    checked,
    comment_word,
    one_env_problems,
    shell_command,
    shell_word,
)
from rl_backend.losses import clip_range

TARGET = "skyrl"
COMMIT = "a9564572eb8e91076be43c1bd5e4615e3de17265"
INTEGRATION = "examples/train_integrations/verifiers"
ENTRYPOINT = "examples.train_integrations.verifiers.entrypoints.main_verifiers"

MAPPING: dict[str, str] = {
    "model": "trainer.policy.model.path",
    "run_name": "trainer.run_name",
    "max_steps": "trainer.max_training_steps (and trainer.epochs, so the data never runs out first)",
    "batch_size": "trainer.train_batch_size / policy_mini_batch_size (batch_size / rollouts_per_example prompts)",
    "rollouts_per_example": "generator.n_samples_per_prompt",
    "seed": "trainer.seed",
    "sampling.max_tokens": "generator.sampling_params.max_generate_length",
    "sampling.temperature": "generator.sampling_params.temperature",
    "sampling.top_p": "generator.sampling_params.top_p",
    "env.id": "environment.env_class and the dataset step's --env_id",
    "trainer.lr": "trainer.policy.optimizer_config.lr",
    "trainer.weight_decay": "trainer.policy.optimizer_config.weight_decay",
    "trainer.warmup_steps": "trainer.policy.optimizer_config.num_warmup_steps",
    "trainer.max_grad_norm": "trainer.policy.optimizer_config.max_grad_norm",
    "trainer.max_seq_len": "trainer.max_prompt_length / generator.max_input_length (max_seq_len - max_tokens)",
    "trainer.lora.rank": "trainer.policy.model.lora.rank",
    "trainer.lora.alpha": "trainer.policy.model.lora.alpha",
    "trainer.lora.dropout": "trainer.policy.model.lora.dropout",
    "trainer.loss.type": "trainer.algorithm.policy_loss_type (mask: importance_sampling, clip: regular)",
    "trainer.loss.mask_low": "trainer.algorithm.off_policy_correction.token_mask_is_threshold_low",
    "trainer.loss.mask_high": "trainer.algorithm.off_policy_correction.token_mask_is_threshold_high",
    "trainer.loss.clip_eps": "trainer.algorithm.eps_clip_low / eps_clip_high",
    "trainer.loss.clip_eps_high": "trainer.algorithm.eps_clip_high",
    "trainer.advantage.type": "trainer.algorithm.advantage_estimator",
    "trainer.advantage.std_normalize": "trainer.algorithm.grpo_norm_by_std",
    "trainer.on_policy": (
        "(SkyRL's synchronous trainer is on-policy; primekit's one-step overlap is noted, not carried)"
    ),
    "trainer.async_level": (
        "(SkyRL's synchronous trainer is on-policy; primekit's one-step overlap is noted, not carried)"
    ),
    "filter.enabled": "trainer.algorithm.dynamic_sampling.type = filter",
    "filter.max_rounds": "trainer.algorithm.dynamic_sampling.max_sample_batches",
    "ckpt.interval": "trainer.ckpt_interval (0: max_steps)",
    "ckpt.keep_last": "trainer.max_ckpts_to_keep",
    "ckpt.save_weights": "trainer.hf_save_interval",
    "eval.interval": "trainer.eval_interval (0: -1)",
    "eval.rollouts_per_example": "generator.eval_n_samples_per_prompt",
    "eval.at_start": "trainer.eval_before_train",
    "wandb.project": "trainer.project_name (trainer.logger = wandb)",
    "wandb.name": "trainer.run_name",
}

LOCAL_ONLY = (
    "max_concurrent",
    "rollout_timeout",
    "score_timeout",
    "max_message_chars",
    "trainer.micro_batch_size",
    "trainer.bf16",
    "trainer.device",
    "trainer.gpus",
    "inference",
    "baseline",
    "trainer.gradient_checkpointing",
)

NO_MEANING: dict[str, str] = {
    **HALT_ON,
    **GRPO_ONLY,
    **DPPO_ONLY,
    "system_prompt": "the integration uses the environment's own prompt",
    "env.args": "the dataset step and the generator load the environment without arguments",
    "env.name": "one environment, named by its id",
    "buffer.env_ratios": "the integration trains one environment",
    "trainer.lora.target_modules": "SkyRL takes 'all-linear'",
    "sampling.top_k": "SkyRL samples without a top-k filter",
    "sampling.min_p": "SkyRL samples without a min-p filter",
    "sampling.repetition_penalty": "SkyRL samples without a repetition penalty",
    "sampling.enable_thinking": "SkyRL renders prompts with the template's defaults",
    "sampling.reasoning_effort": "SkyRL renders prompts with the template's defaults",
    "trainer.adam_beta1": "the export leaves SkyRL's Adam betas",
    "trainer.adam_beta2": "the export leaves SkyRL's Adam betas",
    "trainer.lr_scheduler_type": "the export writes SkyRL's constant_with_warmup schedule",
    "trainer.min_lr": "the export writes SkyRL's constant_with_warmup schedule",
    "trainer.kl_coef": "the export turns SkyRL's KL term off; primekit's is to the starting model",
    "trainer.mask_truncated_completions": "SkyRL trains truncated rollouts as they are",
    "trainer.num_iterations": "the export writes one policy update per batch",
    "trainer.loss.entropy_coef": "the export writes SkyRL's algorithm without an entropy term",
    "trainer.zero_truncated_completions": "SkyRL scores truncated rollouts as they are",
    "eval.env": "the export evaluates the training environment",
    "filter.oversampling_factor": "SkyRL rolls out each batch once",
}
NOTED: dict[str, str] = {
    **NEWER_NOTED,
    "eval.num_examples": "SkyRL evaluates the whole validation Parquet",
    "eval.temperature": "SkyRL's eval sampling is a separate table; set generator.eval_sampling_params there",
    "wandb.entity": "SkyRL takes a project and a run name",
}
"""Keys that do not change what is trained: noted when set, never refused."""
SAME_AT_DEFAULT = ("env.args", "env.name", "buffer.env_ratios", "system_prompt",
                   "trainer.adam_beta1", "trainer.adam_beta2", "trainer.lr_scheduler_type", "trainer.min_lr",
                   *NEWER_SAME_AT_DEFAULT)
"""Keys whose primekit default is what SkyRL does anyway (no note)."""


DATA_KEYS = ("data.train_data", "data.val_data")
"""The overrides :func:`build` writes with ``$DATA_DIR`` in them (the only words the shell expands)."""


def build(config: RLConfig, env_id: str, model: str) -> list[tuple[str, str]]:
    """The training overrides (``key=value``), with ``$DATA_DIR`` for the dataset step's output."""
    algo = config.trainer.loss
    examples = config.examples_per_step
    lora = config.trainer.lora
    prompt_len = config.trainer.max_seq_len - config.sampling.max_tokens
    args: list[tuple[str, Any]] = [
        ("data.train_data", "['$DATA_DIR/train.parquet']"),
        ("data.val_data", "['$DATA_DIR/validation.parquet']"),
        ("environment.env_class", env_id),
        ("trainer.policy.model.path", model),
        ("trainer.policy.model.lora.rank", lora.rank if lora else 0),
    ]
    if lora is not None:
        args += [
            ("trainer.policy.model.lora.alpha", int(lora.alpha)),
            ("trainer.policy.model.lora.dropout", lora.dropout),
        ]
    opt = "trainer.policy.optimizer_config"
    args += [
        (f"{opt}.lr", config.trainer.lr),
        (f"{opt}.weight_decay", config.trainer.weight_decay),
        (f"{opt}.max_grad_norm", config.trainer.max_grad_norm),
        (f"{opt}.num_warmup_steps", config.trainer.warmup_steps),
        (f"{opt}.scheduler", "constant_with_warmup"),
        ("trainer.algorithm.advantage_estimator", config.trainer.advantage.type),
        ("trainer.algorithm.grpo_norm_by_std", config.trainer.advantage.std_normalize),
        ("trainer.algorithm.use_kl_loss", False),
        ("trainer.algorithm.policy_loss_type", "importance_sampling" if algo.type == "mask" else "regular"),
        ("trainer.algorithm.loss_reduction", "token_mean"),
        ("trainer.algorithm.off_policy_correction.token_mask_is_threshold_low", algo.mask_low),
        ("trainer.algorithm.off_policy_correction.token_mask_is_threshold_high", algo.mask_high),
    ]
    if algo.type == "clip":
        low, high = clip_range(algo.type, algo.clip_eps, algo.clip_eps_high)
        args += [("trainer.algorithm.eps_clip_low", low), ("trainer.algorithm.eps_clip_high", high)]
    if config.filter.enabled:
        args += [("trainer.algorithm.dynamic_sampling.type", "filter"),
                 ("trainer.algorithm.dynamic_sampling.max_sample_batches", config.filter.max_rounds)]
    args += [
        ("generator.n_samples_per_prompt", config.rollouts_per_example),
        ("generator.sampling_params.max_generate_length", config.sampling.max_tokens),
        ("generator.sampling_params.temperature", config.sampling.temperature),
        ("generator.sampling_params.top_p", config.sampling.top_p),
        ("generator.max_input_length", prompt_len),
        ("generator.eval_n_samples_per_prompt", config.eval.rollouts_per_example),
        ("trainer.max_prompt_length", prompt_len),
        ("trainer.train_batch_size", examples),
        ("trainer.policy_mini_batch_size", examples),
        ("trainer.max_training_steps", config.max_steps),
        ("trainer.epochs", config.max_steps),
        ("trainer.seed", config.seed),
        ("trainer.ckpt_interval", config.ckpt.interval or config.max_steps),
        ("trainer.max_ckpts_to_keep", config.ckpt.keep_last or -1),
        ("trainer.hf_save_interval", (config.ckpt.interval or config.max_steps) if config.ckpt.save_weights else -1),
        ("trainer.eval_interval", config.eval.interval or -1),
        ("trainer.eval_before_train", config.eval.at_start),
        ("trainer.logger", "wandb" if config.wandb else "console"),
    ]
    if config.wandb is not None:
        args.append(("trainer.project_name", config.wandb.project))
    name = (config.wandb.name if config.wandb else None) or config.run_name
    if name:
        args.append(("trainer.run_name", name))
    return [(key, _text(value)) for key, value in args]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else repr(value)


def export(config: RLConfig, **_: Any) -> Export:
    """The dataset step and training command for ``config``, or one UserError naming what cannot carry."""
    problems = one_env_problems(config, "SkyRL's verifiers integration")
    if config.trainer.loss.type not in ("mask", "clip"):
        problems.append(
            f"trainer.loss.type = '{config.trainer.loss.type}': the export writes SkyRL's importance_sampling "
            "('mask') or regular PPO ('clip') loss only"
        )
    lora = config.trainer.lora
    if lora is not None and lora.alpha != int(lora.alpha):
        problems.append(f"trainer.lora.alpha = {lora.alpha:g}: SkyRL takes a whole number")
    model, entries, notes = checked(config, sys.modules[__name__], ("legacy",), problems)
    env_id = entries[0].verifiers_id
    dataset_head = ["uv", "run", "--isolated", "--with", "verifiers", "python", f"{INTEGRATION}/prepare_dataset.py"]
    dataset_args = ["--env_id", env_id, "--output_dir", Expanded("$DATA_DIR")]
    train_head = ["uv", "run", "--isolated", "--with", "verifiers", "--extra", "fsdp", "-m", ENTRYPOINT]
    overrides = [
        Expanded(f"{key}={value}") if key in DATA_KEYS else f"{key}={value}"
        for key, value in build(config, env_id, model)
    ]
    if not config.trainer.on_policy:
        notes.append(
            "trainer.on_policy: SkyRL's synchronous trainer samples with the current weights "
            "(primekit overlaps one step)"
        )
    notes.append("not carried (this machine's run only): " + ", ".join(LOCAL_ONLY))
    text = (
        "#!/usr/bin/env bash\n"
        f"# SkyRL ({COMMIT[:12]}) verifiers integration, exported by `prime rl export --target skyrl`.\n"
        "# Run from a SkyRL checkout with the environment installed "
        f"(uv run {INTEGRATION}/install_environment.py {comment_word(env_id)}).\n"
        "set -euo pipefail\n"
        f"ENV_ID={shell_word(env_id)}\n"
        'DATA_DIR="${DATA_DIR:-$HOME/data/$ENV_ID}"\n'
        "# 1) the environment's rows as Parquet\n"
        + " ".join(shell_word(word) for word in [*dataset_head, *dataset_args]) + "\n"
        "# 2) training\n"
        + shell_command(train_head, overrides) + ' "$@"\n'
    )
    command = [*dataset_head, *dataset_args, AND_THEN, *train_head, *overrides]
    return Export(TARGET, text, ".skyrl.sh", command=command, notes=notes)

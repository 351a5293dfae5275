"""primekit's RL config -> the tinker-cookbook ``verifiers_rl`` recipe command.

The recipe (``python -m tinker_cookbook.recipes.verifiers_rl.train key=value ...``, tinker-cookbook
``v0.5.5``) trains one legacy verifiers environment (``vf.load_environment(vf_env_id, **vf_env_args)``,
its ``verifiers>=0.1.9,<0.1.10`` pin) with LoRA on Tinker. Its ``CLIConfig`` has no key for several
environments, full fine-tuning, a system prompt, top_p, weight decay, warm-up, LoRA alpha or dropout;
those are refused when set, noted when at primekit's default.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rl_backend.config import RLConfig
from rl_backend.export.common import (
    DPPO_ONLY,
    GRPO_ONLY,
    HALT_ON,
    NEWER_NOTED,
    NEWER_SAME_AT_DEFAULT,
    Export,
    checked,
    one_env_problems,
    shell_command,
)

TARGET = "tinker"
VERSION = "v0.5.5"
COMMIT = "9dfcc3a2cf44432d621a01005073dc6d76a1e87a"
MODULE = "tinker_cookbook.recipes.verifiers_rl.train"

MAPPING: dict[str, str] = {
    "model": "model_name",
    "run_name": "wandb_name",
    "max_steps": "max_steps",
    "batch_size": "groups_per_batch (batch_size / rollouts_per_example)",
    "rollouts_per_example": "group_size",
    "seed": "dataset_seed",
    "sampling.max_tokens": "max_tokens",
    "sampling.temperature": "temperature",
    "env.id": "vf_env_id",
    "env.args": "vf_env_args (JSON)",
    "trainer.lr": "learning_rate",
    "trainer.lora.rank": "lora_rank",
    "trainer.advantage.type": "(group-centred advantages, the recipe's rule)",
    "trainer.loss.type": "(importance-sampling loss, the recipe's; other losses are refused)",
    "trainer.on_policy": "(the recipe is on-policy; primekit's one-step overlap is noted, not carried)",
    "trainer.async_level": "(the recipe is on-policy; primekit's one-step overlap is noted, not carried)",
    "filter.enabled": "(the recipe trains on every group; primekit's filter is noted, not carried)",
    "ckpt.interval": "save_every",
    "eval.interval": "eval_every",
    "wandb.project": "wandb_project",
    "wandb.name": "wandb_name",
}

LOCAL_ONLY = (
    "max_concurrent", "rollout_timeout", "score_timeout", "max_message_chars", "trainer.micro_batch_size",
    "trainer.max_seq_len", "trainer.bf16", "trainer.device", "trainer.gpus", "inference", "baseline", "ckpt.keep_last",
    "ckpt.save_weights", "trainer.gradient_checkpointing")

NO_MEANING: dict[str, str] = {
    **HALT_ON,
    **GRPO_ONLY,
    **DPPO_ONLY,
    "system_prompt": "the recipe uses the environment's own prompt",
    "sampling.top_p": "the recipe samples with top_p = 1.0",
    "env.name": "one environment, named by its id",
    "buffer.env_ratios": "the recipe trains one environment",
    "trainer.weight_decay": "the recipe's Adam has no weight decay",
    "trainer.warmup_steps": "the recipe uses a constant learning rate",
    "trainer.max_grad_norm": "the recipe does not clip gradients",
    "trainer.lora.alpha": "Tinker's LoRA has no alpha setting",
    "trainer.lora.dropout": "Tinker's LoRA has no dropout",
    "trainer.lora.target_modules": "Tinker adapts the attention and MLP layers",
    "trainer.loss.mask_low": "Tinker's importance-sampling loss has no ratio mask",
    "trainer.loss.mask_high": "Tinker's importance-sampling loss has no ratio mask",
    "trainer.loss.clip_eps": "Tinker's importance-sampling loss has no clipping",
    "trainer.loss.clip_eps_high": "Tinker's importance-sampling loss has no clipping",
    "trainer.loss.entropy_coef": "Tinker's importance-sampling loss has no entropy term",
    "trainer.num_iterations": "the recipe takes one optimizer step per batch",
    "trainer.advantage.std_normalize": "the recipe centres rewards within a group only",
    "filter.max_rounds": "the recipe trains on every group",
    "sampling.top_k": "the recipe samples without a top-k filter",
    "sampling.min_p": "the recipe samples without a min-p filter",
    "sampling.repetition_penalty": "the recipe samples without a repetition penalty",
    "sampling.enable_thinking": "the recipe renders prompts with the template's defaults",
    "sampling.reasoning_effort": "the recipe renders prompts with the template's defaults",
    "trainer.adam_beta1": "the recipe's Adam uses its own betas",
    "trainer.adam_beta2": "the recipe's Adam uses its own betas",
    "trainer.lr_scheduler_type": "the recipe uses a constant learning rate",
    "trainer.min_lr": "the recipe uses a constant learning rate",
    "trainer.kl_coef": "the export turns the recipe's KL term off; primekit's is to the starting model",
    "trainer.mask_truncated_completions": "the recipe trains truncated rollouts as they are",
    "trainer.zero_truncated_completions": "the recipe scores truncated rollouts as they are",
    "eval.env": "the export evaluates the training environment",
    "filter.oversampling_factor": "the recipe rolls out each batch once",
}
NOTED: dict[str, str] = {
    **NEWER_NOTED,
    "eval.num_examples": "the recipe's evaluator decides",
    "eval.rollouts_per_example": "the recipe's evaluator decides",
    "eval.temperature": "the recipe's evaluator decides",
    "eval.at_start": "the recipe's evaluator decides",
    "wandb.entity": "the recipe takes a project and a run name",
}
"""Keys that do not change what is trained: noted when set, never refused."""
SAME_AT_DEFAULT = ("system_prompt", "sampling.top_p", "env.name", "buffer.env_ratios", "trainer.weight_decay",
                   "trainer.warmup_steps", "trainer.lora.dropout", "trainer.loss.clip_eps",
                   "trainer.advantage.std_normalize", "filter.max_rounds",
                   "trainer.adam_beta1", "trainer.adam_beta2", "trainer.lr_scheduler_type", "trainer.min_lr",
                   *NEWER_SAME_AT_DEFAULT)
"""Keys whose primekit default is what the recipe does anyway (no note)."""


def build(config: RLConfig, env_id: str, model: str) -> list[tuple[str, str]]:
    """The recipe's ``key=value`` arguments, in CLIConfig order."""
    args: list[tuple[str, Any]] = [
        ("model_name", model),
        ("lora_rank", config.trainer.lora.rank if config.trainer.lora else 0),
        ("renderer_name", "None"),  # the recipe then picks the model's recommended renderer
        ("vf_env_id", env_id),
        ("vf_env_args", json.dumps(config.env[0].args, sort_keys=True)),
        ("dataset_seed", config.seed),
        ("group_size", config.rollouts_per_example),
        ("groups_per_batch", config.examples_per_step),
        ("learning_rate", config.trainer.lr),
        ("max_tokens", config.sampling.max_tokens),
        ("temperature", config.sampling.temperature),
        ("kl_penalty_coef", 0.0),
        ("eval_every", config.eval.interval),
        ("save_every", config.ckpt.interval),
        ("max_steps", config.max_steps),
    ]
    if config.wandb is not None:
        args.append(("wandb_project", config.wandb.project))
    name = (config.wandb.name if config.wandb else None) or config.run_name
    if name:
        args.append(("wandb_name", name))
    return [(key, value if isinstance(value, str) else repr(value)) for key, value in args]


def export(config: RLConfig, **_: Any) -> Export:
    """The recipe command for ``config``, or one UserError naming everything that cannot carry."""
    problems = one_env_problems(config, "the verifiers_rl recipe")
    if config.trainer.lora is None:
        problems.append("trainer.lora = false: the recipe trains a LoRA adapter (set [trainer.lora])")
    if config.trainer.loss.type != "mask":
        problems.append(
            f"trainer.loss.type = '{config.trainer.loss.type}': the recipe uses Tinker's importance-sampling loss"
        )
    model, entries, notes = checked(config, sys.modules[__name__], ("legacy",), problems)
    args = build(config, entries[0].bare_id, model)
    recipe_args = [f"{key}={value}" for key, value in args]
    command = ["python", "-m", MODULE, *recipe_args]
    if not config.trainer.on_policy:
        notes.append("trainer.on_policy: the recipe trains on-policy (primekit overlaps one step)")
    if config.filter.enabled:
        notes.append("filter.enabled: the recipe trains on groups with uniform rewards too (zero advantage)")
    notes.append("not carried (this machine's run only): " + ", ".join(LOCAL_ONLY))
    text = (
        "#!/usr/bin/env bash\n"
        f"# tinker-cookbook {VERSION} ({COMMIT[:12]}) verifiers_rl recipe, "
        "exported by `prime rl export --target tinker`.\n"
        f"# Needs the environment installed beside tinker-cookbook (prime env install ...) and TINKER_API_KEY set.\n"
        "set -euo pipefail\n" + shell_command(["python", "-m", MODULE], recipe_args) + ' "$@"\n'
    )
    return Export(TARGET, text, ".tinker.sh", command=command, notes=notes)

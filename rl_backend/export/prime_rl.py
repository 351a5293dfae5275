"""primekit's RL config -> a prime-rl ``rl`` config (the shape of prime-rl ``v0.8.1.dev67``).

The file is what prime-rl's launcher reads (``uv run rl @ FILE``): top-level ``max_steps`` /
``seq_len`` / ``[model]`` shared by trainer and orchestrator, ``[trainer.*]`` (optimizer, scheduler,
loss, LoRA), ``[orchestrator]`` (batch, group size, off-policy bound, algorithm, renderer, one
``[[orchestrator.train.source]]`` per ``[[env]]``), ``[ckpt]``, ``[deployment]`` and ``[inference]``.
Every value where prime-rl's default differs from what `prime rl run` does is written out
(weight decay, off-policy steps, LoRA target modules, KL term, scheduler, renderer, harness, ...).

prime-rl at this version loads verifiers v1 tasksets only: ``[[env]] args`` become the taskset's
config keys, the way primekit hands them to a v1 taskset, and the agent is verifiers' ``null``
harness on the ``subprocess`` runtime (a plain chat, as primekit runs it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from evalkit.core.tomlio import dumps
from rl_backend.algo_config import AlgoConfig
from rl_backend.config import DPPO_KNOBS, LoraConfig, OptimizerFields, RLConfig
from rl_backend.export.common import (
    HALT_ON,
    NEWER_NOTED,
    NEWER_SAME_AT_DEFAULT,
    EnvEntry,
    Export,
    changed,
    checked,
    classify_envs,
    env_problems,
    value_at,
)
from rl_backend.prime_rl_loss import CARRIED, IMPORT_PATH

TARGET = "prime-rl"
VERSION = "v0.8.1.dev67"
COMMIT = "559b44772e471d1538537b8805cc77f3824a5e64"
"""The prime-rl release this export writes for (tag and commit), validated with its own config loader."""
MAX_TEMPERATURE = 2.0
"""prime-rl's bound on the training sampling temperature."""

MAPPING: dict[str, str] = {
    "model": "model.name",
    "run_name": "run.name",
    "max_steps": "max_steps",
    "batch_size": "orchestrator.batch_size",
    "rollouts_per_example": "orchestrator.group_size",
    "max_concurrent": "orchestrator.concurrency.max_inflight",
    "system_prompt": "orchestrator.train.source.env.taskset.system_prompt (a file beside the config)",
    "sampling.max_tokens": "orchestrator.train.sampling.max_completion_tokens",
    "sampling.temperature": "orchestrator.train.sampling.temperature",
    "env.id": "orchestrator.train.source.env.taskset.id",
    "env.args": "orchestrator.train.source.env.taskset.<key>",
    "env.name": "orchestrator.train.source.name",
    "buffer.env_ratios": "orchestrator.train.source.ratio",
    "trainer.lr": "trainer.optim.lr",
    "trainer.weight_decay": "trainer.optim.weight_decay",
    "trainer.max_grad_norm": "trainer.optim.max_norm (0, no clipping: \"None\")",
    "trainer.warmup_steps": "trainer.scheduler (constant, or linear warm-up)",
    "trainer.max_seq_len": "seq_len",
    "trainer.lora.rank": "trainer.model.lora.rank",
    "trainer.lora.alpha": "trainer.model.lora.alpha",
    "trainer.lora.dropout": "trainer.model.lora.dropout",
    "trainer.lora.target_modules": "trainer.model.lora.target_modules",
    "trainer.loss.type": "trainer.loss (mask: type 'default', kl_tau = 0; dppo: type 'default' with its knobs; "
                         "clip, dapo, cispo: type 'custom', "
                         "import_path rl_backend.prime_rl_loss.primekit_loss; grpo, dr_grpo, gspo refused)",
    **{f"trainer.loss.{key}": f"trainer.loss.{key} (loss type 'dppo': prime-rl's default loss)" for key in DPPO_KNOBS},
    "trainer.loss.mask_low": "trainer.loss.kwargs.mask_low (custom losses; refused when changed with 'mask')",
    "trainer.loss.mask_high": "trainer.loss.kwargs.mask_high (custom losses; refused when changed with 'mask')",
    "trainer.loss.clip_eps": "trainer.loss.kwargs.clip_eps (custom losses; refused when changed with 'mask')",
    "trainer.loss.clip_eps_high": "trainer.loss.kwargs.clip_eps_high (custom losses; refused when changed with 'mask')",
    "trainer.advantage.type": "orchestrator.algo.type",
    "algo": "orchestrator.algo (its type and the keys set, under prime-rl's names)",
    "env.algo": "orchestrator.train.source.algo",
    "trainer.on_policy": "orchestrator.max_off_policy_steps (0, else 1)",
    "trainer.async_level": "orchestrator.max_off_policy_steps",
    "trainer.adam_beta1": "trainer.optim.betas1",
    "trainer.adam_beta2": "trainer.optim.betas2",
    "trainer.lr_scheduler_type": "trainer.scheduler.type (linear: decay_steps = max_steps - warmup_steps)",
    "trainer.min_lr": "trainer.scheduler.min_lr",
    "sampling.top_k": "orchestrator.train.sampling.extra_body.top_k (vLLM reads it from the request)",
    "sampling.min_p": "orchestrator.train.sampling.extra_body.min_p",
    "sampling.repetition_penalty": "orchestrator.train.sampling.extra_body.repetition_penalty",
    "ckpt.interval": "ckpt.interval",
    "ckpt.keep_last": "ckpt.keep_last",
    "eval.interval": "orchestrator.eval.interval",
    "eval.num_examples": "orchestrator.eval.num_examples",
    "eval.rollouts_per_example": "orchestrator.eval.group_size",
    "eval.temperature": "orchestrator.eval.sampling.temperature",
    "eval.env": "orchestrator.eval.source (one per [[eval.env]]; else the training environments' tasksets)",
    "eval.at_start": "orchestrator.eval.skip_first_step (negated)",
    "filter.enabled": "orchestrator.train.filter_zero_advantages + an advantage_range gate per source",
    "wandb.project": "monitors.wandb.project",
    "wandb.entity": "monitors.wandb.entity",
    "wandb.name": "monitors.wandb.name",
}
"""primekit key -> prime-rl key (README's mapping table)."""

LOCAL_ONLY = (
    "seed", "trainer.micro_batch_size", "trainer.bf16", "trainer.device", "trainer.gpus", "inference",
    "baseline", "ckpt.save_weights", "rollout_timeout", "score_timeout", "max_message_chars",
    "trainer.gradient_checkpointing",
)
"""Keys about this machine's run: prime-rl packs micro-batches by tokens, trains in its own precision,
places trainer and vLLM by ``[deployment]``, writes its own weights, has no baseline checks
(`prime rl run --backend prime-rl` runs primekit's first) and checkpoints activations by default; primekit's
rollout guards (rollout and score timeouts, message cap) bound only primekit's own rollouts. Not carried."""

NO_MEANING: dict[str, str] = {
    **HALT_ON,
    "sampling.top_p": "prime-rl samples training rollouts with top_p = 1.0",
    "trainer.loss.entropy_coef": "prime-rl's losses have no entropy term",
    "trainer.num_iterations": "prime-rl takes one optimizer step per batch",
    "trainer.advantage.std_normalize": "prime-rl's grpo subtracts the group mean only",
    "filter.max_rounds": "prime-rl keeps sampling until the batch is full",
    "filter.oversampling_factor": "prime-rl keeps sampling until the batch is full",
    "sampling.enable_thinking": "prime-rl renders prompts itself ([orchestrator.renderer])",
    "sampling.reasoning_effort": "prime-rl renders prompts itself ([orchestrator.renderer])",
    "trainer.kl_coef": "prime-rl's kl_tau weighs a term against the sampler, not the starting model",
    "trainer.mask_truncated_completions": "prime-rl trains truncated rollouts as they are",
    "trainer.zero_truncated_completions": "prime-rl scores truncated rollouts as they are",
}
NOTED: dict[str, str] = dict(NEWER_NOTED)
"""Keys noted when set, never refused."""
SAME_AT_DEFAULT = ("sampling.top_p", "trainer.advantage.std_normalize", "trainer.loss.entropy_coef",
                   "trainer.num_iterations", *NEWER_SAME_AT_DEFAULT)
"""Keys whose primekit default is what prime-rl does anyway (no note)."""


def build(config: RLConfig, entries: list[EnvEntry], model: str, *, output_dir: Path | None = None,
          run_name: str | None = None, system_prompt_file: Path | None = None,
          eval_entries: list[EnvEntry] | None = None) -> dict[str, Any]:
    """The prime-rl config as a dict (what :func:`export` writes as TOML)."""
    data: dict[str, Any] = {"max_steps": config.max_steps, "seq_len": config.trainer.max_seq_len}
    if output_dir is not None:
        data["output_dir"] = str(output_dir)
    name = run_name or config.run_name
    if name:
        data["run"] = {"name": name}
    data["model"] = {"name": model}
    data["deployment"] = {"type": "single_node", "num_train_gpus": 1, "num_infer_gpus": 1}
    data["trainer"] = _trainer(config)
    data["orchestrator"] = _orchestrator(config, entries, system_prompt_file, eval_entries or entries)
    ckpt: dict[str, Any] = {}
    if config.ckpt.interval:
        ckpt["interval"] = config.ckpt.interval
    if config.ckpt.keep_last is not None:
        ckpt["keep_last"] = config.ckpt.keep_last
    data["ckpt"] = ckpt
    data["inference"] = {}
    if config.wandb is not None:
        wandb = {"project": config.wandb.project, "entity": config.wandb.entity, "name": config.wandb.name}
        data["monitors"] = {"wandb": {k: v for k, v in wandb.items() if v is not None}}
    return data


def _trainer(config: RLConfig) -> dict[str, Any]:
    out: dict[str, Any] = {
        "optim": optim_table(config.trainer),
        "scheduler": scheduler_table(config.trainer, config.max_steps),
        "loss": _loss(config),
    }
    if config.trainer.lora is not None:
        out["model"] = {"lora": lora_table(config.trainer.lora)}
    return out


def optim_table(trainer: OptimizerFields) -> dict[str, Any]:
    """``[optim]``: AdamW with primekit's values (RL's ``[trainer.optim]``, SFT's top-level ``[optim]``).

    ``max_grad_norm = 0`` is primekit's "no clipping"; prime-rl would clip to a norm of 0 (every gradient zeroed)
    and turns clipping off with ``max_norm = None``, which its config loader reads from the TOML string "None"."""
    max_norm: float | str = trainer.max_grad_norm or "None"
    return {"type": "adamw", "lr": trainer.lr, "weight_decay": trainer.weight_decay, "max_norm": max_norm,
            "betas1": trainer.adam_beta1, "betas2": trainer.adam_beta2}


def lora_table(lora: LoraConfig) -> dict[str, Any]:
    """``[model.lora]`` with every value written (prime-rl's default target modules differ from primekit's)."""
    return {
        "rank": lora.rank,
        "alpha": lora.alpha,
        "dropout": lora.dropout,
        "target_modules": list(lora.target_modules),
    }


LOSS_KNOBS = ("mask_low", "mask_high", "clip_eps", "clip_eps_high")
"""``[trainer.loss]`` keys a custom loss carries as its kwargs."""


def _loss(config: RLConfig) -> dict[str, Any]:
    """``mask``: prime-rl's default loss without its KL term; ``clip``/``dapo``/``cispo``: primekit's own loss,
    imported by prime-rl (:mod:`rl_backend.prime_rl_loss`), with the knobs the user set."""
    loss = config.trainer.loss
    if loss.type == "mask":
        return {"type": "default", "adv_tau": 1.0, "kl_tau": 0.0}
    if loss.type == "dppo":
        return {"type": "default", **loss.knobs()}
    kwargs: dict[str, Any] = {"type": loss.type}
    kwargs.update({key: getattr(loss, key) for key in LOSS_KNOBS if getattr(loss, key) is not None})
    return {"type": "custom", "import_path": IMPORT_PATH, "kwargs": kwargs}


def scheduler_table(trainer: OptimizerFields, max_steps: int) -> dict[str, Any]:
    """primekit's schedule: linear warm-up, then constant, or decaying to ``min_lr`` at ``max_steps``."""
    warmup = trainer.warmup_steps
    if trainer.lr_scheduler_type == "cosine":
        return {"type": "cosine", "warmup_steps": warmup, "min_lr": trainer.min_lr}
    if trainer.lr_scheduler_type == "linear":
        return {
            "type": "linear",
            "warmup_steps": warmup,
            "decay_steps": max(0, max_steps - warmup),
            "min_lr": trainer.min_lr,
        }
    return {"type": "linear", "warmup_steps": warmup, "decay_steps": 0} if warmup else {"type": "constant"}


def _orchestrator(config: RLConfig, entries: list[EnvEntry], system_prompt_file: Path | None,
                  eval_entries: list[EnvEntry]) -> dict[str, Any]:
    sampling: dict[str, Any] = {
        "temperature": config.sampling.temperature,
        "max_completion_tokens": config.sampling.max_tokens,
    }
    extra = {key: getattr(config.sampling, key) for key in ("top_k", "min_p", "repetition_penalty")
             if getattr(config.sampling, key) is not None}
    if extra:
        sampling["extra_body"] = extra
    out: dict[str, Any] = {
        "batch_size": config.batch_size,
        "group_size": config.rollouts_per_example,
        "max_off_policy_steps": config.trainer.async_level,
        "algo": algo_table(config.algo, config),
        "concurrency": {"max_inflight": config.max_concurrent},
        "renderer": {"name": "default"},
        "train": {
            "filter_zero_advantages": config.filter.enabled,
            "sampling": sampling,
            "source": [_train_source(config, entry, index, system_prompt_file) for index, entry in enumerate(entries)],
        },
    }
    if config.eval.interval:
        eval_sampling = {"temperature": config.eval.temperature if config.eval.temperature is not None
                         else config.sampling.temperature, "max_completion_tokens": config.sampling.max_tokens}
        out["eval"] = {
            "interval": config.eval.interval,
            "num_examples": config.eval.num_examples,
            "group_size": config.eval.rollouts_per_example,
            "skip_first_step": not config.eval.at_start,
            "sampling": eval_sampling,
            "source": [{"name": e.spec.label, "env": _env(e, system_prompt_file)} for e in eval_entries],
        }
    return out


def _train_source(config: RLConfig, entry: EnvEntry, index: int, system_prompt_file: Path | None) -> dict[str, Any]:
    source: dict[str, Any] = {"name": entry.spec.label}
    ratios = config.buffer.env_ratios
    if ratios is not None:
        source["ratio"] = ratios[index]
    source["env"] = _env(entry, system_prompt_file)
    if entry.spec.algo is not None:
        source["algo"] = algo_table(entry.spec.algo, config)
    if config.filter.enabled:
        gate = {"type": "advantage_range", "reject_min": 0.0, "reject_max": 0.0}
        source["curriculum"] = {"gates": {"zero_advantage": gate}}
    return source


def algo_table(algo: AlgoConfig, config: RLConfig) -> dict[str, Any]:
    """``[orchestrator.algo]``: primekit's ``[algo]`` keys are prime-rl's own; plain GRPO names the advantage rule."""
    if algo.type == "grpo" and algo.model_fields_set <= {"type"}:
        return {"type": config.trainer.advantage.type}
    source = algo.sampling.source if algo.sampling.source != "policy" else None
    for key, frozen in (("teacher", algo.teacher), ("sampling.source", source)):
        if frozen is not None and not frozen.base_url:
            from evalkit.core.errors import ConfigError

            raise ConfigError(f"algo.{key} '{frozen.name}' is a local folder, and prime-rl reaches a teacher only "
                              "as an endpoint; serve it (`prime serve -m FOLDER --port 8001`, or vLLM) and set "
                              f"algo.{key}.base_url")
    return algo.model_dump(mode="json", exclude_none=True)


def _env(entry: EnvEntry, system_prompt_file: Path | None) -> dict[str, Any]:
    taskset: dict[str, Any] = {"id": entry.verifiers_id, **entry.spec.args}
    if system_prompt_file is not None:
        taskset["system_prompt"] = str(system_prompt_file)
    return {"taskset": taskset, "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}}


def export(config: RLConfig, *, output: Path | None = None, output_dir: Path | None = None,
           run_name: str | None = None) -> Export:
    """The prime-rl config for ``config``, or one UserError naming everything that cannot carry.

    ``output`` is where the file will be written (a system prompt goes to a file beside it, which
    prime-rl reads); ``output_dir`` / ``run_name`` place prime-rl's own outputs (`prime rl run
    --backend prime-rl` points them into its run dir).
    """
    eval_entries = classify_envs(config, config.eval.env) if config.eval.env else None
    problems = _value_problems(config, output)
    if eval_entries:
        problems += [p.replace("[[env]]", "[[eval.env]]", 1) for p in env_problems(eval_entries, TARGET, ("v1",))]
    model, entries, notes = checked(config, sys.modules[__name__], ("v1",), problems)
    prompt_file = output.with_suffix(".system_prompt.txt").resolve() if output and config.system_prompt else None
    data = build(config, entries, model, output_dir=output_dir, run_name=run_name, system_prompt_file=prompt_file,
                 eval_entries=eval_entries)
    if config.trainer.loss.type in CARRIED:
        notes.append(f"trainer.loss.type = '{config.trainer.loss.type}': prime-rl imports primekit's loss "
                     f"({IMPORT_PATH}); install primekit where prime-rl runs (`uv pip install --no-deps primekit`)")
    notes.append("not carried (this machine's run only; prime-rl places vLLM and the trainer by [deployment]): "
                 + ", ".join(LOCAL_ONLY))
    local = {str(e.local_path): e.spec.id for e in entries if e.local_path is not None}
    notes += [f"[[env]] '{env_id}' is a local folder: install it where prime-rl runs (`uv pip install -e {path}`)"
              for path, env_id in local.items()]
    if prompt_file is not None:
        notes.append(f"system_prompt: written to {prompt_file}, which the config names by that absolute path "
                     "(moving the files to another machine: fix taskset.system_prompt)")
    text = HEADER + dumps(data)
    extra = {prompt_file.name: config.system_prompt} if prompt_file is not None and config.system_prompt else {}
    return Export(
        TARGET,
        text,
        ".prime-rl.toml",
        command=["rl", "@", str(output.resolve()) if output else "FILE"],
        notes=notes,
        extra_files=extra,
    )


def _value_problems(config: RLConfig, output: Path | None) -> list[str]:
    problems = []
    if config.sampling.temperature > MAX_TEMPERATURE:
        problems.append(
            f"sampling.temperature = {config.sampling.temperature:g} is above prime-rl's limit {MAX_TEMPERATURE:g}"
        )
    problems += _loss_problems(config)
    if len(config.env) > 1 and config.buffer.env_ratios is None:
        problems.append("several [[env]] tables without buffer.env_ratios: primekit pools their rows, prime-rl draws "
                        "each source by its ratio (equal by default); set buffer.env_ratios")
    if config.max_concurrent < config.rollouts_per_example:
        problems.append(
            f"max_concurrent ({config.max_concurrent}) is below rollouts_per_example, which prime-rl refuses"
        )
    if config.system_prompt and output is None:
        problems.append(
            "system_prompt: prime-rl reads a system prompt from a file; pass -o FILE so it is written beside it"
        )
    return problems


def _loss_problems(config: RLConfig) -> list[str]:
    loss = config.trainer.loss
    if loss.type == "mask":
        return [
            f"trainer.loss.{key} = {value_at(config, f'trainer.loss.{key}')!r} has no prime-rl equivalent with "
            "loss.type 'mask' (prime-rl's default loss masks by probability difference, DPPO, not by ratio bounds "
            "or clipping; 'clip', 'dapo' or 'cispo' carry it)"
            for key in LOSS_KNOBS
            if changed(config, f"trainer.loss.{key}")
        ]
    if loss.type == "dppo":
        return []
    if loss.type not in CARRIED:
        how = {"grpo": "averages each sequence's tokens first", "gspo": "averages sequence-level losses",
               "dr_grpo": "divides by batch_size * max_tokens"}.get(loss.type, "normalises otherwise")
        return [
            f"trainer.loss.type = '{loss.type}' cannot carry: prime-rl divides every loss by the step's token count, "
            f"and {loss.type} {how}; 'dapo' (or 'clip', 'cispo') carries exactly"
        ]
    return []


HEADER = (
    f"# prime-rl {VERSION} ({COMMIT[:12]}) config, exported by `prime rl export --target prime-rl`.\n"
    "# Run it from a prime-rl checkout: uv run rl @ THIS_FILE  (add --dry-run to check it first).\n"
    "# [deployment] asks for 1 trainer GPU + 1 inference GPU; raise num_train_gpus / num_infer_gpus to scale out.\n"
    "# [orchestrator.renderer] 'default' renders with the model's chat template, as primekit does; a model in\n"
    "# prime-rl's renderer table can use name = \"auto\" instead.\n\n"
)

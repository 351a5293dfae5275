"""The `prime rl run` config: pydantic models with one docstring per field. Imports no torch.

The top level keeps the hosted-training shape users already write (``model``, ``max_steps``,
``batch_size``, ``rollouts_per_example``, ``[sampling]``, ``[[env]]``); the trainer, inference,
checkpoint, eval, baseline and filtering knobs live in their own tables. Unknown keys are rejected
and cross-field problems name the key to change.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evalkit.clients.spec import DEFAULT_MODEL
from evalkit.errors import ConfigError
from evalkit.tomlio import load_toml, validate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class EnvConfig(_Strict):
    id: str
    """Environment id (``arithmetic``, ``primeintellect/reverse-text``, ``./environments/my_env``)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the environment's ``load_environment``."""


class SamplingConfig(_Strict):
    max_tokens: int = Field(128, gt=0)
    """Most tokens the policy may generate per turn."""
    temperature: float = Field(1.0, gt=0)
    """Sampling temperature; the trainer divides its logits by the same value so ratios compare like with like."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling; keep 1.0 for RL (truncation makes the sampler's distribution differ from the trainer's)."""


class LoraConfig(_Strict):
    rank: int = Field(16, gt=0)
    """LoRA rank r."""
    alpha: float = Field(32.0, gt=0)
    """LoRA scaling numerator (scale = alpha / rank)."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the LoRA input."""
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """Module names that get adapters (Llama-style names by default)."""


class LossConfig(_Strict):
    type: str = "mask"
    """Loss rule from ``rl_backend.losses.LOSSES``: ``mask`` (drop tokens whose importance ratio is out of range) or ``clip`` (PPO-style clipping plus the same masking)."""
    mask_low: float = Field(0.125, gt=0)
    """Tokens with ratio trainer/sampler below this are masked out of the loss."""
    mask_high: float = Field(8.0, gt=0)
    """Tokens with ratio trainer/sampler above this are masked out of the loss."""
    clip_eps: float = Field(0.2, gt=0, lt=1)
    """For ``clip``: the ratio is clipped to [1 - clip_eps, 1 + clip_eps]."""

    @model_validator(mode="after")
    def _order(self) -> "LossConfig":
        if self.mask_low >= 1 or self.mask_high <= 1:
            raise ValueError(f"need mask_low < 1 < mask_high, got mask_low={self.mask_low} mask_high={self.mask_high}")
        return self


class AdvantageConfig(_Strict):
    type: str = "grpo"
    """Advantage rule from ``rl_backend.advantages.ADVANTAGES`` (``grpo``: reward minus the group mean)."""
    std_normalize: bool = False
    """Divide by the group's reward standard deviation as well (original GRPO); off by default (Dr. GRPO)."""


class TrainerConfig(_Strict):
    lr: float = Field(5e-5, gt=0)
    """AdamW learning rate."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay."""
    warmup_steps: int = Field(0, ge=0)
    """Linear learning-rate warm-up over this many steps."""
    max_grad_norm: float = Field(1.0, gt=0)
    """Gradients are clipped to this global norm."""
    micro_batch_size: int = Field(8, gt=0)
    """Sequences per forward/backward pass; gradients accumulate over the whole batch (one optimizer step per RL step)."""
    max_seq_len: int = Field(2048, gt=0)
    """Longest prompt+completion the trainer accepts; longer samples are dropped (and counted)."""
    bf16: bool = False
    """Train in bfloat16 (halves memory; on CPU also faster where supported)."""
    lora: LoraConfig | None = Field(default_factory=LoraConfig)
    """LoRA adapter settings; ``lora = false`` trains all weights."""
    loss: LossConfig = Field(default_factory=LossConfig)
    """Policy loss."""
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Advantage rule."""
    on_policy: bool = False
    """Generate each step's rollouts with the current weights (no overlap). Default: one-step off-policy, generation of step n+1 overlaps training of step n. On a 2-core CPU the overlap does not pay (measured: 70 s vs 63 s per step, the two halves compete for the cores); it pays when generation and training run on different devices or many cores."""

    @field_validator("lora", mode="before")
    @classmethod
    def _lora_bool(cls, value: Any) -> Any:
        if value is False:
            return None
        if value is True:
            return {}
        return value


class InferenceConfig(_Strict):
    backend: Literal["auto", "torch", "vllm"] = "auto"
    """Where rollouts are generated: ``torch`` (in-process engine, CPU or GPU), ``vllm`` (a vLLM server subprocess; needs CUDA and the ``gpu`` extra), ``auto`` (vllm when CUDA and vllm are present, else torch)."""
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1)
    """vLLM: fraction of GPU memory vLLM may take (the trainer shares the GPU)."""
    max_model_len: int | None = Field(None, gt=0)
    """vLLM: context length to allocate for; must exceed sampling.max_tokens."""
    port: int = Field(8765, gt=0, lt=65536)
    """vLLM: local port for the server."""
    server_args: list[str] = Field(default_factory=list)
    """vLLM: extra command-line arguments for the server."""
    tool_call_parser: str | None = None
    """vLLM: the server's tool-call parser (e.g. ``hermes`` for ``<tool_call>`` JSON blocks, as Qwen models write them); needed for environments with tools, which the server otherwise refuses."""
    startup_timeout_s: float = Field(900.0, gt=0)
    """vLLM: how long to wait for the server to become healthy."""
    max_batch_size: int = Field(64, gt=0)
    """torch: most sequences decoded together in one batched forward."""
    engine: Literal["auto", "fused", "hf"] = "auto"
    """torch: ``fused`` is the project's batching engine (Llama-architecture models), ``hf`` a plain batched sampler over the Hugging Face module (any architecture, logprobs bit-identical to the trainer's), ``auto`` fused when it can run the model."""
    dtype: Literal["float32", "bfloat16"] = "bfloat16"
    """torch, fused engine: dtype of the sampling snapshot; bf16 decodes ~2x faster on CPU and the importance ratio corrects the small mismatch."""


class CkptConfig(_Strict):
    interval: int = Field(10, ge=0)
    """Save a checkpoint (and merged weights) every this many steps; 0 saves only at the end."""
    keep_last: int | None = Field(2, gt=0)
    """Keep only the newest N checkpoints and weight exports (``None`` keeps all)."""
    save_weights: bool = True
    """Also export merged full weights (HF format) to ``weights/step_N/`` for `prime eval run -m`."""


class EvalConfig(_Strict):
    interval: int = Field(0, ge=0)
    """Evaluate on held-out examples every this many steps (and after the last); 0 disables."""
    num_examples: int = Field(32, gt=0)
    """Held-out examples per evaluation."""
    rollouts_per_example: int = Field(1, gt=0)
    """Rollouts per held-out example."""
    temperature: float | None = Field(None, ge=0)
    """Sampling temperature for evaluation (default: the training temperature; 0 = greedy)."""
    at_start: bool = False
    """Also evaluate the starting model (step 0), for a before/after comparison on the same examples."""


class BaselineConfig(_Strict):
    enabled: bool = True
    """Run the baseline checks before training (``--skip-baseline`` turns them off)."""
    num_examples: int = Field(16, gt=0)
    """Training examples evaluated before training."""
    rollouts_per_example: int | None = Field(None, gt=1)
    """Rollouts per example for the checks (default: the top-level rollouts_per_example)."""
    min_reward: float = 0.01
    """Refuse to train when the mean reward is below this (the task is too hard: no reward to learn from)."""
    max_reward: float = 0.8
    """Refuse to train when the mean reward is above this (the task is too easy)."""
    min_diverse_groups: float = Field(0.1, ge=0, le=1)
    """Refuse when fewer than this fraction of groups have non-identical rewards (no learning signal)."""


class FilterConfig(_Strict):
    enabled: bool = True
    """Drop groups whose rollouts all got the same reward (zero advantage) and draw replacement examples."""
    max_rounds: int = Field(4, gt=0)
    """Most generation rounds per step while replacing dropped groups; a step trains on what it has after that."""


class WandbConfig(_Strict):
    project: str
    """Weights & Biases project (needs `pip install wandb`)."""
    entity: str | None = None
    """W&B entity (team or user)."""
    name: str | None = None
    """Run name (default: the run's name)."""


class RLConfig(_Strict):
    model: str = DEFAULT_MODEL
    """Model to train: ``local/smollm2-135m`` (embedded) or a local Hugging Face model folder."""
    run_name: str | None = None
    """Output folder name under ``<output-dir>/rl/``; default: env id plus a timestamp."""
    max_steps: int = Field(100, gt=0)
    """Optimizer steps to train."""
    batch_size: int = Field(128, gt=0)
    """Rollouts per step; a multiple of rollouts_per_example."""
    rollouts_per_example: int = Field(8, gt=1)
    """Group size: rollouts of one example whose rewards are compared."""
    seed: int = 0
    """Seed for data order, sampling and LoRA initialisation."""
    max_concurrent: int = Field(256, gt=0)
    """Most rollouts in flight at once."""
    system_prompt: str | None = None
    """Replaces the environment's system prompt (e.g. one found by `prime gepa run`)."""
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    """Sampling settings for training rollouts (and the baseline)."""
    env: list[EnvConfig]
    """The environment to train on (one ``[[env]]`` table)."""
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    """Optimizer, loss, LoRA."""
    inference: InferenceConfig = Field(default_factory=InferenceConfig)
    """Rollout generation backend."""
    ckpt: CkptConfig = Field(default_factory=CkptConfig)
    """Checkpointing."""
    eval: EvalConfig = Field(default_factory=EvalConfig)
    """Periodic held-out evaluation."""
    baseline: BaselineConfig = Field(default_factory=BaselineConfig)
    """Checks before training."""
    filter: FilterConfig = Field(default_factory=FilterConfig)
    """Online difficulty filtering."""
    wandb: WandbConfig | None = None
    """Optional Weights & Biases logging."""

    @model_validator(mode="after")
    def _consistent(self) -> "RLConfig":
        if self.batch_size % self.rollouts_per_example:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be divisible by rollouts_per_example "
                f"({self.rollouts_per_example}); e.g. batch_size = {max(1, self.batch_size // self.rollouts_per_example) * self.rollouts_per_example}"
            )
        if not self.env:
            raise ValueError("add one [[env]] table with the environment id")
        if len(self.env) > 1:
            raise ValueError(f"training on {len(self.env)} environments at once is not supported; keep one [[env]] table")
        if self.sampling.max_tokens >= self.trainer.max_seq_len:
            raise ValueError(
                f"sampling.max_tokens ({self.sampling.max_tokens}) must be below trainer.max_seq_len ({self.trainer.max_seq_len})"
            )
        if self.inference.max_model_len is not None and self.sampling.max_tokens >= self.inference.max_model_len:
            raise ValueError(
                f"sampling.max_tokens ({self.sampling.max_tokens}) must be below inference.max_model_len ({self.inference.max_model_len})"
            )
        if self.inference.backend == "vllm" and self.trainer.lora is None:
            raise ValueError(
                "inference.backend = 'vllm' needs LoRA (adapters are hot-loaded into the server); "
                "remove 'trainer.lora = false' or use backend = 'torch'"
            )
        if self.baseline.min_reward > self.baseline.max_reward:
            raise ValueError(
                f"baseline.min_reward ({self.baseline.min_reward}) is above baseline.max_reward ({self.baseline.max_reward})"
            )
        from rl_backend.advantages import ADVANTAGE_NAMES
        from rl_backend.losses import LOSS_NAMES

        if self.trainer.loss.type not in LOSS_NAMES:
            raise ValueError(f"trainer.loss.type '{self.trainer.loss.type}' is unknown; choose one of {sorted(LOSS_NAMES)}")
        if self.trainer.advantage.type not in ADVANTAGE_NAMES:
            raise ValueError(
                f"trainer.advantage.type '{self.trainer.advantage.type}' is unknown; choose one of {sorted(ADVANTAGE_NAMES)}"
            )
        return self

    @property
    def examples_per_step(self) -> int:
        return self.batch_size // self.rollouts_per_example


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """``["--trainer.lr", "5e-6", "--max-steps=3"]`` -> ``{"trainer": {"lr": 5e-6}, "max_steps": 3}``.

    Values are read as TOML values (numbers, booleans, strings, arrays); anything that is not valid
    TOML is taken as a plain string. A flag with no value means ``true``.
    """
    out: dict[str, Any] = {}
    index = 0
    while index < len(args):
        flag = args[index]
        if not flag.startswith("--") or len(flag) <= 2:
            raise ConfigError(f"unexpected argument '{flag}'; overrides look like --trainer.lr 5e-6")
        key, eq, value = flag[2:].partition("=")
        if not eq:
            if index + 1 < len(args) and not args[index + 1].startswith("--"):
                value = args[index + 1]
                index += 1
            else:
                value = "true"
        index += 1
        parts = [part.replace("-", "_") for part in key.split(".")]
        if any(not part for part in parts):
            raise ConfigError(f"bad override key '--{key}'")
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override '--{key}' conflicts with another override")
            node = child
        node[parts[-1]] = _parse_value(value)
    return out


def _parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_rl_config(path: str | Path, overrides: list[str] | None = None) -> RLConfig:
    """Read, override and validate a config; a local model path resolves against the config's folder."""
    data = deep_merge(load_toml(path), parse_overrides(list(overrides or [])))
    try:
        config = validate(RLConfig, data, path)
    except ConfigError as exc:  # cross-field checks name their keys in the message itself
        raise ConfigError(str(exc).replace("'(top level)': ", "")) from None
    folder = Path(path).resolve().parent
    if config.model.startswith((".", "~")) or ("/" in config.model and not config.model.startswith("local/")):
        candidate = (folder / Path(config.model).expanduser()).resolve()
        if candidate.exists():
            config.model = str(candidate)
    return config


def to_toml(config: RLConfig) -> str:
    """The resolved config as TOML (written to ``config.resolved.toml``; reloadable by `prime rl run`)."""
    data = config.model_dump(mode="json", exclude_none=True)
    if config.trainer.lora is None:
        data["trainer"]["lora"] = False
    return _dump_table(data, [])


def _toml_value(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _key(key: str) -> str:
    import json
    import re

    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _dump_table(data: dict[str, Any], path: list[str]) -> str:
    lines = []
    tables = []
    for key, value in data.items():
        if isinstance(value, dict) and key != "args":
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            tables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_toml_value(value)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for key, value in tables:
        name = ".".join([*path, _key(key)])
        if isinstance(value, list):
            for item in value:
                out += f"\n[[{name}]]\n" + _dump_table(item, [*path, key]).lstrip("\n")
        else:
            out += f"\n[{name}]\n" + _dump_table(value, [*path, key]).lstrip("\n")
    return out

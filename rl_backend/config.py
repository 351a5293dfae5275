"""The `prime rl run` config: pydantic models with one docstring per field. Imports no torch.

The top level keeps the hosted-training shape users already write (``model``, ``max_steps``,
``batch_size``, ``rollouts_per_example``, ``[sampling]``, ``[[env]]``); the trainer, inference,
checkpoint, eval, baseline and filtering knobs live in their own tables. Unknown keys are rejected
and cross-field problems name the key to change.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_serializer, model_validator

from evalkit.core.baseline_rules import MAX_REWARD, MIN_DIVERSE_GROUPS, MIN_REWARD
from evalkit.core.defaults import DEFAULT_MODEL, DEFAULT_RL_MAX_CONCURRENT
from evalkit.core.dotted import deep_merge, key_parts, read_flag
from evalkit.core.errors import ConfigError
from evalkit.core.runs import env_slug
from evalkit.core.sampling_rules import MAX_MAX_TOKENS, MAX_TOP_K
from evalkit.core.tomlio import dumps, load_toml, validate
from evalkit.core.untrusted import name_problem
from evalkit.eval.config import EnvTable
from evalkit.vocabulary import ConcurrencyFields, RolloutBounds, SecretsFields
from rl_backend.algo_config import AlgoConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


ENV_NAME = re.compile(r"[A-Za-z0-9._+-]+")


class EnvConfig(EnvTable):
    """One ``[[env]]`` table; verifiers' ``env_id``/``env_args`` are accepted for ``id``/``args``."""

    name: str | None = None
    """Label of this environment in metrics (``reward_mean/<name>``), rollout rows and eval folders
    (default: the id's last part, ``reverse-text``); needed when two tables share an id."""
    algo: AlgoConfig | None = None
    """This environment's own training algorithm (prime-rl's per-source ``algo``); default: the run's ``[algo]``."""

    @property
    def label(self) -> str:
        return self.name or env_slug(self.id)


class SamplingConfig(_Strict):
    """Sampling of training rollouts (and the baseline).

    Filters and penalties (``top_p``, ``top_k``, ``min_p``, ``repetition_penalty``) change the
    distribution the sampler draws from; the sampler reports each token's logprob under that
    distribution, and the trainer's importance ratio (its own temperature-scaled probability over
    the sampler's) corrects for the difference like for any other policy lag. Tokens whose ratio
    leaves ``[trainer.loss.mask_low, mask_high]`` are masked (``masked_frac`` in metrics.jsonl).
    """

    max_tokens: int = Field(128, gt=0, le=MAX_MAX_TOKENS)
    """Most tokens the policy may generate per turn."""
    temperature: float = Field(1.0, gt=0)
    """Sampling temperature; the trainer divides its logits by the same value so ratios compare like with like."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling (1.0: off)."""
    top_k: int | None = Field(None, ge=-1, le=MAX_TOP_K)
    """Sample among the k most likely tokens only (``None``, 0 or -1: off)."""
    min_p: float | None = Field(None, ge=0, le=1)
    """Drop tokens whose probability is below ``min_p`` times the most likely token's (``None`` or 0: off)."""
    repetition_penalty: float | None = Field(None, gt=0)
    """Penalise tokens already in the prompt or the completion (vLLM's rule: a positive logit is divided
    by it, a negative one multiplied); 1.0 or ``None``: off."""
    enable_thinking: bool | None = None
    """Chat-template switch for models with a thinking mode (Qwen3/3.5, Nemotron 3); ``None``: the template's
    default."""
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    """Reasoning effort for models whose template takes one (gpt-oss); ``None``: the template's default."""

    def request_args(self) -> dict[str, Any]:
        """What every rollout request carries: the set keys, chat-template switches under
        ``chat_template_kwargs`` (the key vLLM and the in-process engine read)."""
        out: dict[str, Any] = {"max_tokens": self.max_tokens, "temperature": self.temperature, "top_p": self.top_p}
        for key in ("top_k", "min_p", "repetition_penalty", "reasoning_effort"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.enable_thinking is not None:
            out["chat_template_kwargs"] = {"enable_thinking": self.enable_thinking}
        return out


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
    """Loss rule from ``rl_backend.losses.LOSSES`` (docs/rl-losses.md): ``mask`` (importance-weighted, tokens whose
    ratio is out of range dropped; the default), ``clip`` (PPO clipping plus the same masking), ``grpo``, ``dr_grpo``,
    ``dapo``, ``cispo`` or ``gspo`` (each as its paper and TRL's GRPOTrainer define it), or ``dppo`` (prime-rl's
    default: DPPO plus a KL term to the sampler)."""
    mask_low: float = Field(0.125, gt=0)
    """``mask`` and ``clip``: tokens with ratio trainer/sampler below this are masked out of the loss."""
    mask_high: float = Field(8.0, gt=0)
    """``mask`` and ``clip``: tokens with ratio trainer/sampler above this are masked out of the loss."""
    clip_eps: float | None = Field(None, gt=0, lt=1)
    """Clipped losses: the ratio is clipped below at 1 - clip_eps (and above at 1 + clip_eps unless
    ``clip_eps_high`` is set). Unset: the loss's own default (0.2; ``gspo`` 3e-4, its paper's)."""
    clip_eps_high: float | None = Field(None, gt=0)
    """The upper clip 1 + clip_eps_high (DAPO's decoupled "clip-higher"; ``cispo``: the cap of its detached
    importance weight). Unset: the loss's own default (``clip_eps``; ``dapo`` 0.28, ``gspo`` 4e-4, ``cispo`` 4.0)."""
    dppo_mask_low: float = Field(0.2, ge=0)
    """``dppo``: with a negative advantage, a token whose probability fell more than this below the sampler's leaves
    the policy-gradient term (prime-rl's default)."""
    dppo_mask_high: float = Field(0.2, ge=0)
    """``dppo``: with a positive advantage, a token whose probability rose more than this above the sampler's
    leaves it."""
    adv_tau: float = Field(1.0, ge=0)
    """``dppo``: weight of the policy-gradient term (0 leaves only the KL term)."""
    kl_tau: float = Field(1e-3, ge=0)
    """``dppo``: weight of the squared log ratio trainer/sampler on every token (0: off)."""
    entropy_coef: float = Field(0.0, ge=0)
    """Entropy bonus: ``entropy_coef`` times the mean per-token entropy of the policy is subtracted from the
    loss (0: off). A counter to entropy collapse, at the price of slower sharpening."""

    @model_serializer(mode="wrap")
    def _written(self, handler: Any) -> dict[str, Any]:
        """``dppo``'s knobs only with ``dppo`` (the resolved config reloads)."""
        data = handler(self)
        return data if self.type == "dppo" else {k: v for k, v in data.items() if k not in DPPO_KNOBS}

    def knobs(self) -> dict[str, float]:
        """The loss's own settings beyond the shared ones (``dppo``'s four)."""
        return {key: getattr(self, key) for key in DPPO_KNOBS} if self.type == "dppo" else {}

    @model_validator(mode="after")
    def _order(self) -> LossConfig:
        stray = sorted(set(DPPO_KNOBS) & self.model_fields_set) if self.type != "dppo" else []
        if stray:
            raise ValueError(f"trainer.loss.{stray[0]} is a knob of loss type 'dppo' (prime-rl's default), not "
                             f"'{self.type}'; remove it or set trainer.loss.type = 'dppo'")
        if self.mask_low >= 1 or self.mask_high <= 1:
            raise ValueError(f"need mask_low < 1 < mask_high, got mask_low={self.mask_low} mask_high={self.mask_high}")
        return self


DPPO_KNOBS = ("dppo_mask_low", "dppo_mask_high", "adv_tau", "kl_tau")


class AdvantageConfig(_Strict):
    type: str = "grpo"
    """Advantage rule from ``rl_backend.advantages.ADVANTAGES`` (``grpo``: reward minus the group mean)."""
    std_normalize: bool = False
    """Divide by the group's reward standard deviation as well (original GRPO); off by default (Dr. GRPO)."""


class OptimizerFields(_Strict):
    """The trainer knobs RL and SFT share (optimizer, schedule, batching, precision, LoRA, device):
    ``[trainer]`` of `prime rl run` and of `prime sft run` (:mod:`rl_backend.sft_config`)."""

    lr: float = Field(5e-5, gt=0)
    """AdamW learning rate (the peak, after warm-up)."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay."""
    adam_beta1: float = Field(0.9, ge=0, lt=1)
    """AdamW beta1."""
    adam_beta2: float = Field(0.999, ge=0, lt=1)
    """AdamW beta2."""
    lr_scheduler_type: Literal["constant", "linear", "cosine"] = "constant"
    """Learning rate after warm-up: ``constant``, or decaying to ``min_lr`` at ``max_steps`` linearly or on a half
    cosine."""
    warmup_steps: int = Field(0, ge=0)
    """Linear learning-rate warm-up over this many steps."""
    min_lr: float = Field(0.0, ge=0)
    """Where ``linear`` and ``cosine`` decay end (at ``max_steps``)."""
    max_grad_norm: float = Field(1.0, ge=0)
    """Gradients are clipped to this global norm (0: no clipping; ``grad_norm`` in metrics.jsonl is the norm before
    clipping)."""
    gradient_checkpointing: bool = False
    """Recompute each layer's activations in the backward pass instead of keeping them (less memory, ~30% more
    compute)."""
    micro_batch_size: int = Field(8, gt=0)
    """Sequences per forward/backward pass; gradients accumulate over the whole batch (``num_iterations`` optimizer
    steps per RL step)."""
    max_seq_len: int = Field(2048, gt=0)
    """Longest prompt+completion the trainer accepts; longer samples are dropped (and counted). Unset, it
    follows the config (:mod:`rl_backend.seq_len`): ``inference.max_model_len``, else 2048 or
    ``sampling.max_tokens`` plus 1024 tokens of prompt, within the model's context length when known."""
    bf16: bool = False
    """Train in bfloat16 (halves memory; on CPU also faster where supported)."""
    lora: LoraConfig | None = Field(default_factory=LoraConfig)
    """LoRA adapter settings; ``lora = false`` trains all weights."""
    device: str = "auto"
    """Where the trainer (and the in-process engine that samples from its weights) runs: ``auto`` (the GPU of ``gpus``,
    else the first GPU, else the CPU), ``cpu`` (even with CUDA present), ``cuda`` or ``cuda:N`` (the same as
    ``gpus = [N]``)."""

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str) -> str:
        from evalkit.model.devices import check_device

        return check_device(value)

    @field_validator("lora", mode="before")
    @classmethod
    def _lora_bool(cls, value: Any) -> Any:
        if value is False:
            return None
        if value is True:
            return {}
        return value


class TrainerConfig(OptimizerFields):
    """RL's ``[trainer]``: the shared optimizer fields plus the policy loss, advantages, KL and off-policy knobs."""

    kl_coef: float = Field(0.0, ge=0)
    """Weight of a KL(policy || starting model) penalty per completion token (verifiers' ``beta``); 0: off.
    With LoRA the reference is the base model (the adapter switched off, one extra forward per
    micro-batch); full fine-tuning keeps a frozen copy of the starting weights (twice the memory)."""
    async_level: int = Field(1, ge=0)
    """How many steps generation may run ahead of training: 0 strictly on-policy (no overlap), 1 (default)
    one-step off-policy, N up to N steps (the sampler takes new weights whenever it runs out of batches to
    generate). The importance ratio against the sampler's logprobs corrects for the lag; ``policy_lag`` in
    metrics.jsonl is each step's. prime-rl's and hosted training's ``max_async_level``."""
    mask_truncated_completions: bool = False
    """Leave rollouts cut by ``max_tokens`` out of the loss (they still count in the group's mean)."""
    zero_truncated_completions: bool = False
    """Score rollouts cut by ``max_tokens`` 0 before advantages are computed."""
    num_iterations: int = Field(1, ge=1)
    """Optimizer steps on each step's batch (GRPO's mu, TRL's ``num_iterations``); the importance ratio against the
    sampler's logprobs (pi_old) and the loss's clipping keep the later ones near the sampling policy."""
    loss: LossConfig = Field(default_factory=LossConfig)
    """Policy loss."""
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Advantage rule."""
    gpus: list[int] | None = None
    """GPU index the trainer runs on (one; multi-GPU training is prime-rl's job); default: the first GPU, or the CPU
    without CUDA. prime-rl's top-level ``trainer_gpu_ids`` is accepted too."""
    on_policy: bool = False
    """``true`` is ``async_level = 0``: each step's rollouts come from the current weights (no overlap). On a
    2-core CPU the overlap does not pay (measured: 70 s vs 63 s per step, the two halves compete for the
    cores); it pays when generation and training run on different devices or many cores."""

    @model_validator(mode="after")
    def _on_policy_is_async_0(self) -> TrainerConfig:
        if self.on_policy and self.async_level not in (0, 1):
            raise ValueError(
                f"trainer.on_policy = true contradicts trainer.async_level = {self.async_level}; set one of them"
            )
        if self.on_policy:
            self.async_level = 0
        self.on_policy = self.async_level == 0
        return self

    @model_validator(mode="after")
    def _device_or_gpus(self) -> TrainerConfig:
        if self.gpus is not None and self.device not in ("auto", "cuda", f"cuda:{self.gpus[0]}"):
            raise ValueError(
                f"trainer.device = '{self.device}' contradicts trainer.gpus = {self.gpus}; set one of them"
            )
        return self

    @field_validator("gpus")
    @classmethod
    def _one_gpu(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and len(value) != 1:
            raise ValueError(
                f"the trainer runs on one GPU, got {value}; give one index "
                "(multi-GPU training: export the config to prime-rl)"
            )
        return value


class InferenceConfig(_Strict):
    backend: Literal["auto", "torch", "vllm"] = "auto"
    """Who samples: where rollouts are generated (who trains is ``prime rl run --backend``): ``torch`` (in-process
    engine, CPU or GPU), ``vllm`` (a vLLM server; started here it needs CUDA and vllm in this environment, unless
    ``vllm_command`` or ``base_url`` is set), ``auto`` (vllm when ``vllm_command``/``base_url`` is set or CUDA and vllm
    are present, else torch)."""
    vllm_command: list[str] | None = None
    """vLLM: the command that starts the server, for a vLLM installed in another environment (e.g.
    ``["/opt/vllm-env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]`` or ``["vllm", "serve"]``); the model
    and the flags RL needs are appended. Default: this interpreter's ``-m vllm.entrypoints.openai.api_server``."""
    base_url: str | None = None
    """vLLM: an already running server (``http://127.0.0.1:8000`` or ``.../v1``) to use instead of starting one. It must
    have been started with ``--enable-lora``, ``--max-lora-rank`` >= the LoRA rank,
    ``--logprobs-mode processed_logprobs`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``, and read this run's
    ``adapters/`` folder (same machine or a shared filesystem)."""
    gpus: list[int] | None = None
    """vLLM: GPU indices the started server may use (its ``CUDA_VISIBLE_DEVICES``; several mean tensor parallelism);
    default: the first GPU. prime-rl's top-level ``inference_gpu_ids`` is accepted too."""
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    """vLLM: fraction of GPU memory vLLM may take; default 0.9 when it has its GPUs to itself, 0.5 when the trainer
    shares one (at most 0.8 then)."""
    max_model_len: int | None = Field(None, gt=0)
    """vLLM: context length to allocate for; must exceed sampling.max_tokens."""
    port: int = Field(8765, gt=0, lt=65536)
    """vLLM: local port for the server."""
    server_args: list[str] = Field(default_factory=list)
    """vLLM: extra command-line arguments for the server."""
    tool_call_parser: str | None = None
    """vLLM: the server's tool-call parser (e.g. ``hermes`` for ``<tool_call>`` JSON blocks, as Qwen models write them);
    needed for environments with tools, which the server otherwise refuses."""
    startup_timeout_s: float = Field(900.0, gt=0)
    """vLLM: how long to wait for the server to become healthy."""
    max_batch_size: int = Field(64, gt=0)
    """torch: most sequences decoded together in one batched forward."""
    engine: Literal["auto", "fused", "hf"] = "auto"
    """torch: which forward the in-process engine runs: ``fused`` (its own Llama-family path; refused for models it
    cannot run exactly), ``hf`` (the model's own Hugging Face modules, any common decoder), ``auto`` (fused when it can,
    else hf). Both batch continuously and return the sampled tokens' logprobs."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """torch: dtype of the sampling snapshot. ``auto``: bf16 on CUDA and on CPUs with native bf16 (AMX, AVX512-BF16),
    else fp32, where bf16 decodes several times slower (docs/engine-speed.md); the importance ratio corrects a bf16
    sampler's small mismatch. No ``q4``: the sampler keeps full-precision weights (a LoRA delta re-quantized to 4 bits
    would mostly round away)."""


class HealthConfig(_Strict):
    """Checks on the run's own metrics after each step (``evalkit.report.rl_health``), each alarm printed once with its
    fix."""

    halt_on: list[str] = Field(default_factory=list)
    """Alarms that stop the run, after the step's checkpoint and metrics are saved (resume with ``--resume``):
    any of ``reward_spread``, ``entropy_collapse``, ``kl_growth``, ``truncation_rising``, ``errors_rising``,
    ``reward_drop``, or ``all``. `prime rl run --halt-on A,B` sets it."""

    @field_validator("halt_on", mode="before")
    @classmethod
    def _known_alarms(cls, value: Any) -> Any:
        from evalkit.report.rl_health import ALARM_NAMES

        names = [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value
        if not isinstance(names, list):
            return names  # pydantic says what the type should be
        known = f"choose from {', '.join(ALARM_NAMES)} or all"
        unknown = [name for name in names if name not in (*ALARM_NAMES, "all")]
        if unknown:  # checked before `all` is expanded, so `all,typo` is refused too
            raise ValueError(f"unknown alarm {', '.join(map(repr, unknown))}; {known}")
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"alarm {', '.join(map(repr, twice))} named more than once; name each once ({known})")
        return list(ALARM_NAMES) if "all" in names else names


class CkptConfig(_Strict):
    interval: int = Field(10, ge=0)
    """Save a checkpoint (and merged weights) every this many steps; 0 saves only at the end."""
    keep_last: int | None = Field(2, gt=0)
    """Keep only the newest N checkpoints and weight exports (``None`` keeps all)."""
    save_weights: bool = True
    """Also export merged full weights (HF format) to ``weights/step_N/`` for `prime eval run -m`."""


class PeriodicEvalConfig(_Strict):
    interval: int = Field(0, ge=0)
    """Evaluate on held-out examples every this many steps (and after the last); 0 disables."""
    num_examples: int = Field(32, gt=0)
    """Held-out examples per evaluation."""
    rollouts_per_example: int = Field(1, gt=0)
    """Rollouts per held-out example."""
    temperature: float | None = Field(None, ge=0)
    """Sampling temperature for evaluation (default: the training temperature; 0 = greedy)."""
    at_start: bool = False
    """Also evaluate the starting model (step 0), for a before/after comparison on the same examples
    (hosted training's ``eval_base_model``)."""
    env: list[EnvConfig] | None = None
    """Environments to evaluate on (``[[eval.env]]``, as hosted training writes them); default: the held-out
    split of each training environment."""


class BaselineConfig(_Strict):
    enabled: bool = True
    """Run the baseline checks before training (``--skip-baseline`` turns them off)."""
    num_examples: int = Field(16, gt=0)
    """Training examples evaluated before training."""
    rollouts_per_example: int | None = Field(None, gt=1)
    """Rollouts per example for the checks (default: the top-level rollouts_per_example)."""
    min_reward: float = MIN_REWARD
    """Refuse to train when the mean reward is below this (the task is too hard: no reward to learn from)."""
    max_reward: float = MAX_REWARD
    """Refuse to train when the mean reward is above this (the task is too easy)."""
    min_diverse_groups: float = Field(MIN_DIVERSE_GROUPS, ge=0, le=1)
    """Refuse when fewer than this fraction of groups have non-identical rewards (no learning signal)."""
    check: bool = False
    """Also run ``prime env check``'s scripted policies on each environment first (gold, empty, echo, adversarial
    replies; determinism, range, mutation) and refuse to train when one fails (``--skip-baseline`` overrides)."""


class FilterConfig(_Strict):
    enabled: bool = True
    """Drop groups whose rollouts all got the same reward (zero advantage) and draw replacement examples
    (hosted training's and prime-rl's ``[buffer] online_difficulty_filtering``)."""
    max_rounds: int = Field(4, gt=0)
    """Most generation rounds per step while replacing dropped groups; a step trains on what it has after that."""
    oversampling_factor: float = Field(1.0, ge=1)
    """The first round of a step rolls out this many times the examples a step needs, so that fewer
    refill rounds follow when groups are dropped; kept groups beyond the step's need are not trained on."""


class BufferConfig(_Strict):
    env_ratios: list[float] | None = None
    """How often each ``[[env]]`` (in table order) is drawn, e.g. ``[0.7, 0.3]`` (normalized). Default: rows of all
    environments pooled, each example equally likely."""

    @field_validator("env_ratios")
    @classmethod
    def _positive(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and any(not ratio > 0 for ratio in value):
            raise ValueError(
                f"every ratio must be above 0, got {value}; remove an [[env]] table instead of giving it 0"
            )
        return value


class WandbConfig(_Strict):
    project: str
    """Weights & Biases project (needs `pip install wandb`)."""
    entity: str | None = None
    """W&B entity (team or user)."""
    name: str | None = None
    """Run name (default: the run's name)."""


class RLConfig(RolloutBounds, ConcurrencyFields, SecretsFields):
    """A ``prime rl run`` config. The rollout bounds and ``max_concurrent`` are the shared vocabulary
    (:mod:`evalkit.vocabulary`); RL's ``max_concurrent`` defaults to
    :data:`~evalkit.core.defaults.DEFAULT_RL_MAX_CONCURRENT`."""

    _notes: list[str] = PrivateAttr(default_factory=list)

    model: str = DEFAULT_MODEL
    """Model to train: ``local/smollm2-135m`` (embedded) or a local Hugging Face model folder."""
    run_name: str | None = None
    """Output folder name under ``<output-dir>/rl/`` (a name, not a path: no ``/``, not ``..``); default:
    env id plus a timestamp. ``--resume RUN_DIR`` takes a run dir anywhere."""

    @field_validator("run_name")
    @classmethod
    def _run_name_is_a_name(cls, value: str | None) -> str | None:
        why = name_problem(value) if value is not None else None
        if why:
            raise ValueError(f"{value!r} is not a folder name ({why}); run_name names a folder under <output-dir>/rl/: "
                             "use a plain name, and -o/--output-dir to choose where runs go")
        return value
    max_steps: int = Field(100, gt=0)
    """Optimizer steps to train."""
    batch_size: int = Field(128, gt=0)
    """Rollouts per step; a multiple of rollouts_per_example."""
    rollouts_per_example: int = Field(8, ge=1)
    """Group size: rollouts of one example whose rewards are compared (prime-rl's ``group_size``); 1 only for an
    algorithm that needs no siblings (``rae``)."""
    seed: int = 0
    """Seed for data order, sampling and LoRA initialisation."""
    system_prompt: str | None = None
    """Replaces the environment's system prompt (e.g. one found by `prime gepa run`)."""
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    """Sampling settings for training rollouts (and the baseline)."""
    env: list[EnvConfig]
    """The environments to train on, one ``[[env]]`` table each; several are mixed (see ``[buffer]``)."""
    buffer: BufferConfig = Field(default_factory=BufferConfig)
    """How the environments' rows are mixed (hosted training's ``[buffer]``; only ``env_ratios`` here)."""
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    """Optimizer, loss, LoRA."""
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    """The training algorithm (``grpo``, ``max_rl``, ``rae``, ...; docs/rl-algorithms.md); an ``[[env]]`` may set
    its own."""
    inference: InferenceConfig = Field(default_factory=InferenceConfig)
    """Rollout generation backend."""
    ckpt: CkptConfig = Field(default_factory=CkptConfig)
    """Checkpointing."""
    eval: PeriodicEvalConfig = Field(default_factory=PeriodicEvalConfig)
    """Periodic held-out evaluation."""
    baseline: BaselineConfig = Field(default_factory=BaselineConfig)
    """Checks before training."""
    filter: FilterConfig = Field(default_factory=FilterConfig)
    """Online difficulty filtering."""
    health: HealthConfig = Field(default_factory=HealthConfig)
    """Run health checks after each step, and which alarms stop the run."""
    wandb: WandbConfig | None = None
    """Optional Weights & Biases logging."""
    trajectory_strategy: Literal["branching", "interleaved"] = "branching"
    """How a multi-turn rollout becomes training samples (hosted training's and prime-rl's key): ``branching``,
    each model turn its own sample after the prompt it was sampled after (exact for any chat template);
    ``interleaved``, the turns of a rollout as one sequence (environment tokens masked), which needs each
    turn's prompt to extend the previous turn's prompt and completion token for token; checked on real
    rollouts before training (see ``retokenize``)."""
    retokenize: bool = False
    """For ``interleaved``: where a rollout's next prompt does not extend its previous turn token for token (a
    chat template that rewrites earlier turns, e.g. drops their reasoning), start a new sample from that
    turn's own prompt, the whole conversation so far tokenized afresh, instead of refusing to train."""

    @model_validator(mode="wrap")
    @classmethod
    def _other_shapes(cls, data: Any, handler: Any) -> RLConfig:
        """Keys of the shapes prime-rl, vf-rl and the quick-start guides document, as ours
        (:mod:`rl_backend.config_shapes`); the notes go to the plan."""
        from rl_backend.config_shapes import translate

        notes: list[str] = []
        if isinstance(data, dict):
            data, notes = translate(data)
            data.setdefault("max_concurrent", DEFAULT_RL_MAX_CONCURRENT)
        config = handler(data)
        config._notes = [*notes, *config._notes]
        return config

    @model_validator(mode="after")
    def _consistent(self) -> RLConfig:
        if self.batch_size % self.rollouts_per_example:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be divisible by rollouts_per_example "
                f"({self.rollouts_per_example}); e.g. batch_size = "
                f"{max(1, self.batch_size // self.rollouts_per_example) * self.rollouts_per_example}"
            )
        _check_envs(self.env, self.buffer)
        if self.eval.env is not None:
            _check_envs(self.eval.env, BufferConfig(), table="eval.env")
        if self.inference.max_model_len is not None and self.sampling.max_tokens >= self.inference.max_model_len:
            raise ValueError(
                f"sampling.max_tokens ({self.sampling.max_tokens}) must be below inference.max_model_len "
                f"({self.inference.max_model_len})"
            )
        _derive_max_seq_len(self)
        if self.sampling.max_tokens >= self.trainer.max_seq_len:
            raise ValueError(
                f"sampling.max_tokens ({self.sampling.max_tokens}) must be below trainer.max_seq_len "
                f"({self.trainer.max_seq_len})"
            )
        _check_inference(self)
        if self.baseline.min_reward > self.baseline.max_reward:
            raise ValueError(
                f"baseline.min_reward ({self.baseline.min_reward}) is above baseline.max_reward "
                f"({self.baseline.max_reward})"
            )
        from rl_backend.advantages import ADVANTAGE_NAMES
        from rl_backend.losses import LOSS_NAMES

        if self.trainer.loss.type not in LOSS_NAMES:
            raise ValueError(
                f"trainer.loss.type '{self.trainer.loss.type}' is unknown; choose one of {sorted(LOSS_NAMES)}"
            )
        if self.trainer.advantage.type not in ADVANTAGE_NAMES:
            raise ValueError(
                f"trainer.advantage.type '{self.trainer.advantage.type}' is unknown; "
                f"choose one of {sorted(ADVANTAGE_NAMES)}"
            )
        _check_algos(self)
        return self

    def algo_of(self, env: EnvConfig) -> AlgoConfig:
        """The algorithm an environment trains with: its own ``algo``, else the run's."""
        return env.algo or self.algo

    @property
    def notes(self) -> list[str]:
        """Keys of another trainer's shape that were accepted but change nothing here, each with why."""
        return list(self._notes)

    @property
    def baseline_rollouts(self) -> int:
        """Rollouts per example of the baseline checks (at least 2: they compare a group's rewards)."""
        return self.baseline.rollouts_per_example or max(2, self.rollouts_per_example)

    @property
    def examples_per_step(self) -> int:
        return self.batch_size // self.rollouts_per_example

    @property
    def external_vllm(self) -> bool:
        """vLLM runs from another environment (``vllm_command``) or is already running (``base_url``)."""
        return self.inference.vllm_command is not None or self.inference.base_url is not None


def _derive_max_seq_len(config: RLConfig) -> None:
    """``trainer.max_seq_len`` from the rest of the config when the user did not write it (:mod:`rl_backend.seq_len`),
    with a note for the plan; ``max_tokens`` past the model's known context length is refused here."""
    if "max_seq_len" in config.trainer.model_fields_set:
        return
    from rl_backend.seq_len import DEFAULT_MAX_SEQ_LEN, derived_max_seq_len, model_context_length

    max_tokens = config.sampling.max_tokens
    context = model_context_length(config.model) if config.inference.max_model_len is None else None
    if context is not None and max_tokens >= context:
        raise ValueError(f"sampling.max_tokens ({max_tokens}) must be below the context length of {config.model} "
                         f"({context}); lower sampling.max_tokens")
    derived = derived_max_seq_len(max_tokens, config.inference.max_model_len, context)
    config.trainer.max_seq_len = derived
    if derived != DEFAULT_MAX_SEQ_LEN:
        source = (
            "inference.max_model_len"
            if config.inference.max_model_len is not None
            else f"sampling.max_tokens ({max_tokens}) plus prompt room"
            + (f", within the model's {context}" if context else "")
        )
        config._notes.append(f"trainer.max_seq_len = {derived}: unset, from {source}")


def _check_algos(config: RLConfig) -> None:
    """``[trainer.advantage]`` is GRPO's baseline rule: set beside an algorithm with its own credit, it is refused."""
    if config.rollouts_per_example == 1:
        from rl_backend.algorithms import ALGORITHMS

        relative = sorted({a.type for a in [config.algo, *(e.algo for e in config.env)] if a is not None
                           and ALGORITHMS[a.type].group_relative})
        if relative:
            raise ValueError(f"rollouts_per_example (group_size) = 1 leaves algo.type '{relative[0]}' no siblings to "
                             "compare: every advantage would be 0; use 2 or more, or algo.type = 'rae'")
    advantage = config.trainer.advantage
    if advantage.model_fields_set:
        own = sorted({a.type for a in [config.algo, *(e.algo for e in config.env if e.algo)]}
                     - {"grpo", "echo", "hierarchical_grpo"})
        if own:
            raise ValueError(f"trainer.advantage is GRPO's baseline rule; algo.type '{own[0]}' assigns its own credit: "
                             "remove [trainer.advantage] or use algo.type = 'grpo'")
    for spec in config.eval.env or []:
        if spec.algo is not None:
            raise ValueError(f"eval.env '{spec.label}' sets algo, but evaluation does not train; remove it")


def _check_envs(envs: list[EnvConfig], buffer: BufferConfig, table: str = "env") -> None:
    """At least one environment, distinct safe labels, one ratio per environment."""
    if not envs:
        raise ValueError(f"add one [[{table}]] table with the environment id")
    seen: set[str] = set()
    for spec in envs:
        if spec.name is not None and (not ENV_NAME.fullmatch(spec.name) or name_problem(spec.name)):
            raise ValueError(f"{table} name '{spec.name}' may hold only letters, digits and . _ + - and may not be "
                             "'.' or '..' (it names folders)")
        if spec.label in seen:
            raise ValueError(
                f"two [[{table}]] tables are both named '{spec.label}'; give each a distinct name = \"...\""
            )
        seen.add(spec.label)
    ratios = buffer.env_ratios
    if ratios is not None and len(ratios) != len(envs):
        raise ValueError(
            f"buffer.env_ratios has {len(ratios)} values for {len(envs)} [[env]] tables; give one per table, in order"
        )


def _check_inference(config: RLConfig) -> None:
    """vLLM settings that cannot work together, each named with its fix."""
    inference, vllm = config.inference, config.inference.backend == "vllm" or config.external_vllm
    if inference.vllm_command is not None and inference.base_url is not None:
        raise ValueError(
            "set inference.vllm_command (start a server) or inference.base_url (use a running one), not both"
        )
    if inference.vllm_command is not None and not inference.vllm_command:
        raise ValueError('inference.vllm_command is empty; give the command that starts vLLM, e.g. ["vllm", "serve"]')
    if config.external_vllm and inference.backend == "torch":
        raise ValueError(
            "inference.vllm_command / inference.base_url are for backend 'vllm'; remove them or set backend = 'vllm'"
        )
    if inference.base_url is not None and inference.gpus is not None:
        raise ValueError("inference.gpus has no effect on an already running server (inference.base_url); remove it")
    if inference.base_url is not None and not inference.base_url.startswith(("http://", "https://")):
        raise ValueError(f"inference.base_url '{inference.base_url}' must start with http:// or https://")
    if vllm and config.trainer.lora is None:
        raise ValueError(
            "a vLLM backend needs LoRA (adapters are hot-loaded into the server); "
            "remove 'trainer.lora = false' or use backend = 'torch'"
        )
    if vllm and inference.base_url is None:
        from rl_backend.gpus import plan_gpus

        plan_gpus(inference.gpus, config.trainer.gpus, inference.gpu_memory_utilization,
                  trainer_on_gpu=config.trainer.gpus is not None)  # else known at run time (plan.resolve_backend)
    elif inference.gpus is not None and inference.backend == "torch":
        raise ValueError(
            "inference.gpus is for a vLLM server; the torch engine runs on the trainer's device (trainer.gpus)"
        )


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
        key, value, index = read_flag(args, index, lambda token: not token.startswith("--"))
        parts = key_parts(key)
        if parts is None:
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
    except (tomllib.TOMLDecodeError, RecursionError):  # arrays nested thousands deep: a plain string
        return raw


def is_sft_table(data: dict[str, Any]) -> bool:
    """Whether a parsed config is `prime sft run`'s (it names a ``data`` file and no ``[[env]]``), not RL's."""
    return "data" in data and "env" not in data


def load_rl_config(path: str | Path, overrides: list[str] | None = None) -> RLConfig:
    """Read, override and validate a config; a local model path resolves against the config's folder."""
    data = deep_merge(load_toml(path), parse_overrides(list(overrides or [])))
    if is_sft_table(data):  # the likeliest wrong file: an SFT config has rows, not environments
        raise ConfigError(f"{path} is an SFT config (it names `data` and no [[env]]); train on it with "
                          f"`prime sft run {path}`")
    try:
        config = validate(RLConfig, data, path)
    except ConfigError as exc:  # cross-field checks name their keys in the message itself
        raise ConfigError(str(exc).replace("'(top level)': ", "")) from None
    folder = Path(path).resolve().parent
    from evalkit.core.secrets_file import resolve_env_files

    config.env_file = resolve_env_files(config.env_file, folder)
    config.model = resolve_local_model(config.model, folder)
    return config


def resolve_local_model(model: str, folder: Path) -> str:
    """A model path written relative to the config's folder, made absolute when it exists there (names stay)."""
    if model.startswith((".", "~")) or ("/" in model and not model.startswith("local/")):
        candidate = (folder / Path(model).expanduser()).resolve()
        if candidate.exists():
            return str(candidate)
    return model


def to_toml(config: RLConfig) -> str:
    """The resolved config as TOML (written to ``config.resolved.toml``; reloadable by `prime rl run`)."""
    data = config.model_dump(mode="json", exclude_none=True)
    if config.trainer.lora is None:
        data["trainer"]["lora"] = False
    return dumps(data, inline=("args",))

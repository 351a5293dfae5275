"""Before a run: which rollout backend, which devices, and the plan printed by `prime rl run` (and ``--dry-run``).

Nothing here loads a model or an environment, so ``--dry-run`` stays quick; only ``torch`` is
imported (to ask whether CUDA is present).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path

from evalkit.core.errors import ConfigError
from evalkit.model.devices import cuda_available, resolve_device
from rl_backend.algo_config import FrozenModelConfig
from rl_backend.config import RLConfig
from rl_backend.gpus import GpuLayout, plan_gpus
from rl_backend.mixture import mixture_line


def gpu_layout(config: RLConfig, trainer_on_gpu: bool = True) -> GpuLayout:
    """Where this run's started vLLM server and its trainer run (:func:`rl_backend.gpus.plan_gpus`)."""
    inference = config.inference
    return plan_gpus(inference.gpus, config.trainer.gpus, inference.gpu_memory_utilization, trainer_on_gpu)


def resolve_backend(config: RLConfig) -> str:
    """``torch`` or ``vllm`` for this config on this machine.

    ``auto`` is vLLM when the config names a vLLM from elsewhere (``vllm_command``/``base_url``),
    or when CUDA and vllm are both present here (and LoRA is on); else the in-process torch engine.
    A server started with ``vllm_command`` or already running at ``base_url`` does not need vllm
    importable in this environment (vllm pins its own torch).
    """
    want = config.inference.backend
    cuda = cuda_available()
    if config.external_vllm:
        return _checked_vllm(config, cuda)
    has_vllm = importlib.util.find_spec("vllm") is not None
    if want == "vllm":
        if not cuda or not has_vllm:
            raise ConfigError(
                "inference.backend = 'vllm' needs a CUDA GPU and vllm (`pip install 'primekit[gpu]'`), or a vLLM from "
                "another environment (inference.vllm_command / inference.base_url); "
                "use backend = 'torch' on this machine"
            )
        return _checked_vllm(config, cuda)
    if want == "auto" and cuda and has_vllm and config.trainer.lora is not None:
        return _checked_vllm(config, cuda)
    if config.inference.gpus is not None:
        raise ConfigError(
            "inference.gpus is set, but rollouts run in-process on the trainer's device (no vllm here and no "
            "inference.vllm_command / base_url); remove inference.gpus or give a vLLM"
        )
    return "torch"


def _checked_vllm(config: RLConfig, cuda: bool) -> str:
    """``vllm``, once a server started here would leave the trainer room on a GPU they share."""
    if config.inference.base_url is None:
        try:
            gpu_layout(config, trainer_on_gpu=cuda)
        except ValueError as exc:  # only now known: whether the trainer is on a GPU at all
            raise ConfigError(str(exc)) from None
    return "vllm"


def trainer_device(config: RLConfig) -> str:
    """``trainer.device`` when it names one; else ``cuda:N`` for ``trainer.gpus = [N]``, else ``cuda``
    when present, else ``cpu``."""
    import torch

    if config.trainer.device == "cpu" or config.trainer.device.startswith("cuda:"):
        return resolve_device(config.trainer.device)
    if config.trainer.device == "cuda" and not config.trainer.gpus:
        return resolve_device("cuda")
    gpus = config.trainer.gpus
    if not torch.cuda.is_available():
        if gpus:
            raise ConfigError(
                f"trainer.gpus = {gpus} but torch sees no CUDA GPU here; remove trainer.gpus to train on the CPU"
            )
        return "cpu"
    if not gpus:
        return "cuda"
    count = torch.cuda.device_count()
    if gpus[0] >= count:
        raise ConfigError(f"trainer.gpus = {gpus} but this process sees {count} GPU(s) (indices 0..{count - 1})")
    return f"cuda:{gpus[0]}"


def plan_lines(config: RLConfig, run_dir: Path, backend: str) -> list[str]:
    check_algorithms(config)
    lora = config.trainer.lora
    mode = f"LoRA r={lora.rank} alpha={lora.alpha:g}" if lora else "full fine-tuning"
    ckpts = f"every {config.ckpt.interval} steps + final" if config.ckpt.interval else "final only"
    per_env = " per environment" if len(config.env) > 1 else ""
    where = f"of {', '.join(e.label for e in config.eval.env)}" if config.eval.env else f"held-out examples{per_env}"
    evals = (
        f"every {config.eval.interval} steps on {config.eval.num_examples} {where}" if config.eval.interval else "off"
    )
    if config.eval.at_start:
        evals += ", and of the starting model"
    return [
        f"run dir      {run_dir}",
        f"model        {config.model} ({mode}, loss '{config.trainer.loss.type}')",
        *algo_lines(config),
        *_env_lines(config),
        f"steps        {config.max_steps} x {config.batch_size} rollouts "
        f"({config.examples_per_step} examples x {config.rollouts_per_example}), "
        f"max_tokens {config.sampling.max_tokens}",
        f"rollouts     {_inference_text(config, backend)}, {_async_text(config.trainer.async_level)}",
        f"sampling     {_sampling_text(config)}",
        f"trainer      {_trainer_text(config)}",
        f"optimizer    {_optimizer_text(config)}",
        *_loss_lines(config),
        baseline_line(config),
        f"checkpoints  {ckpts}, keep last {config.ckpt.keep_last or 'all'}; eval {evals}",
        *(
            [f"secrets      {', '.join(config.env_file)} (loaded for the run; never written anywhere)"]
            if config.env_file
            else []
        ),
        *(f"note         {line}" for line in config.notes),
    ]


def check_algorithms(config: RLConfig) -> None:
    """Refuse, before anything starts, an algorithm `prime rl run` cannot train yet (one line saying what it needs)."""
    from rl_backend.algo_config import unavailable

    tables = [("algo", config.algo)] + [(f"env '{e.label}' algo", e.algo) for e in config.env if e.algo]
    for where, algo in tables:
        why = unavailable(algo, where)
        if why:
            raise ConfigError(why)
        if algo.type == "echo" and algo.filter is not None:
            raise ConfigError(f"{where}.filter (prime-rl's echo token filter, an import path) is not run by primekit's "
                              "trainer; remove it to train the chosen roles' tokens whole, or hand the run to prime-rl "
                              "(`prime rl run --backend prime-rl`)")
        if algo.type in ("opd", "sft", "opsd") and config.trajectory_strategy == "interleaved":
            raise ConfigError(f"{where}.type = '{algo.type}' trains each model turn as its own sample; remove "
                              "trajectory_strategy = 'interleaved' (the default 'branching' does that)")
        if algo.type == "opd" and algo.teacher is not None and _same_model(algo.teacher, config.model):
            raise ConfigError(f"{where}.teacher '{algo.teacher.name}' is the policy model itself: on-policy "
                              "distillation toward itself has no signal; name a stronger model as the teacher")


def _same_model(teacher: FrozenModelConfig, model: str) -> bool:
    """Whether a teacher names the policy's model (the same name, or for a local one the same folder)."""
    if teacher.name == model:
        return True
    if teacher.base_url:
        return False
    mine, theirs = Path(model).expanduser(), Path(teacher.name).expanduser()
    return mine.exists() and theirs.exists() and mine.resolve() == theirs.resolve()


def algo_lines(config: RLConfig) -> list[str]:
    """The run's algorithm, and each environment's where it sets its own."""
    lines = [f"algorithm    {config.algo.summary()}"]
    lines += [f"             {e.label}: {e.algo.summary()}" for e in config.env if e.algo is not None]
    return lines


def _loss_lines(config: RLConfig) -> list[str]:
    """The loss's clipping, normalisation and extras, and the alarms that halt the run; nothing at the defaults."""
    from rl_backend.losses import LOSSES, clip_range

    loss, trainer, lines = config.trainer.loss, config.trainer, []
    if loss.type != "mask" or trainer.num_iterations > 1 or loss.entropy_coef:
        rule = LOSSES[loss.type]
        low, high = clip_range(loss.type, loss.clip_eps, loss.clip_eps_high)
        clip = (
            ""
            if loss.type == "mask"
            else (f"weight cap {1 + high:g}, " if loss.type == "cispo" else f"clip [{1 - low:g}, {1 + high:g}], ")
        )
        if loss.type == "dppo":
            clip = (f"probability trust region -{loss.dppo_mask_low:g}/+{loss.dppo_mask_high:g}, "
                    f"adv_tau {loss.adv_tau:g}, kl_tau {loss.kl_tau:g}, ")
        norm = {"token": "mean over the batch's tokens", "sequence": "mean per sequence, then over sequences",
                "constant": "sum / (sequences x max_tokens)"}[rule.normalizer]
        lines.append(f"loss         {loss.type}: {clip}{norm}, {trainer.num_iterations} update(s) per batch"
                     + (f", entropy bonus {loss.entropy_coef:g}" if loss.entropy_coef else ""))
    if config.health.halt_on:
        lines.append(f"health       halt on {', '.join(config.health.halt_on)} (checkpoint and metrics saved first)")
    return lines


def baseline_line(config: RLConfig, skip: bool = False) -> str:
    """The plan's line for the baseline checks (what is evaluated, and the thresholds that refuse)."""
    cfg = config.baseline
    if not cfg.enabled or skip:
        return "baseline     off" + (" (--skip-baseline)" if skip and cfg.enabled else "")
    judged = rewarded_envs(config)
    if not judged:
        return "baseline     off: distillation learns from its teacher, not from the varied rewards the checks look for"
    per_env = " per environment" if len(judged) > 1 else ""
    if len(judged) < len(config.env):
        per_env += f" of {', '.join(judged)} (the others distill)"
    return (
        f"baseline     {cfg.num_examples} examples x {config.baseline_rollouts}{per_env} "
        f"(reward in [{cfg.min_reward:g}, {cfg.max_reward:g}], diverse groups >= {cfg.min_diverse_groups:.0%})"
    )


def rewarded_envs(config: RLConfig) -> list[str]:
    """The environments whose algorithm learns from rewards (its sampled tokens feed ``rl``): the ones the baseline
    checks judge. A distilling one (``opd``, ``sft``) learns from its teacher whatever the policy scores."""
    return [env.label for env in config.env if config.algo_of(env).action_component_name() == "rl"]


def _async_text(level: int) -> str:
    if level == 0:
        return "strictly on-policy"
    if level == 1:
        return "one-step off-policy (generation overlaps training)"
    return f"up to {level} steps off-policy (generation runs ahead; importance ratios correct the lag)"


def _sampling_text(config: RLConfig) -> str:
    """The rollout request's settings, and how multi-turn rollouts become samples."""
    args = config.sampling.request_args()
    shown = ", ".join(f"{key} {json.dumps(value)}" for key, value in args.items() if key != "max_tokens")
    return f"{shown}; multi-turn: {config.trajectory_strategy}" + (
        " (retokenize at template breaks)" if config.retokenize else ""
    )


def _optimizer_text(config: RLConfig) -> str:
    t = config.trainer
    schedule = t.lr_scheduler_type + (f" after {t.warmup_steps} warm-up steps" if t.warmup_steps else "")
    extras = [f"grad clip {t.max_grad_norm:g}" if t.max_grad_norm else "no grad clip"]
    if t.kl_coef:
        extras.append(f"KL to the start x {t.kl_coef:g}")
    if t.gradient_checkpointing:
        extras.append("gradient checkpointing")
    return f"AdamW lr {t.lr:g} ({schedule}), " + ", ".join(extras)


def _env_lines(config: RLConfig) -> list[str]:
    """One line per ``[[env]]``; several are preceded by how their rows are mixed."""
    if len(config.env) == 1:
        e = config.env[0]
        return [f"environment  {e.id} {json.dumps(e.args) if e.args else ''}".rstrip()]
    lines = [f"environments {len(config.env)}: {mixture_line(config.env, config.buffer.env_ratios)}"]
    width = max(len(e.label) for e in config.env)
    for e in config.env:
        lines.append(f"  {e.label:<{width}}  {e.id} {json.dumps(e.args) if e.args else ''}".rstrip())
    return lines


def _inference_text(config: RLConfig, backend: str) -> str:
    """Where rollouts come from: the in-process engine, a vLLM server started here (how, on which GPUs), or one
    already running."""
    inference = config.inference
    if backend != "vllm":
        return "backend 'torch' (in-process engine on the trainer's device)"
    if inference.base_url is not None:
        return f"backend 'vllm', the running server at {inference.base_url} (LoRA adapters hot-loaded each step)"
    from rl_backend.sources.vllm_source import check_launcher, launcher_prefix

    if inference.vllm_command:
        check_launcher(inference.vllm_command)
    layout = gpu_layout(config, trainer_on_gpu=cuda_available())
    gpus = ",".join(str(g) for g in layout.inference)
    return (
        f"backend 'vllm', a server started with `{shlex.join(launcher_prefix(config))}` on GPU {gpus} "
        f"(gpu_memory_utilization {layout.memory_utilization:g}{', shared with the trainer' if layout.shared else ''}; "
        "LoRA adapters hot-loaded each step)"
    )


def _trainer_text(config: RLConfig) -> str:
    device = trainer_device(config)
    if device == "cpu":
        return "CPU (no CUDA GPU here)"
    return f"GPU {device.partition(':')[2] or 0}"

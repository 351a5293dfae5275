"""The trainable policy: the model (LoRA via peft by default), its optimizer and one training step.

``train_step`` does ``trainer.num_iterations`` optimizer steps per RL step (one by default): micro-batches of samples
are laid out as ``[left-padded prompt | right-padded completion]`` so that the completion logits are the last
``C + 1`` positions (``logits_to_keep``) and the full-vocabulary logits of prompts are never
materialised. Logits are divided by the sampling temperature before the log-softmax, so the
trainer's log-probabilities are of the same distribution the sampler drew from.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_backend.config import RLConfig
from rl_backend.loss_components import REF_KL_MASK_LOW
from rl_backend.losses import make_loss
from rl_backend.model_io import load_model_and_tokenizer


def _strip_lora(model: Any) -> Any:
    """Replace every LoRA-wrapped layer of a (copied) model by its base layer."""
    from peft.tuners.lora import LoraLayer

    for name, module in list(model.named_modules()):
        if isinstance(module, LoraLayer):
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, module.get_base_layer())
    return model


def _enable_checkpointing(net: Any) -> None:
    """Activation (gradient) checkpointing of every decoder layer; transformers 5 renamed the switch."""
    kwargs = {"use_reentrant": False}
    if hasattr(net, "activation_checkpointing_enable"):
        net.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        net.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def lr_at(trainer: Any, step: int, max_steps: int) -> float:
    """Learning rate of optimizer step ``step`` (1-based): linear warm-up over ``warmup_steps``, then
    constant or decaying to ``min_lr`` at ``max_steps`` (``linear`` or ``cosine``)."""
    warmup = trainer.warmup_steps
    if warmup and step < warmup:
        return trainer.lr * step / warmup
    if trainer.lr_scheduler_type == "constant" or max_steps <= warmup:
        return trainer.lr
    progress = min(1.0, (step - warmup) / (max_steps - warmup))
    shape = 1 - progress if trainer.lr_scheduler_type == "linear" else 0.5 * (1 + math.cos(math.pi * progress))
    return trainer.min_lr + (trainer.lr - trainer.min_lr) * shape


def build_trainable(model: str, trainer: Any, seed: int, device: str) -> tuple[Any, Any]:
    """(the model to train, LoRA-wrapped when ``trainer.lora`` is set; its tokenizer), from RL's or SFT's
    ``[trainer]``."""
    import torch

    dtype = "bfloat16" if trainer.bf16 else "float32"
    net, tokenizer = load_model_and_tokenizer(model, dtype=dtype, device=device)
    lora = trainer.lora
    if lora is not None:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(seed)
        peft_config = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                 target_modules=list(lora.target_modules), task_type="CAUSAL_LM")
        try:
            net = get_peft_model(net, peft_config)
        except ValueError as exc:
            from evalkit.core.errors import ConfigError

            raise ConfigError(f"trainer.lora.target_modules does not fit this model: {exc}") from exc
    return net, tokenizer


def make_optimizer(model: Any, trainer: Any) -> Any:
    """AdamW over the trainable parameters, with ``trainer``'s settings."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=trainer.lr, weight_decay=trainer.weight_decay,
                             betas=(trainer.adam_beta1, trainer.adam_beta2))


@dataclass
class Layout:
    """A micro-batch as ``[left-padded prompt | right-padded completion]`` rows: the completion's logits are the
    last ``comp_width + 1`` positions, so prompts' full-vocabulary logits are never materialised."""

    inputs: dict[str, Any]
    targets: Any
    mask: Any
    comp_width: int


def layout(batch: list[Sample], pad: int, device: str) -> Layout:
    import torch

    prompt_width = max(len(s.prompt_ids) for s in batch)
    comp_width = max(len(s.completion_ids) for s in batch)
    ids = torch.full((len(batch), prompt_width + comp_width), pad, dtype=torch.long)
    attention = torch.zeros_like(ids)
    comp_mask = torch.zeros((len(batch), comp_width), dtype=torch.float32)
    for r, s in enumerate(batch):
        p, c = len(s.prompt_ids), len(s.completion_ids)
        ids[r, prompt_width - p : prompt_width] = torch.tensor(s.prompt_ids)
        ids[r, prompt_width : prompt_width + c] = torch.tensor(s.completion_ids)
        attention[r, prompt_width - p : prompt_width + c] = 1
        comp_mask[r, :c] = torch.tensor(s.mask(), dtype=torch.float32)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    inputs = {"input_ids": ids.to(device), "attention_mask": attention.to(device), "position_ids": positions.to(device)}
    return Layout(inputs, ids[:, prompt_width:].to(device), comp_mask.to(device), comp_width)


@dataclass
class Sample:
    """A sequence to train on: what the sampler saw, what it drew, and how good that was.

    ``loss_mask`` (one flag per completion token; ``None``: all trained) leaves out tokens that were
    not sampled, such as environment and tool messages between the turns of an interleaved rollout.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    sampler_logprobs: list[float]
    advantage: float
    loss_mask: list[bool] | None = None
    env: str | None = None
    """The environment the rollout came from (its ``[[env]]`` label): the trainer's per-environment statistics
    (``entropy/<env>/mean``, as prime-rl's trainer names them)."""
    ref_logprobs: list[float] | None = None
    """A teacher's log-probability of each completion token (``opd``): the sample then feeds the ``ref_kl`` loss
    component, not ``rl`` (its advantage is unused)."""
    ce_actions: bool = False
    """The completion tokens are a frozen teacher's (``sft``): they feed the ``ce`` component at weight 1."""
    ce_weights: list[float] | None = None
    """The ``ce`` weight of each completion position outside the loss mask (``echo``: environment-provided tokens
    by role; 0: not trained)."""
    roles: list[str | None] | None = None
    """The message role of each completion position: ``assistant`` where the policy sampled it, the environment
    message's role for the tokens between replies that an interleaved or ``echo`` sample carries, ``None`` for the
    chat template's scaffold (:mod:`rl_backend.observations`). ``None``: every position is sampled."""
    hint_ids: list[int] | None = None
    """``opsd``: the tokens of the system message holding the task's demonstration. The trainer fills
    ``ref_logprobs`` with the policy's own log-probabilities of the completion read after them and the prompt, at
    the weights the step starts from (:meth:`Policy.self_reference`)."""

    @property
    def component(self) -> str:
        """The loss component this sample's trained (mask) tokens feed (:mod:`rl_backend.loss_components`)."""
        if self.ref_logprobs is not None or self.hint_ids is not None:
            return "ref_kl"
        return "ce" if self.ce_actions else "rl"

    def ce_row(self) -> list[float]:
        """The ``ce`` weight of each completion position: 1 on the trained tokens of a ``ce`` sample, and the
        ``ce_weights`` of the positions outside the loss mask."""
        mask = self.mask()
        extra = self.ce_weights or [0.0] * len(mask)
        own = self.component == "ce"
        return [(1.0 if own else 0.0) if trained else float(w) for trained, w in zip(mask, extra)]

    def mask(self) -> list[bool]:
        return list(self.loss_mask) if self.loss_mask is not None else [True] * len(self.completion_ids)

    @property
    def trained_tokens(self) -> int:
        return sum(self.mask())


def _padded(rows: list[Any], width: int) -> Any:
    """Per-token values of each row, cut to ``width`` and zero-padded to it: one float32 tensor for the batch."""
    import torch

    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for r, values in enumerate(rows):
        values = list(values)[:width]
        out[r, : len(values)] = torch.tensor(values, dtype=torch.float32)
    return out


def _ref_kl_term(batch: list[Sample], ref_rows: list[int], logprobs: Any, old: Any, mask: Any,
                 count: int) -> tuple[Any, float, float, float, tuple[Any, Any]]:
    """The ``ref_kl`` rows' loss term (over the step's ``count`` tokens of that component), and for the metrics: the
    summed KL to the reference, the tokens the mask dropped, the sampler mismatch and the per-token KL for
    :func:`_sum_by_env` (laid out over the whole micro-batch)."""
    import torch

    from rl_backend.loss_components import combine, ref_kl_token_losses

    rows = torch.tensor(ref_rows, device=logprobs.device)
    ref = _padded([batch[r].ref_logprobs or [] for r in ref_rows], logprobs.shape[1]).to(logprobs.device)
    lp, sampled, ref_mask = logprobs[rows], old[rows], mask[rows]
    term = combine({"ref_kl": ref_kl_token_losses(lp, sampled, ref, ref_mask).sum()}, {"ref_kl": count})
    with torch.no_grad():
        ref_kl_sum = float(((ref - lp) * ref_mask).sum())
        ref_masked = float((((lp.exp() - sampled.exp()) < -REF_KL_MASK_LOW).float() * ref_mask).sum())
        detached = (lp - sampled).detach()
        mismatch = float(((detached.exp() - 1 - detached) * ref_mask).sum())
        full = torch.zeros_like(mask)
        full[rows] = ((ref - lp) * ref_mask).detach()
        whole_mask = torch.zeros_like(mask)
        whole_mask[rows] = ref_mask
    return term, ref_kl_sum, ref_masked, mismatch, (full, whole_mask)


def _ce_term(logprobs: Any, ce_weights: Any, count: int) -> tuple[Any, float, tuple[Any, Any]]:
    """The ``ce`` loss term (weighted, over the step's ``count`` tokens of that component), the summed unweighted
    cross-entropy of its member tokens and the per-token values for :func:`_sum_by_env`."""
    import torch

    from rl_backend.loss_components import ce_token_losses, combine, members

    term = combine({"ce": ce_token_losses(logprobs, ce_weights).sum()}, {"ce": count})
    ce_members = members(ce_weights)
    with torch.no_grad():
        ce_sum = float((-logprobs * ce_members).sum())
    return term, ce_sum, ((-logprobs).detach() * ce_members, ce_members)


def _sum_by_env(batch: list[Sample], values: Any, member: Any) -> dict[str, tuple[float, float]]:
    """``env -> (values summed over its samples' member tokens, those tokens)`` of one micro-batch."""
    out: dict[str, tuple[float, float]] = {}
    for sample, total, tokens in zip(batch, (values * member).sum(-1).tolist(), member.sum(-1).tolist()):
        if sample.env is not None and tokens:
            held = out.get(sample.env, (0.0, 0.0))
            out[sample.env] = (held[0] + total, held[1] + float(tokens))
    return out


class Policy:
    def __init__(self, config: RLConfig, device: str = "cpu"):
        import warnings

        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        self.config = config
        self.device = device
        self.temperature = config.sampling.temperature
        net, self.tokenizer = build_trainable(config.model, config.trainer, config.seed, device)
        self.lora = config.trainer.lora
        self.model = net
        trainer = config.trainer
        self.reference = None
        if trainer.kl_coef > 0 and self.lora is None:  # LoRA's reference is the base model: the adapter switched off
            self.reference = copy.deepcopy(net).eval().requires_grad_(False)
        if trainer.gradient_checkpointing:
            _enable_checkpointing(net)
        self.model.train()
        self.optimizer = make_optimizer(self.model, trainer)
        loss = trainer.loss
        self.loss_fn = make_loss(loss.type, loss.mask_low, loss.mask_high, loss.clip_eps, loss.clip_eps_high,
                                 max_tokens=config.sampling.max_tokens, **loss.knobs())

    # ----- weights for the sampler / export ------------------------------------------------------
    def merged_copy(self) -> Any:
        """A plain (non-peft) model holding the current weights with LoRA merged (sampling, export)."""
        if self.lora is not None:
            target = _strip_lora(copy.deepcopy(self.model.get_base_model()))
        else:
            target = copy.deepcopy(self.model)
        self.copy_merged_into(target)
        target.eval()
        return target

    def copy_merged_into(self, target: Any) -> None:
        import torch

        with torch.no_grad():
            if self.lora is None:
                target.load_state_dict(self.model.state_dict())
                return
            from peft.tuners.lora import LoraLayer

            for name, module in self.model.named_modules():
                if isinstance(module, LoraLayer) and "default" in module.lora_A:
                    base = module.get_base_layer()
                    merged = base.weight + module.get_delta_weight("default").to(base.weight.dtype)
                    target.get_submodule(name.removeprefix("base_model.model.")).weight.copy_(merged)

    # ----- training ------------------------------------------------------------------------------
    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step ``step`` (1-based)."""
        return lr_at(self.config.trainer, step, self.config.max_steps)

    def train_step(self, samples: list[Sample], step: int) -> dict[str, float]:
        """``trainer.num_iterations`` optimizer steps on the samples; statistics of the first (the policy that
        sampled them), with ``grad_norm`` the mean over the iterations."""
        limit = self.config.trainer.max_seq_len
        usable = [s for s in samples if s.completion_ids and len(s.prompt_ids) + len(s.completion_ids) <= limit]
        self.self_reference([s for s in usable if s.hint_ids is not None and s.ref_logprobs is None])
        iterations = [self._update(usable, step) for _ in range(self.config.trainer.num_iterations)]
        stats = {"samples": float(len(usable)), "too_long": float(len(samples) - len(usable)), **iterations[0]}
        stats["grad_norm"] = sum(it["grad_norm"] for it in iterations) / len(iterations)
        return stats

    def self_reference(self, samples: list[Sample]) -> None:
        """``opsd``'s reference: each sample's ``ref_logprobs`` are this policy's temperature-scaled log-probabilities
        of its completion with ``hint_ids`` before its prompt, before this step's update (no dropout, no grad)."""
        import torch

        if not samples:
            return
        training = self.model.training
        self.model.eval()
        try:
            size = self.config.trainer.micro_batch_size
            for start in range(0, len(samples), size):
                batch = samples[start : start + size]
                hinted = [Sample([*(s.hint_ids or []), *s.prompt_ids], s.completion_ids, s.sampler_logprobs, 0.0)
                          for s in batch]
                lay = layout(hinted, self.tokenizer.pad_token_id or 0, self.device)
                with torch.no_grad():
                    logp = self._log_softmax(self.model, lay.inputs, lay.comp_width)
                    values = logp.gather(-1, lay.targets.unsqueeze(-1)).squeeze(-1).float().cpu()
                for row, sample in enumerate(batch):
                    sample.ref_logprobs = values[row, : len(sample.completion_ids)].tolist()
        finally:
            self.model.train(training)

    def _update(self, usable: list[Sample], step: int) -> dict[str, float]:
        """Accumulate gradients over all samples, clip, take one optimizer step; return statistics."""
        import torch

        total_tokens = sum(s.trained_tokens for s in usable)
        counts = {component: sum(s.trained_tokens for s in usable if s.component == component)
                  for component in ("rl", "ref_kl")}
        counts["ce"] = sum(1 for s in usable for weight in s.ce_row() if weight)
        rl_sequences = sum(1 for s in usable if s.component == "rl")
        sums = {"loss": 0.0, "entropy": 0.0, "mismatch_kl": 0.0, "masked": 0.0, "clipped": 0.0, "kl_ref": 0.0,
                "ref_kl": 0.0, "ref_kl_masked": 0.0, "ce": 0.0}
        by_env: dict[str, dict[str, list[float]]] = {}  # metric -> env -> [summed over its tokens, those tokens]
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        size = self.config.trainer.micro_batch_size
        ordered = sorted(usable, key=lambda s: len(s.prompt_ids) + len(s.completion_ids))
        for start in range(0, len(ordered), size):
            out = self._micro_step(ordered[start : start + size], total_tokens, counts, rl_sequences)
            for key in sums:
                sums[key] += out[key]
            for metric, envs in out["by_env"].items():
                for env, (total, tokens) in envs.items():
                    held = by_env.setdefault(metric, {}).setdefault(env, [0.0, 0.0])
                    held[0], held[1] = held[0] + total, held[1] + tokens
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = self.config.trainer.max_grad_norm or math.inf  # 0: measure the norm, clip nothing
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip)) if usable else 0.0
        lr = self.lr_at(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if usable and math.isfinite(grad_norm):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        denom = max(1, total_tokens)
        return dict(
            loss=sums["loss"],
            entropy=sums["entropy"] / denom,
            mismatch_kl=sums["mismatch_kl"] / denom,
            masked_frac=sums["masked"] / denom,
            clipped_frac=sums["clipped"] / denom,
            **({"kl_ref": sums["kl_ref"] / denom} if self.config.trainer.kl_coef > 0 else {}),
            **({"ref_kl": sums["ref_kl"] / counts["ref_kl"],
                "ref_kl/is_masked": sums["ref_kl_masked"] / counts["ref_kl"]} if counts["ref_kl"] else {}),
            **({"ce": sums["ce"] / counts["ce"]} if counts["ce"] else {}),
            **{f"tokens/{component}": float(count) for component, count in sorted(counts.items())},
            **{f"{metric}/{env}/mean": total / tokens for metric, envs in sorted(by_env.items())
               for env, (total, tokens) in sorted(envs.items()) if tokens},
            grad_norm=grad_norm,
            lr=lr,
            train_tokens=float(total_tokens),
        )

    def _micro_step(self, batch: list[Sample], total_tokens: int, counts: dict[str, int],
                    rl_sequences: int) -> dict[str, float]:
        """One micro-batch's gradients: each sample's tokens feed its component (``rl``: the policy loss of
        ``[trainer.loss]``, normalised by it over the step's ``rl`` tokens and sequences; ``ref_kl`` and ``ce``:
        summed, over the step's tokens of that component, :func:`rl_backend.loss_components.combine`)."""
        import torch

        lay = layout(batch, self.tokenizer.pad_token_id or 0, self.device)
        inputs, targets, mask, comp_width = lay.inputs, lay.targets, lay.mask, lay.comp_width
        dev = self.device
        old = _padded([s.sampler_logprobs[: len(s.completion_ids)] for s in batch], comp_width).to(dev)
        advantages = torch.tensor([s.advantage for s in batch], dtype=torch.float32)
        logp_all = self._log_softmax(self.model, inputs, comp_width)
        logprobs = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        rl_rows = [r for r, s in enumerate(batch) if s.component == "rl"]
        ref_rows = [r for r, s in enumerate(batch) if s.component == "ref_kl"]
        loss, kl_sum = logprobs.sum() * 0.0, 0.0
        mismatch, masked, clipped, ref_kl_sum, ref_masked, ce_sum = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        per_env: dict[str, Any] = {"ref_kl": None, "ce": None}  # metric -> (per-token values, member mask)
        if rl_rows:
            rows = torch.tensor(rl_rows, device=dev)
            result = self.loss_fn(logprobs[rows], old[rows], advantages.to(dev)[rows], mask[rows], counts["rl"],
                                  rl_sequences)
            loss = loss + result.loss
            mismatch, masked, clipped = result.mismatch_kl, result.masked_tokens, result.clipped_tokens
        if ref_rows:
            term, ref_kl_sum, ref_masked, ref_mismatch, per_env["ref_kl"] = _ref_kl_term(
                batch, ref_rows, logprobs, old, mask, counts["ref_kl"])
            loss, mismatch = loss + term, mismatch + ref_mismatch
        ce_weights = _padded([s.ce_row() for s in batch], comp_width)
        if bool(ce_weights.any()):
            term, ce_sum, per_env["ce"] = _ce_term(logprobs, ce_weights.to(dev), counts["ce"])
            loss = loss + term
        if self.config.trainer.kl_coef > 0:
            kl = self._reference_kl(inputs, comp_width, targets, logprobs)
            loss = loss + self.config.trainer.kl_coef * (kl * mask).sum() / max(1, total_tokens)
            kl_sum = float((kl.detach() * mask).sum())
        bonus = self.config.trainer.loss.entropy_coef
        with torch.set_grad_enabled(bonus > 0):
            entropy = -(logp_all.exp() * logp_all).sum(-1)
        if bonus > 0:  # the entropy bonus: higher entropy lowers the loss
            loss = loss - bonus * (entropy * mask).sum() / max(1, total_tokens)
        loss.backward()
        per_row = (entropy.detach() * mask).sum(-1).tolist()
        per_env["entropy"] = (entropy.detach() * mask, mask)
        return {
            "loss": float(loss.detach()),
            "entropy": sum(per_row),
            "by_env": {metric: _sum_by_env(batch, *pair) for metric, pair in per_env.items() if pair is not None},
            "mismatch_kl": mismatch,
            "masked": masked,
            "clipped": clipped,
            "kl_ref": kl_sum,
            "ref_kl": ref_kl_sum,
            "ref_kl_masked": ref_masked,
            "ce": ce_sum,
        }

    def _log_softmax(self, model: Any, inputs: dict[str, Any], comp_width: int) -> Any:
        """Temperature-scaled log-probabilities over the vocabulary at the ``comp_width`` completion positions."""
        from evalkit.model.scoring import completion_logprobs

        return completion_logprobs(model, inputs, comp_width, self.temperature)

    def _reference_kl(self, inputs: dict[str, Any], comp_width: int, targets: Any, logprobs: Any) -> Any:
        """Per-token k3 estimate of KL(policy || reference) at the sampled tokens (>= 0, gradient through ``logprobs``).

        The reference is the starting model: the base model under a disabled LoRA adapter, else the frozen copy."""
        import contextlib

        import torch

        with torch.no_grad():
            if self.reference is not None:
                context, model = contextlib.nullcontext(), self.reference
            else:
                context, model = self.model.disable_adapter(), self.model
            with context:
                ref_all = self._log_softmax(model, inputs, comp_width)
            ref = ref_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        delta = ref - logprobs
        return torch.exp(delta) - delta - 1

    # ----- checkpoint state ----------------------------------------------------------------------
    def save_trainable(self, folder: Path) -> None:
        """LoRA: the adapter (peft format, loadable by vLLM); full: the whole model (HF format)."""
        self.model.save_pretrained(folder)

    def load_trainable(self, folder: Path) -> None:
        import torch
        from safetensors.torch import load_file

        if self.lora is not None:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(self.model, load_file(str(folder / "adapter_model.safetensors")))
            return
        from transformers import AutoModelForCausalLM

        loaded = AutoModelForCausalLM.from_pretrained(folder, dtype=next(self.model.parameters()).dtype)
        with torch.no_grad():
            self.model.load_state_dict(loaded.state_dict())

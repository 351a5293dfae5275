"""`prime sft run`: supervised fine-tuning on a chat dataset with the RL trainer's machinery.

The model, LoRA wrapping, optimizer, learning-rate schedule, micro-batch layout, checkpoints, merged weight
exports and the run-dir layout are RL's (:mod:`rl_backend.policy`, :mod:`rl_backend.checkpoints`); the loss
is the mean cross-entropy over the assistant's completion tokens of the whole batch (prompt and tool
messages masked, :mod:`rl_backend.sft_samples`). The data order is a seeded permutation per epoch, so a
resumed run (``--resume`` after a kill) trains on exactly the rows the uninterrupted one would have.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from evalkit.core import runs
from evalkit.core.errors import UserError
from evalkit.core.fileio import write_text_atomic
from evalkit.core.untrusted import json_bytes
from rl_backend.config import OptimizerFields
from rl_backend.policy import Policy, Sample, _enable_checkpointing, build_trainable, layout, lr_at, make_optimizer
from rl_backend.sft_config import SFTConfig, to_toml
from rl_backend.sft_samples import load_samples, read_rows

RESUME_FIXED = ("model", "data", "seed", "batch_size")
"""What a resumed SFT run must keep: its checkpoints are of that model, and its step counts that data order."""


@dataclass
class SFTSummary:
    run_dir: Path
    steps: int
    first_loss: float | None
    last_loss: float | None
    rows: int
    skipped: int


class SFTPolicy(Policy):
    """RL's :class:`Policy` (merged export, checkpoint state) trained by cross-entropy instead of a policy loss."""

    def __init__(self, config: SFTConfig, device: str):
        import warnings

        import torch
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        torch.manual_seed(config.seed)
        self.config, self.device, self.temperature, self.reference = config, device, 1.0, None
        self.model, self.tokenizer = build_trainable(config.model, config.trainer, config.seed, device)
        self.lora = config.trainer.lora
        if config.trainer.gradient_checkpointing:
            _enable_checkpointing(self.model)
        self.model.train()
        self.optimizer = make_optimizer(self.model, config.trainer)

    def sft_step(self, batch: list[Sample], lr: float) -> dict[str, float]:
        """One optimizer step: summed token cross-entropy over the batch, divided by its trained tokens."""
        import torch

        trainer: OptimizerFields = self.config.trainer
        tokens = sum(s.trained_tokens for s in batch)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        ordered = sorted(batch, key=lambda s: len(s.prompt_ids) + len(s.completion_ids))
        for start in range(0, len(ordered), trainer.micro_batch_size):
            lay = layout(
                ordered[start : start + trainer.micro_batch_size], self.tokenizer.pad_token_id or 0, self.device
            )
            logp = self._log_softmax(self.model, lay.inputs, lay.comp_width)
            nll = -logp.gather(-1, lay.targets.unsqueeze(-1)).squeeze(-1)
            loss = (nll * lay.mask).sum() / max(1, tokens)
            loss.backward()
            total += float(loss.detach())
        params = [p for p in self.model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, trainer.max_grad_norm or math.inf))
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if math.isfinite(grad_norm):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"loss": total, "grad_norm": grad_norm, "lr": lr, "train_tokens": float(tokens)}


def data_order(rows: int, steps: int, batch_size: int, seed: int) -> list[list[int]]:
    """Row indices of each step's batch: seeded permutations, one per epoch, read in batches across epochs."""
    order: list[int] = []
    epoch = 0
    while len(order) < steps * batch_size:
        perm = list(range(rows))
        random.Random(seed * 1_000_003 + epoch).shuffle(perm)
        order += perm
        epoch += 1
    return [order[i * batch_size : (i + 1) * batch_size] for i in range(steps)]


def run_dirs(config: SFTConfig, output_dir: Path) -> runs.RunDirs:
    """``<output>/sft/<run_name>``, else ``<output>/sft/<dataset stem>-<UTC timestamp>``; ``--resume`` as RL's."""
    root = Path(output_dir) / runs.SFT_JOB
    slug = runs.env_slug(Path(config.data).stem)

    def check(run_dir: Path) -> None:
        if not (run_dir / runs.CHECKPOINTS_DIR).is_dir():
            raise UserError(f"--resume: {run_dir} is not an SFT run dir with checkpoints")

    return runs.RunDirs(
        parent=root, fixed=root / config.run_name if config.run_name else None,
        new_name=lambda: f"{slug}-{runs.timestamp()}", pattern=f"{slug}-*", holds_run=runs.is_rl_run, check=check,
        taken=lambda d: (f"run dir {d} already holds a training run; use --resume, or another run_name / --output-dir"
                         if (d / runs.METRICS).exists() or (d / runs.CHECKPOINTS_DIR).exists() else None),
        none_found=lambda where: f"--resume found no earlier SFT run of '{slug}' in {where}; pass --resume RUN_DIR, "
                                 "or drop --resume to start a new run",
    )


def _resume_step(resolved: runs.ResolvedRun, config: SFTConfig, total: int, console: Console) -> int:
    """The checkpoint step to continue from (0: the start); a finished run is refused."""
    from evalkit.core.tomlio import load_toml
    from rl_backend.checkpoints import steps_in

    for note in resolved.notes:
        console.print(note, markup=False, highlight=False)
    if not resolved.resuming:
        return 0
    saved = resolved.run_dir / runs.RESOLVED_CONFIG
    if saved.is_file():
        runs.require_same(
            resolved.run_dir,
            load_toml(saved),
            config.model_dump(mode="json", exclude_none=True),
            RESUME_FIXED,
            hint="resume with the same model, data, seed and batch_size, or start a new run",
        )
    available = steps_in(resolved.run_dir / runs.CHECKPOINTS_DIR)
    step = resolved.step if resolved.step is not None else (available[-1] if available else 0)
    if step and step not in available:
        raise UserError(f"--resume {step}: no such checkpoint (available: {', '.join(map(str, available)) or 'none'})")
    if step >= total and runs.step_dir(resolved.run_dir / runs.WEIGHTS_DIR, step).is_dir():
        raise UserError(
            f"--resume: the run already finished its {total} steps; raise max_steps or epochs to train further"
        )
    return step


def _save(run_dir: Path, step: int, policy: SFTPolicy, config: SFTConfig, final: bool) -> None:
    from rl_backend.checkpoints import export_weights, prune, save_checkpoint

    save_checkpoint(run_dir, step, policy, {"cursor": step})
    prune(run_dir / runs.CHECKPOINTS_DIR, config.ckpt.keep_last)
    if config.ckpt.save_weights or final:
        export_weights(run_dir, step, policy.merged_copy(), policy.tokenizer)
        prune(run_dir / runs.WEIGHTS_DIR, config.ckpt.keep_last)


def _train(
    policy: SFTPolicy, samples: list[Sample], run_dir: Path, start: int, total: int, console: Console
) -> list[float]:
    """Steps ``start+1 .. total`` with a progress bar, one metrics line each; returns the losses."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    config: SFTConfig = policy.config
    batches = data_order(len(samples), total, config.batch_size, config.seed)
    losses: list[float] = []
    columns = (TextColumn("[bold]step {task.completed}/{task.total}"), BarColumn(), TextColumn("{task.description}"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("", total=total, completed=start)
        for step in range(start + 1, total + 1):
            began = time.perf_counter()
            stats = policy.sft_step([samples[i] for i in batches[step - 1]], lr_at(config.trainer, step, total))
            losses.append(stats["loss"])
            row = {"step": step, **stats, "epoch": round(step * config.batch_size / len(samples), 4),
                   "train_s": round(time.perf_counter() - began, 3)}
            with (run_dir / runs.METRICS).open("ab") as handle:
                handle.write(json_bytes(row) + b"\n")
            interval = config.ckpt.interval
            if (interval and step % interval == 0) or step == total:
                _save(run_dir, step, policy, config, final=step == total)
            progress.update(task, completed=step, description=f"loss {stats['loss']:.4f}")
    return losses


def run(config: SFTConfig, *, output_dir: Path, resume: runs.ResumeRequest | None = None,
        console: Console | None = None) -> SFTSummary:
    """Resolve the run dir, tokenize the dataset, train (from a checkpoint when resuming). The run dir is locked."""
    import torch

    from evalkit.model.devices import resolve_device
    from rl_backend.checkpoints import load_checkpoint
    from rl_backend.runner import _truncate_metrics

    console = console or Console(stderr=True)
    resolved = runs.resolve_run(run_dirs(config, output_dir), resume or runs.ResumeRequest())
    run_dir = resolved.run_dir
    with runs.RunLock(run_dir):
        rows = read_rows(Path(config.data))  # a bad dataset is refused before the model loads
        torch.manual_seed(config.seed)
        policy = SFTPolicy(config, resolve_device(config.trainer.device))
        all_samples = load_samples(Path(config.data), rows, policy.tokenizer)
        samples = [s for s in all_samples if len(s.prompt_ids) + len(s.completion_ids) <= config.trainer.max_seq_len]
        if not samples:
            raise UserError(
                f"every row of {config.data} is longer than trainer.max_seq_len ({config.trainer.max_seq_len})"
            )
        total = config.total_steps(len(samples))
        start = _resume_step(resolved, config, total, console)
        write_text_atomic(run_dir / runs.RESOLVED_CONFIG, to_toml(config))
        if start:
            load_checkpoint(run_dir, start, policy)
            console.print(f"resumed from checkpoint step {start}")
        _truncate_metrics(run_dir / runs.METRICS, start)
        console.print(f"sft          {len(samples)} rows ({len(all_samples) - len(samples)} longer than max_seq_len "
                      f"left out), {total} steps of {config.batch_size}, device {policy.device}", markup=False)
        losses = _train(policy, samples, run_dir, start, total, console)
        if start == total:  # killed while exporting the last step's weights: only that is left
            _save(run_dir, total, policy, config, final=True)
    return SFTSummary(run_dir, total, losses[0] if losses else None, losses[-1] if losses else None,
                      len(samples), len(all_samples) - len(samples))


"""What the SFT report shows (`prime eval view OUTPUT/sft/RUN`, text and HTML).

An SFT run dir has RL's layout (``config.resolved.toml``, ``metrics.jsonl``, ``checkpoints/``, ``weights/``), so
it is read with RL's loader (:func:`evalkit.report.rl_data.load_rl_run`); what differs is what a step holds
(loss, gradient norm, learning rate, trained tokens, epoch: no rewards, no rollouts) and the run's facts
(a dataset and passes over it, not an environment and rollouts per example).
"""

from __future__ import annotations

from typing import Any

from evalkit.core.runs import WEIGHTS_DIR, step_numbers
from evalkit.report.rl_data import RLRun

STEP_COLUMNS = [("loss", "loss", 5), ("grad_norm", "grad norm", 4), ("lr", "lr", 6), ("train_tokens", "tokens", 0),
                ("epoch", "epoch", 2), ("train_s", "train s", 2)]
"""(metrics.jsonl key, column title, digits) of each step, as `prime sft run` writes them."""


def header(run: RLRun) -> list[tuple[str, str]]:
    """Run facts from the resolved config, as (name, value) pairs."""
    cfg = run.config
    trainer = cfg.get("trainer") or {}
    lora = trainer.get("lora")
    mode = f"LoRA r={lora.get('rank')} alpha={lora.get('alpha')}" if isinstance(lora, dict) else "full fine-tuning"
    last = run.steps[-1] if run.steps else {}
    planned = f"{cfg.get('epochs', '?')} epoch(s)" + (
        f", at most {cfg['max_steps']} steps" if cfg.get("max_steps") else ""
    )
    weights = step_numbers(run.path / WEIGHTS_DIR)
    pairs = [
        ("data", str(cfg.get("data") or "?")),
        ("model", str(cfg.get("model") or "?")),
        ("training", f"{mode}, lr {trainer.get('lr')}" if trainer else ""),
        ("steps", f"{last.get('step', 0)} done (epoch {last.get('epoch', 0):.2f}; planned {planned})"),
        ("batch", f"{cfg.get('batch_size')} rows per step" if cfg.get("batch_size") else ""),
        ("weights", f"step {', '.join(map(str, weights))} in {run.path / WEIGHTS_DIR} (prime eval run ENV -m "
                    f"{run.path / WEIGHTS_DIR} --steps all sweeps them)" if weights else ""),
        ("run dir", str(run.path)),
    ]
    return [(name, value) for name, value in pairs if value]


def step_rows(run: RLRun) -> list[list[Any]]:
    """One row per step: the step, then each :data:`STEP_COLUMNS` value (None when the line lacks it)."""
    return [[metrics["step"], *(metrics.get(key) for key, _, _ in STEP_COLUMNS)] for metrics in run.steps]


def sft_context(runs: list[RLRun]) -> dict[str, Any]:
    """The HTML template's context: facts, curves and the step table of each run."""
    from evalkit.report import plots

    charts = plots.step_charts(runs, (
        ("loss", "Loss (assistant tokens)", False),
        ("grad_norm", "Gradient norm (before clipping)", True),
        ("lr", "Learning rate", False),
    ))
    return {
        "kind": "sft",
        "title": f"SFT · {runs[0].label}" if len(runs) == 1 else f"SFT · {len(runs)} runs compared",
        "runs": [{"label": run.label, "color": plots.color(i)} for i, run in enumerate(runs)],
        "sft_runs": [{"label": run.label, "header": header(run), "columns": [title for _, title, _ in STEP_COLUMNS],
                      "steps": [{"step": row[0], "cells": list(zip(row[1:], (d for _, _, d in STEP_COLUMNS)))}
                                for row in step_rows(run)]} for run in runs],
        "plots": charts,
    }


"""An RL run dir as the report reads it: config, baseline, per-step metrics, evals, rollouts.

Files (``rl_backend/runner.py`` writes them): ``config.resolved.toml``, ``baseline.json``,
``metrics.jsonl`` (one line per training step with ``loss``; one line ``{step, eval_reward}`` per eval
at a sync point), ``rollouts/step_N.jsonl`` (eval-style rows plus ``kept`` and ``advantage``).
Runs may also hold full eval run dirs, ``baseline/`` and ``evals/step_N/`` (results.jsonl +
metadata.json); when they exist, eval rewards come from them (with pass@1), otherwise from
``metrics.jsonl``. A distillation run with a held-out eval also has one step-0 line ``teacher/eval_reward``: the
same eval of its teacher, once. A resumed run may repeat a step in ``metrics.jsonl``: the last line wins.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.readback import RL_METRICS_ROW, RL_ROLLOUT_ROW, read_jsonl, read_object
from evalkit.core.runs import (
    BASELINE,
    BASELINE_DIR,
    EVALS_DIR,
    METRICS,
    RESOLVED_CONFIG,
    RESULTS,
    ROLLOUTS_DIR,
    STEP_GLOB,
)
from evalkit.core.tomlio import read_run_toml
from evalkit.report.eval_data import EvalRun, load_eval_run
from evalkit.report.rl_names import with_old_names

_STEP = re.compile(r"^step_(\d+)(?:\.jsonl)?$")


@dataclass
class EvalPoint:
    """Held-out eval reward at one sync point (step 0 = before training)."""

    step: int
    reward: float
    pass_at_1: float | None = None
    run_dir: Path | None = None


@dataclass
class RLRun:
    """Everything the RL report shows; a killed run has whatever it got to write."""

    path: Path
    label: str
    config: dict[str, Any]
    baseline: dict[str, Any]
    steps: list[dict[str, Any]]
    evals: list[EvalPoint]
    rollout_files: dict[int, Path]
    baseline_run: EvalRun | None = None
    eval_runs: dict[int, EvalRun] = field(default_factory=dict)
    teacher_reward: float | None = None
    """A distillation run's teacher on the same held-out eval (measured once, before step 1)."""


def load_rl_run(path: Path, label: str | None = None) -> RLRun:
    """Read an RL run dir; eval run dirs inside it take precedence over ``metrics.jsonl``'s eval lines."""
    config = _read_toml(path / RESOLVED_CONFIG)
    lines = [with_old_names(line) for line in read_jsonl(path / METRICS, RL_METRICS_ROW)]  # prime-rl's names or ours
    steps_by_number: dict[int, dict[str, Any]] = {}
    evals_by_step: dict[int, EvalPoint] = {}
    teacher: float | None = None
    for line in lines:
        step = line.get("step")
        if not isinstance(step, int):
            continue
        if isinstance(line.get("teacher/eval_reward"), (int, float)):
            teacher = float(line["teacher/eval_reward"])
        elif "eval_reward" in line and "loss" not in line:
            evals_by_step[step] = EvalPoint(step, float(line["eval_reward"]))
        else:
            steps_by_number[step] = line
    eval_runs = _eval_dirs(path)
    for step, run in eval_runs.items():
        if run.summary.get("avg_reward") is not None:
            evals_by_step[step] = EvalPoint(
                step, float(run.summary["avg_reward"]), run.summary["pass_at_k"].get("1"), run.path
            )
    baseline_dir = path / BASELINE_DIR
    baseline_run = load_eval_run(baseline_dir, "baseline") if (baseline_dir / RESULTS).is_file() else None
    return RLRun(
        path=path,
        label=label or str(config.get("run_name") or path.name),
        config=config,
        baseline=read_object(path / BASELINE),
        steps=[steps_by_number[s] for s in sorted(steps_by_number)],
        evals=[evals_by_step[s] for s in sorted(evals_by_step)],
        rollout_files=_rollout_files(path / ROLLOUTS_DIR),
        baseline_run=baseline_run,
        eval_runs=eval_runs,
        teacher_reward=teacher,
    )


def header(run: RLRun) -> list[tuple[str, str]]:
    """Run facts from the resolved config, as (name, value) pairs."""
    cfg = run.config
    envs = cfg.get("env") or []
    env = ", ".join(
        f"{e.get('id')}{' ' + json.dumps(e['args']) if e.get('args') else ''}" for e in envs if isinstance(e, dict)
    )
    trainer = cfg.get("trainer") or {}
    lora = trainer.get("lora")
    mode = f"LoRA r={lora.get('rank')} alpha={lora.get('alpha')}" if isinstance(lora, dict) else "full fine-tuning"
    loss = (trainer.get("loss") or {}).get("type")
    done = run.steps[-1]["step"] if run.steps else 0
    pairs = [
        ("environment", env or "?"),
        ("model", str(cfg.get("model") or "?")),
        ("training", f"{mode}, lr {trainer.get('lr')}" + (f", loss '{loss}'" if loss else "") if trainer else ""),
        ("steps", f"{done} of {cfg.get('max_steps', '?')} done" if cfg or run.steps else ""),
        (
            "batch",
            f"{cfg.get('batch_size')} rollouts ({cfg.get('rollouts_per_example')} per example)"
            if cfg.get("batch_size")
            else "",
        ),
        ("sampling", json.dumps(cfg.get("sampling"), sort_keys=True) if cfg.get("sampling") else ""),
        ("teacher held-out reward", f"{run.teacher_reward:.3f}" if run.teacher_reward is not None else ""),
        ("run dir", str(run.path)),
    ]
    return [(name, value) for name, value in pairs if value]


def read_rollouts(run: RLRun, steps: list[int]) -> list[dict[str, Any]]:
    """Rollout rows of the given steps, each with its ``step`` added."""
    rows = []
    for step in steps:
        for row in read_jsonl(run.rollout_files[step], RL_ROLLOUT_ROW):
            rows.append({**row, "step": step})
    return rows


def spread(values: list[int], limit: int) -> list[int]:
    """Up to ``limit`` of ``values``, evenly spaced, always keeping the first and the last."""
    if len(values) <= limit:
        return list(values)
    if limit <= 1:
        return values[-1:]
    picks = {values[round(i * (len(values) - 1) / (limit - 1))] for i in range(limit)}
    return sorted(picks)


def _eval_dirs(path: Path) -> dict[int, EvalRun]:
    runs = {}
    for folder in sorted((path / EVALS_DIR).glob(STEP_GLOB)) if (path / EVALS_DIR).is_dir() else []:
        match = _STEP.match(folder.name)
        if match and (folder / RESULTS).is_file():
            runs[int(match.group(1))] = load_eval_run(folder, f"eval step {match.group(1)}")
    return runs


def _rollout_files(folder: Path) -> dict[int, Path]:
    files = {}
    for file in folder.glob(f"{STEP_GLOB}.jsonl") if folder.is_dir() else []:
        match = _STEP.match(file.name)
        if match:
            files[int(match.group(1))] = file
    return dict(sorted(files.items()))


def _read_toml(path: Path) -> dict[str, Any]:
    return read_run_toml(path) or {}

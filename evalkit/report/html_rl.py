"""The template context of an RL report: curves by step, evals at sync points, time split, rollouts.

Rollouts of at most ``MAX_ROLLOUT_STEPS`` steps go into the page (the first, the last and evenly
spaced ones between); a long run writes hundreds of rollout files, and the page says which steps
it holds. Curves and the step table always cover every step.
"""

from __future__ import annotations

from typing import Any

from evalkit.report import plots
from evalkit.report.paired_view import contexts, rl_comparisons
from evalkit.report.payload import RolloutPayload
from evalkit.report.rl_data import RLRun, header, read_rollouts, spread
from evalkit.report.rl_health import diagnose
from evalkit.report.rl_names import TRAIN

MAX_ROLLOUT_STEPS = 8
STEP_COLUMNS = [
    ("reward_mean", "reward", 4),
    ("reward_std", "± std", 3),
    ("groups_kept", "kept", 0),
    ("groups_generated", "groups", 0),
    ("loss", "loss", 5),
    ("entropy", "entropy", 3),
    ("mismatch_kl", "KL", 6),
    ("ref_kl", "ref KL", 4),
    ("ce", "CE", 4),
    ("grad_norm", "grad norm", 4),
    ("errors", "errors", 0),
    (f"{TRAIN}/is_truncated/mean", "truncated", 2),
    ("train/agg/all/num_turns/mean", "turns", 1),
    ("train/agg/all/num_output_tokens/mean", "tokens", 0),
    ("gen_s", "gen s", 2),
    ("train_s", "train s", 2),
    ("wait_s", "wait s", 2),
    ("step_s", "step s", 2),
]


def rl_context(runs: list[RLRun]) -> dict[str, Any]:
    labels = [run.label for run in runs]
    payload = RolloutPayload(labels)
    included: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        steps = spread(list(run.rollout_files), MAX_ROLLOUT_STEPS)
        for row in read_rollouts(run, steps):
            payload.add(i, row)
        included.append({"label": run.label, "steps": steps, "total": len(run.rollout_files)})
    return {
        "kind": "rl",
        "title": f"RL · {runs[0].label}" if len(runs) == 1 else f"RL · {len(runs)} runs compared",
        "runs": [{"label": label, "color": plots.color(i)} for i, label in enumerate(labels)],
        "rl_runs": [_run_context(run) for run in runs],
        "plots": _plots(runs),
        "paired": [entry for run in runs for entry in contexts(rl_comparisons(run))],
        "included_steps": included,
        "payload": payload.to_json(),
        "clipped": payload.clipped,
        "num_rollouts": len(payload.rows),
    }


def _health(run: RLRun) -> str:
    """The run's health alarms (:mod:`evalkit.report.rl_health`), each with its fix, or that there are none."""
    alarms = diagnose(run.steps)
    return "; ".join(alarm.line().removeprefix("health: ") for alarm in alarms) if alarms else "no alarms"


def _run_context(run: RLRun) -> dict[str, Any]:
    eval_at = {point.step: point for point in run.evals}
    rows = []
    for metrics in run.steps:
        cells = [(metrics.get(key), digits) for key, _, digits in STEP_COLUMNS]
        point = eval_at.get(metrics["step"])
        rows.append({"step": metrics["step"], "cells": cells, "eval": point.reward if point else None})
    baseline = run.baseline
    return {
        "label": run.label,
        "header": [*header(run), ("health", _health(run))],
        "columns": [title for _, title, _ in STEP_COLUMNS],
        "steps": rows,
        "evals": [vars(point) for point in run.evals],
        "baseline": [
            (name, _plain(baseline[key])) for key, name in (
                ("passed", "passed"), ("mean_reward", "mean reward"), ("std_reward", "std"), ("attempts", "rollouts"),
                ("diverse_groups", "groups with varied rewards"), ("num_examples", "examples"), ("errors", "errors"),
                ("seconds", "seconds"))
            if key in baseline
        ] + ([("problems", "; ".join(map(str, baseline["problems"])))] if baseline.get("problems") else []),
    }


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _plots(runs: list[RLRun]) -> list[dict[str, str]]:
    charts = [{"title": "Reward by step (training batch ± std; ◆ held-out eval)", "svg": _reward_plot(runs)}]
    charts += plots.step_charts(runs, (
        ("loss", "Loss", False),
        ("entropy", "Entropy", False),
        ("mismatch_kl", "KL (trainer vs sampler)", True),
        ("ref_kl", "Reference KL term, log p_ref - log p (opd, opsd: rises toward 0 as the policy nears it)", False),
        ("ce", "Cross-entropy of the ce tokens (sft: the teacher's; echo: the environment's)", False),
    ))
    kept = [
        (f"{run.label} kept", [m["step"] for m in run.steps], [m.get("groups_kept", 0) for m in run.steps])
        for run in runs
    ]
    made = [
        (f"{run.label} generated", [m["step"] for m in run.steps], [m.get("groups_generated", 0) for m in run.steps])
        for run in runs
    ]
    if any(xs for _, xs, _ in kept):
        charts.append(
            {
                "title": "Groups kept (reward varied) vs generated",
                "svg": plots.lines(kept + made, "step", "groups", integer_x=True, counts=True),
            }
        )
    for run in runs:
        timed = [m for m in run.steps if "step_s" in m]
        if timed:
            parts = {
                "train": [m.get("train_s", 0.0) for m in timed],
                "waiting for rollouts": [m.get("wait_s", 0.0) for m in timed],
                "other": [max(0.0, m["step_s"] - m.get("train_s", 0.0) - m.get("wait_s", 0.0)) for m in timed],
            }
            charts.append(
                {
                    "title": f"Step time split · {run.label} (line: generation time, overlapped when off-policy)",
                    "svg": plots.stacked_bars(
                        [m["step"] for m in timed],
                        parts,
                        "step",
                        "seconds",
                        overlay=("generation", [m.get("gen_s", 0.0) for m in timed]),
                    ),
                }
            )
    return charts


def _reward_plot(runs: list[RLRun]) -> str:
    import math

    series, bands = [], []
    for run in runs:
        steps = [m for m in run.steps if "reward_mean" in m]
        series.append((f"{run.label} train", [m["step"] for m in steps], [m["reward_mean"] for m in steps]))
        bands.append([m.get("reward_std", 0.0) for m in steps])
    evals = [(f"{run.label} eval", [p.step for p in run.evals], [p.reward for p in run.evals]) for run in runs]
    baselines = [
        (f"{run.label} baseline", [0], [float(run.baseline["mean_reward"])])
        for run in runs
        if isinstance(run.baseline.get("mean_reward"), (int, float)) and math.isfinite(run.baseline["mean_reward"])
    ]
    teachers = [(f"{run.label} teacher", run.teacher_reward) if run.teacher_reward is not None else None
                for run in runs]
    return plots.reward_curves(series, bands, evals, baselines, teachers)

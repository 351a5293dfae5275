"""The template context of a checkpoint-sweep report: held-out reward by training step, the baseline beside it."""

from __future__ import annotations

from typing import Any

from evalkit.report import plots
from evalkit.report.paired_view import contexts, sweep_comparisons
from evalkit.report.sweep_data import SweepRun, header


def sweep_context(runs: list[SweepRun]) -> dict[str, Any]:
    first = runs[0]
    return {
        "kind": "sweep",
        "title": f"Checkpoint sweep · {len(runs)} sweeps" if len(runs) > 1 else f"Checkpoint sweep · {first.label}",
        "runs": [{"label": run.label, "color": plots.color(i)} for i, run in enumerate(runs)],
        "sweeps": [
            {"label": run.label, "header": header(run), "points": [_row(p, run) for p in run.points]} for run in runs
        ],
        "paired": [entry for run in runs for entry in contexts(sweep_comparisons(run))],
        "plots": [{"title": "Reward by checkpoint step (dashed: the starting model, step 0)", "svg": _plot(runs)}],
    }


def _row(point: Any, run: SweepRun) -> dict[str, Any]:
    base = run.baseline
    delta = point.reward - base.reward if point.reward is not None and base is not None and point.step else None
    return {"step": point.step, "reward": point.reward, "std": point.std, "delta": delta, "pass_at_1": point.pass_at_1,
            "rollouts": point.rollouts, "errors": point.errors, "status": point.status, "run_dir": str(point.run_dir)}


def _plot(runs: list[SweepRun]) -> str:
    series = [(run.label, [p.step for p in run.trained], [p.reward for p in run.trained]) for run in runs]
    bands = [[p.std or 0.0 for p in run.trained] for run in runs]
    baselines = [(f"{run.label} baseline", run.baseline.reward) if run.baseline else None for run in runs]
    return plots.sweep_curve(series, bands, baselines)

"""Text reports of GEPA and RL runs, and the side-by-side table of several eval runs, for a terminal.

The eval run's own text report is :func:`evalkit.report.eval_text.render_report`; this module adds what
`prime eval view` prints for the other kinds, from the same loaders the HTML report uses.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evalkit.core.stats import number
from evalkit.report.eval_data import EvalRun
from evalkit.report.gepa_data import GepaRun
from evalkit.report.gepa_data import header as gepa_header
from evalkit.report.lineage import tree_lines
from evalkit.report.paired_view import gepa_comparisons, paired_renderable, print_sweep_paired, rl_comparisons
from evalkit.report.rl_data import RLRun
from evalkit.report.rl_data import header as rl_header
from evalkit.report.sweep_data import SweepRun
from evalkit.report.sweep_data import header as sweep_header

MAX_STEPS_SHOWN = 20


def _pairs_table(title: str, pairs: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left", title_style="bold")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in pairs:
        table.add_row(name, value)
    return table


def render_gepa(run: GepaRun, console: Console) -> None:
    """Header, one line per candidate, the frontier's mean, and the best prompt's diff from the seed."""
    console.print(_pairs_table(f"GEPA · {run.label}", gepa_header(run)))
    table = Table(title="Candidates", title_justify="left")
    for column, justify in (("#", "right"), ("val score", "right"), ("found at call", "right"), ("parents", "left")):
        table.add_column(column, justify=justify, no_wrap=True)
    table.add_column("prompt (first line)", overflow="fold")
    for c in run.candidates:
        first = (c.prompt.strip().splitlines() or [""])[0]
        first = first[:60] + ("…" if len(first) > 60 else "")
        table.add_row(
            f"{c.idx}{' ★' if c.is_best else ''}",
            "n/a" if c.score is None else f"{c.score:.3f}",
            "" if c.discovered_at_calls is None else str(c.discovered_at_calls),
            ", ".join(map(str, c.parents)),
            first,
        )
    console.print(table)
    console.print(Text("Lineage", style="bold"))
    for line in tree_lines(run):
        console.print(line, markup=False, highlight=False)
    if run.frontier:
        mean = sum(row.best_score for row in run.frontier) / len(run.frontier)
        console.print(f"pareto frontier: {len(run.frontier)} validation examples, mean of best scores {mean:.3f}")
    diff = run.diff_lines()
    if not diff:
        console.print("best prompt = seed prompt" if run.best_idx == 0 else "best prompt: same text as the seed")
    for line in diff:
        style = (
            "green"
            if line.startswith("+") and not line.startswith("+++")
            else "red"
            if line.startswith("-") and not line.startswith("---")
            else "dim"
        )
        console.print(Text(line, style=style))
    for found in gepa_comparisons(run):
        console.print(paired_renderable(*found))
    console.print(f"run dir: {run.path}", soft_wrap=True)


def render_rl(run: RLRun, console: Console) -> None:
    """Header, baseline verdict, the last steps' numbers and every eval point."""
    console.print(_pairs_table(f"RL · {run.label}", rl_header(run)))
    baseline = run.baseline
    if baseline:
        verdict = "[green]passed[/green]" if baseline.get("passed") else "[red]refused[/red]"
        console.print(f"baseline {verdict}: mean reward {float(baseline.get('mean_reward') or 0):.3f} over "
                      f"{baseline.get('attempts', '?')} rollouts, {baseline.get('diverse_groups', '?')}/"
                      f"{baseline.get('num_examples', '?')} groups with varied rewards")
    evals = {point.step: point.reward for point in run.evals}
    table = Table(
        title=f"Steps (last {MAX_STEPS_SHOWN})" if len(run.steps) > MAX_STEPS_SHOWN else "Steps", title_justify="left"
    )
    columns = [("step", "step", 0), ("reward", "reward_mean", 3), ("kept", "groups_kept", 0), ("loss", "loss", 5),
               ("entropy", "entropy", 3), ("KL", "mismatch_kl", 6), ("step s", "step_s", 1)]
    columns[-1:-1] = [(title, key, 4) for title, key in (("ref KL", "ref_kl"), ("CE", "ce"))
                      if any(key in m for m in run.steps)]  # a distillation run's component terms
    for title, _, _ in columns:
        table.add_column(title, justify="right")
    table.add_column("eval", justify="right")
    for metrics in run.steps[-MAX_STEPS_SHOWN:]:
        cells = [_fmt(metrics.get(key), digits) for _, key, digits in columns]
        table.add_row(*cells, _fmt(evals.get(metrics["step"]), 3))
    console.print(table)
    if run.evals:
        console.print("eval reward by step: " + ", ".join(f"{p.step}: {p.reward:.3f}" for p in run.evals))
    if run.teacher_reward is not None:
        console.print(f"teacher held-out reward (same eval, before step 1): {run.teacher_reward:.3f}")
    for found in rl_comparisons(run):
        console.print(paired_renderable(*found))
    _render_health(run, console)
    console.print(f"run dir: {run.path}", soft_wrap=True)


def _render_health(run: RLRun, console: Console) -> None:
    """The health checks over the run's steps (:mod:`evalkit.report.rl_health`): each alarm with its fix."""
    from evalkit.report.rl_health import diagnose

    if not run.steps:
        return
    alarms = diagnose(run.steps)
    for alarm in alarms:
        console.print(alarm.line(), markup=False, highlight=False, soft_wrap=True)
    if not alarms:
        console.print(f"health: no alarms over {len(run.steps)} steps")


def render_sft(run: RLRun, console: Console) -> None:
    """Header, then the last steps' loss, gradient norm, learning rate, tokens and epoch."""
    from evalkit.report.sft_data import STEP_COLUMNS, header, step_rows

    console.print(_pairs_table(f"SFT · {run.label}", header(run)))
    table = Table(
        title=f"Steps (last {MAX_STEPS_SHOWN})" if len(run.steps) > MAX_STEPS_SHOWN else "Steps", title_justify="left"
    )
    for title in ("step", *(title for _, title, _ in STEP_COLUMNS)):
        table.add_column(title, justify="right")
    for row in step_rows(run)[-MAX_STEPS_SHOWN:]:
        table.add_row(str(row[0]), *(_fmt(value, digits) for value, (_, _, digits) in zip(row[1:], STEP_COLUMNS)))
    console.print(table)
    console.print(f"run dir: {run.path}", soft_wrap=True)


def render_sweep(run: SweepRun, console: Console) -> None:
    """Header, then one line per checkpoint step with its reward against the starting model's."""
    console.print(_pairs_table(f"Sweep · {run.label}", sweep_header(run)))
    base = run.baseline
    table = Table(title="Reward by step", title_justify="left")
    for title in ("step", "reward", "± std", "Δ vs step 0", "pass@1", "errors", "status"):
        table.add_column(title, justify="right")
    for p in run.points:
        delta = p.reward - base.reward if p.step and p.reward is not None and base is not None else None
        table.add_row(
            str(p.step),
            _fmt(p.reward, 4),
            _fmt(p.std, 3),
            _fmt(delta, 4),
            _fmt(p.pass_at_1, 3),
            str(p.errors),
            p.status,
        )
    console.print(table)
    print_sweep_paired(run, console)
    console.print(f"sweep dir: {run.path}", soft_wrap=True)


def comparison_table(runs: list[EvalRun]) -> Table:
    """One column per eval run: the numbers to compare at a glance."""
    table = Table(title="Comparison", title_justify="left")
    table.add_column("metric")
    for run in runs:
        table.add_column(run.label, justify="right", overflow="fold")
    summaries = [run.summary for run in runs]
    table.add_row("rollouts", *[str(s["num_rollouts"]) for s in summaries])
    table.add_row("reward (avg)", *[_fmt(s.get("avg_reward"), 4) for s in summaries])
    for k in sorted({int(k) for s in summaries for k in s["pass_at_k"]}):
        table.add_row(f"pass@{k}", *[_fmt(s["pass_at_k"].get(str(k)), 4) for s in summaries])
    for name in dict.fromkeys(n for s in summaries for n in s["avg_metrics"]):
        table.add_row(f"  {name}", *[_fmt(s["avg_metrics"].get(name), 4) for s in summaries])
    table.add_row("errors", *[str(s["num_errors"]) for s in summaries])
    return table


def _fmt(value: object, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2e}" if value and abs(value) < 10 ** -digits else number(value, digits)
    return str(value)

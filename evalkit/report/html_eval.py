"""The template context of an eval report: one run, or several side by side (example by example).

Runs are compared by ``example_id``: the same id in two runs of one environment is the same
example (eval takes the first ``-n`` examples in a fixed order unless shuffled with a seed). When
the runs' environments differ the page says so, since their ids then name different examples.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import is_scored
from evalkit.core.stats import number
from evalkit.core.types import id_order
from evalkit.report import plots
from evalkit.report.eval_data import EvalRun, error_groups, examples, header, stop_conditions
from evalkit.report.paired_view import paired_context
from evalkit.report.payload import RolloutPayload


def eval_context(runs: list[EvalRun]) -> dict[str, Any]:
    labels = [run.label for run in runs]
    payload = RolloutPayload(labels)
    for i, run in enumerate(runs):
        for row in run.rows:
            payload.add(i, row)
    example_rows = _example_rows(runs)
    envs = {str(run.meta.get("env_id")) for run in runs if run.meta.get("env_id")}
    return {
        "kind": "eval",
        "title": _title(runs),
        "runs": [{"label": label, "color": plots.color(i)} for i, label in enumerate(labels)],
        "header": _side_by_side([header(run) for run in runs]),
        "summary": _summary_rows(runs),
        "paired": paired_context(runs) if len(runs) > 1 else [],
        "plots": _plots(runs, example_rows),
        "examples": example_rows,
        "errors": [
            {"run": run.label, "run_index": i, **vars(group)}
            for i, run in enumerate(runs)
            for group in error_groups(run.rows)
        ],
        "stops": _stop_rows(runs),
        "notes": [
            f"these runs are on different environments ({', '.join(sorted(envs))}): "
            "the same example id names different examples"
        ]
        if len(envs) > 1
        else [],
        "payload": payload.to_json(),
        "clipped": payload.clipped,
        "num_rollouts": len(payload.rows),
    }


def _title(runs: list[EvalRun]) -> str:
    env = runs[0].meta.get("env_id") or runs[0].path.parent.name
    if len(runs) == 1:
        return f"{env} · {runs[0].meta.get('model') or '?'}"
    return f"{env} · {len(runs)} runs compared"


def _side_by_side(headers: list[list[tuple[str, str]]]) -> list[dict[str, Any]]:
    """Union of header fields in first-seen order, one value per run ('' where a run lacks it)."""
    names: list[str] = []
    for pairs in headers:
        names += [name for name, _ in pairs if name not in names]
    values = [dict(pairs) for pairs in headers]
    return [{"name": name, "values": [v.get(name, "") for v in values]} for name in names]


def _summary_rows(runs: list[EvalRun]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(name: str, cells: list[str], hint: str = "") -> None:
        rows.append({"name": name, "values": cells, "hint": hint})

    summaries = [run.summary for run in runs]
    add("rollouts", [f"{s['num_rollouts']} ({s['num_groups']} examples)" for s in summaries])
    add("reward (avg ± std)", [_pm(s.get("avg_reward"), s.get("std_reward")) for s in summaries])
    ks = sorted({int(k) for s in summaries for k in s["pass_at_k"]})
    for k in ks:
        add(
            f"pass@{k}",
            [_num(s["pass_at_k"].get(str(k))) for s in summaries],
            f"reward ≥ {summaries[0]['pass_threshold']:g}",
        )
    metrics = list(dict.fromkeys(name for s in summaries for name in s["avg_metrics"]))
    for name in metrics:
        add(f"metric: {name}", [_num(s["avg_metrics"].get(name)) for s in summaries], "mean")
    add(
        "errors",
        [
            f"{s['num_errors']} ({s['num_errors'] / s['num_rollouts']:.1%})" if s["num_rollouts"] else "0"
            for s in summaries
        ],
    )
    add(
        "reward diversity",
        [f"{s['reward_diversity']:.0%}" if s.get("reward_diversity") is not None else "n/a" for s in summaries],
        "groups whose rollouts differ in reward",
    )
    add("tokens (in / out)", [f"{s['usage']['input_tokens']:,} / {s['usage']['output_tokens']:,}" for s in summaries])
    return rows


def _example_rows(runs: list[EvalRun]) -> list[dict[str, Any]]:
    per_run = [{stat.example_id: stat for stat in examples(run)} for run in runs]
    ids = sorted({eid for stats in per_run for eid in stats}, key=id_order)
    rows = []
    for eid in ids:
        present = [stats.get(eid) for stats in per_run]
        first = next(stat for stat in present if stat is not None)
        means = [stat.mean if stat is not None else None for stat in present]
        rows.append({
            "id": eid,
            "question": first.question,
            "answer": first.answer,
            "means": means,
            "counts": [len(stat.rewards) if stat else 0 for stat in present],
            "passed": [stat.passed if stat else 0 for stat in present],
            "errors": [stat.errors if stat else 0 for stat in present],
            "delta": means[-1] - means[0] if len(means) == 2 and None not in means else None,  # type: ignore[operator]
        })
    return rows


def _plots(runs: list[EvalRun], example_rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    labels = [run.label for run in runs]
    charts = []
    rewards = [
        [float(row.get("reward") or 0.0) for row in run.rows if is_scored(row)] for run in runs
    ]  # errors are not scores
    if any(rewards):
        charts.append({"title": "Reward distribution", "svg": plots.histogram(rewards, labels, "reward")})
    pass_series = [
        (run.label, [int(k) for k in run.summary["pass_at_k"]], list(run.summary["pass_at_k"].values())) for run in runs
    ]
    if any(xs for _, xs, _ in pass_series):
        charts.append(
            {
                "title": f"pass@k (reward ≥ {runs[0].summary['pass_threshold']:g})",
                "svg": plots.lines(pass_series, "k (rollouts per example)", "pass@k", integer_x=True, unit_y=True),
            }
        )
    metrics = list(dict.fromkeys(name for run in runs for name in run.summary["avg_metrics"]))
    if metrics:
        values = [[run.summary["avg_metrics"].get(name) for name in metrics] for run in runs]
        charts.append({"title": "Metric means", "svg": plots.grouped_bars(metrics, values, labels, "mean")})
    if example_rows:
        order = sorted(example_rows, key=lambda r: (r["means"][0] is None, r["means"][0] or 0.0, r["id"]))
        columns = [[row["means"][i] for row in order] for i in range(len(runs))]
        charts.append({"title": "Mean reward by example (sorted by the first run)",
                       "svg": plots.dots(columns, labels, "example (rank)", "mean reward")})
    return charts


def _stop_rows(runs: list[EvalRun]) -> list[dict[str, Any]]:
    counts = [stop_conditions(run.rows) for run in runs]
    names = list(dict.fromkeys(name for c in counts for name in c))
    return [{"name": name, "values": [c.get(name, 0) for c in counts]} for name in names]


def _num(value: float | None) -> str:
    return "n/a" if value is None else number(value)


def _pm(mean: float | None, std: float | None) -> str:
    return "n/a" if mean is None else f"{number(mean)} ± {number(std or 0.0)}"

"""Summary numbers of a run (from its rows) and the table a person reads.

pass@k uses the unbiased estimator of Chen et al. (2021): for a group of ``n`` rollouts of which
``c`` pass, ``pass@k = 1 - C(n-c, k) / C(n, k)``, averaged over groups, for k = 1..n; ``pass_all_k``
(verifiers' pass^k: all k of k draws pass) is ``C(c, k) / C(n, k)``. A rollout
*passes* when its reward is at least ``pass_threshold`` (default 1.0, i.e. fully correct on the
usual 0..1 rewards; set ``pass_threshold`` for rubrics on another scale).

Reward diversity is the fraction of groups whose rewards are not all equal: groups where every
rollout scores the same carry no learning signal for group-relative RL.

Errors are not scores. A rollout whose model call, environment code or scoring failed (error kinds
``model``, ``environment``, ``timeout``; :mod:`evalkit.core.errors`) has no reward: it is left out of
``avg_reward``, ``std_reward``, ``avg_metrics``, ``pass_at_k``, ``pass_all_k`` and ``reward_diversity``, which cover
the ``num_scored`` rollouts. A rollout whose reward function raised is scored (that function 0) and
counted in both. A row read back with an error but no ``error_kind`` (an older file) is of kind
``unknown`` and not scored. ``num_errors`` counts every rollout with an error, ``errors_by_kind`` splits them,
and ``avg_error`` is their fraction of all rollouts (verifiers' ``avg_error``: rollouts with an
error / rollouts). Token usage counts every rollout (errored ones spent tokens too).

A multi-seat episode writes one row per seat (``agent``, ``trainable``, ``episode_id``); the reward numbers
cover the rows of trained seats (every row when no seat trains), as verifiers' headline reward does, and the
counts cover every row.
"""

from __future__ import annotations

from math import comb, isnan
from typing import Any

from rich.table import Table

from evalkit.core.errors import ERROR_KINDS, UNKNOWN, error_kind
from evalkit.core.stats import mean as mean_of
from evalkit.core.stats import number, pstdev
from evalkit.core.types import id_order, row_order


def summarize(rows: list[dict[str, Any]], rollouts_per_example: int, pass_threshold: float = 1.0) -> dict[str, Any]:
    """Aggregate numbers for metadata.json and the summary table (see the module docstring)."""
    kinds = [error_kind(r) for r in rows]
    by_kind = {kind: kinds.count(kind) for kind in (*ERROR_KINDS, UNKNOWN) if kind in kinds}
    scored = [r for r, kind in zip(rows, kinds) if kind in (None, "reward")]
    out: dict[str, Any] = {
        "num_rollouts": len(rows),
        "num_groups": len({r["example_id"] for r in rows}),
        "num_scored": len(scored),
        "num_errors": sum(by_kind.values()),
        "errors_by_kind": by_kind,
        "avg_error": round(sum(by_kind.values()) / len(rows), 6) if rows else None,
        "usage": {
            "input_tokens": sum(int((r.get("token_usage") or {}).get("input_tokens", 0)) for r in rows),
            "output_tokens": sum(int((r.get("token_usage") or {}).get("output_tokens", 0)) for r in rows),
        },
        "pass_threshold": pass_threshold,
    }
    policy = [r for r in scored if r.get("trainable") is not False] or scored  # seat rows: the trained seats'
    return {**out, **_reward_numbers(policy, rollouts_per_example, pass_threshold)}


def _reward_numbers(rows: list[dict[str, Any]], rollouts_per_example: int, pass_threshold: float) -> dict[str, Any]:
    """Mean/std reward, metric means, pass@k, pass^k and reward diversity over scored rows only.

    Plain Python, not pandas: it runs twice at the end of every run (and importing pandas cost start-up
    time); the numbers are pandas' (population std; a metric's mean over the rows that have it as a number)."""
    if not rows:
        return {"avg_reward": None, "std_reward": None, "avg_metrics": {}, "pass_at_k": {}, "pass_all_k": {},
                "reward_diversity": None}
    rewards = [float(r.get("reward") or 0.0) for r in rows]
    groups: dict[Any, list[float]] = {}
    for row, reward in zip(rows, rewards):
        groups.setdefault(row["example_id"], []).append(reward)
    ordered = [groups[key] for key in sorted(groups, key=id_order)]
    pass_at_k, pass_all_k = {}, {}
    for k in range(1, rollouts_per_example + 1):
        pairs = [(len(g), sum(1 for x in g if x >= pass_threshold)) for g in ordered if len(g) >= k]
        if pairs:
            pass_at_k[str(k)] = round(sum(1.0 - comb(n - c, k) / comb(n, k) for n, c in pairs) / len(pairs), 6)
            pass_all_k[str(k)] = round(sum(comb(c, k) / comb(n, k) for n, c in pairs) / len(pairs), 6)
    multi = [g for g in ordered if len(g) > 1]
    mean = mean_of(rewards)
    return {
        "avg_reward": round(mean, 6),
        "std_reward": round(pstdev(rewards, mean), 6),  # any finite rewards (1e200): evalkit.core.stats
        "avg_metrics": _metric_means(rows),
        "pass_at_k": pass_at_k,
        "pass_all_k": pass_all_k,
        "reward_diversity": round(sum(len(set(g)) > 1 for g in multi) / len(multi), 6) if multi else None,
    }


def _metric_means(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each metric's mean over the rows where it is a number (missing, None and NaN skipped), in order of first
    appearance, as pandas' ``mean(numeric_only=True)`` gave it: a metric with any value that is not a number
    is left out, and one that is None wherever it appears averages to NaN unless every row has it (then left out)."""
    columns: dict[str, list[float]] = {}
    present: dict[str, int] = {}
    dropped: set[str] = set()
    for row in rows:
        for name, value in (row.get("metrics") or {}).items():
            values = columns.setdefault(name, [])
            present[name] = present.get(name, 0) + 1
            if isinstance(value, (int, float)):
                values.append(float(value))
            elif value is not None:
                dropped.add(name)
    means = {}
    for name, values in columns.items():
        numbers = [v for v in values if not isnan(v)]
        if name in dropped or (not values and present[name] == len(rows)):
            continue
        means[name] = round(mean_of(numbers), 6) if numbers else float("nan")
    return means


def run_status(summary: dict[str, Any]) -> str:
    """``complete``, or ``complete_with_errors`` when any rollout has an error (of any kind)."""
    return "complete_with_errors" if summary.get("num_errors") else "complete"


def summary_table(summary: dict[str, Any], *, duration_s: float | None = None, title: str = "Summary") -> Table:
    """The end-of-run table: one metric per line, so it stays readable in a narrow terminal."""
    table = Table(title=title, show_header=True, header_style="bold", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    n = summary["num_rollouts"]
    table.add_row("rollouts", f"{n} ({summary['num_groups']} examples)")
    scored = summary.get("num_scored", n)
    if scored < n:
        table.add_row("scored", f"[yellow]{scored}[/yellow] ({n - scored} errored, not scored)")
    if summary["avg_reward"] is not None:
        table.add_row("reward (avg ± std)", f"{number(summary['avg_reward'])} ± {number(summary['std_reward'])}")
    else:
        table.add_row("reward (avg ± std)", "[red]n/a (no rollout was scored)[/red]")
    ks = list(summary["pass_at_k"])
    for k, value in summary["pass_at_k"].items():
        if int(k) & (int(k) - 1) and k != ks[-1]:  # show k = 1, 2, 4, 8, ... and the largest; metadata has all
            continue
        table.add_row(f"pass@{k} (reward ≥ {summary['pass_threshold']:g})", f"{value:.4f}")
    for name, value in summary["avg_metrics"].items():
        table.add_row(f"  {name}", number(value))
    table.add_row("errors", error_cell(summary))
    usage = summary["usage"]
    table.add_row("tokens (in / out)", f"{usage['input_tokens']:,} / {usage['output_tokens']:,}")
    if duration_s is not None:
        per_s = n / duration_s if duration_s > 0 else 0.0
        rate = f" ({per_s:.{1 if per_s >= 10 else 2}f} rollouts/s)" if duration_s > 0 and n else ""
        table.add_row("time", f"{duration_s:.{2 if duration_s < 10 else 1}f} s{rate}")
    return table


def error_cell(summary: dict[str, Any]) -> str:
    """``0``, or the count, its share and the kinds: ``5 (8.3%: model 3, reward 2)``."""
    errors = summary["num_errors"]
    if not errors:
        return "0"
    kinds = ", ".join(f"{kind} {count}" for kind, count in (summary.get("errors_by_kind") or {}).items())
    share = f"{summary['avg_error']:.1%}" if summary.get("avg_error") is not None else ""
    detail = ": ".join(part for part in (share, kinds) if part)
    return f"[red]{errors}[/red]" + (f" ({detail})" if detail else "")


def first_error(rows: list[dict[str, Any]]) -> str | None:
    """The error of the first errored row in (example, rollout) order, kind first."""
    for row in sorted(rows, key=row_order):
        if row.get("error"):
            return f"[{error_kind(row)}] {row['error']}"
    return None


def error_lines(rows: list[dict[str, Any]], limit: int = 3) -> list[str]:
    """The most common error messages (first 160 chars, kind first), so a failing run says why at a glance."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.get("error"):
            key = f"[{error_kind(row)}] {str(row['error'])[:160]}"
            counts[key] = counts.get(key, 0) + 1
    top = sorted(counts.items(), key=lambda item: -item[1])[:limit]
    return [f"{n} × {message}" for message, n in top]


def diversity_line(summary: dict[str, Any]) -> str:
    """One sentence on within-group reward variance (what RL's baseline check looks at)."""
    value = summary.get("reward_diversity")
    if value is None and not summary.get("num_scored", summary.get("num_rollouts")):
        return "reward diversity: n/a (no rollout was scored)"
    if value is None and summary.get("num_scored", 0) < summary.get("num_rollouts", 0):
        return "reward diversity: n/a (no example has 2 scored rollouts)"
    if value is None:
        return "reward diversity: n/a (one rollout per example; use -r 2 or more)"
    return f"reward diversity: {value:.0%} of groups have rollouts with different rewards"

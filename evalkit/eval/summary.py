"""Summary numbers of a run (from its rows) and the table a person reads.

pass@k uses the unbiased estimator of Chen et al. (2021): for a group of ``n`` rollouts of which
``c`` pass, ``pass@k = 1 - C(n-c, k) / C(n, k)``, averaged over groups, for k = 1..n; ``pass_all_k``
(verifiers' pass^k: all k of k draws pass) is ``C(c, k) / C(n, k)``. A rollout
*passes* when its reward is at least ``pass_threshold`` (default 1.0, i.e. fully correct on the
usual 0..1 rewards; set ``pass_threshold`` for rubrics on another scale).

Reward diversity is the fraction of groups whose rewards are not all equal: groups where every
rollout scores the same carry no learning signal for group-relative RL.
"""

from __future__ import annotations

from math import comb
from typing import Any

import pandas as pd
from rich.table import Table


def summarize(rows: list[dict[str, Any]], rollouts_per_example: int, pass_threshold: float = 1.0) -> dict[str, Any]:
    """Aggregate numbers for metadata.json and the summary table."""
    if not rows:
        return {
            "num_rollouts": 0, "num_groups": 0, "avg_reward": None, "std_reward": None, "avg_metrics": {},
            "pass_at_k": {}, "pass_all_k": {}, "num_errors": 0, "reward_diversity": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}, "pass_threshold": pass_threshold,
        }
    frame = pd.DataFrame(
        {
            "example_id": [r["example_id"] for r in rows],
            "reward": [float(r.get("reward") or 0.0) for r in rows],
            "error": [r.get("error") is not None for r in rows],
            "input_tokens": [int((r.get("token_usage") or {}).get("input_tokens", 0)) for r in rows],
            "output_tokens": [int((r.get("token_usage") or {}).get("output_tokens", 0)) for r in rows],
        }
    )
    metrics = pd.DataFrame([r.get("metrics") or {} for r in rows])
    groups = frame.groupby("example_id")["reward"]
    passes = frame.assign(passed=frame["reward"] >= pass_threshold).groupby("example_id")["passed"].agg(["size", "sum"])
    pass_at_k, pass_all_k = {}, {}
    for k in range(1, rollouts_per_example + 1):
        eligible = passes[passes["size"] >= k]
        if len(eligible):
            pairs = [(int(n), int(c)) for n, c in zip(eligible["size"], eligible["sum"])]
            pass_at_k[str(k)] = round(sum(1.0 - comb(n - c, k) / comb(n, k) for n, c in pairs) / len(pairs), 6)
            pass_all_k[str(k)] = round(sum(comb(c, k) / comb(n, k) for n, c in pairs) / len(pairs), 6)
    multi = groups.agg(["size", "nunique"])
    multi = multi[multi["size"] > 1]
    return {
        "num_rollouts": int(len(frame)),
        "num_groups": int(frame["example_id"].nunique()),
        "avg_reward": round(float(frame["reward"].mean()), 6),
        "std_reward": round(float(frame["reward"].std(ddof=0)), 6),
        "avg_metrics": {name: round(float(value), 6) for name, value in metrics.mean(numeric_only=True).items()},
        "pass_at_k": pass_at_k,
        "pass_all_k": pass_all_k,
        "num_errors": int(frame["error"].sum()),
        "reward_diversity": round(float((multi["nunique"] > 1).mean()), 6) if len(multi) else None,
        "usage": {"input_tokens": int(frame["input_tokens"].sum()), "output_tokens": int(frame["output_tokens"].sum())},
        "pass_threshold": pass_threshold,
    }


def summary_table(summary: dict[str, Any], *, duration_s: float | None = None, title: str = "Summary") -> Table:
    """The end-of-run table: one metric per line, so it stays readable in a narrow terminal."""
    table = Table(title=title, show_header=True, header_style="bold", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    n = summary["num_rollouts"]
    table.add_row("rollouts", f"{n} ({summary['num_groups']} examples)")
    if summary["avg_reward"] is not None:
        table.add_row("reward (avg ± std)", f"{summary['avg_reward']:.4f} ± {summary['std_reward']:.4f}")
    ks = list(summary["pass_at_k"])
    for k, value in summary["pass_at_k"].items():
        if int(k) & (int(k) - 1) and k != ks[-1]:  # show k = 1, 2, 4, 8, ... and the largest; metadata has all
            continue
        table.add_row(f"pass@{k} (reward ≥ {summary['pass_threshold']:g})", f"{value:.4f}")
    for name, value in summary["avg_metrics"].items():
        table.add_row(f"  {name}", f"{value:.4f}")
    errors = summary["num_errors"]
    table.add_row("errors", f"[red]{errors}[/red]" if errors else "0")
    usage = summary["usage"]
    table.add_row("tokens (in / out)", f"{usage['input_tokens']:,} / {usage['output_tokens']:,}")
    if duration_s is not None:
        per_s = n / duration_s if duration_s > 0 else 0.0
        rate = f" ({per_s:.{1 if per_s >= 10 else 2}f} rollouts/s)" if duration_s > 0 and n else ""
        table.add_row("time", f"{duration_s:.{2 if duration_s < 10 else 1}f} s{rate}")
    return table


def error_lines(rows: list[dict[str, Any]], limit: int = 3) -> list[str]:
    """The most common error messages (first 160 chars), so a failing run says why at a glance."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.get("error"):
            key = str(row["error"])[:160]
            counts[key] = counts.get(key, 0) + 1
    top = sorted(counts.items(), key=lambda item: -item[1])[:limit]
    return [f"{n} × {message}" for message, n in top]


def diversity_line(summary: dict[str, Any]) -> str:
    """One sentence on within-group reward variance (what RL's baseline check looks at)."""
    value = summary.get("reward_diversity")
    if value is None:
        return "reward diversity: n/a (one rollout per example; use -r 2 or more)"
    return f"reward diversity: {value:.0%} of groups have rollouts with different rewards"

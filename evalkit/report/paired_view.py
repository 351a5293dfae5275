"""Paired comparisons as a person reads them: a rich table for the terminal and a context for the HTML page.

Every later run is compared with the first (the baseline: run A), example by example, through
:func:`evalkit.report.paired.compare`. Unpaired runs print the reason instead of numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from evalkit.core.stats import number
from evalkit.report.paired import CONFIDENCE, Interval, Paired, compare, summary_line

FLIPS_SHOWN = 20


def pass_threshold(meta: dict[str, Any]) -> float:
    value = meta.get("pass_threshold")
    return float(value) if isinstance(value, (int, float)) else 1.0


def comparisons(runs: Sequence[Any]) -> list[tuple[str, str, Paired]]:
    """``(label A, label B, result)`` for each run after the first (eval runs: ``rows``, ``meta``, ``label``)."""
    base = runs[0]
    return [(base.label, run.label, compare(base.rows, run.rows, pass_threshold(base.meta))) for run in runs[1:]]


def _ci(interval: Interval) -> str:
    return f"{interval.estimate:+.4f}  [{interval.low:+.4f}, {interval.high:+.4f}]"


def paired_renderable(label_a: str, label_b: str, result: Paired) -> Group | Text:
    if not result.paired:
        return Text(f"paired comparison {label_b} vs {label_a}: {result.reason}", style="yellow")
    table = Table(title=f"Paired: B {escape(label_b)} − A {escape(label_a)} ({CONFIDENCE:.0%} bootstrap CI)",
                  title_justify="left")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    table.add_row("paired examples", str(result.examples))
    table.add_row("mean reward A / B", f"{number(result.mean_a)} / {number(result.mean_b)}")
    if result.difference is not None:
        table.add_row("mean difference", _ci(result.difference))
    for k, interval in result.pass_at_k.items():
        table.add_row(f"pass@{k} difference", _ci(interval))
    table.add_row("better / worse / same", f"{result.better} / {result.worse} / {result.same}")
    table.add_row("sign test p", f"{result.sign_p:.3g}")
    parts: list[Any] = [table, Text(summary_line(result, "A", "B"))]
    if result.flips:
        shown = "" if len(result.flips) <= FLIPS_SHOWN else f", the first {FLIPS_SHOWN} shown (all in --html)"
        flips = Table(title=f"Flipped examples ({len(result.flips)}{shown}; solved = a rollout at or above the pass "
                            "threshold)", title_justify="left")
        for column in ("example", "solved in", "mean A", "mean B", "question"):
            flips.add_column(column, overflow="fold")
        for flip in result.flips[:FLIPS_SHOWN]:
            flips.add_row(str(flip.example_id), flip.solved_by, f"{flip.mean_a:.3f}", f"{flip.mean_b:.3f}",
                          escape(" ".join(flip.question.split())[:100]))
        parts.append(flips)
    return Group(*parts)


def print_paired(runs: Sequence[Any], console: Any) -> None:
    for label_a, label_b, result in comparisons(runs):
        console.print(paired_renderable(label_a, label_b, result))


def paired_context(runs: Sequence[Any]) -> list[dict[str, Any]]:
    """What the HTML page's "Paired comparison" section shows, one entry per run after the first."""
    return contexts(comparisons(runs))


class _Side:
    """A run as :func:`comparisons` reads it, loaded from an eval run dir (a sweep's ``step_N/``)."""

    def __init__(self, label: str, run_dir: Any):
        from evalkit.core.readback import EVAL_METADATA, read_object
        from evalkit.core.runs import METADATA
        from evalkit.eval.results import read_rows

        self.label, self.rows, self.meta = label, read_rows(run_dir), read_object(run_dir / METADATA, EVAL_METADATA)


def sweep_comparisons(sweep: Any) -> list[tuple[str, str, Paired]]:
    """Each evaluated checkpoint step of a sweep against step 0, the model the RL run started from."""
    base = sweep.baseline
    if base is None or not sweep.trained:
        return []
    return comparisons([_Side("step 0", base.run_dir), *[_Side(f"step {p.step}", p.run_dir) for p in sweep.trained]])


def print_sweep_paired(sweep: Any, console: Any) -> None:
    """One line per step against step 0; the last step in full (its interval table and flipped examples)."""
    found = sweep_comparisons(sweep)
    for label_a, label_b, result in found[:-1]:
        console.print(summary_line(result, label_a, label_b))
    if found:
        console.print(paired_renderable(*found[-1]))


def contexts(found: list[tuple[str, str, Paired]]) -> list[dict[str, Any]]:
    out = []
    for label_a, label_b, result in found:
        entry: dict[str, Any] = {
            "a": label_a,
            "b": label_b,
            "summary": summary_line(result, "A", "B"),
            **result.to_dict(),
        }
        entry["flips"] = [{**vars(f), "question": " ".join(f.question.split())[:300]} for f in result.flips]
        out.append(entry)
    return out


class _Scores:
    """A GEPA candidate's validation subscores as rows :func:`compare` reads (one rollout per example; both
    candidates of a run score the same validation set, so examples pair by id)."""

    def __init__(self, label: str, subscores: dict[str, float]):
        self.label, self.meta = label, {}
        self.rows = [{"example_id": i, "rollout_idx": 0, "reward": float(score), "error": None,
                      "prompt": [{"role": "user", "content": f"validation example {key}"}]}
                     for i, (key, score) in enumerate(sorted(subscores.items(), key=lambda kv: _key(kv[0])))]


def _key(key: str) -> tuple[int, Any]:
    return (0, int(key)) if str(key).lstrip("-").isdigit() else (1, str(key))


def gepa_comparisons(run: Any) -> list[tuple[str, str, Paired]]:
    """The best candidate against the seed on the validation set, from their per-example subscores."""
    seed, best = run.seed, run.best
    if seed is None or best is None or best.idx == seed.idx:
        return []
    if not seed.subscores or set(seed.subscores) != set(best.subscores):
        return [("seed", f"best (candidate {best.idx})",
                 Paired(False, "the seed's and the best candidate's validation subscores do not cover the same "
                               "examples: unpaired, not compared example by example"))]
    return comparisons([_Scores("seed", seed.subscores), _Scores(f"best (candidate {best.idx})", best.subscores)])


def rl_comparisons(run: Any) -> list[tuple[str, str, Paired]]:
    """An RL run's last held-out eval against its step-0 eval (the starting model), when both kept their rows."""
    trained = [step for step in run.eval_runs if step > 0]
    if 0 not in run.eval_runs or not trained:
        return []
    return comparisons([run.eval_runs[0], run.eval_runs[max(trained)]])

"""The template context of a GEPA report: candidates over metric calls, the frontier, the prompt diff."""

from __future__ import annotations

from typing import Any

from evalkit.report import plots
from evalkit.report.gepa_data import GepaRun, header
from evalkit.report.lineage import ended_by, lineage_svg
from evalkit.report.paired_view import contexts, gepa_comparisons


def gepa_context(runs: list[GepaRun]) -> dict[str, Any]:
    first = runs[0]
    env = first.meta.get("env") or first.meta.get("env_id") or first.path.parent.name
    return {
        "kind": "gepa",
        "title": f"GEPA · {env}"
        + (f" · {len(runs)} runs" if len(runs) > 1 else f" · {first.meta.get('model') or '?'}"),
        "runs": [{"label": run.label, "color": plots.color(i)} for i, run in enumerate(runs)],
        "gepa_runs": [_run_context(run) for run in runs],
        "plots": _overview_plots(runs),
        "paired": [entry for run in runs for entry in contexts(gepa_comparisons(run))],
    }


def _run_context(run: GepaRun) -> dict[str, Any]:
    seed, best = run.seed, run.best
    return {
        "label": run.label,
        "header": header(run),
        "candidates": [
            {
                "idx": c.idx,
                "score": c.score,
                "delta": None if c.score is None or seed is None or seed.score is None else c.score - seed.score,
                "parents": c.parents,
                "calls": c.discovered_at_calls,
                "is_best": c.is_best,
                "prompt": c.prompt,
                "first_line": (c.prompt.strip().splitlines() or [""])[0][:140],
                "chars": len(c.prompt),
                "wins": sum(1 for row in run.frontier if c.idx in row.candidate_idxs),
            }
            for c in run.candidates
        ],
        "frontier": run.frontier,
        "lineage": lineage_svg(run),
        "ended_by": ended_by(run),
        "heatmap": _heatmap(run),
        "diff": [{"text": line, "cls": _diff_class(line)} for line in run.diff_lines()],
        "best_prompt": best.prompt if best else None,
        "seed_prompt": seed.prompt if seed else None,
        "best_idx": run.best_idx,
    }


def _overview_plots(runs: list[GepaRun]) -> list[dict[str, str]]:
    points = []
    for run in runs:
        scored = [(c.idx, c.discovered_at_calls, c.score, c.parents) for c in run.candidates
                  if c.score is not None and c.discovered_at_calls is not None]
        if scored:
            points.append({"label": run.label, "points": scored, "best": run.best_idx})
    if not points:
        return []
    return [{"title": "Candidate scores over metric calls (★ best; lines join parent and child)",
             "svg": plots.candidate_scores(points)}]


def _heatmap(run: GepaRun) -> str | None:
    """Candidates x validation examples; frontier cells (the best score on that example) outlined."""
    columns = sorted({key for c in run.candidates for key in c.subscores}, key=_natural)
    if not columns or not run.candidates:
        return None
    matrix = [[c.subscores.get(col) for col in columns] for c in run.candidates]
    best_at = {row.example_id: set(row.candidate_idxs) for row in run.frontier}
    outlined = {
        (r, j)
        for r, c in enumerate(run.candidates)
        for j, col in enumerate(columns)
        if c.idx in best_at.get(col, set())
    }
    return plots.heatmap(matrix, [f"#{c.idx}" for c in run.candidates], columns,
                         "validation example", "candidate", outlined)


def _natural(key: str) -> tuple[int, Any]:
    return (0, int(key)) if key.lstrip("-").isdigit() else (1, key)


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")

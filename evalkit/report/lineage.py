"""A GEPA run's candidate lineage: which candidate each one was rewritten (or merged) from, drawn.

Two renderings of one layout: :func:`tree_lines` for ``prime eval view`` (an indented tree, each child
under its first parent, merges naming both parents) and :func:`lineage_svg` for the HTML report (one
column per generation, edges from parents to children, merge edges dashed, the best candidate framed).
Both end with what ended the run (``stopped_by`` in metadata.json, else its status). The walk is iterative: a
lineage thousands of generations deep (a long run, or a results file from anywhere) is drawn, not a RecursionError;
the text tree indents at most :data:`MAX_INDENT` levels and names the generation beyond.
"""

from __future__ import annotations

from html import escape
from typing import Any

from evalkit.report.gepa_data import Candidate, GepaRun

MAX_INDENT = 40
"""Generations the text tree indents; deeper ones are written at this indent, their generation named."""


def _depths(candidates: list[Candidate]) -> dict[int, int]:
    """Generation of each candidate: 0 for the seed, one more than its deepest parent."""
    depth: dict[int, int] = {}
    for c in sorted(candidates, key=lambda c: c.idx):
        depth[c.idx] = 1 + max((depth.get(p, 0) for p in c.parents), default=-1)
    return depth


def _order(candidates: list[Candidate]) -> list[Candidate]:
    """Depth-first from the roots, each child under its first parent (the row order of both renderings)."""
    children: dict[int | None, list[Candidate]] = {}
    known = {c.idx for c in candidates}
    for c in sorted(candidates, key=lambda c: c.idx):
        first = next((p for p in c.parents if p in known), None)
        children.setdefault(first, []).append(c)
    out: list[Candidate] = []
    stack = list(reversed(children.get(None, [])))  # depth-first, in index order, without recursion
    while stack:
        child = stack.pop()
        out.append(child)
        stack.extend(reversed(children.get(child.idx, [])))
    return out


def ended_by(run: GepaRun) -> str:
    """The stopper that ended the run, its status when none is named, or that it has not ended."""
    if run.meta.get("status") == "running":
        return "nothing yet (running, or killed)"
    return str(run.meta.get("stopped_by") or run.meta.get("status") or "unknown")


def _label(c: Candidate, seed: Candidate | None) -> str:
    score = "n/a" if c.score is None else f"{c.score:.3f}"
    delta = ""
    if c.score is not None and seed is not None and seed.score is not None and c.idx != seed.idx:
        delta = f" ({c.score - seed.score:+.3f})"
    return f"#{c.idx} {score}{delta}{' ★' if c.is_best else ''}"


def tree_lines(run: GepaRun) -> list[str]:
    """The lineage as text lines, indented by generation."""
    depth, seed = _depths(run.candidates), run.seed
    lines = []
    for c in _order(run.candidates):
        merge = f"  merge of {' + '.join(f'#{p}' for p in c.parents)}" if len(c.parents) > 1 else ""
        level = depth[c.idx]
        deep = f"[generation {level}] " if level > MAX_INDENT else ""
        lines.append("  " * min(level, MAX_INDENT) + ("└─ " if level else "") + deep + _label(c, seed) + merge)
    lines.append(f"ended by: {ended_by(run)}")
    return lines


COLUMN, ROW, MARGIN = 150, 26, 16


def lineage_svg(run: GepaRun) -> str | None:
    """The lineage as an SVG: generations left to right, one row per candidate; None without candidates."""
    if not run.candidates:
        return None
    depth, seed = _depths(run.candidates), run.seed
    rows = _order(run.candidates)
    where = {c.idx: (MARGIN + depth[c.idx] * COLUMN, MARGIN + i * ROW) for i, c in enumerate(rows)}
    width = MARGIN * 2 + (max(depth.values()) + 1) * COLUMN
    height = MARGIN * 2 + len(rows) * ROW + ROW
    parts: list[str] = [f'<svg xmlns="http://www.w3.org/2000/svg" class="lineage" width="{width}" height="{height}" '
                        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">']
    for c in rows:
        x, y = where[c.idx]
        for p in c.parents:
            if p in where:
                px, py = where[p]
                dash = ' stroke-dasharray="4 3"' if len(c.parents) > 1 else ""
                parts.append(f'<path d="M{px + 6},{py} C{px + 60},{py} {x - 60},{y} {x - 6},{y}" fill="none" '
                             f'stroke="#888"{dash}/>')
    for c in rows:
        parts.append(_node(c, where[c.idx], seed))
    parts.append(f'<text x="{MARGIN}" y="{height - MARGIN / 2}" fill="#555">ended by: {escape(ended_by(run))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _node(c: Candidate, at: tuple[float, float], seed: Candidate | None) -> str:
    x, y = at
    shade = _shade(c.score)
    ring = ' stroke="#000" stroke-width="2"' if c.is_best else ' stroke="#444"'
    first = (c.prompt.strip().splitlines() or [""])[0][:200]
    return (f'<g class="node" data-idx="{c.idx}"><title>#{c.idx}: {escape(first)}</title>'
            f'<circle cx="{x}" cy="{y}" r="6" fill="{shade}"{ring}/>'
            f'<text x="{x + 10}" y="{y + 4}">{escape(_label(c, seed))}</text></g>')


def _shade(score: Any) -> str:
    """Red (0) to green (1) for a score in [0, 1]; grey when unknown."""
    if score is None:
        return "#bbb"
    s = min(1.0, max(0.0, float(score)))
    return f"rgb({int(220 * (1 - s))},{int(180 * s + 40)},80)"

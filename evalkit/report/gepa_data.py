"""A GEPA run dir as the report reads it: one loader for both file schemas.

Two layouts of the same facts exist, and :func:`load_gepa_run` is the only place that knows both:

- primekit's (``gepa_cli/outputs.py``): ``results.jsonl`` rows ``{idx, system_prompt, parents,
  val_score, val_subscores, discovered_at_calls}``, ``pareto_frontier.jsonl`` rows ``{example_id,
  best_score, candidate_idxs}``, ``metadata.json`` with ``env``, ``seed_val_score``, ``best_val_score``,
  plus ``budget.json``.
- verifiers 0.3.1's ``save_gepa_results`` (the anchor): ``results.jsonl`` rows ``{example_id, reward,
  score, info: {candidate_idx, is_best, system_prompt, parent_candidate_idxs, val_subscores,
  discovery_metric_calls}}``, ``pareto_frontier.jsonl`` rows ``{valset_row, best_score,
  best_candidates: [{candidate_idx, score}]}``, ``metadata.json`` with ``env_id`` and ``best_score``.

A row is read by whichever names it carries, so a run dir written half by one and half by the
other still loads. The prompt diff is recomputed from the prompts (seed vs best), never taken from
a file, so both layouts show the same diff.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.readback import BUDGET as BUDGET_SCHEMA
from evalkit.core.readback import GEPA_FRONTIER_ROW, GEPA_METADATA, GEPA_ROW, read_jsonl, read_object
from evalkit.core.runs import BUDGET, METADATA, PARETO_FRONTIER, RESULTS


@dataclass
class Candidate:
    """One prompt GEPA scored on the validation set."""

    idx: int
    prompt: str
    score: float | None
    subscores: dict[str, float]
    parents: list[int]
    discovered_at_calls: int | None
    is_best: bool = False


@dataclass
class FrontierRow:
    """One validation example: the best score any candidate reached there, and which candidates did."""

    example_id: str
    best_score: float
    candidate_idxs: list[int]


@dataclass
class GepaRun:
    """Everything the GEPA report shows; fields a run did not record are ``None``."""

    path: Path
    label: str
    meta: dict[str, Any]
    candidates: list[Candidate]
    frontier: list[FrontierRow]
    best_idx: int | None
    budget: dict[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> Candidate | None:
        return next((c for c in self.candidates if c.idx == 0), None)

    @property
    def best(self) -> Candidate | None:
        return next((c for c in self.candidates if c.idx == self.best_idx), None)

    def diff_lines(self) -> list[str]:
        """Unified diff of the seed prompt against the best one (no lines when they are equal)."""
        seed, best = self.seed, self.best
        if seed is None or best is None or seed.prompt == best.prompt:
            return []
        return list(difflib.unified_diff(seed.prompt.splitlines(), best.prompt.splitlines(),
                                         "seed (candidate 0)", f"best (candidate {best.idx})", lineterm=""))


def load_gepa_run(path: Path, label: str | None = None) -> GepaRun:
    """Read a GEPA run dir in either schema (see the module docstring); missing files give empty parts."""
    meta = read_object(path / METADATA, GEPA_METADATA)
    candidates = [_candidate(row, i) for i, row in enumerate(read_jsonl(path / RESULTS, GEPA_ROW))]
    candidates.sort(key=lambda c: c.idx)
    frontier = [_frontier_row(row) for row in read_jsonl(path / PARETO_FRONTIER, GEPA_FRONTIER_ROW)]
    best_idx = _best_idx(meta, candidates)
    for candidate in candidates:
        candidate.is_best = candidate.idx == best_idx
    budget = read_object(path / BUDGET, BUDGET_SCHEMA)
    if "max_calls" not in budget and meta.get("budget") is not None:
        budget["max_calls"] = meta.get("budget")
    if "used" not in budget and meta.get("total_metric_calls") is not None:
        budget["used"] = meta.get("total_metric_calls")
    if label is None:
        label = f"{meta.get('model') or path.parent.name} · {path.name}"
    return GepaRun(path, label, meta, candidates, frontier, best_idx, budget)


def _spent(used: Any, max_calls: Any, reserved: Any, unfinished: bool) -> str:
    """Rollouts used of the budget. An unfinished run's ``budget.json`` holds ``used`` as of its last write, which
    can miss the iteration it was in when killed: a lower bound, with the reservation that bounds it from above."""
    if used is None:
        return ""
    shown = f"{used} / {max_calls}" if max_calls else str(used)
    if not unfinished:
        return shown if used or max_calls else ""
    ceiling = f", at most {reserved} reserved" if isinstance(reserved, int) and reserved > used else ""
    return f"at least {shown} (the run did not finish: its last iteration may be uncounted{ceiling})"


def _at_least(count: Any, unfinished: bool) -> str:
    if not count:
        return ""
    return f"at least {count}" if unfinished else str(count)


def header(run: GepaRun) -> list[tuple[str, str]]:
    """Run facts as (name, value) pairs, skipping what the run does not record."""
    meta, budget = run.meta, run.budget
    env = meta.get("env") or meta.get("env_id") or ", ".join(str(e.get("id")) for e in meta.get("envs") or [])
    seed, best = run.seed, run.best
    used, max_calls = budget.get("used"), budget.get("max_calls")
    unfinished = meta.get("status") == "running"  # still running, or killed (kill -9) and never resumed
    pairs = [
        ("environment", str(env or "?")),
        ("model", str(meta.get("model") or "?")),
        ("reflection model", str(meta.get("reflection_model") or "")),
        ("status", str(meta.get("status") or "")),
        ("seed score", _num(seed.score) if seed else ""),
        ("best score", f"{_num(best.score)} (candidate {best.idx} of {len(run.candidates)})" if best else ""),
        ("rollouts (metric calls)", _spent(used, max_calls, budget.get("reserved"), unfinished)),
        ("reflection calls", _at_least(budget.get("reflection_calls") or meta.get("num_reflection_calls"), unfinished)),
        ("date", str(meta.get("started_at") or meta.get("completed_at") or "")),
        ("duration", f"{float(meta['duration_s']):.1f} s" if meta.get("duration_s") is not None else ""),
        ("run dir", str(run.path)),
    ]
    return [(name, value) for name, value in pairs if value]


def _candidate(row: dict[str, Any], position: int) -> Candidate:
    info = row.get("info") if isinstance(row.get("info"), dict) else {}
    idx = _first(row.get("idx"), info.get("candidate_idx"), row.get("example_id"), position)
    subscores = row.get("val_subscores") or info.get("val_subscores") or {}
    score = _first(row.get("val_score"), row.get("score"))
    if score is None and subscores:
        score = sum(float(v) for v in subscores.values()) / len(subscores)
    if score is None:
        score = row.get("reward")
    calls = _first(row.get("discovered_at_calls"), info.get("discovered_at_calls"), info.get("discovery_metric_calls"))
    return Candidate(
        idx=int(idx),
        prompt=str(_first(row.get("system_prompt"), info.get("system_prompt"), "")),
        score=None if score is None else float(score),
        subscores={str(k): float(v) for k, v in subscores.items() if v is not None},
        parents=[
            int(p) for p in (_first(row.get("parents"), info.get("parent_candidate_idxs")) or []) if p is not None
        ],
        discovered_at_calls=None if calls is None else int(calls),
        is_best=bool(info.get("is_best")),
    )


def _frontier_row(row: dict[str, Any]) -> FrontierRow:
    example = _first(row.get("example_id"), row.get("valset_row"), "?")
    idxs = row.get("candidate_idxs")
    if idxs is None:
        idxs = [b.get("candidate_idx") for b in row.get("best_candidates") or [] if isinstance(b, dict)]
    return FrontierRow(str(example), float(row.get("best_score") or 0.0), [int(i) for i in idxs if i is not None])


def _best_idx(meta: dict[str, Any], candidates: list[Candidate]) -> int | None:
    """The run's own choice (metadata ``best_idx``, or the row marked ``is_best``), else the top score."""
    if meta.get("best_idx") is not None:
        return int(meta["best_idx"])
    marked = [c.idx for c in candidates if c.is_best]
    if marked:
        return marked[0]
    scored = [c for c in candidates if c.score is not None]
    return max(scored, key=lambda c: (c.score, -c.idx)).idx if scored else None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"

"""The files of a GEPA run dir that a person (or ``prime eval``) reads afterwards.

Where run dirs are and how they are named and locked: :mod:`evalkit.runs`.

Everything here is derived from the library's state plus our own counters, and every file is
written atomically (temp + rename), so a run killed at any moment leaves either the previous or the
new version of each file, never half of one. Rewritten after every iteration, so a killed run's
directory already holds its best prompt so far.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any

from evalkit.fileio import write_text_atomic
from gepa_cli.gepa_job.adapter import COMPONENT

STATE_SUBDIR = "state"
"""The library's own run dir (``gepa_state.bin``, its logs) inside ours, kept apart from our files."""


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def best_index(state: Any) -> int:
    """Best candidate by mean validation score; ties go to the earliest (the simplest prompt)."""
    scores = [mean(list(sub.values())) for sub in state.prog_candidate_val_subscores]
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def candidate_rows(state: Any, discovered_at: dict[int, int]) -> list[dict[str, Any]]:
    seed_prompt = state.program_candidates[0][COMPONENT]
    rows = []
    for idx, candidate in enumerate(state.program_candidates):
        prompt = candidate[COMPONENT]
        subscores = {str(k): float(v) for k, v in sorted(state.prog_candidate_val_subscores[idx].items())}
        diff = "".join(
            difflib.unified_diff(
                seed_prompt.splitlines(keepends=True), prompt.splitlines(keepends=True), "seed", f"candidate_{idx}"
            )
        )
        rows.append(
            {
                "idx": idx,
                "system_prompt": prompt,
                "parents": [p for p in state.parent_program_for_candidate[idx] if p is not None],
                "val_score": mean(list(subscores.values())),
                "val_subscores": subscores,
                "sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
                "diff_from_seed": diff,
                "discovered_at_calls": discovered_at.get(idx),
            }
        )
    return rows


def frontier_rows(state: Any) -> list[dict[str, Any]]:
    """Per validation example: the best score any candidate reached there and which candidates did."""
    rows = []
    val_ids = sorted({vid for sub in state.prog_candidate_val_subscores for vid in sub})
    for vid in val_ids:
        scored = [(idx, sub[vid]) for idx, sub in enumerate(state.prog_candidate_val_subscores) if vid in sub]
        best = max(score for _, score in scored)
        rows.append({"example_id": vid, "best_score": float(best), "candidate_idxs": [i for i, s in scored if s == best]})
    return rows


def write_candidate_files(run_dir: Path, state: Any, discovered_at: dict[int, int]) -> tuple[int, list[dict[str, Any]]]:
    """``results.jsonl``, ``pareto_frontier.jsonl`` and ``system_prompt.txt`` from the current state."""
    rows = candidate_rows(state, discovered_at)
    write_text_atomic(run_dir / "results.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    write_text_atomic(run_dir / "pareto_frontier.jsonl", "".join(json.dumps(row) + "\n" for row in frontier_rows(state)))
    best = best_index(state)
    write_text_atomic(run_dir / "system_prompt.txt", rows[best]["system_prompt"])
    return best, rows

"""The run directory: where it is, and the files a person (or ``prime eval``) reads afterwards.

Everything here is derived from the library's state plus our own counters, and every file is
written atomically (temp + rename), so a run killed at any moment leaves either the previous or the
new version of each file, never half of one. Rewritten after every iteration, so a killed run's
directory already holds its best prompt so far.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from evalkit.eval.results import model_slug
from evalkit.fileio import write_text_atomic
from gepa_cli.gepa_job.adapter import COMPONENT

STATE_SUBDIR = "state"
"""The library's own run dir (``gepa_state.bin``, its logs) inside ours, kept apart from our files."""


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-") or "x"


def new_run_dir(output_root: str | Path, env_label: str, model: str) -> Path:
    """``<output>/gepa/<env>--<model>/<run-id>/`` with a sortable, collision-free run id."""
    parent = Path(output_root) / "gepa" / f"{safe_name(env_label)}--{safe_name(model_slug(model))}"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for suffix in ["", *(f"-{i}" for i in range(2, 100))]:
        candidate = parent / f"{stamp}{suffix}"
        if not candidate.exists():
            return candidate
    raise RuntimeError(f"cannot find a free run directory under {parent}")


def latest_run_dir(output_root: str | Path, env_label: str, model: str) -> Path | None:
    parent = Path(output_root) / "gepa" / f"{safe_name(env_label)}--{safe_name(model_slug(model))}"
    runs = sorted(p for p in parent.glob("*") if (p / "metadata.json").is_file()) if parent.is_dir() else []
    return runs[-1] if runs else None


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

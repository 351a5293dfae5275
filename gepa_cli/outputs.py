"""The files of a GEPA run dir that a person (or ``prime eval``) reads afterwards.

Where run dirs are and how they are named and locked: :mod:`evalkit.core.runs`.

The schema is verifiers' (``save_gepa_results`` in verifiers 0.3.1, ``schema_version`` ``verifiers.gepa.v1``),
with primekit's budget accounting beside verifiers' fields. Everything here is derived from the library's
state plus our own counters, and every file is
written atomically (temp + rename), so a run killed at any moment leaves either the previous or the
new version of each file, never half of one. Rewritten after every iteration, so a killed run's
directory already holds its best prompt so far.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.fileio import write_files_atomic
from evalkit.core.runs import PARETO_FRONTIER, RESULTS, SYSTEM_PROMPT
from evalkit.core.untrusted import row_line, utf8
from gepa_cli.adapter import COMPONENT
from gepa_cli.components import component_files

STATE_SUBDIR = "state"
"""The library's own run dir (``gepa_state.bin``, its logs) inside ours, kept apart from our files."""


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def best_index(state: Any) -> int:
    """Best candidate by mean validation score; ties go to the earliest (the simplest prompt)."""
    scores = [mean(list(sub.values())) for sub in state.prog_candidate_val_subscores]
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


SCHEMA_VERSION = "verifiers.gepa.v1"
"""verifiers' id for the GEPA file schema written here (results.jsonl, pareto_frontier.jsonl, metadata.json)."""
EVAL_KIND = "gepa"
TARGET = "system_prompt"


def sha256(text: str) -> str:
    return hashlib.sha256(utf8(text)).hexdigest()


def prompt_diff(initial: str, prompt: str) -> str:
    """verifiers' ``diff_from_initial``: a unified diff, empty when the prompts are equal."""
    if initial == prompt:
        return ""
    lines = difflib.unified_diff(initial.splitlines(), prompt.splitlines(), f"initial/{SYSTEM_PROMPT}",
                                 f"candidate/{SYSTEM_PROMPT}", lineterm="")
    return "\n".join(lines) + "\n"


def candidate_rows(state: Any, discovered_at: dict[int, int]) -> list[dict[str, Any]]:
    """One ``results.jsonl`` row per candidate in verifiers' schema: ``{example_id, reward, score, info}``.

    ``example_id`` is the candidate's index, ``score`` (and ``reward``) its mean validation score; ``info``
    holds verifiers' fields and, beside them, primekit's ``discovered_at_calls``: the rollouts this run had
    spent (the honest budget count) when the candidate's validation pass finished.
    """
    initial = state.program_candidates[0][COMPONENT]
    best = best_index(state)
    by_discovery = list(getattr(state, "num_metric_calls_by_discovery", []) or [])
    rows = []
    for idx, candidate in enumerate(state.program_candidates):
        prompt = candidate[COMPONENT]
        subscores = {str(k): float(v) for k, v in sorted(state.prog_candidate_val_subscores[idx].items())}
        score = mean(list(subscores.values()))
        info = {
            "schema_version": SCHEMA_VERSION,
            "eval_kind": EVAL_KIND,
            "sample_type": "gepa_candidate",
            "optimization_target": TARGET,
            "candidate_idx": idx,
            "is_best": idx == best,
            "system_prompt": prompt,
            "system_prompt_sha256": sha256(prompt),
            "diff_from_initial": prompt_diff(initial, prompt),
            "parent_candidate_idxs": [int(p) for p in state.parent_program_for_candidate[idx] if p is not None],
            "val_subscores": subscores,
            "num_val_examples": len(subscores),
            "discovery_metric_calls": by_discovery[idx] if idx < len(by_discovery) else None,
            "discovered_at_calls": discovered_at.get(idx),
        }
        others = {name: text for name, text in candidate.items() if name != COMPONENT}
        if others:  # primekit's, beside verifiers' fields: the other optimized components (tools)
            info["components"] = others
        rows.append({"example_id": idx, "reward": score, "score": score, "info": info})
    return rows


def frontier_rows(state: Any) -> list[dict[str, Any]]:
    """Per validation example (``valset_row``): the best score any candidate reached there and which candidates did."""
    rows = []
    val_ids = sorted({vid for sub in state.prog_candidate_val_subscores for vid in sub})
    for vid in val_ids:
        scored = [(idx, float(sub[vid])) for idx, sub in enumerate(state.prog_candidate_val_subscores) if vid in sub]
        best = max(score for _, score in scored)
        winners = [
            {
                "candidate_idx": idx,
                "system_prompt_sha256": sha256(state.program_candidates[idx][COMPONENT]),
                "score": score,
            }
            for idx, score in scored
            if score == best
        ]
        rows.append({"schema_version": SCHEMA_VERSION, "valset_row": int(vid), "best_score": best,
                     "num_best_candidates": len(winners), "best_candidates": winners})
    return rows


@dataclass(frozen=True)
class Candidates:
    """What the candidate files are built from, copied out of gepa's state (which the library goes on
    changing): cheap to take on the search thread, so the files can be built and written on another."""

    program_candidates: list[dict[str, str]]
    prog_candidate_val_subscores: list[dict[Any, float]]
    parent_program_for_candidate: list[list[int | None]]
    num_metric_calls_by_discovery: list[int]
    discovered_at: dict[int, int]

    @classmethod
    def of(cls, state: Any, discovered_at: dict[int, int]) -> Candidates:
        return cls([dict(c) for c in state.program_candidates], [dict(s) for s in state.prog_candidate_val_subscores],
                   [list(p) for p in state.parent_program_for_candidate],
                   list(getattr(state, "num_metric_calls_by_discovery", []) or []), dict(discovered_at))


def write_candidates(run_dir: Path, candidates: Candidates) -> None:
    """The candidate files of ``candidates``, without syncs (after an iteration; rebuilt durably at the end)."""
    write_files(run_dir, candidate_files(candidates, candidates.discovered_at)[2], durable=False)


def candidate_files(state: Any, discovered_at: dict[int, int]) -> tuple[int, list[dict[str, Any]], dict[str, bytes]]:
    """The best candidate's index, the ``results.jsonl`` rows, and every candidate file's bytes by name
    (``results.jsonl``, ``pareto_frontier.jsonl``, ``system_prompt.txt``, one per other component), built
    from ``state`` (gepa's, or :class:`Candidates`)."""
    rows = candidate_rows(state, discovered_at)
    lines, rows = zip(*(row_line(row) for row in rows))
    rows = list(rows)
    best = best_index(state)
    files = {RESULTS: b"".join(lines),
             PARETO_FRONTIER: b"".join(row_line(row)[0] for row in frontier_rows(state)),
             SYSTEM_PROMPT: utf8(rows[best]["info"]["system_prompt"])}
    files.update({name: utf8(text) for name, text in component_files(state.program_candidates[best]).items()})
    return best, rows, files


def write_files(run_dir: Path, files: dict[str, bytes], *, durable: bool = True, sync_too: Sequence[Path] = ()) -> None:
    """Each of ``files`` (name -> bytes) into ``run_dir``, atomically (``sync_too``: files written in
    place, synced with them).

    ``durable=False`` (after each iteration) skips the file syncs: the files are rebuilt from the state,
    durably, when the run ends or resumes (:func:`evalkit.core.fileio.write_bytes_atomic`)."""
    write_files_atomic({run_dir / name: data for name, data in files.items()}, durable=durable, sync_too=sync_too)


def write_candidate_files(run_dir: Path, state: Any, discovered_at: dict[int, int]) -> tuple[int, list[dict[str, Any]]]:
    """The candidate files (:func:`candidate_files`) from the current state, durably; returns the best
    candidate's index and the ``results.jsonl`` rows."""
    best, rows, files = candidate_files(state, discovered_at)
    write_files(run_dir, files)
    return best, rows

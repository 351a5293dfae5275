"""An eval run dir's ``results.jsonl`` and ``metadata.json``: written so that a killed run can be resumed.

Where run dirs are, how they are named and locked: :mod:`evalkit.runs`.

- ``results.jsonl`` is append-only; each finished group is written with a single ``write`` and a
  flush, so ``kill -9`` loses at most the groups in flight. A kill can still cut the last line in
  half; :func:`read_rows` drops such a tail (and truncates it away before appending again) and
  skips duplicate ``(example_id, rollout_idx)`` rows, keeping the first.
- ``metadata.json`` is rewritten atomically (temp file + rename): ``status`` is ``incomplete``
  until the run ends, which is how ``--resume`` finds runs to continue.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from evalkit import runs
from evalkit.runs import METADATA, read_metadata

__all__ = ["METADATA", "RESULTS", "ResultsWriter", "newest_run_dir", "read_metadata", "read_rows"]

RESULTS = "results.jsonl"


def read_rows(run_dir: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """All complete rows, first of each ``(example_id, rollout_idx)``; ``repair`` truncates a cut tail."""
    path = run_dir / RESULTS
    if not path.is_file():
        return []
    data = path.read_bytes()
    good_end = data.rfind(b"\n") + 1  # everything after the last newline is a half-written row
    rows: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    for line in data[:good_end].splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = (int(row["example_id"]), int(row["rollout_idx"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line damaged by a crash mid-write; its rollout will be re-run
        if key in seen:
            continue
        seen.add(key)
        rows.append(row)
    if repair and good_end < len(data):
        with path.open("r+b") as handle:
            handle.truncate(good_end)
    return rows


class ResultsWriter:
    """Appends groups of rows to results.jsonl: one write and one flush per group."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / RESULTS
        self._handle: TextIO = self.path.open("a", encoding="utf-8")

    def write_group(self, rows: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in rows)
        self._handle.write(text)
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def newest_run_dir(output_dir: str | Path | None = None) -> Path | None:
    """The newest eval run dir (by run id, i.e. start time) holding a metadata.json (for `prime eval view`).

    Without ``output_dir``: the newest under every default root (``./outputs`` and each local
    environment's ``environments/<env>/outputs``, see :func:`evalkit.runs.default_output_roots`).
    """
    roots = [Path(output_dir)] if output_dir is not None else runs.default_output_roots()
    candidates = [path for root in roots for path in root.joinpath("evals").glob("*/*")]
    return runs.newest_run(candidates, runs.has_metadata)

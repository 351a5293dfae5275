"""An eval run dir's ``results.jsonl`` and ``metadata.json``: written so that a killed run can be resumed.

Where run dirs are, how they are named and locked: :mod:`evalkit.runs`.

- ``results.jsonl`` is append-only; each finished group is written straight to the file (no
  buffer), so ``kill -9`` loses at most the groups in flight. A kill can still cut the last line in
  half; :func:`read_rows` drops such a tail (and truncates it away before appending again) and
  skips duplicate ``(example_id, rollout_idx)`` rows, keeping the first. A write that fails part-way
  (a full disk) is cut back to where its group began before the error is raised, so the file never
  ends in half a row. Resuming with ``retry_errors`` first rewrites the file (atomically) without the
  rows to run again (:func:`drop_rows`), so every rollout keeps exactly one row.
- ``metadata.json`` is rewritten atomically (temp file + rename): ``status`` is ``incomplete``
  until the run ends, which is how ``--resume`` finds runs to continue.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from evalkit import runs
from evalkit.redact import scrub_secrets
from evalkit.fileio import output_error, write_text_atomic
from evalkit.runs import METADATA, read_metadata

__all__ = ["METADATA", "RESULTS", "ResultsWriter", "drop_rows", "newest_run_dir", "read_metadata", "read_rows"]

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


def drop_rows(run_dir: Path, keys: Collection[tuple[int, int]]) -> None:
    """Rewrite results.jsonl without the rows of ``keys`` (``(example_id, rollout_idx)``), atomically;
    every other line is kept byte for byte. The caller holds the run's lock."""
    path = run_dir / RESULTS
    if not keys or not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            row = json.loads(line)
            key = (int(row["example_id"]), int(row["rollout_idx"]))
        except (ValueError, KeyError, TypeError):
            key = None
        if key not in keys:
            kept.append(line)
    try:
        write_text_atomic(path, "".join(kept))
    except OSError as exc:
        raise output_error(path, exc) from exc


class ResultsWriter:
    """Appends groups of rows to results.jsonl: one unbuffered write per group, whole or not at all.

    A failed write (``ENOSPC``, ``EIO``) truncates the file back to where the group began and
    raises a UserError naming the file; the group's rollouts count as missing for ``--resume``.
    """

    def __init__(self, run_dir: Path):
        self.path = run_dir / RESULTS
        try:
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise output_error(self.path, exc) from exc

    def write_group(self, rows: list[dict[str, Any]]) -> None:
        if self._fd is None:
            raise RuntimeError("ResultsWriter is closed")
        text = "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in rows)
        data = memoryview(scrub_secrets(text).encode("utf-8"))  # a secret a tool or judge echoed never lands here
        start = os.fstat(self._fd).st_size
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            try:
                os.ftruncate(self._fd, start)
            except OSError:
                pass  # nothing more can be done here; read_rows drops a cut tail on the next resume
            raise output_error(self.path, exc) from exc

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def newest_run_dir(output_dir: str | Path | None = None) -> Path | None:
    """The newest eval run dir (by run id, i.e. start time) holding a metadata.json (for `prime eval view`).

    Without ``output_dir``: the newest under every default root (``./outputs`` and each local
    environment's ``environments/<env>/outputs``, see :func:`evalkit.runs.default_output_roots`).
    """
    roots = [Path(output_dir)] if output_dir is not None else runs.default_output_roots()
    candidates = [path for root in roots for path in root.joinpath("evals").glob("*/*")]
    return runs.newest_run(candidates, runs.has_metadata)

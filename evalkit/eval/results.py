"""An eval run dir's ``results.jsonl`` and ``metadata.json``: written so that a killed run can be resumed.

Where run dirs are, how they are named and locked: :mod:`evalkit.core.runs`.

- ``results.jsonl`` is append-only; each finished group is written straight to the file (no
  buffer), so ``kill -9`` loses at most the groups in flight. A kill can still cut the last line in
  half; :func:`read_rows` drops such a tail (and truncates it away before appending again) and
  skips duplicate ``(example_id, rollout_idx)`` rows, keeping the first. A row without ``rollout_idx``
  (``vf-eval`` writes none: an example's rollouts in order) gets its place among its example's rows, so a
  verifiers run dir reads, and pairs with primekit's, example by example. A write that fails part-way
  (a full disk) is cut back to where its group began before the error is raised, so the file never
  ends in half a row. Resuming with ``retry_errors`` first rewrites the file (atomically) without the
  rows to run again (:func:`drop_rows`), so every rollout keeps exactly one row.
- ``metadata.json`` is rewritten atomically (temp file + rename): ``status`` is ``incomplete``
  until the run ends, which is how ``--resume`` finds runs to continue.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from evalkit.core.fileio import output_error, write_bytes_atomic
from evalkit.core.readback import EVAL_ROW, parse_line, read_jsonl
from evalkit.core.runs import RESULTS
from evalkit.core.types import ExampleId
from evalkit.core.untrusted import row_line

__all__ = ["ResultsWriter", "drop_rows", "read_rows"]


def read_rows(run_dir: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """All complete rows, first of each ``(example_id, rollout_idx, agent)`` (``agent``: a multi-seat episode's
    seat, one row each; None otherwise); ``repair`` truncates a cut tail.

    A damaged line (not JSON, not UTF-8, a field of the wrong type) is skipped with one warning
    (:func:`evalkit.core.readback.read_jsonl`): its rollout counts as missing, so ``-R`` runs it again.
    """
    path = run_dir / RESULTS
    rows: list[dict[str, Any]] = []
    seen: set[tuple[ExampleId, int, Any]] = set()
    counts: dict[ExampleId, int] = {}
    for row in read_jsonl(path, EVAL_ROW):
        if "rollout_idx" not in row:
            row["rollout_idx"] = counts.get(row["example_id"], 0)
        counts[row["example_id"]] = max(counts.get(row["example_id"], 0), row["rollout_idx"] + 1)
        key = (row["example_id"], row["rollout_idx"], row.get("agent"))
        if key not in seen:
            seen.add(key)
            rows.append(row)
    if repair and path.is_file():
        size = path.stat().st_size
        with path.open("r+b") as handle:
            handle.seek(max(0, size - 1))
            if size and handle.read(1) != b"\n":
                handle.seek(0)
                handle.truncate(handle.read().rfind(b"\n") + 1)
    return rows


def drop_rows(run_dir: Path, keys: Collection[tuple[ExampleId, int]]) -> None:
    """Rewrite results.jsonl without the rows of ``keys`` (``(example_id, rollout_idx)``), atomically;
    every other line, damaged ones included, is kept byte for byte. The caller holds the run's lock."""
    path = run_dir / RESULTS
    if not keys or not path.is_file():
        return
    kept = []
    for line in path.read_bytes().splitlines(keepends=True):
        row, _ = parse_line(line.rstrip(b"\n"), EVAL_ROW)
        if row is None or (row["example_id"], row.get("rollout_idx")) not in keys:
            kept.append(line)
    try:
        write_bytes_atomic(path, b"".join(kept))
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

    def write_group(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append ``rows``; return them as written (a row with bad text or non-finite numbers comes
        back repaired and marked, see :func:`evalkit.core.untrusted.row_line`)."""
        if self._fd is None:
            raise RuntimeError("ResultsWriter is closed")
        lines, written = zip(*(row_line(row) for row in rows)) if rows else ((), ())
        data = memoryview(b"".join(lines))
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
        return list(written)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


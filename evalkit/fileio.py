"""Atomic file writes, shared by every job's outputs.

A reader (a person, ``--resume``, a killed run's successor) must see either the old or the new
version of a file, never half of one: write a uniquely named temp file in the same folder, fsync it,
then rename it over the target. Append-only JSONL files do not go through here; they are flushed per
group by their writers.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename; the file gets ordinary 0644 permissions."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs are meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Pretty JSON (2-space indent, UTF-8 kept as is, unknown types as strings), written atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")

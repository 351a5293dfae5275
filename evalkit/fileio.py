"""Atomic file writes, shared by every job's outputs.

A reader (a person, ``--resume``, a killed run's successor) must see either the old or the new
version of a file, never half of one: write a uniquely named temp file in the same folder, fsync it,
then rename it over the target. Append-only JSONL files do not go through here; they are flushed per
group by their writers. Registered secret values (API keys read from the environment, the values of
a run's secrets files: :mod:`evalkit.redact`) are replaced before any text reaches a file.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalkit.redact import scrub_secrets
from evalkit.errors import UserError


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename; the file gets ordinary 0644 permissions."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(scrub_secrets(text))
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


def read_user_text(path: str | Path, what: str) -> str:
    """A text file a user named (a system prompt file, ...); anything else is one clear UserError.

    Missing, a folder, unreadable, binary (a NUL byte) or not UTF-8: each says which file and why,
    so ``prime`` prints one ``error:`` line instead of a traceback.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise UserError(f"{what} not found: {path}")
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; pass a text file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise UserError(f"{what} {path} is a binary file, not text; pass a UTF-8 text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_output_dir(path: str | Path, flag: str = "--output-dir") -> None:
    """Refuse, before any work, an output folder that cannot be a folder: a file is in its way."""
    existing = nearest_existing(Path(path))
    if not existing.is_dir():
        raise UserError(f"{flag} {path}: {existing} is a file, not a folder; pass a folder (it is created if missing)")


def output_error(path: str | Path, exc: OSError) -> UserError:
    """A UserError for a failed write under ``path``: what failed, on which file, and what to do."""
    where = exc.filename or path
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = "free some space, then resume the run (for an eval: the same command with -R)"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = "choose a writable --output-dir"
    elif exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        blocker = nearest_existing(Path(where))
        reason = f"{blocker} is a file, not a folder" if not blocker.is_dir() else reason
        hint = "choose another --output-dir"
    else:
        hint = "check the output folder"
    return UserError(f"cannot write {where}: {reason}; {hint}")


@contextmanager
def writing_to(path: str | Path) -> Iterator[None]:
    """Turn a file-system ``OSError`` raised inside into :func:`output_error` (one ``error:`` line)."""
    try:
        yield
    except OSError as exc:
        raise output_error(path, exc) from exc

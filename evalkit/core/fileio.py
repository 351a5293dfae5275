"""Atomic file writes, shared by every job's outputs.

A reader (a person, ``--resume``, a killed run's successor) must see either the old or the new
version of a file, never half of one: write a uniquely named temp file in the same folder, fsync it,
then rename it over the target. Append-only JSONL files do not go through here; they are flushed per
group by their writers. Registered secret values (API keys read from the environment, the values of
a run's secrets files: :mod:`evalkit.core.redact`) are replaced before any text reaches a file.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.untrusted import json_bytes, utf8


def write_text_atomic(path: Path, text: str, *, durable: bool = True) -> None:
    """Replace ``path`` with ``text`` (as UTF-8; bad code points replaced, see :mod:`evalkit.core.untrusted`)
    in one rename; the file gets ordinary 0644 permissions."""
    write_bytes_atomic(path, utf8(text), durable=durable)


def write_bytes_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` in one rename; the file gets ordinary 0644 permissions.

    ``durable=False`` skips the file sync (a few ms on a busy disk): the rename still makes the write
    all-or-nothing for a killed process, but after a power loss the file may be empty or old. Only for
    files rewritten later from durable ones (a GEPA run's candidate files, rebuilt from its state when it
    ends or resumes)."""
    write_files_atomic({path: data}, durable=durable)


def write_files_atomic(files: Mapping[Path, bytes], *, durable: bool = True, sync_too: Sequence[Path] = ()) -> None:
    """Replace each of ``files`` (path -> bytes) as :func:`write_bytes_atomic` does, syncing them together.

    Every temp file is written first and all are synced at once, one thread each: the file system then
    commits them in one journal transaction instead of one each (several times faster on ext4). Only then
    is each renamed into place, in the order given, so each file is old or new, never half, and never new
    before its data is on disk. ``sync_too``: files the caller wrote in place, synced in the same batch."""
    temps: list[tuple[Path, str, Any]] = []
    extra = [os.open(path, os.O_RDWR) for path in sync_too] if durable else []
    try:
        for path, data in files.items():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            handle = os.fdopen(fd, "wb")
            temps.append((path, tmp, handle))
            handle.write(data)
            handle.flush()
        if durable:
            _sync_all([handle.fileno() for _, _, handle in temps] + extra)
        for path, tmp, handle in temps:
            handle.close()
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs are meant to be read by others
            os.replace(tmp, path)
    except BaseException:
        for _, tmp, handle in temps:
            handle.close()
            Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        for fd in extra:
            os.close(fd)


def _sync_all(fds: list[int]) -> None:
    """``os.fsync`` each of ``fds``, all at once when there are several; raises the first failure."""
    if len(fds) == 1:
        os.fsync(fds[0])
        return
    with ThreadPoolExecutor(max_workers=len(fds), thread_name_prefix="fsync") as pool:
        for future in [pool.submit(os.fsync, fd) for fd in fds]:
            future.result()


def keep_lines_atomic(path: Path, keep: Callable[[bytes], bool]) -> None:
    """Replace ``path`` with the lines ``keep`` accepts, byte for byte, in one rename. Streamed: one line in
    memory at a time, however large the file (a JSONL file a killed run left behind)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle, path.open("rb") as source:
            for line in source:
                if keep(line):
                    handle.write(line if line.endswith(b"\n") else line + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Pretty JSON (2-space indent, UTF-8 kept as is, unknown types as strings), written atomically;
    valid UTF-8 and finite numbers whatever ``data`` holds (:func:`evalkit.core.untrusted.json_bytes`)."""
    write_bytes_atomic(path, json_bytes(data, indent=2) + b"\n")


def remove_inside(path: Path, root: Path) -> None:
    """Delete ``path`` (a file or a folder tree), which must lie inside ``root``: the run dir a command
    created or was given. A symlink is removed as a link, never followed; a path that resolves to ``root``
    or outside it is refused with a UserError, so no name, link or ``..`` can make a command delete
    what it does not own."""
    path, root = Path(path), Path(root)
    if path.is_symlink():
        path.unlink()
        return
    if not path.exists():
        return
    real, base = path.resolve(), root.resolve()
    if base not in real.parents:
        raise UserError(f"refusing to delete {path}: it is not inside {root}")
    if real.is_dir():
        shutil.rmtree(real, ignore_errors=True)
    else:
        real.unlink(missing_ok=True)


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

"""Atomic file writes, shared by every job's outputs, and bounded reads of the files users and run dirs hold.

A reader (a person, ``--resume``, a killed run's successor) must see either the old or the new
version of a file, never half of one: write a uniquely named temp file in the same folder, fsync it,
then rename it over the target. Append-only JSONL files do not go through here; they are flushed per
group by their writers.

What is at the path is replaced only when it is a regular file (:func:`writable_target`): a symlink is
followed and the file it names is written (created when missing), a folder, a FIFO, a device or a socket is
refused with one UserError before anything is written, so ``-o /dev/null`` never replaces the system's
device and a FIFO never blocks a writer. A write that fails raises :class:`WriteFailed`, an ``OSError``
that names the path the user gave, never the temp file.

Registered secret values (API keys read from the environment, the values of a run's secrets files:
:mod:`evalkit.core.redact`) are replaced before any text reaches a file.

Reading (:func:`read_regular`): only regular files, at most a bound the caller gives (docs/reliability.md).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.untrusted import json_bytes, utf8


class WriteFailed(OSError):
    """A write to an output path failed (``errno``, ``strerror`` and ``filename``: the path the caller named, not
    the temp file). Still an ``OSError`` for code that handles those; the CLI shows it as one ``error:`` line."""


def file_kind(mode: int) -> str:
    """What a ``stat`` mode is, in words (``a FIFO``, ``a character device``, ...)."""
    for test, words in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a file")):
        if test(mode):
            return words
    return "not a regular file"


def writable_target(path: str | Path) -> Path:
    """The file a write to ``path`` replaces: ``path`` with every symlink followed (a dangling one names the
    file to create). UserError, naming ``path``, when something other than a regular file is there."""
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return target  # missing (created by the write), or a failure the write itself reports
    if stat.S_ISREG(mode):
        return target
    shown = f"{path} (a symlink to {target})" if target != Path(path).absolute() else str(path)
    if stat.S_ISDIR(mode):
        raise UserError(f"cannot write {shown}: it is a folder; name a file (a new one, or a file to replace)")
    raise UserError(f"cannot write {shown}: it is {file_kind(mode)}, not a regular file; primekit writes only "
                    "regular files, so name a file")


def refuse_existing(paths: Sequence[Path], force: bool, flag: str = "-o") -> None:
    """Refuse, unless ``force``, to replace a file (or a symlink) already at any of ``paths``: commands that write
    where the user pointed (``-o``) replace nothing they were not told to."""
    existing = [str(path) for path in paths if path.exists() or path.is_symlink()]
    if existing and not force:
        raise UserError(f"{', '.join(existing)} already exists; pass --force to replace it, or choose another {flag}")


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
    before its data is on disk. ``sync_too``: files the caller wrote in place, synced in the same batch.
    Every path is checked by :func:`writable_target` before the first byte is written."""
    targets = {path: writable_target(path) for path in files}
    temps: list[tuple[Path, str, Any]] = []
    extra = [os.open(path, os.O_RDWR) for path in sync_too] if durable else []
    current = next(iter(files), Path())
    try:
        for path, data in files.items():
            current = path
            target = targets[path]
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            handle = os.fdopen(fd, "wb")
            temps.append((target, tmp, handle))
            handle.write(data)
            handle.flush()
        if durable:
            _sync_all([handle.fileno() for _, _, handle in temps] + extra)
        for (path, (target, tmp, handle)) in zip(files, temps):
            current = path
            handle.close()
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs are meant to be read by others
            os.replace(tmp, target)
    except BaseException as exc:
        for _, tmp, handle in temps:
            handle.close()
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, WriteFailed):
            raise WriteFailed(exc.errno, exc.strerror or str(exc), str(current)) from exc
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
    memory at a time, however large the file (a JSONL file a killed run left behind). Only a regular file
    (a symlink followed) is filtered and replaced (:func:`writable_target`)."""
    target = writable_target(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise WriteFailed(exc.errno, exc.strerror or str(exc), str(path)) from exc
    try:
        with os.fdopen(fd, "wb") as handle, target.open("rb") as source:
            for line in source:
                if keep(line):
                    handle.write(line if line.endswith(b"\n") else line + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise WriteFailed(exc.errno, exc.strerror or str(exc), str(path)) from exc
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


MAX_USER_FILE_BYTES = 16 * 2**20
"""The most primekit reads of a text file a user names (a system prompt, a tools file, a config, an env file)."""
MAX_RUN_OBJECT_BYTES = 64 * 2**20
"""The most primekit reads of a JSON or TOML file of a run dir (``metadata.json``, ``budget.json``, ...)."""


class FileRefused(Exception):
    """A file primekit will not read: not a regular file, or larger than the caller's limit. ``why`` says which,
    as a clause (``it is a FIFO, not a regular file``) the caller puts after the file's name."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def read_regular(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (a symlink followed); :class:`FileRefused` for anything else, or
    for a file larger than ``limit`` bytes; ``OSError`` (``FileNotFoundError``, ...) as ``open`` raises it.

    The path is ``stat``-ed before it is opened, so a FIFO (which would block ``open`` until a writer comes) or a
    device (``/dev/zero`` never ends) is never opened; it is then opened without blocking and checked again on the
    open file (it may have been swapped in between). At most the size the open file reports is read: a file that
    grows meanwhile is not chased."""
    info = os.stat(path)
    _check_regular(info.st_mode, limit, info.st_size)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        _check_regular(info.st_mode, limit, info.st_size)
        chunks, left = [], info.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_regular(mode: int, limit: int | None, size: int) -> None:
    if not stat.S_ISREG(mode):
        raise FileRefused(f"it is {file_kind(mode)}, not a regular file")
    if limit is not None and size > limit:
        raise FileRefused(f"it holds {size:,} bytes, more than the {limit // 2**20} MiB primekit reads from it")


def read_user_bytes(path: str | Path, what: str, limit: int = MAX_USER_FILE_BYTES) -> bytes:
    """A file a user named (``what``: how the user named it, ``--tools-file``), at most ``limit`` bytes: missing,
    a folder, a FIFO or device, too large or unreadable is one UserError naming the file and why."""
    path = Path(path).expanduser()
    try:
        return read_regular(path, limit)
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except FileRefused as exc:
        if path.is_dir():
            raise UserError(f"{what} {path} is a folder; pass a text file") from None
        raise UserError(f"{what} {path}: {exc.why}; pass a text file") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def read_user_text(path: str | Path, what: str) -> str:
    """A text file a user named (a system prompt file, ...); anything else is one clear UserError.

    Missing, a folder, a FIFO or device, larger than :data:`MAX_USER_FILE_BYTES`, unreadable, binary (a NUL byte)
    or not UTF-8: each says which file and why, so ``prime`` prints one ``error:`` line instead of a traceback.
    """
    path = Path(path).expanduser()
    data = read_user_bytes(path, what)
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


def output_error(path: str | Path, exc: OSError, flag: str | None = "--output-dir") -> UserError:
    """A UserError for a failed write under ``path``: what failed, on which file, and what to do. ``flag``: the
    option that chose the path (``None`` when not known: the hint then names no flag)."""
    where = exc.filename or path
    reason = exc.strerror or str(exc)
    other = f"another {flag}" if flag else "another path"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = "free some space, then resume the run (for an eval: the same command with -R)"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = f"choose a writable {flag}" if flag else "choose a path in a writable folder"
    elif exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        blocker = nearest_existing(Path(where))
        reason = f"{blocker} is a file, not a folder" if not blocker.is_dir() else reason
        hint = f"choose {other}"
    elif exc.errno == errno.ENOENT:
        folder = Path(where).parent
        reason = f"{reason} (folder {folder} does not take new files there)" if folder.is_dir() else \
            f"folder {folder} does not exist"
        hint = f"choose {other}"
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

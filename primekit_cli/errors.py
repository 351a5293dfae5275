"""The single place where user errors become ``error: ...`` lines and exit code 2.

Every command is wrapped by :func:`user_errors`:

* :class:`UserError` -> ``error: <message>`` on stderr, exit 2, no traceback.
* A file-system ``OSError`` that escaped the code that should have named it (a full disk, a
  read-only or missing folder, a file where a folder should be), and any failed atomic write
  (:class:`evalkit.core.fileio.WriteFailed`, which names the user's path) -> the same, via
  :func:`evalkit.core.fileio.output_error`. Other exceptions are bugs and keep their traceback.
* Ctrl-C (SIGINT) and SIGTERM both interrupt the command the same way: running work is
  cancelled, files are closed and run metadata says ``incomplete`` (so ``--resume`` continues
  it); the exit code is 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import errno
import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer

from evalkit.core.errors import UserError
from evalkit.core.redact import redact

F = TypeVar("F", bound=Callable[..., Any])

FILE_SYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                                errno.EEXIST, errno.EISDIR, errno.ENAMETOOLONG})
"""``OSError`` numbers that are the user's environment, not a bug (shown as one line)."""


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` to stderr (scrubbed of keys and auth headers) and return the exit to raise (code 2)."""
    first_line = redact(" ".join(str(message).split("\n")).strip())
    print(f"error: {first_line}", file=sys.stderr, flush=True)
    return typer.Exit(code=2)


class _Signals:
    """Which interrupting signal arrived last (for the exit code)."""

    last: int = signal.SIGINT


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM does what Ctrl-C does (see the module docstring).

    The handler calls whatever SIGINT handler is installed at that moment: inside ``asyncio.run``
    that is asyncio's (it cancels the main task, so ``finally`` blocks and metadata writes run),
    elsewhere Python's default (``KeyboardInterrupt``). Only the main thread can install handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        _Signals.last = signal.SIGTERM
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    _Signals.last = signal.SIGINT
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def user_errors(func: F) -> F:
    """Decorate a command so :class:`UserError`, file-system errors and SIGINT/SIGTERM end it cleanly."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with sigterm_as_interrupt():
                return func(*args, **kwargs)
        except UserError as exc:
            raise fail(str(exc)) from None
        except OSError as exc:
            from evalkit.core.fileio import WriteFailed, output_error

            if exc.errno not in FILE_SYSTEM_ERRNOS and not isinstance(exc, WriteFailed):
                raise
            raise fail(str(output_error(exc.filename or "", exc, flag=None))) from None
        except KeyboardInterrupt:
            term = _Signals.last == signal.SIGTERM
            print("terminated" if term else "interrupted", file=sys.stderr)
            raise typer.Exit(code=143 if term else 130) from None

    return wrapper  # type: ignore[return-value]

"""The single place where user errors become ``error: ...`` lines and exit code 2."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from evalkit.clients.redact import redact
from evalkit.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` to stderr (scrubbed of keys and auth headers) and return the exit to raise (code 2)."""
    first_line = redact(" ".join(str(message).split("\n")).strip())
    print(f"error: {first_line}", file=sys.stderr, flush=True)
    return typer.Exit(code=2)


def user_errors(func: F) -> F:
    """Decorate a command so :class:`UserError` (and Ctrl-C) end it cleanly, without a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            raise fail(str(exc)) from None
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            raise typer.Exit(code=130) from None

    return wrapper  # type: ignore[return-value]


def not_available(feature: str) -> typer.Exit:
    """For commands whose implementation has not landed: say so plainly, exit 2."""
    return fail(f"{feature} is not available yet in this version of primekit")

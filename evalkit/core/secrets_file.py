"""``KEY=VALUE`` secrets files for one run: ``env_file = "secrets.env"`` in a config, ``--env-file`` on a command.

Hosted training reads judge and tool keys from such a file; eval, GEPA and RL configs here take the
same key (a path relative to the config, or a list of them) and the commands take ``--env-file``
(relative to the working folder). The file's lines are ``KEY=VALUE`` (``export KEY=VALUE`` too;
blank lines and ``#`` comments skipped; a value may be quoted with ``'`` or ``"``; no ``$VAR``
expansion). Its values are set in this process's environment for the run (over what was there:
the file was named for this run) and registered with :mod:`evalkit.core.redact`, so they are
scrubbed from errors, logs, rows and reports. Only the file's name is ever written (the resolved
config records the path). A file other users may read gets a warning with the ``chmod`` that fixes
it; a missing file or a malformed line is one ``error:`` (naming the line, never its value).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from evalkit.core.redact import register_secret
from evalkit.core.errors import UserError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_env_file(path: Path) -> dict[str, str]:
    """The ``KEY=VALUE`` pairs of ``path``, in order (a later line wins)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"env file {path} does not exist; create it with KEY=VALUE lines or fix the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read env file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    pairs: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.removeprefix("export ").partition("=")
        name = name.strip()
        if not eq or not _NAME.fullmatch(name):
            raise UserError(f"env file {path}, line {number}: expected KEY=VALUE (a KEY of letters, digits and _)")
        pairs[name] = _unquote(value.strip())
    return pairs


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value.split(" #", 1)[0].rstrip()  # an unquoted value ends at a comment


def check_permissions(path: Path) -> str | None:
    """A warning when users other than the owner may read ``path`` (None when only the owner can)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    if mode & 0o077:
        return f"warning: {path} can be read by other users (mode {mode:o}); `chmod 600 {path}` keeps its secrets yours"
    return None


def load_env_files(paths: Iterable[str | Path], *, apply: bool = True, warn: bool = True) -> list[str]:
    """Read every file (each once), register its values as secrets and, with ``apply``, set them in
    ``os.environ``; returns the variable names (for a plan line; never the values).

    ``apply=False`` checks the files (a dry run) without touching the environment.
    """
    names: list[str] = []
    seen: set[Path] = set()
    for item in paths:
        path = Path(item).expanduser()
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        pairs = parse_env_file(path)
        problem = check_permissions(path) if warn else None
        if problem:
            print(problem, file=sys.stderr, flush=True)
        for name, value in pairs.items():
            register_secret(value)
            if apply:
                os.environ[name] = value
            if name not in names:
                names.append(name)
    return names


def resolve_env_files(value: str | list[str] | None, base: Path) -> list[str]:
    """A config's ``env_file`` (one path or a list) as paths resolved against the config's folder ``base``."""
    items = [value] if isinstance(value, str) else list(value or [])
    out = []
    for item in items:
        path = Path(item).expanduser()
        out.append(str(path if path.is_absolute() else base / path))
    return out

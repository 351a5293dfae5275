"""``KEY=VALUE`` secrets files for one run: ``env_file = "secrets.env"`` in a config, ``--env-file`` on a command.

Hosted training reads judge and tool keys from such a file; eval, GEPA and RL configs here take the
same key (a path relative to the config, or a list of them) and the commands take ``--env-file``
(relative to the working folder). The file's lines are ``KEY=VALUE``, read by dotenv's rules:
``export KEY=VALUE`` too (any whitespace after ``export``); blank lines and ``#`` comments skipped; a UTF-8
BOM ignored; a value may be quoted with ``'`` (taken as written) or ``"`` (``\\"``, ``\\\\`` and ``\\n``
escapes), and a ``#`` comment may follow the closing quote; an unquoted value ends at `` #``; no ``$VAR``
expansion. Its values are set in this process's environment for the run (over what was there:
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

from evalkit.core.errors import UserError
from evalkit.core.redact import register_secret

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXPORT = re.compile(r"export\s+")
_AFTER_QUOTE = re.compile(r"\s*(#.*)?")
"""What may follow a quoted value's closing quote: spaces, then a comment."""
_ESCAPES = {"n": "\n", '"': '"', "\\": "\\"}


def parse_env_file(path: Path) -> dict[str, str]:
    """The ``KEY=VALUE`` pairs of ``path``, in order (a later line wins)."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM is not part of the first name
    except FileNotFoundError:
        raise UserError(f"env file {path} does not exist; create it with KEY=VALUE lines or fix the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read env file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    pairs: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exported = _EXPORT.match(line)
        name, eq, value = line[exported.end() if exported else 0:].partition("=")
        name = name.strip()
        if not eq or not _NAME.fullmatch(name):
            raise UserError(f"env file {path}, line {number}: expected KEY=VALUE (a KEY of letters, digits and _)")
        parsed = _value(value.strip())
        if parsed is None:
            raise UserError(f"env file {path}, line {number}: a quoted value must end with its quote "
                            "(then only a # comment may follow)")
        pairs[name] = parsed
    return pairs


def _value(text: str) -> str | None:
    """A line's value by dotenv's rules (see the module docstring); None when its quoting is broken."""
    if not text or text[0] not in "'\"":
        return text.split(" #", 1)[0].rstrip()  # an unquoted value ends at a comment
    quote, out, index = text[0], [], 1
    while index < len(text):
        char = text[index]
        if char == quote:
            return "".join(out) if _AFTER_QUOTE.fullmatch(text, index + 1) else None
        if char == "\\" and quote == '"' and index + 1 < len(text) and text[index + 1] in _ESCAPES:
            char = _ESCAPES[text[index + 1]]
            index += 1
        out.append(char)
        index += 1
    return None


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

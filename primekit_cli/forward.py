"""Living beside the official prime CLI (the ``prime`` distribution, package ``prime_cli``).

Both distributions install a ``prime`` command. When primekit's is the one on PATH, a command primekit does not
have (``prime login``, ``prime env push``, ``prime train``, ``prime eval run --hosted``, ...) is handed to the prime
CLI when it is installed, with the arguments as typed; when it is not installed, the user gets one line saying what
to install. ``primekit ...`` never forwards: it is always primekit.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import metadata, util
from typing import Any

PRIME_CLI_DIST = "prime"
"""The official prime CLI's distribution name on PyPI (its package is ``prime_cli``)."""
PRIME_CLI_COMMANDS = frozenset({
    "login", "logout", "whoami", "switch", "config", "teams", "secret", "upgrade", "update", "feedback", "wallet",
    "train", "volumes", "traces", "factory", "availability", "disks", "pods", "sandbox", "images", "tunnel",
    "inference", "fork",
})
"""Top-level commands of prime 0.18.0 that primekit has no command of its own for (for the install hint)."""
HOSTED_FLAG = "--hosted"


def prime_cli_installed() -> bool:
    """Whether the official prime CLI is importable here (its package, from its own distribution)."""
    try:
        metadata.distribution(PRIME_CLI_DIST)
    except metadata.PackageNotFoundError:
        return False
    return util.find_spec("prime_cli") is not None


def is_ours(group: Any, args: Sequence[str]) -> bool:
    """Whether ``args`` (the command line after the program name) names a primekit command, or is primekit's own
    top-level option or help. A hosted eval (``eval run ... --hosted``) is the prime CLI's. ``group`` is the click
    group typer builds for the app (typer ships its own click, so groups are told apart by their ``commands``)."""
    words = [a for a in args if not a.startswith("-")]
    if not words or args[0].startswith("-"):
        return True
    command = group.commands.get(words[0])
    if command is None:
        return False
    if hasattr(command, "commands"):
        position = args.index(words[0]) + 1
        sub = args[position] if position < len(args) else None
        if sub is None or sub.startswith("-"):
            return True
        if sub not in command.commands:
            return False
        return not (words[0] == "eval" and HOSTED_FLAG in args)
    return True


def forward_if_not_ours(group: Any, args: Sequence[str]) -> None:
    """Hand the command line to the prime CLI when it is not primekit's (returns when it is primekit's, or when
    neither has it, so primekit's own parser says what is wrong)."""
    if is_ours(group, args):
        return
    if prime_cli_installed():
        from prime_cli.main import run  # type: ignore[import-not-found]

        sys.argv = ["prime", *args]
        run()
        raise SystemExit(0)
    words = [a for a in args if not a.startswith("-")]
    if words[0] in PRIME_CLI_COMMANDS or words[0] in group.commands:
        shown = " ".join(words[:2]) + (f" {HOSTED_FLAG}" if HOSTED_FLAG in args else "") if words[0] in group.commands else words[0]
        print(f"error: `prime {shown}` is a command of the prime CLI, which is not installed here; install it beside "
              f"primekit with `pip install {PRIME_CLI_DIST}` (primekit's own commands stay available as `primekit`)",
              file=sys.stderr)
        raise SystemExit(2)

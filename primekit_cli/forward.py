"""Living beside the official prime CLI (the ``prime`` distribution, package ``prime_cli``).

Both distributions install a ``prime`` command. When primekit's is the one on PATH, a command primekit does not
have (``prime login``, ``prime env push``, ``prime train``, ``prime eval run --hosted``, ...) is handed to the prime
CLI when it is installed, with the arguments as typed; when it is not installed, the user gets one line saying what
to install. ``primekit ...`` never forwards: it is always primekit.

Only a command the prime CLI has is handed over: its own command group is asked when it is installed (a tabled
list of prime 0.18.0's names says what to install when it is not), so a typo (``prime eval frob``) gets primekit's
own "No such command". A prime CLI that is installed but fails to import is one ``error:`` line, not its traceback.
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
PRIME_CLI_SUBCOMMANDS = {
    "eval": frozenset({"run", "logs", "stop", "list", "ls", "get", "samples", "push"}),
    "env": frozenset({"list", "ls", "status", "push", "pull", "info", "inspect", "install", "uninstall", "delete",
                      "action", "secret", "var", "version"}),
    "rl": frozenset({"validate", "run", "models", "gpus", "request", "list", "ls", "get", "stop", "pause", "resume",
                     "delete", "restart", "logs", "components", "metrics", "rollouts", "progress", "distributions",
                     "checkpoints", "usage"}),
}
"""Subcommands of prime 0.18.0 in the groups primekit has too (for the install hint: a name in neither is a typo)."""
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
    """Hand the command line to the prime CLI when it is not primekit's and the prime CLI has it (returns when it is
    primekit's, or when neither has it, so primekit's own parser says what is wrong)."""
    if is_ours(group, args):
        return
    words = [a for a in args if not a.startswith("-")]
    tabled = _tabled(group, words, args)
    if prime_cli_installed():
        prime_group, run = _load_prime_cli(tabled)
        if prime_group is None or not _has_command(prime_group, words):
            return
        sys.argv = ["prime", *args]
        run()
        raise SystemExit(0)
    if tabled:
        shown = (
            " ".join(words[:2]) + (f" {HOSTED_FLAG}" if HOSTED_FLAG in args else "")
            if words[0] in group.commands
            else words[0]
        )
        print(f"error: `prime {shown}` is a command of the prime CLI, which is not installed here; install it beside "
              f"primekit with `pip install {PRIME_CLI_DIST}` (primekit's own commands stay available as `primekit`)",
              file=sys.stderr)
        raise SystemExit(2)


def _tabled(group: Any, words: Sequence[str], args: Sequence[str]) -> bool:
    """Whether prime 0.18.0 has the command (:data:`PRIME_CLI_COMMANDS`, :data:`PRIME_CLI_SUBCOMMANDS`; a hosted
    eval)."""
    if words[0] in PRIME_CLI_COMMANDS:
        return True
    sub = PRIME_CLI_SUBCOMMANDS.get(words[0])
    if sub is None or len(words) < 2 or words[1] not in sub:
        return False
    return words[1] not in group.commands[words[0]].commands or HOSTED_FLAG in args


def _load_prime_cli(tabled: bool) -> tuple[Any, Any]:
    """The prime CLI's click group and its entry point, or ``(None, None)`` when it fails to import and prime 0.18.0
    has no such command (``tabled`` false: a typo, for primekit's parser to name). When it has, the failed import
    ends the command with one ``error:`` line (exit 2). A prime CLI whose app typer cannot read is trusted with
    every command line (its group is then ``True``)."""
    try:
        from prime_cli.main import app as prime_app  # type: ignore[import-not-found]
        from prime_cli.main import run  # type: ignore[import-not-found]
    except Exception as exc:  # anything its import raises: its own bug or a broken install, not primekit's
        if not tabled:
            return None, None
        version = _dist_version()
        print(f"error: the prime CLI installed here ({PRIME_CLI_DIST} {version}) fails to start "
              f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); reinstall it with "
              f"`pip install --force-reinstall {PRIME_CLI_DIST}`, or run primekit's commands as `primekit ...`",
              file=sys.stderr)
        raise SystemExit(2) from None
    import typer

    try:
        return typer.main.get_command(prime_app), run
    except Exception:  # not a typer app we can read: let the prime CLI itself judge the command line
        return True, run


def _has_command(prime_group: Any, words: Sequence[str]) -> bool:
    """Whether the prime CLI's click group has ``words[0]`` (and, when that is a group, ``words[1]``) as a command
    of its own, by the names and aliases its groups resolve (a group that runs an unknown word as its default
    command counts only its named commands)."""
    import click

    if prime_group is True:
        return True
    ctx = click.Context(prime_group, info_name="prime")
    command = prime_group.get_command(ctx, words[0])
    if command is None or not hasattr(command, "commands") or len(words) < 2:
        return command is not None
    return command.get_command(click.Context(command, parent=ctx, info_name=words[0]), words[1]) is not None


def _dist_version() -> str:
    try:
        return metadata.version(PRIME_CLI_DIST)
    except metadata.PackageNotFoundError:
        return "unknown version"

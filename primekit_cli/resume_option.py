"""One ``--resume [VALUE]`` option for `prime eval run`, `prime gepa run` and `prime rl run`.

Click options either always or never take a value; ``--resume`` takes one optionally:

* ``prime eval run ENV -R [RUN_DIR]``  (no value: the newest incomplete run with the same settings)
* ``prime gepa run ENV --resume [RUN_DIR]``  (no value: the newest run of this env + model)
* ``prime rl run CONFIG --resume [STEP | RUN_DIR]``  (no value: the newest checkpoint of the config's run)

A command built with :func:`resume_command` rewrites its argument list before click parses it: the
token after the flag is the flag's value when the command's ``accepts(token)`` says so (an existing
folder; for RL also a step number), otherwise the flag gets :data:`LATEST`. The value must be
recognisable because the token after the flag may just as well be the command's positional
argument (``prime eval run -R reverse-text``). ``--resume=VALUE`` always takes the value as given.

The value then goes to :meth:`evalkit.core.runs.ResumeRequest.parse` and :func:`evalkit.core.runs.resolve_run`,
which turn it into the run dir (and, for RL, the step) once per command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import click
from typer.core import TyperCommand

from evalkit.core.runs import LATEST

__all__ = ["LATEST", "is_folder", "is_step_or_folder", "resume_command", "with_default_values"]


def is_folder(token: str) -> bool:
    """A token that names an existing folder (a run dir to resume)."""
    return Path(token).expanduser().is_dir()


def is_step_or_folder(token: str) -> bool:
    """RL: a checkpoint step number or a run dir."""
    return token.isdigit() or is_folder(token)


def with_default_values(args: Sequence[str], flags: Sequence[str], accepts: Callable[[str], bool]) -> list[str]:
    """``args`` with :data:`LATEST` inserted after each of ``flags`` that is not followed by its value."""
    fixed: list[str] = []
    for index, arg in enumerate(args):
        fixed.append(arg)
        if arg in flags:
            following = args[index + 1] if index + 1 < len(args) else None
            if following is None or not (following == LATEST or accepts(following)):
                fixed.append(LATEST)
    return fixed


def resume_command(flags: Sequence[str], accepts: Callable[[str], bool] = is_folder) -> type[TyperCommand]:
    """A typer command class whose ``flags`` (e.g. ``("-R", "--resume")``) take an optional value."""

    class _ResumeCommand(TyperCommand):
        def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
            return super().parse_args(ctx, with_default_values(args, tuple(flags), accepts))

    return _ResumeCommand

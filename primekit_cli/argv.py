"""The one step that rewrites a command line before click parses it, and the rules each command gives it.

Click is strict where the anchors (``vf-eval``, verifiers 0.4's ``vf-eval @ config.toml``, the GEPA script,
the ``prime`` CLI) are loose, so a command's argument list goes through these steps, in this order, each a pure
function of the list:

1. :func:`~primekit_cli.dialect.args.take_dialect_tokens`: verifiers 0.4's ``@ config.toml`` and dotted flags
   (``--sampling.temperature 0.5``) are taken out, so click never sees ``@`` or ``--a.b``; the command reads them
   back with :func:`dialect_args`. A malformed one is raised inside the command, where its ``error:`` is printed.
2. :func:`spread_greedy`: a greedy option takes several space-separated values, as argparse's ``nargs="*"`` does
   (``--state-columns a b c`` becomes one repeated option per value).
3. :func:`drop_anchor_flags`: a flag of the anchors that primekit does not implement is refused (an ``error:``
   line that says what to use instead, exit 2) or dropped with a note (its meaning has no effect here); the
   tables are in :mod:`primekit_cli.compat_flags`.
4. :func:`with_default_values`: a flag whose value is optional (``--resume [RUN_DIR]``) gets :data:`LATEST`
   when the token after it is not a value this command accepts (see below).

Steps 2 and 3 never look past ``--``. Click options either always or never take a value; ``--resume`` takes one
optionally:

* ``prime eval run ENV -R [RUN_DIR]``  (no value: the newest incomplete run with the same settings)
* ``prime gepa run ENV --resume [RUN_DIR]``  (no value: the newest run of this env + model)
* ``prime rl run CONFIG --resume [STEP | RUN_DIR]``  (no value: the newest checkpoint of the config's run)

The token after the flag is its value when the command's ``accepts(token)`` says so (an existing folder; for RL
also a step number), because it may just as well be the command's positional argument
(``prime eval run -R reverse-text``). ``--resume=VALUE`` always takes the value as given. The value then goes to
:meth:`evalkit.core.runs.ResumeRequest.parse` and :func:`evalkit.core.runs.resolve_run`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from typer.core import TyperCommand

from evalkit.core.errors import UserError
from evalkit.core.runs import LATEST
from primekit_cli.compat_flags import EVAL_NOOPS, EVAL_REFUSED, GEPA_GREEDY, GEPA_REFUSED, NoOp, Refused
from primekit_cli.dialect.args import DialectArgs, take_dialect_tokens
from primekit_cli.errors import fail

__all__ = ["LATEST", "ArgvRules", "argv_command", "dialect_args", "is_folder", "is_step_or_folder", "rewrite"]

HTML_FLAG = "--html"
"""``prime eval view --html [FILE.html]``."""
DIALECT_KEY = "primekit_v1_dialect"
"""Where the dialect step leaves its tokens (or its error) in ``ctx.meta``."""


def is_folder(token: str) -> bool:
    """A token that names an existing folder (a run dir to resume)."""
    return Path(token).expanduser().is_dir()


def is_step_or_folder(token: str) -> bool:
    """RL and SFT: a checkpoint step number or a run dir."""
    return token.isdigit() or is_folder(token)


def is_html_file(token: str) -> bool:
    """``prime eval view --html``: the next token is its value only when it names an .html/.htm file."""
    return token.lower().endswith((".html", ".htm"))


@dataclass(frozen=True)
class ArgvRules:
    """What one command's argument list goes through (the steps run in the module docstring's order)."""

    dialect: bool = False
    """Take verifiers 0.4's ``@ file`` and dotted flags out (step 1)."""
    greedy: tuple[str, ...] = ()
    """Options that take several space-separated values (step 2)."""
    refused: tuple[Refused, ...] = ()
    noops: tuple[NoOp, ...] = ()
    """Anchor flags refused or dropped (step 3)."""
    optional_value: tuple[str, ...] = ()
    """Flags whose value is optional (step 4), a value being a token ``accepts`` says yes to."""
    accepts: Callable[[str], bool] = is_folder


EVAL_RUN = ArgvRules(dialect=True, refused=EVAL_REFUSED, noops=EVAL_NOOPS, optional_value=("-R", "--resume"))
GEPA_RUN = ArgvRules(dialect=True, greedy=GEPA_GREEDY, refused=GEPA_REFUSED, optional_value=("--resume",))
RL_RUN = ArgvRules(optional_value=("--resume",), accepts=is_step_or_folder)
SFT_RUN = RL_RUN
EVAL_VIEW = ArgvRules(optional_value=(HTML_FLAG,), accepts=is_html_file)


def _name(token: str) -> str:
    return token.split("=", 1)[0] if token.startswith("--") else token


def spread_greedy(args: Sequence[str], greedy: Sequence[str]) -> list[str]:
    """``--opt a b c`` -> ``--opt a --opt b --opt c`` for each of ``greedy`` (no value: one empty value)."""
    out: list[str] = []
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if token == "--":
            out.extend(args[index - 1:])
            break
        if _name(token) in greedy and "=" not in token:
            values = []
            while index < len(args) and not args[index].startswith("-"):
                values.append(args[index])
                index += 1
            out.extend(part for value in values or [""] for part in (token, value))
            continue
        out.append(token)
    return out


def drop_anchor_flags(args: Sequence[str], refused: Sequence[Refused] = (),
                      noops: Sequence[NoOp] = ()) -> tuple[list[str], list[str]]:
    """``args`` without the no-op flags, and a note for each one dropped; a refused flag raises a UserError."""
    refused_by = {flag: r for r in refused for flag in r.flags}
    noop_by = {flag: n for n in noops for flag in n.flags}
    out: list[str] = []
    notes: list[str] = []
    for index, token in enumerate(args):
        if token == "--":
            out.extend(args[index:])
            break
        name = _name(token)
        if name in refused_by:
            raise UserError(f"{name} is not supported: {refused_by[name].instead}")
        if name in noop_by:
            notes.append(f"note: {name} has no effect here: {noop_by[name].why}")
            continue
        out.append(token)
    return out, notes


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


@dataclass
class Rewritten:
    """A command line after the steps: what click parses, the dialect's tokens (or why they are wrong), notes."""

    args: list[str]
    dialect: DialectArgs | UserError
    notes: list[str]


def rewrite(args: Sequence[str], rules: ArgvRules) -> Rewritten:
    """The four steps of the module docstring, in order; a refused flag raises a UserError."""
    rest, dialect = list(args), DialectArgs()
    if rules.dialect:
        try:
            rest, dialect = take_dialect_tokens(rest)
        except UserError as exc:  # raised again inside the command (dialect_args), where user_errors prints it
            dialect = exc
    rest = spread_greedy(rest, rules.greedy)
    rest, notes = drop_anchor_flags(rest, rules.refused, rules.noops)
    return Rewritten(with_default_values(rest, rules.optional_value, rules.accepts), dialect, notes)


def argv_command(rules: ArgvRules) -> type[TyperCommand]:
    """A typer command class whose arguments go through :func:`rewrite` with ``rules`` before click parses them."""

    class _Command(TyperCommand):
        def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
            try:
                done = rewrite(args, rules)
            except UserError as exc:
                raise fail(str(exc)) from None
            for note in done.notes:
                print(note, file=sys.stderr)
            if rules.dialect:
                ctx.meta[DIALECT_KEY] = done.dialect
            return super().parse_args(ctx, done.args)

    return _Command


def dialect_args(ctx: Any) -> DialectArgs:
    """The dialect tokens the argv step took out of ``ctx``'s command line (empty when there were none)."""
    found = ctx.meta.get(DIALECT_KEY)
    if isinstance(found, UserError):
        raise found
    return found if isinstance(found, DialectArgs) else DialectArgs()

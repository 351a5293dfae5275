"""The ``prime`` typer application: one sub-app per command group, each in its own module.

Command modules import heavy libraries (torch, transformers, datasets) inside the command
functions, so ``prime --help`` stays instant.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from primekit_cli import __version__
from primekit_cli.commands import data_cmd, env_cmd, eval_cmd, gepa_cmd, lab_cmd, rl_cmd, serve_cmd, sft_cmd

app = typer.Typer(
    name="prime",
    help="Evaluate, optimize and train models on LLM environments.\n\n"
    "Start with a baseline: `prime eval run reverse-text` (embedded model, offline).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
)
app.add_typer(eval_cmd.app, name="eval")
app.add_typer(gepa_cmd.app, name="gepa")
app.add_typer(rl_cmd.app, name="rl")
app.add_typer(env_cmd.app, name="env")
app.add_typer(lab_cmd.app, name="lab")
app.add_typer(data_cmd.app, name="data")
app.add_typer(sft_cmd.app, name="sft")
app.command("serve")(serve_cmd.serve)


def _version(value: bool) -> None:
    if value:
        print(f"primekit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Evaluate, optimize and train models on LLM environments."""


def main() -> None:
    """The ``prime`` and ``primekit`` commands; ``prime`` hands what is not primekit's to the prime CLI
    (:mod:`primekit_cli.forward`)."""
    if _invoked_as_prime():
        from primekit_cli.forward import forward_if_not_ours

        forward_if_not_ours(typer.main.get_command(app), sys.argv[1:])
    # `datasets` draws a tqdm bar for every `map` an environment does while it loads (verifiers envs
    # map their rows); beside our own progress bar it is noise. A user's explicit setting wins.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    # text from models and environments may hold lone surrogates (evalkit.core.untrusted); a terminal line
    # shows them as "?" rather than ending the command with a UnicodeEncodeError
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    raise SystemExit(_run_app())


def _run_app() -> int:
    """The app, with click's usage errors (an unknown flag, a missing argument) as one ``error:`` line and exit 2,
    as every other bad input is; help for a bare group, ``--help`` and exit codes as click gives them."""
    errors = _click_errors()
    try:
        code = app(standalone_mode=False)
    except errors.NoArgsIsHelp as exc:  # `prime` or `prime eval` alone: the help, as click shows it
        print(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 2
    except errors.UsageError as exc:
        where = f"; see `{exc.ctx.command_path} --help`" if exc.ctx is not None else ""
        print(f"error: {exc.format_message().rstrip('.')}{where}", file=sys.stderr)
        return 2
    except errors.ClickException as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code
    except errors.Abort:
        print("Aborted!", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else 0


def _click_errors() -> Any:
    """click's exception classes as typer raises them (newer typer ships its own copy of click)."""
    from types import SimpleNamespace

    try:
        from typer._click import exceptions
        from typer.exceptions import Abort
    except ImportError:  # typer before it vendored click
        from click import exceptions
        from click.exceptions import Abort
    no_args = getattr(exceptions, "NoArgsIsHelpError", ())
    return SimpleNamespace(NoArgsIsHelp=no_args, UsageError=exceptions.UsageError,
                           ClickException=exceptions.ClickException, Abort=Abort)


def _invoked_as_prime() -> bool:
    """``primekit ...`` (and ``python -m primekit_cli``) never forward; ``prime ...`` may."""
    return os.path.basename(sys.argv[0]) == "prime"

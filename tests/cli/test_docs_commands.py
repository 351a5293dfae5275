"""Every ``prime ...`` / ``primekit ...`` command shown in a fenced block of README.md and docs/*.md parses against
the real typer app: the subcommand exists and every flag is one it takes. Nothing runs (no model, no job): each
command line goes through click's ``make_context`` on the resolved subcommand, which applies the command classes'
own argument rewrites (the optional ``--resume``, vf-eval's refused flags, verifiers 0.4's ``@`` and dotted tokens).
``prime rl run|export`` pass unknown options on as dotted config overrides; where the config file is in the repo,
they are applied to it with the loader ``prime rl`` uses, so a dotted key the config lacks fails here too.

Doc commands name things outside primekit (remote models, ``<run>``, ``RUN_DIR``, a prime-rl checkout): those are
values, and only their flags are checked.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

try:  # typer 0.2x carries its own click (typer._click); its commands raise that copy's errors
    from typer._click import exceptions as click_errors
except ImportError:  # an older typer on the real click
    from click import exceptions as click_errors

from support import REPO, with_pythonpath

from primekit_cli.app import app

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
PROGRAMS = {"prime", "primekit"}


@dataclass(frozen=True)
class DocCommand:
    """One command line as a doc shows it, and where."""

    source: str
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.source}: {shlex.join(self.argv)}"


def _doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _commands_in(text: str, source: str) -> list[DocCommand]:
    """Shell lines of the fenced blocks that call primekit (``a && b`` is two commands; comments dropped)."""
    found: list[DocCommand] = []
    for fence in FENCE.finditer(text):
        if fence.group(1) not in SHELL_LANGS:
            continue
        for line in re.sub(r"\\\n\s*", " ", fence.group(2)).splitlines():
            tokens = shlex.split(line.strip().removeprefix("$ "), comments=True)
            for part in _split_on(tokens, {"&&", "||", ";", "|"}):
                if part and part[0] in PROGRAMS:
                    found.append(DocCommand(source, tuple(part)))
    return found


def _split_on(tokens: list[str], separators: set[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in separators:
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def doc_commands() -> list[DocCommand]:
    commands: list[DocCommand] = []
    for path in _doc_files():
        commands += _commands_in(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    return commands


def _is_group(command: object) -> bool:
    return hasattr(command, "resolve_command")


def parse(argv: tuple[str, ...]) -> typer.Context:
    """The context click builds for ``argv`` (program name first), down to the leaf command; raises click's
    usage errors for an unknown command or option, a missing argument or a bad value."""
    command = typer.main.get_command(app)
    ctx = command.make_context(argv[0], list(argv[1:]))
    while _is_group(command):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        name, sub, args = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None, f"no command {rest[:1]}"
        command = sub
        ctx = sub.make_context(name, list(args), parent=ctx)
    return ctx


def _rl_overrides_apply(ctx: typer.Context) -> None:
    """``prime rl run|export CONFIG --a.b v``: the pass-through options are dotted overrides of CONFIG."""
    if ctx.command.name not in ("run", "export") or ctx.parent is None or ctx.parent.info_name != "rl":
        return
    from rl_backend.config import load_rl_config

    config = REPO / str(ctx.params["config"])
    if config.is_file():  # a config the user writes (a placeholder) is only parsed
        load_rl_config(config, list(ctx.args))


COMMANDS = doc_commands()


def test_the_docs_show_commands() -> None:
    """The walk finds the commands (a broken extractor would pass every check below by finding none)."""
    sources = {command.source for command in COMMANDS}
    assert len(COMMANDS) >= 35, [str(c) for c in COMMANDS]
    assert {"README.md", "docs/gepa.md", "docs/rl.md", "docs/cluster.md", "docs/verifiers.md"} <= sources


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_doc_command_parses(command: DocCommand) -> None:
    try:
        ctx = parse(command.argv)
    except typer.Exit as exc:  # --help / --version exit 0 after printing
        assert exc.exit_code == 0, str(command)
        return
    except click_errors.UsageError as exc:
        pytest.fail(f"{command}\n  -> {exc.format_message()}")
    assert not _is_group(ctx.command), f"{command}: names a command group, not a command"
    _rl_overrides_apply(ctx)


@pytest.mark.parametrize("argv", [
    ("prime", "eval", "run", "reverse-text", "--num-exampels", "5"),
    ("prime", "eval", "runn", "reverse-text"),
    ("prime", "gepa", "run", "arithmetic", "-B"),
    ("prime", "eval"),
])
def test_a_wrong_command_fails_the_walk(argv: tuple[str, ...]) -> None:
    """The check can fail: a misspelt flag or subcommand, a flag without its value, a bare group."""
    with pytest.raises((click_errors.UsageError, AssertionError, typer.Exit)):
        ctx = parse(argv)
        assert not _is_group(ctx.command)


def test_a_wrong_rl_override_fails_the_walk() -> None:
    from evalkit.core.errors import UserError

    ctx = parse(("prime", "rl", "run", "configs/rl/arithmetic.toml", "--trainer.no_such_key", "1"))
    with pytest.raises(UserError):
        _rl_overrides_apply(ctx)


def _runnable_dry_runs() -> list[DocCommand]:
    """The doc commands that ask for ``--dry-run`` and name only files the repo has (the checks, no job)."""
    def named_files_exist(command: DocCommand) -> bool:
        files = [arg for arg in command.argv if arg.endswith(".toml")]
        return all((REPO / name).is_file() for name in files)

    return [c for c in COMMANDS if "--dry-run" in c.argv and named_files_exist(c)]


@pytest.mark.slow
@pytest.mark.parametrize("command", _runnable_dry_runs(), ids=str)
def test_doc_dry_run_runs(command: DocCommand, tmp_path: Path) -> None:
    """A doc's ``--dry-run`` command exits 0 as written (environment ids and config files resolve); it runs in a
    scratch folder that sees the repo's configs/ and environments/, so nothing lands in the repo."""
    for name in ("configs", "environments"):
        (tmp_path / name).symlink_to(REPO / name)
    env = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "primekit_cli", *command.argv[1:]], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"


def test_the_dry_runs_are_found() -> None:
    assert len(_runnable_dry_runs()) >= 3, [str(c) for c in _runnable_dry_runs()]

"""The defaults `--help` shows are the config fields' own: a field flag's help ends with its field's default, and no
option's help has a default typed into it by hand (issue 42: `-B` said 500 because a help string did)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
import typer
from pydantic import BaseModel, ConfigDict, Field

from primekit_cli import options
from primekit_cli.app import app
from primekit_cli.commands import eval_cmd, gepa_cmd, rl_cmd, sft_cmd

TABLES = {("eval", "run"): eval_cmd.EVAL_FLAGS, ("gepa", "run"): gepa_cmd.GEPA_FLAGS,
          ("sft", "run"): sft_cmd.SFT_FLAGS, ("rl", "run"): rl_cmd.RL_FLAGS}
HAND_WRITTEN_CHECKED = (("eval", "run"), ("gepa", "run"), ("sft", "run"))
"""Commands whose hand-written options must not type a default either (``rl run``'s ``--prime-rl-cmd`` names a
default that is no field: "rl on PATH")."""
DEFAULT = re.compile(r"\[default: ([^\]]*)\]")


class _Budget(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    max_calls: int = Field(123, ge=1)
    """Rollout budget."""


def command(path: tuple[str, str]) -> Any:
    group = typer.main.get_command(app)
    for name in path:
        group = group.commands[name]  # type: ignore[attr-defined]
    return group


def options_by_name(path: tuple[str, str]) -> dict[str, Any]:
    return {param.name: param for param in command(path).params if param.param_type_name == "option"}


@pytest.mark.parametrize("path", list(TABLES), ids=" ".join)
def test_each_field_flag_shows_its_fields_default(path):
    params = options_by_name(path)
    for entry in TABLES[path].flags:
        shown = DEFAULT.findall(params[entry.key].help or "")
        expected = options.shown_default(entry.field)
        assert shown == ([] if expected is None else [expected]), (entry.long, shown, expected)


@pytest.mark.parametrize("path", HAND_WRITTEN_CHECKED, ids=" ".join)
def test_no_option_has_a_default_typed_into_its_help(path):
    fields = {entry.key for entry in TABLES[path].flags}
    for name, param in options_by_name(path).items():
        if name not in fields:
            assert not DEFAULT.search(param.help or ""), f"{param.opts}: a default typed into help: {param.help!r}"


def test_the_defaults_come_from_the_config_classes():
    """The numbers a user reads in `prime gepa run --help` are the job config's: change the field, the help follows."""
    from gepa_cli.config import GepaJobConfig

    budget = next(entry for entry in gepa_cmd.GEPA_FLAGS.flags if entry.key == "max_calls")
    assert options.help_text(budget).endswith(f"[default: {GepaJobConfig.model_fields['max_calls'].default}]")
    assert options.help_text(replace(budget, of=_Budget)).endswith("[default: 123]")


def test_a_hand_typed_default_fails_the_check():
    """The check above is not vacuous: a flag whose extra types a default shows two."""
    entry = options.FlagTable(_Budget, options.flag("max_calls", "-B", extra="[default: 500]")).flags[0]
    assert DEFAULT.findall(options.help_text(entry)) == ["500", "123"]


def test_rendered_help_shows_the_fields_defaults():
    """Through the real entry point: `prime gepa run --help` prints the budget's default and the search knobs'."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-m", "primekit_cli", "gepa", "run", "--help"], capture_output=True,
                         text=True, env=env, timeout=120, check=True).stdout
    flat = " ".join(out.replace("│", " ").split())
    assert "Rollout budget: every task-model rollout counts" in flat
    assert "[default: 500]" in flat and "[default: pareto]" in flat


def test_a_table_refuses_a_flag_for_no_field_and_a_parameter_it_does_not_have():
    """A typo in a table fails when the command module is imported, not when a user passes the flag."""
    with pytest.raises(TypeError, match="no field 'max_cals'"):
        options.FlagTable(_Budget, options.flag("max_cals", "-B"))

    def command(dry_run: bool = False, given: dict | None = None) -> None: ...

    with pytest.raises(TypeError, match=r"\['verbose'\]"):
        options.field_flags(options.FlagTable(_Budget, options.flag("max_calls"), "verbose"))(command)

"""The argv step (primekit_cli/argv.py): each step on its own, their order, and one command class built from rules."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from evalkit.core.errors import UserError
from primekit_cli.argv import (
    EVAL_RUN,
    EVAL_VIEW,
    GEPA_RUN,
    LATEST,
    RL_RUN,
    ArgvRules,
    argv_command,
    dialect_args,
    drop_anchor_flags,
    rewrite,
    spread_greedy,
)
from primekit_cli.compat_flags import NoOp, Refused

REFUSED = (Refused(("--fullscreen", "-f"), "use prime eval tui"),)
NOOPS = (NoOp(("--disable-tui", "-d"), "there is no TUI"),)


def test_greedy_options_take_every_value_up_to_the_next_flag():
    assert spread_greedy(["env", "--cols", "a", "b", "-n", "3"], ["--cols"]) == [
        "env", "--cols", "a", "--cols", "b", "-n", "3"]
    assert spread_greedy(["--cols"], ["--cols"]) == ["--cols", ""]
    assert spread_greedy(["--cols=a", "b"], ["--cols"]) == ["--cols=a", "b"]
    assert spread_greedy(["--", "--cols", "a", "b"], ["--cols"]) == ["--", "--cols", "a", "b"]


def test_anchor_flags_are_refused_with_what_to_do_or_dropped_with_a_note():
    assert drop_anchor_flags(["env", "-d", "--disable-tui", "-n", "2"], REFUSED, NOOPS) == (
        ["env", "-n", "2"], ["note: -d has no effect here: there is no TUI",
                             "note: --disable-tui has no effect here: there is no TUI"])
    with pytest.raises(UserError, match="^--fullscreen is not supported: use prime eval tui$"):
        drop_anchor_flags(["env", "--fullscreen=yes"], REFUSED, NOOPS)
    assert drop_anchor_flags(["env", "--", "-f", "-d"], REFUSED, NOOPS) == (["env", "--", "-f", "-d"], [])


def test_the_steps_run_in_the_order_the_rules_state(tmp_path):
    rules = ArgvRules(dialect=True, greedy=("--cols",), noops=NOOPS, optional_value=("--resume",))
    # the dialect first: `@ c.toml` is not taken as two more greedy values
    done = rewrite(["env", "--cols", "a", "@", "c.toml", "--sampling.temperature", "0.5", "--resume"], rules)
    assert done.args == ["env", "--cols", "a", "--resume", LATEST]
    assert (done.dialect.files, done.dialect.overrides) == (["c.toml"], [("sampling.temperature", "0.5")])
    # greedy before the no-ops: a dropped no-op still ends the greedy values, as a flag does
    assert rewrite(["--cols", "a", "-d", "env"], rules).args == ["--cols", "a", "env"]
    # the optional value last: the folder after a dropped no-op is --resume's value
    assert rewrite(["--resume", "-d", str(tmp_path)], rules).args == ["--resume", str(tmp_path)]


def test_rules_without_the_dialect_leave_its_tokens_to_click(tmp_path):
    assert rewrite(["@", "c.toml", "--resume", "12"], RL_RUN).args == ["@", "c.toml", "--resume", "12"]
    assert rewrite(["--resume", str(tmp_path)], RL_RUN).args == ["--resume", str(tmp_path)]
    assert rewrite(["--html", "out.html", "run"], EVAL_VIEW).args == ["--html", "out.html", "run"]
    assert rewrite(["--html", "run"], EVAL_VIEW).args == ["--html", LATEST, "run"]


def test_a_malformed_dialect_token_waits_for_the_command_to_raise_it():
    done = rewrite(["env", "-R", "@"], EVAL_RUN)
    assert isinstance(done.dialect, UserError) and done.args == ["env", "-R", LATEST, "@"]
    with pytest.raises(UserError, match="'@' must be followed by a config file path"):
        dialect_args(type("Ctx", (), {"meta": {"primekit_v1_dialect": done.dialect}})())


def test_gepa_run_spreads_state_columns_and_refuses_its_dropped_flags():
    assert rewrite(["env", "--state-columns", "a", "b"], GEPA_RUN).args == [
        "env", "--state-columns", "a", "--state-columns", "b"]
    with pytest.raises(UserError, match="--no-save is not supported"):
        rewrite(["env", "--no-save"], GEPA_RUN)


def _app(rules: ArgvRules) -> typer.Typer:
    app = typer.Typer()

    @app.command(cls=argv_command(rules))
    def run(ctx: typer.Context, target: str = typer.Argument(None), resume: str = typer.Option(None, "--resume"),
            cols: list[str] = typer.Option(None, "--cols")) -> None:
        found = dialect_args(ctx)
        print(f"target={target} resume={resume} cols={cols} files={found.files} overrides={found.overrides}")

    @app.command()
    def other() -> None:  # a second command, so `run` is a subcommand as in the app
        pass

    return app


def test_one_command_class_applies_every_step_before_click_parses():
    rules = ArgvRules(dialect=True, greedy=("--cols",), refused=REFUSED, noops=NOOPS, optional_value=("--resume",))
    runner = CliRunner()
    result = runner.invoke(_app(rules), ["run", "--resume", "env", "--cols", "a", "b", "-d", "--x.y=1", "@", "c.toml"])
    assert result.exit_code == 0, result.output
    assert f"target=env resume={LATEST} cols=['a', 'b'] files=['c.toml'] overrides=[('x.y', '1')]" in result.output
    assert "note: -d has no effect here: there is no TUI" in result.output
    result = runner.invoke(_app(rules), ["run", "env", "-f"])
    assert result.exit_code == 2
    assert "error: -f is not supported: use prime eval tui" in result.output

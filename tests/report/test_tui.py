"""`prime eval tui` driven headlessly with Textual's test pilot: runs list -> a run -> a rollout, filters, paging."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from support import report_runs
from typer.testing import CliRunner

from evalkit.report.tui import (
    RolloutScreen,
    RunListScreen,
    RunsBrowser,
    RunScreen,
    parse_reward_filter,
)
from primekit_cli.app import app


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tui") / "outputs"
    report_runs.make_eval_runs(out)
    report_runs.make_gepa_run(out)
    return out


def shown_text(screen: RolloutScreen) -> str:
    """What the rollout screen's body displays, as plain text."""
    console = Console(record=True, width=160)
    console.print(screen.query_one("#rollout-body").content)
    return console.export_text()


def test_reward_filter_expressions():
    rows = [{"reward": r, "error": e} for r, e in ((0.0, None), (0.5, None), (1.0, None), (0.0, "boom"))]

    def keep(text):
        return [i for i, row in enumerate(rows) if parse_reward_filter(text)(row)]

    assert keep("") == [0, 1, 2, 3] and keep(">=0.5") == [1, 2] and keep("<1") == [0, 1, 3]
    assert keep("=0") == [0, 3] and keep("0.2..0.8") == [1] and keep("err") == [3] and keep("> 0") == [1, 2]
    with pytest.raises(ValueError, match="not a reward filter"):
        parse_reward_filter("big")


async def test_list_run_rollout_with_the_pilot(outputs):
    app = RunsBrowser(outputs)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        runs = app.screen
        assert isinstance(runs, RunListScreen) and [r.kind for r in runs.runs].count("eval") == 2
        assert runs.query_one("#runs").row_count == 3
        target = next(i for i, r in enumerate(runs.runs) if r.path.parent.name == "toy-tools--tools")
        for _ in range(target):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        run = app.screen
        assert isinstance(run, RunScreen) and len(run.shown) == 12 and run.sub_title.startswith("12 of 12")

        await pilot.press("f", *"err", "enter")  # filter: the failed rollouts only
        await pilot.pause()
        assert len(run.shown) == 2 and all(row["error"] for row in run.shown)
        await pilot.press("f", *[".", "."], "enter")  # not a filter: an error note, the list stays
        await pilot.pause()
        assert len(run.shown) == 2
        await pilot.press("ctrl+a", "ctrl+k", *">=1", "enter")
        await pilot.pause()
        assert len(run.shown) == 8 and all(row["reward"] == 1.0 for row in run.shown)

        await pilot.press("enter")  # open the first rollout
        await pilot.pause()
        rollout = app.screen
        assert isinstance(rollout, RolloutScreen)
        text = shown_text(rollout)
        assert "example 0 · rollout 0" in text and "reward 1.000" in text
        assert "tool call add" in text and "answer: 3" in text and "q0: what is 1 + 2?" in text
        await pilot.press("n")  # page to the next rollout of the filtered list
        await pilot.pause()
        assert "example 0 · rollout 1" in shown_text(rollout) and rollout.title == "rollout 2 of 8"
        await pilot.press("p", "p")  # the second press has nowhere to go and says so
        await pilot.pause()
        assert "example 0 · rollout 0" in shown_text(rollout)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is run
        await pilot.press("s")  # sort by reward, highest first
        await pilot.pause()
        assert run.sub_title.endswith("sorted by reward ↓")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is runs

        gepa_index = next(i for i, r in enumerate(runs.runs) if r.kind == "gepa")
        runs.query_one("#runs").move_cursor(row=gepa_index)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RunScreen) and len(app.screen.shown) == 2
        await pilot.press("down", "enter")
        await pilot.pause()
        assert "Use KEYWORD." in shown_text(app.screen) and "candidate 1 (best)" in shown_text(app.screen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None)


def test_tui_command_help_and_missing_folder(tmp_path):
    runner = CliRunner()
    helped = runner.invoke(app, ["eval", "tui", "--help"])
    assert helped.exit_code == 0 and "filters by reward" in " ".join(helped.output.split())
    missing = runner.invoke(app, ["eval", "tui", "-o", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "does not exist" in missing.output

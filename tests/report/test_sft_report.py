"""SFT run dirs are reported as SFT (not RL): `prime eval view` text and HTML, and the sweep of their checkpoints.

The run is a real `prime sft run` (in process) of a tiny random-weight model on 8 rows, 2 steps, a weight export at
each.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.tiny_model import write_tiny_model
from typer.testing import CliRunner

from evalkit.core.runs import detect_kind
from evalkit.eval.sweep import plan_sweep, record
from evalkit.report.sweep_data import header as sweep_header
from evalkit.report.sweep_data import load_sweep
from primekit_cli.app import app
from rl_backend.sft import run
from rl_backend.sft_config import load_sft_config

pytestmark = pytest.mark.slow  # a real SFT run (training)


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sft-report")
    model = write_tiny_model(folder / "model")
    rows = [
        {
            "prompt": [{"role": "user", "content": f"{i}+1="}],
            "completion": [{"role": "assistant", "content": str(i + 1)}],
        }
        for i in range(8)
    ]
    (folder / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "sft.toml").write_text(f'model = "{model}"\ndata = "rows.jsonl"\nbatch_size = 4\nrun_name = "r"\n'
                                     '[trainer]\nlr = 1e-3\nlora = false\ndevice = "cpu"\n[ckpt]\ninterval = 1\n')
    return run(load_sft_config(folder / "sft.toml"), output_dir=folder / "out").run_dir


def test_an_sft_run_dir_is_of_kind_sft(sft_run: Path) -> None:
    assert detect_kind(sft_run) == "sft"


def test_eval_view_prints_the_sft_report(sft_run: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "view", str(sft_run)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "SFT · r" in out and "RL ·" not in out and "rows.jsonl" in out and "4 rows per step" in out
    assert "grad norm" in out and "epoch" in out and "reward" not in out
    assert "2 done (epoch 1.00; planned 1.0 epoch(s))" in out


def test_the_html_report_is_an_sft_report(sft_run: Path, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["eval", "view", str(sft_run), "--html", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "<h1>SFT · r</h1>" in html and "Loss (assistant tokens)" in html and 'id="steps-0"' in html
    assert "Baseline checks" not in html and "Rollouts" not in html


def test_the_checkpoint_sweep_of_an_sft_run_names_it(sft_run: Path) -> None:
    sweep = plan_sweep(str(sft_run / "weights"), "all", "arithmetic", None)
    assert sweep.steps == [0, 1, 2] and sweep.folder == sft_run / "sweeps" / "arithmetic"
    record(sweep, SimpleNamespace(env_id="arithmetic", env_args={}, num_examples=1, rollouts_per_example=1))
    assert detect_kind(sweep.folder) == "sweep"
    assert ("SFT run", str(sft_run.resolve())) in sweep_header(load_sweep(sweep.folder))


async def test_the_runs_browser_lists_an_sft_run_and_shows_its_steps(sft_run: Path) -> None:
    from evalkit.report.tui import RunListScreen, RunsBrowser, RunScreen, run_summary

    app = RunsBrowser(sft_run.parent.parent)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        runs = app.screen
        assert isinstance(runs, RunListScreen) and [r.kind for r in runs.runs] == ["sft"]
        what, size, loss, _ = run_summary(runs.runs[0])
        assert what == f"sft: {sft_run.name}" and size == "2 steps" and loss.startswith("loss ")
        await pilot.press("enter")
        await pilot.pause()
        steps = app.screen
        assert isinstance(steps, RunScreen) and [row["step"] for row in steps.shown] == [1, 2]
        table = steps.query_one("#rows")
        assert [str(c.label) for c in table.columns.values()][:3] == ["step", "loss", "grad norm"]
        await pilot.press("enter")  # nothing to open under a step: the screen stays
        await pilot.pause()
        assert app.screen is steps

"""A checkpoint sweep over a short CPU RL run: one eval run dir per step plus the starting model, resumable,
and its report (reward by step with the baseline) rendered in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.chromium import Browser, find_chromium
from support.report_runs import RL_ENV as ENV_CODE  # rewards the digits in a reply: even random weights vary
from support.tiny_model import write_tiny_model
from typer.testing import CliRunner

from primekit_cli.app import app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A 3-step RL run of a tiny random model that exported weights at steps 1, 2 and 3."""
    root = tmp_path_factory.mktemp("sweep")
    model = write_tiny_model(root / "model")
    env_dir = root / "environments" / "digits"
    env_dir.mkdir(parents=True)
    (env_dir / "digits.py").write_text(ENV_CODE)
    (root / "rl.toml").write_text(
        f'model = "{model}"\nrun_name = "r"\nmax_steps = 3\nbatch_size = 4\nrollouts_per_example = 2\n'
        f'[sampling]\nmax_tokens = 6\n[[env]]\nid = "{env_dir}"\n[trainer]\nlr = 5e-3\n'
        '[ckpt]\ninterval = 1\nkeep_last = 5\n[baseline]\nenabled = false\n'
    )
    result = CliRunner().invoke(app, ["rl", "run", str(root / "rl.toml"), "-o", str(root / "out")])
    assert result.exit_code == 0, result.output
    return root


def _sweep(root: Path, *args: str):
    return CliRunner().invoke(app, ["eval", "run", str(root / "environments" / "digits"), "-m",
                                    str(root / "out" / "rl" / "r" / "weights"), "-n", "2", "-r", "2", *args])


def test_sweep_evaluates_each_checkpoint_and_the_start_then_resumes(trained):
    first = _sweep(trained, "--steps", "all")
    assert first.exit_code == 0, first.output
    folder = trained / "out" / "rl" / "r" / "sweeps" / "digits"
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["step_0", "step_1", "step_2", "step_3"]
    info = json.loads((folder / "sweep.json").read_text())
    assert info["steps"] == [0, 1, 2, 3] and info["base_model"] == str(trained / "model")
    for step in (0, 1, 2, 3):  # step 0: the run's own export of the starting weights
        meta = json.loads((folder / f"step_{step}" / "metadata.json").read_text())
        assert meta["status"] in ("complete", "complete_with_errors") and meta["num_rollouts"] == 4
        assert meta["model"].endswith(f"weights/step_{step}")
    assert f"report: prime eval view --html {folder}" in first.output.replace("\n", "")
    again = _sweep(trained, "--steps", "2,3")
    assert again.exit_code == 0 and again.output.count("nothing left to run") == 3  # steps 0, 2, 3 were done
    missing = _sweep(trained, "--steps", "2,7")
    assert missing.exit_code == 2 and "no weight export for step(s) 7; this run kept 0, 1, 2, 3" in missing.output
    view = CliRunner().invoke(app, ["eval", "view", str(folder)])
    assert view.exit_code == 0 and "Reward by step" in view.output and "Δ vs step 0" in view.output


def test_sweep_report_plots_reward_by_step_with_the_baseline_in_chromium(trained, tmp_path):
    from evalkit.report.html import write_report

    folder = trained / "out" / "rl" / "r" / "sweeps" / "digits"
    if not (folder / "sweep.json").is_file():
        assert _sweep(trained, "--steps", "all").exit_code == 0
    if find_chromium() is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)")
    page = write_report([folder])
    assert page == folder / "report.html"
    sort_by_reward = (
        "(() => { const th = Array.from(document.querySelectorAll('#sweep-0 th')).find(h => h.textContent === 'step');"
        " th.click(); th.click(); return document.querySelector('#sweep-0 tbody tr').getAttribute('data-step'); })()"
    )
    with Browser(tmp_path / "chromium") as browser:
        values, problems = browser.visit(page.as_uri(), [
            "document.body.innerText", "document.querySelector('figure.chart svg').textContent",
            "document.querySelectorAll('figure.chart svg path').length", sort_by_reward,
        ], tmp_path / "sweep.png")
    text, svg_text, paths, top = values
    assert problems.all() == [], problems.all()
    assert (tmp_path / "sweep.png").stat().st_size > 10_000
    metas = {step: json.loads((folder / f"step_{step}" / "metadata.json").read_text()) for step in range(4)}
    assert "baseline" in svg_text and f"{metas[0]['avg_reward']:.3f}" in svg_text  # the dashed line's legend value
    for step in (1, 2, 3):
        assert f"{metas[step]['avg_reward']:.4f}" in text
    assert "held-out reward" in svg_text and "step" in svg_text and paths > 5
    assert top == "3"  # sorted by step, descending

"""`prime eval view A B` and its `--html` page show the paired comparison (interval, sign test, flipped
examples) of two eval runs written by the eval runner; unpaired runs are said to be unpaired."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import report_runs
from typer.testing import CliRunner

from primekit_cli.app import app


@pytest.fixture(scope="module")
def evals(tmp_path_factory) -> tuple[Path, Path]:
    return report_runs.make_eval_runs(tmp_path_factory.mktemp("evals") / "outputs")


def view(*args: str):
    return CliRunner().invoke(app, ["eval", "view", *args], terminal_width=200)


def test_terminal_shows_interval_sign_test_and_flips(evals):
    tools, even = evals
    result = view(str(tools), str(even))
    assert result.exit_code == 0, result.output
    assert "Paired:" in result.output and "mean difference" in result.output and "sign test p" in result.output
    assert "Flipped examples" in result.output and "95% CI" in result.output


def test_html_compare_page_has_the_paired_section(evals, tmp_path):
    tools, even = evals
    target = tmp_path / "compare.html"
    result = view(str(tools), str(even), "--html", str(target))
    assert result.exit_code == 0, result.output
    page = target.read_text()
    assert 'id="paired"' in page and "mean reward difference" in page and 'id="flip-table-1"' in page


def test_runs_on_different_examples_are_said_to_be_unpaired(evals, tmp_path):
    tools, even = evals
    other = tmp_path / "other"
    shutil.copytree(even, other)
    lines = (other / "results.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    for row in rows:
        row["prompt"] = [
            {**m, "content": "a different question"} if m.get("role") == "user" else m for m in row["prompt"]
        ]
    (other / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = view(str(tools), str(other))
    assert result.exit_code == 0, result.output
    assert "unpaired" in result.output and "mean difference" not in result.output
    page_path = tmp_path / "unpaired.html"
    assert view(str(tools), str(other), "--html", str(page_path)).exit_code == 0
    assert "unpaired" in page_path.read_text()


def test_checkpoint_sweep_compares_each_step_with_step_0(evals, tmp_path):
    """A sweep folder as `prime eval run --steps` writes it (sweep.json, step_N/ eval run dirs), made of the two
    eval runs: step 0 the first, step 2 the second."""
    tools, even = evals
    sweep = tmp_path / "sweeps" / "tools"
    sweep.mkdir(parents=True)
    shutil.copytree(tools, sweep / "step_0")
    shutil.copytree(even, sweep / "step_2")
    (sweep / "sweep.json").write_text(json.dumps({"env_id": "tools", "rl_run": "r", "steps": [0, 2]}))
    result = view(str(sweep))
    assert result.exit_code == 0, result.output
    assert "Paired: B step 2 − A step 0" in result.output and "Flipped examples" in result.output
    page = tmp_path / "sweep.html"
    assert view(str(sweep), "--html", str(page)).exit_code == 0
    assert 'id="paired"' in page.read_text() and "step 2 − step 0" in page.read_text()


def test_gepa_best_candidate_is_paired_with_the_seed_on_the_validation_set(tmp_path_factory, tmp_path):
    run = report_runs.make_gepa_run(tmp_path_factory.mktemp("gepa") / "outputs")
    result = view(str(run))
    assert result.exit_code == 0, result.output
    assert "Paired: B best (candidate" in result.output and "− A seed" in result.output
    assert "mean difference" in result.output
    page = tmp_path / "gepa.html"
    assert view(str(run), "--html", str(page)).exit_code == 0
    assert 'id="paired"' in page.read_text()


def test_rl_run_pairs_its_last_eval_with_step_0(evals, tmp_path):
    """An RL run dir's held-out evals (``evals/step_N/``, full eval run dirs), made of the two eval runs."""
    tools, even = evals
    run = tmp_path / "rl" / "r"
    (run / "evals").mkdir(parents=True)
    shutil.copytree(tools, run / "evals" / "step_0")
    shutil.copytree(even, run / "evals" / "step_2")
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in (
        {"step": 1, "loss": 0.1, "reward_mean": 0.2}, {"step": 2, "loss": 0.1, "reward_mean": 0.3})))
    result = view(str(run))
    assert result.exit_code == 0, result.output
    assert "Paired: B eval step 2 − A eval step 0" in result.output and "Flipped examples" in result.output
    page = tmp_path / "rl.html"
    assert view(str(run), "--html", str(page)).exit_code == 0, result.output
    assert 'id="paired"' in page.read_text()

"""`prime data from-eval` refuses what would lose data or duplicate it (issue 45, items 2 and 9), before it
reads a run: an output inside a run dir it reads, an existing output without --force, a --min-reward that is
not a number, a run dir given twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.report_runs import make_eval_runs
from typer.testing import CliRunner

from primekit_cli.app import app


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_eval_runs(tmp_path / "runs")[0]


def from_eval(*args: str):
    return CliRunner().invoke(app, ["data", "from-eval", *args])


def error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("error: ")]
    return line


def test_an_output_inside_the_run_it_reads_is_refused_and_the_run_kept(run_dir: Path):
    results = run_dir / "results.jsonl"
    before = results.read_bytes()
    for output in (results, run_dir / "sub" / "sft.jsonl"):
        line = error_line(from_eval(str(run_dir), "-o", str(output), "--force"))
        assert line == f"error: -o {output} is inside the run dir {run_dir} that it reads; write the dataset " \
                       "outside the runs"
    assert results.read_bytes() == before and not (run_dir / "sub").exists()


def test_an_existing_output_is_replaced_only_with_force(run_dir: Path, tmp_path: Path):
    out = tmp_path / "sft.jsonl"
    out.write_text("mine\n")
    line = error_line(from_eval(str(run_dir), "-o", str(out)))
    assert line == f"error: {out} already exists; pass --force to replace it, or choose another -o"
    assert out.read_text() == "mine\n"
    forced = from_eval(str(run_dir), "-o", str(out), "--force")
    assert forced.exit_code == 0 and len(out.read_text().splitlines()) == 8, forced.output


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_min_reward_that_is_not_a_finite_number_is_refused(run_dir: Path, tmp_path: Path, value: str):
    out = tmp_path / "sft.jsonl"
    line = error_line(from_eval(str(run_dir), "-o", str(out), "--min-reward", value))
    assert "is not a finite number; pass a reward such as 1 or 0.5" in line
    assert not out.exists()


def test_a_run_dir_given_twice_is_refused(run_dir: Path, tmp_path: Path):
    out = tmp_path / "sft.jsonl"
    line = error_line(from_eval(str(run_dir), str(run_dir.parent / ".." / run_dir.parent.name / run_dir.name),
                                "-o", str(out)))
    assert line.startswith(f"error: run dir {run_dir.parent / '..'}") and "is given twice" in line
    assert f"(as {run_dir} and " in line and not out.exists()

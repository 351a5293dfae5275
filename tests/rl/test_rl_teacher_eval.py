"""A distillation run with a held-out eval also evaluates its teacher once, before step 1, on the same eval."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.distill_models import digits_env, distill_config, rl_run
from support.tiny_model import write_tiny_model


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The student, a copy of it as an ``sft`` teacher (same weights: the same eval must score it the same), and
    another random model of the same tokenizer as an ``opd`` teacher."""
    root = tmp_path_factory.mktemp("teacher_eval")
    student = write_tiny_model(root / "student")
    twin = Path(shutil.copytree(student, root / "twin"))
    teacher = write_tiny_model(root / "teacher", seed=1)
    return {"student": student, "twin": twin, "teacher": teacher, "env": digits_env(root)}


def _run(tmp_path: Path, models: dict[str, Path], algo: str, evals: str) -> tuple[str, list[dict]]:
    config = distill_config(tmp_path, models["student"], models["env"], algo, run_name="t", steps=2, batch_size=8,
                            max_tokens=4, evals=f"num_examples = 6\nrollouts_per_example = 2\n{evals}")
    result = rl_run(config, tmp_path)
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "o" / "rl" / "t" / "metrics.jsonl").read_text().splitlines()
    return result.output, [json.loads(line) for line in lines]


def _teacher_lines(rows: list[dict]) -> list[dict]:
    return [row for row in rows if any(key.startswith("teacher/") for key in row)]


def test_the_teacher_scores_what_the_same_eval_of_its_weights_scores(models, tmp_path):
    """An sft teacher with the student's own weights: its held-out reward is the student's at step 0, to the digit
    (same examples, same sampling, same seed), recorded once at step 0 and printed."""
    sft = f'[algo]\ntype = "sft"\n[algo.sampling.source]\nname = "{models["twin"]}"'
    output, rows = _run(tmp_path, models, sft, "interval = 2\nat_start = true")
    teacher = _teacher_lines(rows)
    assert len(teacher) == 1 and teacher[0]["step"] == 0, rows
    start = next(row for row in rows if row["step"] == 0 and "eval_reward" in row)
    assert teacher[0]["teacher/eval_reward"] == start["eval_reward"]
    assert 0.0 < start["eval_reward"] <= 1.0  # a tiny random model writes some digits: the equality is not 0 == 0
    assert f"teacher held-out reward on digits: {start['eval_reward']:.3f} (4 examples" in output, output
    assert (tmp_path / "o" / "rl" / "t" / "evals" / "teacher" / "results.jsonl").is_file()

    from evalkit.report.rl_data import load_rl_run

    run = load_rl_run(tmp_path / "o" / "rl" / "t")
    assert run.teacher_reward == start["eval_reward"] and [p.step for p in run.evals] == [0, 2]
    assert [s["step"] for s in run.steps] == [1, 2]  # the teacher's line is no training step
    from evalkit.report.html_rl import _reward_plot

    assert f"t teacher {run.teacher_reward:.3f}" in _reward_plot([run])  # the flat line's legend


def test_an_opd_teacher_folder_is_evaluated_in_process(models, tmp_path):
    opd = f'[algo]\ntype = "opd"\n[algo.teacher]\nname = "{models["teacher"]}"'
    output, rows = _run(tmp_path, models, opd, "interval = 2")
    teacher = _teacher_lines(rows)
    assert len(teacher) == 1 and teacher[0]["step"] == 0
    reward = teacher[0]["teacher/eval_reward"]
    assert 0.0 <= reward <= 1.0 and teacher[0]["teacher/eval/digits/all/agent/avg@2"] == reward
    assert f"teacher held-out reward on digits: {reward:.3f} (4 examples" in output


def test_no_held_out_eval_no_teacher_eval(models, tmp_path):
    opd = f'[algo]\ntype = "opd"\n[algo.teacher]\nname = "{models["teacher"]}"'
    output, rows = _run(tmp_path, models, opd, "interval = 0")
    assert _teacher_lines(rows) == [] and "teacher held-out" not in output
    assert not (tmp_path / "o" / "rl" / "t" / "evals").exists()

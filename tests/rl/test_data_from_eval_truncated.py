"""`prime data from-eval` leaves out rollouts cut off at the token limit unless --keep-truncated.

A real eval run of a scripted model whose replies on odd examples end with ``finish_reason = "length"`` (the
runner marks those rows ``is_truncated``); every reply is the right answer, so reward alone would keep them all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.scripted_client import ScriptedClient
from typer.testing import CliRunner

from evalkit.core.types import Completion
from evalkit.envs import Rubric, SingleTurnEnv
from evalkit.eval.config import EvalConfig
from evalkit.eval.runner import run_eval
from primekit_cli.app import app


def _exact(completion, answer) -> float:
    return float(str(completion[-1].get("content") or "").strip() == answer)


def _model(messages, sampling, tools):
    number = int(messages[-1]["content"].removeprefix("q"))
    return Completion(text=f"a{number}", finish_reason="length" if number % 2 else "stop")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = SingleTurnEnv(
        eval_dataset=[{"question": f"q{i}", "answer": f"a{i}"} for i in range(6)], rubric=Rubric([_exact])
    )
    config = EvalConfig(env_id="cut", model="cutter", output_dir=str(tmp_path_factory.mktemp("evals")), num_examples=6,
                        rollouts_per_example=1)
    return run_eval(config, client=ScriptedClient(_model, model="cutter"), env=env).run_dir


def _examples(path: Path) -> list[int]:
    return [json.loads(line)["provenance"]["example_id"] for line in path.read_text().splitlines()]


def test_truncated_rollouts_are_left_out_by_default_and_counted(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "sft.jsonl"
    result = CliRunner().invoke(app, ["data", "from-eval", str(run_dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 3 of 6 rollouts" in result.output and "0 errored, 3 truncated, 0 below 1" in result.output
    assert _examples(out) == [0, 2, 4]


def test_keep_truncated_keeps_them(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    result = CliRunner().invoke(app, ["data", "from-eval", str(run_dir), "-o", str(out), "--keep-truncated"])
    assert result.exit_code == 0, result.output
    assert "wrote 6 of 6 rollouts" in result.output and "(0 errored, 0 below 1)" in result.output
    assert _examples(out) == [0, 1, 2, 3, 4, 5]

"""`-m mock/...`: a scripted model by name, so a command runs in process end to end with no server and no weights."""

from __future__ import annotations

import json

from support.cli import prime


def test_mock_reverse_solves_reverse_text_and_the_run_is_ordinary(tmp_path):
    result = prime("eval", "run", "reverse-text", "-m", "mock/reverse", "-n", "3", "-r", "2", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    (run,) = (tmp_path / "evals" / "reverse-text--mock--reverse").iterdir()
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["avg_reward"] == 1.0 and meta["model"] == "mock/reverse" and meta["num_rollouts"] == 6


def test_mock_text_and_echo_reply_as_scripted(tmp_path):
    for model, expected in (("mock/text:42", "42"), ("mock/echo", None)):
        result = prime("eval", "run", "arithmetic", "-m", model, "-n", "2", "-r", "1", "-o", str(tmp_path / model[5:9]))
        assert result.exit_code == 0, result.output
        run = next((tmp_path / model[5:9] / "evals").glob("*/*"))
        rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
        replies = [row["completion"][-1]["content"] for row in rows]
        prompts = [row["prompt"][-1]["content"] for row in rows]
        assert replies == ([expected] * 2 if expected else prompts)


def test_mock_error_fails_every_rollout_and_exits_1(tmp_path):
    result = prime("eval", "run", "reverse-text", "-m", "mock/error", "-n", "2", "-r", "1", "-o", str(tmp_path))
    assert result.exit_code == 1
    assert (
        "every rollout of reverse-text errored (2/2)" in result.output
        and "mock/error fails every request" in result.output
    )


def test_an_unknown_mock_model_is_one_error_line(tmp_path):
    result = prime("eval", "run", "reverse-text", "-m", "mock/nope", "-o", str(tmp_path))
    assert result.exit_code == 2
    assert (
        "error: unknown mock model 'mock/nope'; use one of mock/echo, mock/reverse, mock/text:WORDS, mock/error"
        in result.output
    )

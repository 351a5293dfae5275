"""`prime eval view A B`: the paired verdict is one the numbers beside it support.

Real runs: an environment whose answer is the question reversed, run with ``mock/echo`` (A: wrong) and
``mock/reverse`` (B: right), and once against tests/support/fault_server.py, which fails every request for a
question holding ``ALWAYS_FAIL`` (that example's rollouts all error in that run). Before: two paired examples
were "a real difference" (a zero-width interval) beside "sign test p = 0.5"; five better and three the same were
"a real difference" beside p = 0.0625; an example errored everywhere in one run vanished without a word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import prime
from support.fault_server import FaultServer

from evalkit.report.paired import MIN_PAIRED_EXAMPLES, compare, summary_line

ENV = '''
from evalkit.envs import Rubric, SingleTurnEnv


def load_environment(fail: int = -1, **kwargs):
    words = ["alpha", "bravo", "charlie", "delta", "echoes", "foxtrot", "golfer", "hotel"]
    rows = [{"question": ("ALWAYS_FAIL " if i == fail else "") + word, "answer": word[::-1], "info": {"i": i}}
            for i, word in enumerate(words)]

    def reversed_right(completion, answer, info) -> float:
        if info["i"] >= 5:
            return 0.5  # the same in every run
        return float(answer in str(completion[-1]["content"]))

    return SingleTurnEnv(dataset=rows, eval_dataset=rows, rubric=Rubric([reversed_right]))
'''


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    (tmp_path / "environments" / "backwards").mkdir(parents=True)
    (tmp_path / "environments" / "backwards" / "backwards.py").write_text(ENV)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(out: str, *args: str) -> Path:
    result = prime("eval", "run", "backwards", "-r", "1", "-o", out, *args)
    assert result.exit_code == 0, result.output
    [run_dir] = list(Path(out).glob("evals/*/*"))
    return run_dir


def _view(a: Path, b: Path) -> str:
    result = prime("eval", "view", str(a), str(b))
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_two_paired_examples_get_no_verdict(project):
    a, b = _run("a", "-m", "mock/echo", "-n", "2"), _run("b", "-m", "mock/reverse", "-n", "2")
    shown = _view(a, b)
    assert "on 2 paired examples" in shown and "sign test p = 0.5" in shown
    assert f"too few paired examples for a verdict (at least {MIN_PAIRED_EXAMPLES} needed)" in shown
    assert "a real difference" not in shown


def test_the_verdict_never_contradicts_the_sign_test(project):
    a, b = _run("a", "-m", "mock/echo", "-n", "8"), _run("b", "-m", "mock/reverse", "-n", "8")
    shown = _view(a, b)
    assert "better on 5, worse on 0, same on 3 (sign test p = 0.0625)" in shown
    assert "inconclusive: the interval excludes 0 but the sign test does not reject at p < 0.05" in shown
    assert "a real difference" not in shown


def test_an_example_errored_everywhere_in_one_run_is_counted(project):
    server = FaultServer("--reply", "reverse")
    try:
        a = _run("a", "-m", "stub", "-b", server.base_url, "-n", "8", "--max-retries", "0", "-a",
                 json.dumps({"fail": 2}))
    finally:
        server.stop()
    b = _run("b", "-m", "mock/echo", "-n", "8", "-a", json.dumps({"fail": 2}))
    rows_a = [json.loads(line) for line in (a / "results.jsonl").read_text().splitlines()]
    assert [r["example_id"] for r in rows_a if r["error"]] == [2]
    shown = _view(a, b)
    assert "on 7 paired examples (1 with every rollout errored in A, left out)" in shown


def _rows(rewards: list[float]) -> list[dict]:
    return [{"example_id": i, "rollout_idx": 0, "prompt": f"q{i}", "reward": r, "error": None}
            for i, r in enumerate(rewards)]


def test_a_verdict_needs_both_the_interval_and_the_sign_test():
    rows = _rows
    strong = compare(rows([0.0] * 10), rows([1.0] * 10))
    assert strong.verdict == "a real difference" and "a real difference" in summary_line(strong)
    assert compare(rows([0.0] * 10), rows([0.0] * 10)).verdict == "no clear difference"

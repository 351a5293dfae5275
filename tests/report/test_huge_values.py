"""A reward function may return any finite float: 1e200 (or +-1e308) on some rollouts ends nothing.

Before, the summary's standard deviation squared 1e200 (``OverflowError``), so `prime eval run`, each `-R` and
every `prime eval view` of the run failed; an RL run's ``metrics.jsonl`` holding +-1e308 made matplotlib's tick
computation fail and with it the whole HTML page.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from support.cli import prime

from evalkit.core.stats import mean, pstdev
from rl_backend.advantages import GroupRelative, LeaveOneOut

ENV = '''
from evalkit.envs import Rubric, SingleTurnEnv


def load_environment(big: float = 1e200, **kwargs):
    def huge(completion, info) -> float:
        return big if info["i"] % 4 == 1 else -big if info["i"] % 4 == 3 else 0.5

    rows = [{"question": f"q{i}", "answer": "a", "info": {"i": i}} for i in range(6)]
    return SingleTurnEnv(dataset=rows, eval_dataset=rows, rubric=Rubric([huge]))
'''


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    (tmp_path / "environments" / "bigreward").mkdir(parents=True)
    (tmp_path / "environments" / "bigreward" / "bigreward.py").write_text(ENV)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("big", ["1e200", "1e308"])
def test_an_eval_of_huge_rewards_runs_resumes_and_is_viewed(project, big):
    run = ["eval", "run", "bigreward", "-a", json.dumps({"big": float(big)}), "-m", "mock/echo", "-n", "6", "-r", "2"]
    first = prime(*run, "-o", "a")
    assert first.exit_code == 0, first.output
    assert "OverflowError" not in first.output
    [run_a] = list((project / "a" / "evals").glob("*/*"))
    summary = json.loads((run_a / "metadata.json").read_text())
    assert summary["avg_reward"] == pytest.approx(mean([0.5, float(big), 0.5, -float(big), 0.5, float(big)]))
    assert summary["std_reward"] > 0
    assert "± " in first.output and "e+" in first.output  # 5e+199 ± ..., not a 200-digit number
    resumed = prime(*run, "-o", "a", "-R")
    assert resumed.exit_code == 0, resumed.output
    assert "12 rollouts were already done" in resumed.output
    assert prime(*run, "-o", "b").exit_code == 0
    [run_b] = list((project / "b" / "evals").glob("*/*"))
    for args in ([str(run_a)], [str(run_a), str(run_b)], [str(run_a), "--html", str(project / "one.html")],
                 [str(run_a), str(run_b), "--html", str(project / "two.html")]):
        viewed = prime("eval", "view", *args)
        assert viewed.exit_code == 0, (args, viewed.output)
    assert "<svg" in (project / "two.html").read_text()


def test_an_rl_run_with_metrics_of_1e308_gets_its_report(tmp_path):
    run_dir = tmp_path / "rl"
    run_dir.mkdir()
    rows = [{"step": s, "reward_mean": 1e308 if s % 2 else -1e308, "reward_std": 1e308,
             "loss": -1e308 if s % 2 else 1e308, "entropy": 1e308, **({"eval_reward": 1e308} if s == 2 else {})}
            for s in (1, 2, 3)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    page = tmp_path / "rl.html"
    viewed = prime("eval", "view", str(run_dir), "--html", str(page))
    assert viewed.exit_code == 0, viewed.output
    text = page.read_text()
    assert "chart not drawn: its values are too large to plot" in text and "<svg" in text
    assert prime("eval", "view", str(run_dir)).exit_code == 0


def test_statistics_and_advantages_of_huge_rewards_are_numbers():
    rewards = [1e200, 0.5, -1e200, 0.5]
    assert mean(rewards) == pytest.approx(0.5, abs=1e184) and pstdev(rewards) == pytest.approx(1e200 / 2 ** 0.5)
    assert pstdev([1e308, -1e308]) == pytest.approx(1e308) and mean([1e308, 1e308]) == 1e308
    assert mean([0.1, 0.2, 0.3]) == math.fsum([0.1, 0.2, 0.3]) / 3  # ordinary values: the digits they always had
    for rule in (GroupRelative(std_normalize=True), LeaveOneOut(std_normalize=True)):
        advantages = rule(rewards)
        assert advantages[0] > 0 > advantages[2] and all(abs(a) < 10 for a in advantages)

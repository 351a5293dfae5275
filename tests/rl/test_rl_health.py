"""Run health: each check on planted metrics, each alarm once; a planted collapse (reward spread 0) in a real
run raises the alarm, `--halt-on` stops that run with its checkpoint and metrics saved, and `prime eval view`
reads the alarm back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.report_runs import QUICK_RL, write_rl_project
from typer.testing import CliRunner

from evalkit.report.rl_health import CHECKS, Monitor, diagnose


def _rows(**series: list[float]) -> list[dict]:
    steps = len(next(iter(series.values())))
    return [{"step": i + 1, "loss": 0.0, **{k: v[i] for k, v in series.items()}} for i in range(steps)]


def _names(rows: list[dict]) -> list[str]:
    return [alarm.name for alarm in diagnose(rows)]


def test_a_healthy_run_raises_nothing():
    rows = _rows(reward_mean=[0.2, 0.3, 0.4, 0.5, 0.6], reward_std=[0.4] * 5, entropy=[2.0, 1.9, 1.8, 1.7, 1.6],
                 mismatch_kl=[1e-3, 1.2e-3, 9e-4, 1e-3, 1.1e-3])
    assert diagnose(rows) == []


def test_reward_spread_zero_for_three_steps_alarms_once_with_the_fix():
    monitor = Monitor()
    alarms = [monitor.step(row) for row in _rows(reward_mean=[0.5] * 5, reward_std=[0.3, 0.0, 0.0, 0.0, 0.0])]
    assert [len(a) for a in alarms] == [0, 0, 0, 1, 0]  # at step 4, and only once
    alarm = alarms[3][0]
    assert alarm.name == "reward_spread" and alarm.step == 4 and "rollouts_per_example" in alarm.line()


def test_each_check_alarms_on_its_planted_trend():
    assert _names(_rows(entropy=[2.0, 1.5, 0.1, 0.05, 0.04])) == ["entropy_collapse"]
    assert _names(_rows(mismatch_kl=[1e-3, 1e-3, 1e-3, 5e-3, 2e-2, 5e-2])) == ["kl_growth"]
    assert _names(_rows(**{"train/agg/all/agent/is_truncated/mean": [0.1, 0.6, 0.7, 0.9]})) == ["truncation_rising"]
    assert _names(_rows(**{"train/agg/all/has_error/mean": [0.0, 0.2, 0.3, 0.3]})) == ["errors_rising"]
    assert _names(_rows(reward_mean=[0.3, 0.8, 0.5, 0.4, 0.3])) == ["reward_drop"]
    assert _names(_rows(reward_mean=[0.3, 0.8, 0.7, 0.75, 0.7])) == []  # within 0.2 of its best
    assert _names(_rows(ref_kl=[-0.3, -0.3, -0.3, -0.4, -0.5, -0.6])) == ["ref_kl_rising"]
    assert set(CHECKS) == {"reward_spread", "entropy_collapse", "kl_growth", "ref_kl_rising", "truncation_rising",
                           "errors_rising", "reward_drop"}


@pytest.mark.parametrize("values, alarmed", [
    ([-0.5, -0.45, -0.4, -0.35, -0.3, -0.25], False),  # distillation working: the KL to the reference falls
    ([-0.3, -0.32, -0.29, -0.31, -0.3, -0.31], False),  # flat, wobbling
    ([-0.01, -0.01, -0.01, -0.015, -0.02, -0.025], False),  # rising, but by less than 0.02 nats over its start
    ([-0.3, -0.3, -0.3, -0.35, -0.4, -0.45], True),  # 0.3 -> 0.45, rising 3 steps running
    ([-0.3, -0.3, -0.3, -0.6, -0.5, -0.55], False),  # up, but not 3 steps running
])
def test_reference_kl_rising_read_from_a_metrics_file(tmp_path, values, alarmed):
    """A synthetic run dir (prime-rl's name ``ref_kl/mean`` only) read back by `prime eval view`."""
    from primekit_cli.app import app

    run_dir = tmp_path / "rl" / "distilled"
    run_dir.mkdir(parents=True)
    rows = [{"step": i + 1, "loss/mean": 0.1, "ref_kl/mean": v} for i, v in enumerate(values)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    view = CliRunner().invoke(app, ["eval", "view", str(run_dir)])
    assert view.exit_code == 0, view.output
    assert ("health: ref_kl_rising at step 6: KL to the reference (-ref_kl) grew from 0.300 to 0.450" in view.output) \
        == alarmed and (("ref_kl_rising" in view.output) == alarmed), view.output


def test_a_distillation_run_is_not_alarmed_on_equal_rewards():
    rows = _rows(reward_mean=[0.0] * 5, reward_std=[0.0] * 5, **{"tokens/rl": [0] * 5, "tokens/ce": [40] * 5})
    assert diagnose(rows) == []
    rows = _rows(reward_mean=[0.0] * 5, reward_std=[0.0] * 5, **{"tokens/rl": [40] * 5})
    assert _names(rows) == ["reward_spread"]


def test_a_resumed_run_is_not_alarmed_again_on_what_its_history_showed():
    history = _rows(reward_mean=[0.5] * 3, reward_std=[0.0] * 3)
    assert Monitor(history).step({"step": 4, "loss": 0.0, "reward_mean": 0.5, "reward_std": 0.0}) == []


CONSTANT_ENV = '''
from evalkit.envs import Rubric, SingleTurnEnv


def always_half(completion) -> float:
    return 0.5


def load_environment(**kwargs):
    rows = [{"question": f"Say a number like {i}", "answer": str(i)} for i in range(24)]
    return SingleTurnEnv(dataset=rows, eval_dataset=rows[:4], rubric=Rubric([always_half]))
'''


def _train_lines(run_dir: Path) -> list[dict]:
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [line for line in lines if "loss" in line]


@pytest.mark.slow
def test_halt_on_stops_a_collapsed_run_with_its_checkpoint_and_metrics_saved(tmp_path: Path):
    """Every rollout scores 0.5 (spread 0, the filter off so the steps still train): the alarm rises at step 3."""
    from primekit_cli.app import app

    config = write_rl_project(tmp_path, CONSTANT_ENV)
    out = tmp_path / "out"
    args = [
        "rl",
        "run",
        str(config),
        "-o",
        str(out),
        *QUICK_RL,
        "--max-steps",
        "6",
        "--eval.interval",
        "6",
        "--filter.enabled",
        "false",
    ]
    watched = CliRunner().invoke(app, [*args, "--run-name", "watched"])
    assert watched.exit_code == 0, watched.output
    assert watched.output.count("health: reward_spread at step 3") == 1  # printed once, the run goes on
    assert len(_train_lines(out / "rl" / "watched")) == 6

    halted = CliRunner().invoke(app, [*args, "--halt-on", "reward_spread,kl_growth"])
    assert halted.exit_code == 2, halted.output
    assert "error: run halted at step 3 on health alarm reward_spread (--halt-on)" in halted.output
    run_dir = out / "rl" / "viewtest"
    assert [line["step"] for line in _train_lines(run_dir)] == [1, 2, 3]
    assert (run_dir / "checkpoints" / "step_3").is_dir()
    page = tmp_path / "report.html"
    view = CliRunner().invoke(app, ["eval", "view", "--html", str(page), str(run_dir)])
    assert "health: reward_spread at step 3" in view.output and "more rollouts per example" in view.output
    assert "reward_spread at step 3" in page.read_text()  # the HTML report's header says it too

    bad = CliRunner().invoke(app, [*args, "--halt-on", "reward_sprad"])
    assert bad.exit_code == 2 and "unknown alarm 'reward_sprad'" in bad.output and "Traceback" not in bad.output

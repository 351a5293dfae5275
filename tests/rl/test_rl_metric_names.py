"""prime-rl's metric names in metrics.jsonl and W&B (the pinned v0.8.1.dev67's orchestrator and trainer), the
old names beside them, and the report reading a run written with either."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from support.report_runs import QUICK_RL, write_rl_project
from typer.testing import CliRunner

from evalkit.core.types import RolloutState, Usage
from evalkit.report.rl_names import with_old_names
from rl_backend.prime_metrics import eval_metrics, rollout_metrics, stat

STATS = ("mean", "max", "min", "p10", "p90")
PRIME_RL_TRAIN = [
    # orchestrator (src/prime_rl/orchestrator/metrics.py: EpisodeMetrics / TraceMetrics.to_dict, Stat.to_dict)
    *(
        f"train/agg/all/{m}/{s}"
        for m in ("num_total_tokens", "num_input_tokens", "num_output_tokens", "num_turns")
        for s in STATS
    ),
    *(f"train/agg/all/agent/{m}/{s}" for m in ("reward", "num_output_tokens", "num_turns") for s in STATS),
    "train/agg/all/agent/is_truncated/mean",
    "train/agg/all/has_error/mean",
    "train/agg/all/agent/has_error/mean",
    "train/agg/effective/agent/reward/mean",
    "train/agg/effective/num_turns/mean",
    # trainer (src/prime_rl/trainer/rl/train.py)
    "loss/mean",
    "entropy/all/mean",
    "mismatch_kl/all/mean",
    "optim/grad_norm",
    "optim/lr",
    "time/step",
    "time/wait_for_batch",
]
OLD = ["reward_mean", "reward_std", "loss", "entropy", "mismatch_kl", "grad_norm"]


def _state(example: int, idx: int, reward: float, *, truncated: bool = False, error: str | None = None) -> RolloutState:
    state = RolloutState(example_id=example, rollout_idx=idx, prompt=[], reward=reward, is_truncated=truncated, turns=1,
                         usage=Usage(input_tokens=10, output_tokens=4 + idx))
    if error:
        state.record_error("model", error)
    return state


def test_rollout_metrics_follow_prime_rls_scopes_subsets_and_stats():
    kept = [_state(0, 0, 1.0), _state(0, 1, 0.0, truncated=True)]
    dropped = [_state(1, 0, 1.0), _state(1, 1, 0.0, error="503")]
    out = rollout_metrics([kept, dropped], [kept], {0: "a", 1: "b"}, "a")
    assert out["train/agg/all/agent/reward/mean"] == pytest.approx(2 / 3)  # the errored rollout is no score
    assert out["train/agg/all/agent/is_truncated/mean"] == 0.25 and out["train/agg/all/has_error/mean"] == 0.25
    assert out["train/agg/all/agent/error/model"] == 1.0 and out["train/agg/all/num_total_tokens/max"] == 15.0
    assert out["train/agg/effective/agent/reward/mean"] == 0.5  # the kept group only
    assert out["train/a/all/agent/reward/mean"] == 0.5 and out["train/b/all/agent/reward/mean"] == 1.0
    assert "train/b/effective/agent/reward/mean" not in out  # nothing of b was trained on
    assert stat("x", [0, 10]) == {"x/mean": 5, "x/max": 10, "x/min": 0, "x/p10": 1.0, "x/p90": 9.0}


def test_eval_metrics_have_avg_at_k_and_unbiased_pass_at_k():
    states = [_state(0, 0, 1.0), _state(0, 1, 0.0), _state(1, 0, 0.0), _state(1, 1, 0.0)]
    out = eval_metrics("arith", states, 2)
    assert out["eval/arith/all/agent/avg@2"] == 0.25 and out["eval/arith/effective/agent/pass@1"] == 0.25
    assert out["eval/arith/effective/agent/pass@2"] == 0.5 and out["eval/arith/effective/agent/pass^2"] == 0.0


def test_old_names_are_filled_from_prime_rls_for_readers():
    row = with_old_names({"step": 3, "loss/mean": 0.5, "train/agg/all/agent/reward/mean": 0.7,
                          "train/x/all/agent/reward/mean": 0.6, "optim/grad_norm": 2.0})
    assert (row["loss"], row["reward_mean"], row["reward_mean/x"], row["grad_norm"]) == (0.5, 0.7, 0.6, 2.0)
    evals = with_old_names({"step": 4, "eval/a/all/agent/avg@1": 0.2, "eval/b/all/agent/avg@1": 0.4})
    assert evals["eval_reward"] == pytest.approx(0.3)


BINARY_ENV = '''
from evalkit.envs import Rubric, SingleTurnEnv


def has_digit(completion) -> float:
    text = completion[-1]["content"] if completion else ""
    return float(any(c.isdigit() for c in text))


def load_environment(**kwargs):
    rows = [{"question": f"Say a number like {i}", "answer": str(i)} for i in range(24)]
    return SingleTurnEnv(dataset=rows, eval_dataset=rows[:4], rubric=Rubric([has_digit]))
'''


def _wandb_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """Record what each ``wandb.log`` call of the run gets: the real wandb in offline mode when installed,
    else a module with wandb's ``init``/``log``/``Table``/``finish`` surface that only records."""
    logged: list[dict[str, Any]] = []
    try:
        import wandb  # noqa: F401  (installed: the real one records)
        from wandb.sdk.wandb_run import Run

        monkeypatch.setenv("WANDB_MODE", "offline")
        monkeypatch.setenv("WANDB_DIR", str(tmp_path))
        real = Run.log
        monkeypatch.setattr(
            Run, "log", lambda self, data, *a, **k: (logged.append(dict(data)), real(self, data, *a, **k))[1]
        )
    except ImportError:
        import importlib.machinery

        fake = types.ModuleType("wandb")
        fake.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
        run = types.SimpleNamespace(log=lambda data, step=None: logged.append(dict(data)), finish=lambda: None)
        fake.init = lambda **kwargs: run  # type: ignore[attr-defined]
        fake.Table = lambda columns, data: {"columns": columns, "data": data}  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "wandb", fake)
    return logged


@pytest.mark.slow
def test_a_runs_wandb_keys_and_metrics_lines_carry_prime_rls_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from primekit_cli.app import app

    logged = _wandb_keys(monkeypatch, tmp_path)
    config = write_rl_project(tmp_path, BINARY_ENV)
    result = CliRunner().invoke(
        app, ["rl", "run", str(config), "-o", str(tmp_path / "out"), *QUICK_RL, "--wandb.project", "p"]
    )
    assert result.exit_code == 0, result.output
    assert (
        "eval step 2: mean reward" in result.output and "num_total_tokens" not in result.output
    )  # the console line stays short
    train = [row for row in logged if "loss" in row]
    assert len(train) == 2
    for row in train:
        missing = [key for key in [*PRIME_RL_TRAIN, "train/digits/all/agent/reward/mean", "entropy/digits/mean", *OLD]
                   if key not in row]
        assert not missing, missing
        assert (
            row["train/agg/all/agent/reward/mean"] == row["reward_mean"] and row["entropy/all/mean"] == row["entropy"]
        )
        table = row["samples"]
        columns = table.columns if hasattr(table, "columns") else table["columns"]
        assert "completion" in columns and "advantage" in columns
    evals = [row for row in logged if "eval_reward" in row]
    assert any("eval/digits/all/agent/avg@2" in row and "eval/digits/effective/agent/pass@1" in row for row in evals)
    run_dir = tmp_path / "out" / "rl" / "viewtest"
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(key in lines[-2] for key in PRIME_RL_TRAIN)  # the last training line (the final eval line follows)


@pytest.mark.slow
def test_the_report_reads_a_run_written_with_prime_rls_names_only(tmp_path: Path):
    """The same run with its old names removed: the report, the TUI's list and `prime eval view` read it alike."""
    from evalkit.report.rl_data import load_rl_run
    from evalkit.report.rl_names import OLD_NAMES
    from primekit_cli.app import app

    config = write_rl_project(tmp_path, BINARY_ENV)
    assert CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out"), *QUICK_RL]).exit_code == 0
    run_dir = tmp_path / "out" / "rl" / "viewtest"
    both = load_rl_run(run_dir)
    metrics = run_dir / "metrics.jsonl"
    old = set(OLD_NAMES.values()) | {"eval_reward"}
    rows = [{k: v for k, v in json.loads(line).items() if k not in old} for line in metrics.read_text().splitlines()]
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
    new_only = load_rl_run(run_dir)
    assert [s["reward_mean"] for s in new_only.steps] == [s["reward_mean"] for s in both.steps]
    assert [s["loss"] for s in new_only.steps] == [s["loss"] for s in both.steps]
    assert [round(p.reward, 6) for p in new_only.evals] == [round(p.reward, 6) for p in both.evals]
    view = CliRunner().invoke(app, ["eval", "view", str(run_dir)])
    assert view.exit_code == 0 and "health:" in view.output, view.output

"""`[algo]` end to end: the config refuses what cannot run yet, the plan names the algorithm, and a real run on
the tiny model trains with each available algorithm's credit (read back from the rollout rows it wrote)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from support.report_runs import RL_ENV as ENV_CODE  # rewards the digits in a reply: even random weights vary
from typer.testing import CliRunner

from primekit_cli.app import app


def _write(tmp_path: Path, model: str, tables: str, top: str = "") -> Path:
    env_dir = tmp_path / "environments" / "digits"
    env_dir.mkdir(parents=True, exist_ok=True)
    (env_dir / "digits.py").write_text(ENV_CODE)
    config = tmp_path / "rl.toml"
    config.write_text(f'''model = "{model}"
run_name = "t"
batch_size = 4
rollouts_per_example = 2
{top}
[[env]]
id = "{env_dir}"
[baseline]
enabled = false
[ckpt]
interval = 1
save_weights = false
[sampling]
max_tokens = 6
{tables}''')
    return config


def _dry_run(config: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "primekit_cli", "rl", "run", str(config), "--dry-run", "-o",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("table, needle", [
    ('[algo]\ntype = "hierarchical_grpo"\nepisode_agents = ["solver"]\n',
     "algo.type = 'hierarchical_grpo' is not available in primekit yet: it needs a proposer-solver environment"),
    ('[algo]\ntype = "opsd"\n', "algo.type = 'opsd' trains each model turn as its own sample"),
    ('[algo]\ntype = "echo"\n[algo.filter]\nimport_path = "m.f"\n',
     "algo.filter (prime-rl's echo token filter, an import path) is not run by primekit's trainer"),
    ('[algo]\ntype = "sft"\n[algo.sampling.source]\nname = "t"\nbase_url = "http://127.0.0.1:9/v1"\n',
     "algo.type = 'sft' trains each model turn as its own sample"),
    ('[algo]\ntype = "sft"\n', "algo.type 'sft' needs a teacher to sample from"),
    ('[algo]\ntype = "opd"\n', "algo.type 'opd' needs a teacher"),
    ('[algo]\ntype = "max_rl"\ndecay = 0.9\n', "algo.decay belongs to algo.type 'rae', not 'max_rl'"),
    ('[algo]\ntype = "max_rl"\n[trainer.advantage]\nstd_normalize = true\n',
     "trainer.advantage is GRPO's baseline rule; algo.type 'max_rl' assigns its own credit"),
    ('[algo]\ntype = "ppo"\n', "algo.type"),
])
def test_refusals_name_the_key(tmp_path, tiny_model, table, needle):
    top = 'trajectory_strategy = "interleaved"' if "trains each model turn" in needle else ""
    config = _write(tmp_path, str(tiny_model), table, top=top)
    result = CliRunner().invoke(app, ["rl", "run", str(config), "--dry-run", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and needle in result.output, result.output


def test_an_unavailable_algorithm_is_one_error_line_before_anything_starts(tmp_path, tiny_model):
    config = _write(tmp_path, str(tiny_model), '[algo]\ntype = "hierarchical_grpo"\nepisode_agents = ["solver"]\n')
    result = _dry_run(config, tmp_path)
    assert result.returncode == 2 and not (tmp_path / "o").exists(), result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: algo.type = 'hierarchical_grpo' is not available in "
                                                   "primekit yet"), lines


def test_plan_names_each_environments_algorithm(tmp_path, tiny_model):
    config = _write(tmp_path, str(tiny_model), '[algo]\ntype = "max_rl"\n')
    text = config.read_text().replace('[baseline]', f'''[[env]]
id = "{tmp_path / "environments" / "digits"}"
name = "selfplay"
[env.algo]
type = "rae"
decay = 0.9
[baseline]''')
    config.write_text(text)
    result = _dry_run(config, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "algorithm    max_rl (rl on sampled tokens)" in result.stdout
    assert "             selfplay: rae (rl on sampled tokens), decay 0.9" in result.stdout
    # the resolved config keeps what was set, and reloads
    assert '[algo]\ntype = "max_rl"\n' in result.stdout and "demo_key" not in result.stdout


def _rows(run_dir: Path, step: int) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "rollouts" / f"step_{step}.jsonl").read_text().splitlines()]


def _groups(rows: list[dict]) -> list[list[dict]]:
    by: dict[int, list[dict]] = {}
    for row in rows:
        by.setdefault(row["example_id"], []).append(row)
    return [sorted(group, key=lambda r: r["rollout_idx"]) for group in by.values()]


@pytest.mark.slow
def test_max_rl_trains_with_mean_normalised_credit(tmp_path, tiny_model):
    config = _write(tmp_path, str(tiny_model), '[algo]\ntype = "max_rl"\n[trainer]\nlr = 1e-3\n', top="max_steps = 2")
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "out" / "rl" / "t"
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert [m["step"] for m in steps] == [1, 2] and all(math.isfinite(m["loss"]) for m in steps)
    checked = 0
    for step in (1, 2):
        for group in _groups(_rows(run_dir, step)):
            if "advantage" not in group[0] or group[0]["advantage"] is None:
                continue  # a dropped (uniform) group has no credit
            mean = sum(r["reward"] for r in group) / len(group)
            for row in group:
                assert row["advantage"] == pytest.approx((row["reward"] - mean) / mean, abs=1e-4)
                checked += 1
    assert checked >= 4


@pytest.mark.slow
def test_rae_baselines_carry_across_steps_and_resume(tmp_path, tiny_model):
    config = _write(tmp_path, str(tiny_model), '[algo]\ntype = "rae"\ndecay = 0.5\n[trainer.loss]\ntype = "dppo"\n',
                    top="max_steps = 2")  # and prime-rl's default loss
    runner = CliRunner()
    assert runner.invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out")]).exit_code == 0
    run_dir = tmp_path / "out" / "rl" / "t"
    baseline = 0.0
    for step in (1, 2):
        rows = [row for group in _groups(_rows(run_dir, step)) for row in group]
        assert len(rows) == 4  # uniform groups are kept: rae's credit does not need sibling variance
        for row in rows:
            assert row["advantage"] == pytest.approx(row["reward"] - baseline, abs=1e-4)
            baseline = 0.5 * baseline + 0.5 * row["reward"]
        state = json.loads((run_dir / "checkpoints" / f"step_{step}" / "state.json").read_text())
        assert state["algorithms"]["digits"]["baselines"]["agent"] == pytest.approx(baseline, abs=1e-4)
    result = runner.invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out"), "--resume", "--max-steps", "3"])
    assert result.exit_code == 0, result.output
    first = _groups(_rows(run_dir, 3))[0][0]
    assert first["advantage"] == pytest.approx(first["reward"] - baseline, abs=1e-4)


def test_each_environment_credits_its_groups_with_its_own_algorithm():
    """Two environments in one step: max_rl on one, rae on the other (whose uniform group the filter keeps)."""
    from types import SimpleNamespace

    from evalkit.core.types import Completion, RolloutState, SamplingArgs
    from rl_backend.collect import BatchCollector
    from rl_backend.config import RLConfig

    def state(example: int, idx: int, reward: float) -> RolloutState:
        response = Completion(text="x", prompt_token_ids=[1, 2], completion_token_ids=[3], logprobs=[-1.0])
        return RolloutState(example_id=example, rollout_idx=idx, prompt=[], reward=reward, responses=[response])

    config = RLConfig.model_validate({
        "env": [{"id": "x", "name": "a"}, {"id": "x", "name": "b", "algo": {"type": "rae", "decay": 0.5}}],
        "algo": {"type": "max_rl"}, "batch_size": 4, "rollouts_per_example": 2, "buffer": {"env_ratios": [1, 1]}})
    source = SimpleNamespace(sampling=SamplingArgs(logprobs=True), reseed=lambda seed: None)
    collector = BatchCollector(config, mixture=None, source=source, loop=SimpleNamespace(run=lambda coro: coro))

    def roll_out(ids, env_of):
        env_of.update({ids[0]: "a", ids[1]: "b"})
        return [[state(ids[0], 0, 1.0), state(ids[0], 1, 0.0)], [state(ids[1], 0, 0.5), state(ids[1], 1, 0.5)]]

    collector._roll_out = roll_out
    batch = collector.collect(1, 0, 0)
    assert len(batch.kept) == 2  # the uniform rae group is kept: its credit is not zero
    # max_rl: mean 0.5 -> (1 - 0.5) / 0.5 = 1, -1;  rae from 0: 0.5, then 0.5 - 0.25
    assert batch.advantages == {(0, 0): 1.0, (0, 1): -1.0, (1, 0): 0.5, (1, 1): 0.25}
    assert batch.algo_state == {"b": {"baselines": {"agent": 0.375}}}

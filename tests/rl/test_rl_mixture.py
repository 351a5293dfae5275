"""Multi-environment RL: several ``[[env]]`` tables mixed (``[buffer] env_ratios``), each rollout scored by its
own environment, per-environment metrics, baseline and evals; the order survives ``--resume``.

The order is checked on the mixture itself (no model); the end-to-end runs train the tiny random-weight
Llama on two built-ins (arithmetic and reverse-text) with the in-process engine.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalkit.core.errors import UserError
from primekit_cli.app import app
from rl_backend.config import EnvConfig, RLConfig, load_rl_config, to_toml
from rl_backend.mixture import EnvMixture, TrainEnv


class _Env:
    def __init__(self, infinite: bool = False):
        self.infinite = infinite
        self.drawn: list[int] = []

    def get_dataset(self, n: int = -1, seed: int = 0, shuffle: bool = False) -> list[dict]:
        self.drawn.append(n)
        return [{"question": f"inf{i}"} for i in range(n)]


def _member(name: str, n: int) -> TrainEnv:
    return TrainEnv(EnvConfig(id=name), _Env(), [{"question": f"{name}{i}"} for i in range(n)])


def test_ratios_hold_in_every_window_and_the_order_is_a_function_of_the_cursor():
    a, b = _member("a", 5), _member("b", 3)
    mix = EnvMixture([a, b], [3, 1], seed=1)
    picks = [mix.pick(i) for i in range(40)]
    for start in range(0, 40, 4):  # every 4 examples: 3 of a, 1 of b
        assert Counter(k for k, _ in picks[start : start + 4]) == {0: 3, 1: 1}
    a_rows = [row["question"] for k, row in picks if k == 0]
    assert sorted(a_rows[:5]) == [
        f"a{i}" for i in range(5)
    ]  # each environment walks its own permutation, epoch by epoch
    assert sorted(a_rows[5:10]) == [f"a{i}" for i in range(5)] and a_rows[:5] != a_rows[5:10]
    fresh = EnvMixture([a, b], [3, 1], seed=1)  # a resumed run asks for a late cursor first
    assert [fresh.pick(i) for i in (33, 7, 39)] == [picks[33], picks[7], picks[39]]
    other_seed = EnvMixture([a, b], [3, 1], seed=2)
    assert [other_seed.pick(i) for i in range(40)] != picks  # the seed picks the permutations


def test_without_ratios_rows_are_pooled_so_each_example_is_equally_likely():
    a, b = _member("a", 6), _member("b", 2)
    mix = EnvMixture([a, b], None, seed=0)
    epoch = [mix.pick(i) for i in range(8)]
    assert sorted(row["question"] for _, row in epoch) == sorted([f"a{i}" for i in range(6)] + ["b0", "b1"])
    assert all(row["question"].startswith("ab"[k]) for k, row in epoch)  # each row stays with its environment


def test_an_infinite_taskset_is_drawn_lazily_and_needs_ratios_beside_others():
    endless = TrainEnv(EnvConfig(id="endless"), _Env(infinite=True))
    mix = EnvMixture([endless], None, seed=0)
    assert [mix.pick(i)[1]["question"] for i in range(3)] == ["inf0", "inf1", "inf2"]  # its own order, no shuffle
    assert mix.pick(40)[1]["question"] == "inf40" and endless.env.drawn == [16, 41]  # drawn as far as the cursor went
    with pytest.raises(UserError, match="'endless' is an infinite v1 taskset.*set \\[buffer\\] env_ratios"):
        EnvMixture([_member("a", 3), endless], None, seed=0)
    mixed = EnvMixture([_member("a", 3), endless], [1, 1], seed=0)
    assert {k for k, _ in (mixed.pick(i) for i in range(4))} == {0, 1}


def test_env_tables_accept_verifiers_keys_and_need_distinct_names(tmp_path):
    path = tmp_path / "rl.toml"
    path.write_text(
        'batch_size = 8\nrollouts_per_example = 4\n'
        '[[env]]\nenv_id = "reverse-text"\nenv_args = { difficulty = "easy" }\n'
        '[[env]]\nid = "reverse-text"\nname = "rt-hard"\n[buffer]\nenv_ratios = [0.75, 0.25]\n'
    )
    config = load_rl_config(path)
    assert [(e.id, e.args, e.label) for e in config.env] == [("reverse-text", {"difficulty": "easy"}, "reverse-text"),
                                                              ("reverse-text", {}, "rt-hard")]
    assert RLConfig.model_validate(__import__("tomllib").loads(to_toml(config))) == config
    for text, needle in [
        (path.read_text().replace('name = "rt-hard"\n', ""), "two [[env]] tables are both named 'reverse-text'"),
        (path.read_text().replace("[0.75, 0.25]", "[1]"), "buffer.env_ratios has 1 values for 2 [[env]] tables"),
        (path.read_text().replace("[0.75, 0.25]", "[1, 0]"), "every ratio must be above 0"),
        (path.read_text().replace('"rt-hard"', '"a/b"'), "env name 'a/b' may hold only"),
    ]:
        path.write_text(text)
        with pytest.raises(Exception, match=__import__("re").escape(needle)):
            load_rl_config(path)


# ----- end to end on the tiny model ----------------------------------------------------------------
CONFIG = """model = "{model}"
run_name = "{name}"
max_steps = 2
batch_size = 8
rollouts_per_example = 2
sampling = {{ max_tokens = 8 }}
trainer = {{ micro_batch_size = 8 }}
inference = {{ dtype = "float32" }}
filter = {{ enabled = false }}
ckpt = {{ interval = 1 }}
eval = {{ interval = 1, num_examples = 2 }}
baseline = {{ num_examples = 2, min_reward = 0.0, max_reward = 1.0, min_diverse_groups = {diverse} }}
buffer = {{ env_ratios = [1, 3] }}
[[env]]
id = "arithmetic"
args = {{ num_train_examples = 20, num_eval_examples = 4 }}
[[env]]
env_id = "reverse-text"
env_args = {{ num_train_examples = 20, num_eval_examples = 4 }}
"""
ENVS = ("arithmetic", "reverse-text")


def _config(tmp_path: Path, model: Path, name: str, diverse: float = 0.0) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(CONFIG.format(model=model, name=name, diverse=diverse))
    return path


def _rows(run_dir: Path, step: int) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "rollouts" / f"step_{step}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_two_builtin_envs_train_together_with_per_env_metrics_baseline_and_evals(tmp_path, tiny_model):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["rl", "run", str(_config(tmp_path, tiny_model, "mix")), "-o", str(out)])
    assert result.exit_code == 0, result.output
    run_dir = out / "rl" / "mix"
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for step, m in zip((1, 2), steps):
        rows = _rows(run_dir, step)
        assert Counter(r["env"] for r in rows) == {"arithmetic": 2, "reverse-text": 6}  # 1:3 of 4 examples x 2 rollouts
        for env in ENVS:
            mine = [r["reward"] for r in rows if r["env"] == env]
            assert m[f"reward_mean/{env}"] == pytest.approx(sum(mine) / len(mine), abs=1e-6)
        # each rollout was scored by its own environment's rubric
        assert all(
            set(r["metrics"])
            == ({"correct_answer", "has_number"} if r["env"] == "arithmetic" else {"lcs_reward", "exact_match"})
            for r in rows
        ), rows[0]
    baseline = json.loads((run_dir / "baseline.json").read_text())
    assert baseline["passed"] and set(baseline["envs"]) == set(ENVS) and baseline["attempts"] == 8
    for env in ENVS:
        meta = json.loads((run_dir / "baseline" / env / "metadata.json").read_text())
        assert meta["env_id"] == env and meta["num_rollouts"] == baseline["envs"][env]["attempts"] == 4
        assert json.loads((run_dir / "evals" / "step_2" / env / "metadata.json").read_text())["split"] == "eval"
    evals = [m for m in metrics if "eval_reward" in m]
    assert [m["step"] for m in evals] == [1, 2]
    assert all(
        m["eval_reward"] == pytest.approx((m["eval_reward/arithmetic"] + m["eval_reward/reverse-text"]) / 2)
        for m in evals
    )


@pytest.mark.slow
def test_resume_draws_the_same_mixture_and_refusals_name_the_env(tmp_path, tiny_model):
    out = tmp_path / "out"
    runner = CliRunner()
    straight = runner.invoke(
        app, ["rl", "run", str(_config(tmp_path, tiny_model, "straight")), "-o", str(out), "--skip-baseline"]
    )
    assert straight.exit_code == 0, straight.output
    config = _config(tmp_path, tiny_model, "split")
    first = runner.invoke(app, ["rl", "run", str(config), "-o", str(out), "--skip-baseline", "--max-steps", "1"])
    assert first.exit_code == 0, first.output
    resumed = runner.invoke(app, ["rl", "run", str(config), "-o", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output

    def drawn(name: str) -> list[tuple]:
        return [(r["env"], r["example_id"], json.dumps(r["prompt"])) for r in _rows(out / "rl" / name, 2)]

    assert drawn("split") == drawn("straight")
    changed = config.read_text().replace("[1, 3]", "[1, 1]")
    config.write_text(changed)
    refused = runner.invoke(app, ["rl", "run", str(config), "-o", str(out), "--resume", "--max-steps", "3"])
    assert refused.exit_code == 2 and "buffer" in refused.output  # another mixture would not continue the same order

    strict = runner.invoke(
        app, ["rl", "run", str(_config(tmp_path, tiny_model, "strict", diverse=0.5)), "-o", str(out)]
    )
    assert strict.exit_code == 2
    assert (
        "error: baseline check failed: env 'arithmetic': only 0/2 groups" in strict.output
    )  # random weights never get sums right
    assert json.loads((out / "rl" / "strict" / "baseline.json").read_text())["envs"]["arithmetic"]["passed"] is False

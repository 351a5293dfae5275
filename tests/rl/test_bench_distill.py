"""bench/distill.py without training: its flags and arm selection, the arms' `[algo]` tables as `prime rl run`
validates them, its ratios by hand, and a bad `--arms` as one `error:` line from the real script."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from support import REPO

BENCH_MODULES = ("distill", "rl_learns", "sft_gain")


@pytest.fixture
def distill(monkeypatch):
    """bench/distill.py imported as its own folder on the path imports it (and gone from sys.modules after)."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    for name in BENCH_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield importlib.import_module("distill")
    for name in BENCH_MODULES:
        sys.modules.pop(name, None)


def test_arms_and_budget_flags(distill):
    args, arms = distill.parse(["--arms", "grpo, opd", "--steps", "3", "--eval-every", "1", "--device", "cpu"])
    assert arms == ["grpo", "opd"]
    assert (args.steps, args.eval_every, args.device, args.teacher_via) == (3, 1, "cpu", "serve")
    _, every = distill.parse([])
    assert every == ["opd", "sft", "grpo"]


@pytest.mark.parametrize("argv, needle", [
    (["--arms", "opd,dpo"], "unknown arm 'dpo' in --arms; choose from opd, sft, grpo"),
    (["--arms", "opd,opd"], "at most once"),
    (["--arms", ","], "at least one"),
    (["--teacher-via", "vllm"], "--teacher-via is serve or local, not 'vllm'"),
    (["--eval-every", "0"], "must be at least 1"),
])
def test_bad_selection_is_one_error_line(distill, capsys, argv, needle):
    with pytest.raises(SystemExit) as stop:
        distill.parse(argv)
    lines = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


def test_the_script_refuses_an_unknown_arm_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "distill.py"), "--arms", "grpo,distill",
                           "--output-dir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done
    assert done.stderr.splitlines() == ["error: unknown arm 'distill' in --arms; choose from opd, sft, grpo"], done
    assert not list(tmp_path.iterdir()), "nothing starts before the arms are checked"


def test_each_arm_is_a_valid_rl_config(distill, tmp_path):
    """The arms differ only in `[algo]`: the same model, steps, rollouts, seed, lr and held-out examples."""
    from rl_backend.algo_config import unavailable

    args, _ = distill.parse(["--steps", "4", "--eval-every", "2"])
    teacher = tmp_path / "weights" / "step_16"
    configs = {arm: distill.learns_config(args, arm, algo=distill.arm_algo(arm, teacher, url), eval_interval=2)
               for arm, url in (("opd", None), ("sft", "http://127.0.0.1:9/v1"), ("grpo", None))}
    assert configs["opd"].algo.type == "opd" and configs["opd"].algo.teacher.name == str(teacher)
    assert configs["opd"].algo.teacher.base_url is None  # --teacher-via local: the folder, scored in-process
    assert configs["sft"].algo.sampling.source.base_url == "http://127.0.0.1:9/v1"
    assert configs["grpo"].algo.type == "grpo"
    shared = {(c.model, c.max_steps, c.batch_size, c.rollouts_per_example, c.seed, c.trainer.lr, c.eval.interval,
               c.eval.num_examples, c.eval.temperature, c.eval.at_start, c.sampling.max_tokens, c.trainer.on_policy)
              for c in configs.values()}
    assert shared == {("local/smollm2-135m", 4, 16, 8, 0, 5e-4, 2, 32, 0.0, True, 32, True)}
    # the sft arm runs exactly when `prime rl run` would not refuse the algorithm
    assert (distill.sft_missing() is None) == (unavailable(configs["sft"].algo) is None)


def test_steps_to_90_percent_and_gap_closed(distill):
    curves = {"opd": {0: 0.25, 2: 0.5, 4: 0.875}, "grpo": {0: 0.25, 2: 0.375, 4: 0.5}}
    text = distill.report(curves, base=0.25, teacher=0.95, steps=4)
    lines = text.splitlines()
    assert lines[0] == "teacher held-out 0.950; base 0.250; 90% of the teacher: 0.855"
    assert lines[1].endswith("90% of teacher reached at step 4 | gap closed +89%")  # (0.875-0.25)/0.7
    assert lines[2].endswith("90% of teacher not reached in 4 steps | gap closed +36%")  # (0.5-0.25)/0.7
    assert "0:0.250 2:0.500 4:0.875" in lines[1]

"""`prime env check`: planted dishonest rewards are flagged (one flaw each, tests/envcheck_envs/), the built-in
environments pass, the CLI prints one table or JSON and exits 1 on a fail; the thresholds are the RL gate's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TESTS
from support.cli import prime_process

from evalkit.envcheck.run import EnvCheckOptions, check_environment
from evalkit.loading.resolve import BUILTIN_IDS

PLANTED = TESTS / "envcheck_envs"


def statuses(env_id: str, **options) -> dict[str, str]:
    report = check_environment(EnvCheckOptions(env_id=env_id, environments_dir=PLANTED, num_examples=4, **options))
    return {check.name: check.status for check in report.checks}


def test_control_environment_passes_every_check():
    assert set(statuses("honest-sum").values()) == {"pass"}


@pytest.mark.parametrize("env_id, check", [
    ("pays-empty", "empty"),
    ("pays-echo", "echo"),
    ("pays-random", "deterministic"),
    ("pays-two", "range"),
    ("mutates-completion", "no-mutation"),
])
def test_planted_flaw_fails_its_check(env_id: str, check: str):
    assert statuses(env_id)[check] == "fail"


def test_declared_range_decides_what_is_out_of_range():
    assert statuses("pays-two", reward_range=(0.0, 2.0))["range"] == "pass"
    assert statuses("pays-two", reward_range=(0.0, 2.0))["gold"] == "pass"


@pytest.mark.parametrize("env_id", BUILTIN_IDS)
def test_builtin_environment_passes(env_id: str):
    report = check_environment(EnvCheckOptions(env_id=env_id, num_examples=4))
    assert not report.failed, [c.to_dict() for c in report.checks if c.status == "fail"]
    assert {c.name: c.status for c in report.checks}["gold"] == "pass"


def test_thresholds_are_the_rl_gates():
    from evalkit.core import baseline_rules
    from rl_backend.config import BaselineConfig

    gate = BaselineConfig()
    assert (gate.min_reward, gate.max_reward, gate.min_diverse_groups) == (
        baseline_rules.MIN_REWARD, baseline_rules.MAX_REWARD, baseline_rules.MIN_DIVERSE_GROUPS)


def test_cli_exit_codes_table_and_json(tmp_path: Path):
    bad = prime_process("env", "check", "pays-echo", "--dir", str(PLANTED), "--no-model", "-n", "3", cwd=tmp_path)
    assert bad.returncode == 1, bad.stderr
    assert "echo" in bad.stdout and "fail" in bad.stdout and "FAILED" in bad.stdout
    good = prime_process("env", "check", "honest-sum", "--dir", str(PLANTED), "--no-model", "-n", "3", "--json",
                         cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    data = json.loads(good.stdout)
    assert data["passed"] is True and {c["status"] for c in data["checks"]} == {"pass"}
    missing = prime_process("env", "check", "no-such-env", "--no-model", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("error: ")


@pytest.mark.slow
def test_rules_of_thumb_on_the_embedded_model():
    report = check_environment(EnvCheckOptions(env_id="arithmetic", num_examples=2, rollouts_per_example=2,
                                               model="local/smollm2-135m",
                                               sampling={"temperature": 1.0, "max_tokens": 16}))
    by_name = {c.name: c for c in report.checks}
    assert {"baseline-mean", "solved-share", "group-spread"} <= set(by_name)
    assert "local/smollm2-135m, 2 examples x 2 rollouts: mean" in by_name["baseline-mean"].detail
    assert all(by_name[n].status in ("pass", "warn") for n in ("baseline-mean", "solved-share", "group-spread"))


def test_cli_user_errors_are_one_line(tmp_path: Path):
    both = prime_process("env", "check", "arithmetic", "-m", "x", "--no-model", cwd=tmp_path)
    assert both.returncode == 2 and both.stderr.strip() == "error: give --model or --no-model, not both"
    bad_range = prime_process("env", "check", "arithmetic", "--no-model", "--range", "1", "0", cwd=tmp_path)
    assert bad_range.returncode == 2 and bad_range.stderr.strip() == "error: --range needs LOW < HIGH, got 1 0"

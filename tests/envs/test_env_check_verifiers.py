"""`prime env check` on the environments written for verifiers (tests/verifiers_envs/), under both verifiers
generations: the ones with honest rewards pass (given their declared range), and the ones whose rewards can
really be gamed, or are broken, are flagged for that reason (each finding below was checked by hand)."""

from __future__ import annotations

import pytest
from support import VERIFIERS_ENVS

verifiers = pytest.importorskip("verifiers", reason="needs the verifiers extra")

from evalkit.envcheck.run import EnvCheckOptions, check_environment  # noqa: E402

pytestmark = [pytest.mark.verifiers, pytest.mark.slow]
ENVS = VERIFIERS_ENVS
LEGACY = not str(verifiers.__version__).startswith("0.4.")

HONEST = [("vf_counter", 1.0), ("vf_envgroup", 1.0), ("vf_math", 1.0), ("vf_task_str", 1.0), ("vf_mix", 2.0),
          ("vf_group", 1.5), ("vf_single", 1.5), ("vf_tools", 1.0), ("vf_completion", 1.0)]
"""Legacy environments that pass, with the top of their declared range (weights that sum past 1)."""
V1_HONEST = ["vf_v1_chat", "vf_v1_math", "vf_v1_opener", "vf_v1_pkg", "vf_v1_seats", "vf_v1_shared"]
FINDINGS = [
    (
        "vf_buggy",
        "finite",
        True,
    ),  # a reward function divides by zero: the fixture for failing rewards, broken on purpose
]
"""(environment, the check that fails, whether it needs the legacy API)."""


def report(env_id: str, high: float = 1.0):
    return check_environment(EnvCheckOptions(env_id=env_id, num_examples=2, reward_range=(0.0, high),
                                             environments_dir=ENVS))


@pytest.mark.parametrize("env_id, high", HONEST)
def test_legacy_environment_passes(env_id: str, high: float):
    if not LEGACY:
        pytest.skip("the legacy API is in verifiers 0.3.1")
    checked = report(env_id, high)
    assert not checked.failed, [c.to_dict() for c in checked.checks if c.status == "fail"]


@pytest.mark.parametrize("env_id", V1_HONEST)
def test_v1_taskset_passes(env_id: str):
    checked = report(env_id)
    assert not checked.failed, [c.to_dict() for c in checked.checks if c.status == "fail"]


@pytest.mark.parametrize("env_id, check, legacy", FINDINGS)
def test_gameable_or_broken_reward_is_flagged(env_id: str, check: str, legacy: bool):
    if legacy and not LEGACY:
        pytest.skip("the legacy API is in verifiers 0.3.1")
    assert {c.name: c.status for c in report(env_id).checks}[check] == "fail"


def test_judged_environment_passes_with_a_judge_that_reads_the_response():
    """vf_judge scores through its own LLM judge: with one that grades (yes only for the right number), the
    rubric is honest; with one that says yes to everything, every floor policy is paid, and the check says so."""
    if not LEGACY:
        pytest.skip("the legacy API is in verifiers 0.3.1")
    from support.solver_server import SolverServer

    for grading, failed in ((True, set()), (False, {"echo", "rubric-quote", "huge", "all-answers"})):
        judge = SolverServer(*(["--grade"] if grading else []))
        try:
            checked = check_environment(EnvCheckOptions(env_id="vf_judge", num_examples=2, environments_dir=ENVS,
                                                        env_args={"judge_base_url": judge.base_url}))
        finally:
            judge.stop()
        assert {c.name for c in checked.checks if c.status == "fail"} & failed == failed, [
            c.to_dict() for c in checked.checks
        ]
        assert checked.failed == bool(failed)

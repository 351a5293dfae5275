"""Per-environment trainer statistics under prime-rl's trainer names: ``entropy/<env>/mean`` beside ``entropy``.

prime-rl's trainer (src/prime_rl/trainer/rl/train.py at v0.8.1.dev67) keeps each trained token's entropy per
environment and logs their mean; the token-weighted mean of the environments' means is the step's entropy.
"""

from __future__ import annotations

import pytest
import torch
from support.tiny_model import write_tiny_model

from evalkit.core.types import Completion, RolloutState
from rl_backend.collect import StepBatch, to_samples
from rl_backend.config import RLConfig
from rl_backend.policy import Policy, Sample
from rl_backend.trajectories import interleave


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Policy:
    model = write_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    return Policy(
        RLConfig.model_validate(
            {
                "model": str(model),
                "env": [{"id": "x"}],
                "batch_size": 4,
                "rollouts_per_example": 2,
                "max_steps": 10,
                "sampling": {"max_tokens": 8},
                "trainer": {"lr": 1e-3, "micro_batch_size": 2},
            }
        )
    )


def test_each_environment_gets_its_token_weighted_entropy(policy: Policy) -> None:
    torch.manual_seed(0)
    lengths = {"add": [3, 5, 4], "sub": [6, 2]}
    samples = [
        Sample(torch.randint(4, 60, (5,)).tolist(), torch.randint(4, 60, (n,)).tolist(), [-4.0] * n, 1.0, env=env)
        for env, ns in lengths.items()
        for n in ns
    ]
    stats = policy.train_step(samples, 1)
    tokens = {env: sum(ns) for env, ns in lengths.items()}
    assert {key for key in stats if key.startswith("entropy/")} == {"entropy/add/mean", "entropy/sub/mean"}
    weighted = sum(stats[f"entropy/{env}/mean"] * n for env, n in tokens.items()) / sum(tokens.values())
    assert weighted == pytest.approx(stats["entropy"], rel=1e-5)
    assert stats["entropy/add/mean"] != pytest.approx(stats["entropy/sub/mean"])


def _state(example: int, prompt: list[int], reply: list[int]) -> RolloutState:
    state = RolloutState(example_id=example, rollout_idx=0, prompt=[])
    state.responses = [
        Completion(text="", prompt_token_ids=prompt, completion_token_ids=reply, logprobs=[-1.0] * len(reply))
    ]
    return state


def test_samples_carry_their_rollouts_environment() -> None:
    groups = [[_state(0, [1, 2], [3])], [_state(7, [4], [5, 6])]]
    advantages = {(0, 0): 1.0, (7, 0): -1.0}
    batch = StepBatch(step=1, kept=groups, generated=groups, rounds=1, cursor_after=2, gen_seconds=0.0, gen_tokens=3,
                      weights_step=0, advantages=advantages, env_of={0: "add", 7: "sub"})
    assert [s.env for s in to_samples(batch)] == ["add", "sub"]
    assert [s.env for s in interleave(groups, advantages, retokenize=False, env_of=batch.env_of)] == ["add", "sub"]

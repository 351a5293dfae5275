"""Advantages, losses and the difficulty filter against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from evalkit.core.types import RolloutState
from rl_backend.advantages import ADVANTAGES, make_advantage_rule
from rl_backend.filtering import filter_groups, is_uniform
from rl_backend.losses import LOSSES, make_loss


def test_grpo_advantage_is_reward_minus_group_mean():
    rule = make_advantage_rule("grpo")
    assert rule([1.0, 0.0, 0.0, 1.0]) == [0.5, -0.5, -0.5, 0.5]
    assert rule([0.2, 0.2]) == [0.0, 0.0]


def test_grpo_std_normalisation():
    rule = make_advantage_rule("grpo", std_normalize=True)
    out = rule([1.0, 0.0, 0.0, 1.0])  # population std 0.5
    assert out == pytest.approx([1.0, -1.0, -1.0, 1.0], rel=1e-5)


def test_rloo_uses_mean_of_the_others():
    rule = make_advantage_rule("rloo")
    # 1 - mean(0, 0) = 1; 0 - mean(1, 0) = -0.5
    assert rule([1.0, 0.0, 0.0]) == pytest.approx([1.0, -0.5, -0.5])
    assert set(ADVANTAGES) == {"grpo", "rloo"}


def _state(reward: float, idx: int = 0) -> RolloutState:
    return RolloutState(example_id=0, rollout_idx=idx, prompt=[], reward=reward)


def test_filter_drops_uniform_groups_only():
    varied = [_state(1.0), _state(0.0, 1)]
    same_ones = [_state(1.0), _state(1.0, 1)]
    same_zeros = [_state(0.0), _state(0.0, 1)]
    assert is_uniform(same_ones) and is_uniform(same_zeros) and not is_uniform(varied)
    result = filter_groups([varied, same_ones, same_zeros])
    assert result.kept == [varied] and result.dropped == 2
    assert filter_groups([same_ones], enabled=False).kept == [same_ones]


def _inputs():
    # two sequences, three completion positions; the second has one padded position
    trainer = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, 0.0]], requires_grad=True)
    sampler = torch.tensor([[-1.0, -2.0 + math.log(2.0), -0.5 - math.log(10.0)], [-1.0, -1.0, 0.0]])
    # ratios: row0 = [1, 0.5, 10], row1 = [1, 1, (pad)]
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    return trainer, sampler, adv, mask


def test_masked_ratio_loss_matches_hand_computation():
    trainer, sampler, adv, mask = _inputs()
    loss_fn = make_loss("mask", mask_low=0.125, mask_high=8.0, clip_eps=0.2)
    out = loss_fn(trainer, sampler, adv, mask, total_tokens=5)
    # kept tokens: row0 ratios 1 and 0.5 (10 is masked), row1 ratios 1, 1
    # sum(-ratio*A) = -(1*1 + 0.5*1) - (1*-2 + 1*-2) = -1.5 + 4 = 2.5 ; / 5 tokens
    assert float(out.loss.detach()) == pytest.approx(0.5, rel=1e-5)
    assert out.masked_tokens == 1.0
    out.loss.backward()
    # d/dlogp of -ratio*A/5 = -ratio*A/5 on kept tokens, 0 on the masked and padded ones
    expected = torch.tensor([[-0.2, -0.1, 0.0], [0.4, 0.4, 0.0]])
    assert torch.allclose(trainer.grad, expected, atol=1e-6)


def test_clipped_loss_clips_and_counts():
    trainer, sampler, adv, mask = _inputs()
    loss_fn = make_loss("clip", mask_low=0.125, mask_high=8.0, clip_eps=0.2)
    out = loss_fn(trainer, sampler, adv, mask, total_tokens=5)
    # row0 (A=1): ratio 1 -> 1 ; ratio 0.5 -> min(0.5, 0.8) = 0.5 (not clipped) ; ratio 10 masked
    # row1 (A=-2): ratio 1 -> -2 each
    # loss = -(1 + 0.5 - 2 - 2) / 5 = 0.5
    assert float(out.loss.detach()) == pytest.approx(0.5, rel=1e-5)
    assert out.clipped_tokens == 0.0
    # a ratio of 1.5 with A=1 is clipped to 1.2
    t = torch.tensor([[math.log(1.5)]], requires_grad=True)
    out = loss_fn(t, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1), total_tokens=1)
    assert float(out.loss.detach()) == pytest.approx(-1.2, rel=1e-5) and out.clipped_tokens == 1.0
    out.loss.backward()
    assert float(t.grad) == 0.0  # clipped: no gradient
    assert {"mask", "clip"} <= set(LOSSES)


def test_mismatch_kl_is_zero_when_on_policy():
    trainer, _, adv, mask = _inputs()
    out = make_loss("mask", 0.125, 8.0, 0.2)(trainer, trainer.detach(), adv, mask, total_tokens=5)
    assert out.mismatch_kl == pytest.approx(0.0, abs=1e-7) and out.masked_tokens == 0.0


def test_errored_rollouts_are_not_scores_in_rl():
    """A rollout whose model call failed has no reward: it neither makes a group look varied nor drags
    the baseline mean down, and the baseline still refuses when every rollout failed."""
    from rl_backend.baseline import summarize
    from rl_backend.config import BaselineConfig

    failed = RolloutState(example_id=0, rollout_idx=1, prompt=[], reward=0.0, error="model call failed: 503",
                          error_kind="model")
    group = [_state(1.0), failed]
    assert is_uniform(group)  # one scored rollout: no learning signal, however the failure scored
    report = summarize([group, [_state(0.5), _state(0.5, 1)]], BaselineConfig(min_reward=0.0, max_reward=1.0,
                                                                              min_diverse_groups=0.0))
    assert report.attempts == 4 and report.scored == 3 and report.errors == 1
    assert report.mean_reward == pytest.approx(2.0 / 3)
    all_failed = summarize([[failed]], BaselineConfig())
    assert not all_failed.passed and "all 1 baseline rollouts failed" in all_failed.problems[0]

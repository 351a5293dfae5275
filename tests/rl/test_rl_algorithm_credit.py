"""Each training algorithm's credit and loss routing, and the three loss components, against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from rl_backend.advantages import make_advantage_rule
from rl_backend.algorithms import (
    ALGORITHMS,
    GRPO,
    OPD,
    OPSD,
    RAE,
    Echo,
    LengthPenalty,
    MaxRL,
    SFTDistill,
    Span,
    Trace,
    observation_weights,
)
from rl_backend.loss_components import ce_token_losses, combine, members, ref_kl_token_losses


def _traces(*rewards: float, agent: str = "agent") -> list[Trace]:
    return [Trace(reward=r, agent=agent) for r in rewards]


def test_registry_names_and_components():
    assert list(ALGORITHMS) == ["grpo", "max_rl", "rae", "hierarchical_grpo", "opd", "sft", "opsd", "echo"]
    routing = {name: (cls.action_component, cls.observation_component) for name, cls in ALGORITHMS.items()}
    assert routing == {"grpo": ("rl", None), "max_rl": ("rl", None), "rae": ("rl", None),
                       "hierarchical_grpo": ("rl", None), "opd": ("ref_kl", None), "sft": ("ce", None),
                       "opsd": ("ref_kl", None), "echo": ("rl", "ce")}
    available = sorted(n for n, cls in ALGORITHMS.items() if cls.available())
    assert available == ["echo", "grpo", "max_rl", "opd", "opsd", "rae", "sft"]


def test_grpo_is_todays_rule():
    assert GRPO().credit(_traces(1, 0, 0, 1)) == [0.5, -0.5, -0.5, 0.5]
    rloo = GRPO(make_advantage_rule("rloo"))
    assert rloo.credit(_traces(1, 0, 0)) == pytest.approx([1.0, -0.5, -0.5])


def test_grpo_length_penalty_by_hand():
    # pass rate 0.5; output 10 and 20 tokens (max 20), input 0, one turn each (max 1)
    group = [Trace(reward=1.0, output_tokens=10, turns=1), Trace(reward=0.0, output_tokens=20, turns=1)]
    penalty = LengthPenalty(num_output_tokens_weight=0.25, num_input_tokens_weight=0.1, num_turns_weight=0.1)
    # shaped: 1 - 0.5 * (0.25 * 0.5 + 0.1) = 0.8875;  0 - 0.5 * (0.25 * 1 + 0.1) = -0.175;  mean 0.35625
    assert penalty.shaped(group) == pytest.approx([0.8875, -0.175])
    assert GRPO(length_penalty=penalty).credit(group) == pytest.approx([0.53125, -0.53125])


def test_max_rl_divides_by_the_group_mean():
    # mean 0.25: (1 - 0.25) / 0.25 = 3, (0 - 0.25) / 0.25 = -1; a hard group (p = 1/4) weighs 1/p
    assert MaxRL().credit(_traces(1, 0, 0, 0)) == pytest.approx([3.0, -1.0, -1.0, -1.0])
    # mean 0.75: 0.25 / 0.75 = 1/3, -0.75 / 0.75 = -1
    assert MaxRL().credit(_traces(1, 1, 1, 0)) == pytest.approx([1 / 3, 1 / 3, 1 / 3, -1.0])
    assert MaxRL().credit(_traces(0, 0)) == [0.0, 0.0]
    assert MaxRL().credit(_traces(-1, 0)) == [0.0, 0.0]  # mean <= 0: no signal


def test_rae_scores_against_the_baseline_before_updating_it():
    rae = RAE(decay=0.5)
    # b = 0: adv 1, b <- 0.5;  adv 1 - 0.5 = 0.5, b <- 0.75;  adv 0 - 0.75, b <- 0.375
    assert rae.credit(_traces(1, 1, 0)) == pytest.approx([1.0, 0.5, -0.75])
    assert rae.baselines == {"agent": pytest.approx(0.375)}
    # per agent: the other seat starts from its own 0
    assert rae.credit([Trace(reward=-1.0, agent="player1"), Trace(reward=1.0, agent="agent")]) == \
        pytest.approx([-1.0, 0.625])
    assert rae.baselines == {"agent": pytest.approx(0.6875), "player1": pytest.approx(-0.5)}
    restored = RAE(decay=0.5)
    restored.load_state_dict(rae.state_dict())
    assert restored.credit(_traces(1)) == pytest.approx([0.3125])
    assert not RAE.group_relative and GRPO.group_relative


def test_distillation_assigns_no_credit():
    for cls in (OPD, OPSD, SFTDistill):
        assert cls().credit(_traces(1, 0)) is None
        assert cls.available() and cls.missing is None


def test_echo_role_weights_by_hand():
    spans = [Span("system", False, 2), Span("user", False, 3), Span("assistant", True, 4), Span("tool", False, 2),
             Span("user", False, 1), Span("assistant", True, 2)]
    # the initial prompt (before the first sampled message) and the sampled tokens get 0
    assert observation_weights(spans, {"tool": 0.25, "user": 0.05}) == \
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0.25, 0.25, 0.05, 0, 0]
    echo = Echo()
    assert echo.roles == {"tool": 0.1}
    assert echo.weights(spans) == [0] * 9 + [0.1, 0.1] + [0] * 3
    assert echo.credit(_traces(1, 0)) == [0.5, -0.5]  # GRPO on the actions


def test_ce_component_is_weighted_nll_over_its_own_tokens():
    logprobs = torch.tensor([[-1.0, -2.0, -0.5, -3.0]])
    weights = torch.tensor([[1.0, 0.0, 0.5, 1.0]])
    losses = ce_token_losses(logprobs, weights)
    assert losses.tolist() == [[1.0, 0.0, 0.25, 3.0]]
    assert float(members(weights).sum()) == 3


def test_ref_kl_component_by_hand():
    logprobs = torch.log(torch.tensor([[0.5, 0.2, 0.4]]))
    sampler = torch.log(torch.tensor([[0.5, 0.5, 0.2]]))
    ref = torch.log(torch.tensor([[0.8, 0.4, 0.1]]))
    weights = torch.ones(1, 3)
    losses = ref_kl_token_losses(logprobs, sampler, ref, weights, mask_low=0.2, kl_tau=1e-3)
    import math
    # token 0: ratio 1, signal log(0.8/0.5); token 1: probability fell 0.3 > 0.2 -> dropped, only the KL term;
    # token 2: ratio 2, signal log(0.1/0.4), plus kl_tau * log(2)^2
    expected = [-math.log(0.8 / 0.5), 1e-3 * math.log(0.4) ** 2, -math.log(0.1 / 0.4) * 2 + 1e-3 * math.log(2) ** 2]
    assert losses[0].tolist() == pytest.approx(expected, rel=1e-5)
    # the gradient raises log p where the teacher is above the policy
    logprobs.requires_grad_(True)
    ref_kl_token_losses(logprobs, sampler, ref, weights)[0, 0].backward()
    assert logprobs.grad[0, 0] < 0


def test_components_sum_with_their_own_denominators():
    # rl: 2 tokens summing 1.0; ce: 4 tokens summing 2.0; ref_kl: none
    assert combine({"rl": 1.0, "ce": 2.0, "ref_kl": 5.0}, {"rl": 2, "ce": 4, "ref_kl": 0}) == pytest.approx(1.0)
    # adding ce tokens never changes the rl term's share
    assert combine({"rl": 1.0, "ce": 4.0}, {"rl": 2, "ce": 8}) == pytest.approx(0.5 + 0.5)
    assert combine({"rl": 1.0}, {"rl": 2}) == pytest.approx(0.5)


def test_dppo_loss_by_hand():
    """prime-rl's default loss: the sign-conditioned probability trust region and the KL term, per batch token."""
    import math

    from rl_backend.losses import make_loss

    loss = make_loss("dppo", dppo_mask_low=0.2, dppo_mask_high=0.2, adv_tau=1.0, kl_tau=0.1)
    p = torch.tensor([[0.5], [0.9], [0.2], [0.4]])  # four one-token sequences
    q = torch.tensor([[0.5], [0.6], [0.5], [0.5]])  # the sampler's
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    terms = loss.token_losses(torch.log(p), torch.log(q), adv.unsqueeze(-1), torch.ones(4, 1))
    # row 1: A > 0 and p rose 0.3 > 0.2: out of the pg term; row 2: A < 0 and p fell 0.3 > 0.2: out too
    assert terms.keep.flatten().tolist() == [1.0, 0.0, 0.0, 1.0]
    r = (p / q).flatten().tolist()
    kl = [0.1 * math.log(x) ** 2 for x in r]
    expected = [-1.0 * r[0] + kl[0], kl[1], kl[2], 1.0 * r[3] + kl[3]]
    assert terms.losses.flatten().tolist() == pytest.approx(expected, rel=1e-5)
    out = loss(torch.log(p), torch.log(q), adv, torch.ones(4, 1), total_tokens=8)
    assert float(out.loss) == pytest.approx(sum(expected) / 8, rel=1e-5)  # over the step's tokens

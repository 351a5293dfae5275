"""The ``ce`` and ``ref_kl`` loss components and how the three components add up.

The loss is ``sum(L_rl) / N_rl + sum(L_ce) / N_ce + sum(L_ref_kl) / N_ref_kl``: each component's summed
per-token losses over its own member tokens (weight != 0), divided by the step's count of those tokens, so that
adding tokens to one component never changes another's per-token learning rate (prime-rl's rule). A token may
belong to several components; their gradients add. ``rl`` is the policy loss of :mod:`rl_backend.losses`.

Inputs are ``(batch, tokens)`` tensors over completion positions, as in :mod:`rl_backend.losses`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

REF_KL_MASK_LOW = 0.2
"""``ref_kl``'s one-sided trust region: a token whose probability fell more than this below the sampler's is dropped."""
REF_KL_TAU = 1e-3
"""Weight of the squared log importance ratio that keeps the trainer near the sampler (prime-rl's fixed value)."""


def members(weights: torch.Tensor) -> torch.Tensor:
    """A component's member tokens: those with a non-zero weight (0 leaves a token out of mask and denominator)."""
    return (weights != 0).to(weights.dtype)


def ce_token_losses(logprobs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted negative log-likelihood per token, ``-w * log p`` (``sft``'s teacher tokens, ``echo``'s
    observations)."""
    return -logprobs * weights


def ref_kl_token_losses(logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, ref_logprobs: torch.Tensor,
                        weights: torch.Tensor, mask_low: float = REF_KL_MASK_LOW,
                        kl_tau: float = REF_KL_TAU) -> torch.Tensor:
    """Reverse KL to a reference as the policy-gradient signal (``opd``, ``opsd``):
    ``-keep * sg(log p_ref - log p) * r + kl_tau * log(r)^2`` per member token, times its weight, with
    ``r = p / p_sampler`` and ``keep`` dropping tokens whose probability fell more than ``mask_low`` below the
    sampler's. Minimising it raises the tokens the reference likes more than the policy does."""
    import torch

    member = members(weights)
    log_ratio = logprobs - sampler_logprobs
    ratio = torch.exp(log_ratio)
    keep = member * ((torch.exp(logprobs) - torch.exp(sampler_logprobs)) >= -mask_low).to(logprobs.dtype)
    signal = (ref_logprobs - logprobs).detach()
    return (-keep * signal * ratio + kl_tau * member * log_ratio ** 2) * weights


def combine(sums: Mapping[str, torch.Tensor | float], counts: Mapping[str, int]) -> torch.Tensor | float:
    """``sum over components of sums[c] / counts[c]``; a component with no member tokens adds nothing."""
    total: torch.Tensor | float = 0.0
    for component, value in sums.items():
        count = counts.get(component, 0)
        if count > 0:
            total = total + value / count
    return total

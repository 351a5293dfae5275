"""Policy losses: small named classes in the plain registry ``LOSSES``.

All share one contract. Inputs, shaped ``(batch, tokens)`` over completion positions:
``logprobs`` (trainer, with grad, logits divided by the sampling temperature), ``sampler_logprobs``
(what the rollout engine reported for the sampled token), ``advantages`` (``(batch,)``), ``mask``
(1 for completion tokens that count). ``total_tokens`` is the token count of the *whole* step's batch
so that micro-batches add up to a loss normalised by tokens, not by sequences.

The importance ratio ``exp(logprobs - sampler_logprobs)`` corrects for the sampler being a step
behind (one-step off-policy) and for numerical differences between engines. Tokens whose ratio is
outside ``[mask_low, mask_high]`` are masked out entirely: their gradient would be dominated by a
mismatch rather than by the advantage. Torch is imported inside the methods so that the config can
list the loss names without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import torch


@dataclass
class LossOutput:
    loss: "torch.Tensor"
    masked_tokens: float
    """Tokens masked for an out-of-range ratio (summed, not normalised)."""
    clipped_tokens: float
    """Tokens whose ratio was clipped (``clip`` only)."""
    mismatch_kl: float
    """Sum over counted tokens of the k3 estimate of KL(sampler || trainer)."""


class PolicyLoss:
    name: ClassVar[str]

    def __init__(self, mask_low: float = 0.125, mask_high: float = 8.0, clip_eps: float = 0.2):
        self.mask_low = mask_low
        self.mask_high = mask_high
        self.clip_eps = clip_eps

    def __call__(
        self,
        logprobs: "torch.Tensor",
        sampler_logprobs: "torch.Tensor",
        advantages: "torch.Tensor",
        mask: "torch.Tensor",
        total_tokens: int,
    ) -> LossOutput:
        import torch

        mask = mask.to(logprobs.dtype)
        log_ratio = logprobs - sampler_logprobs
        ratio = torch.exp(log_ratio)
        in_range = ((ratio >= self.mask_low) & (ratio <= self.mask_high)).to(logprobs.dtype)
        keep = mask * in_range
        adv = advantages.to(logprobs.dtype).unsqueeze(-1)
        per_token, clipped = self.per_token(ratio, adv)
        loss = (per_token * keep).sum() / max(1, total_tokens)
        with torch.no_grad():
            detached = log_ratio.detach()
            k3 = torch.exp(detached) - 1 - detached
            return LossOutput(
                loss=loss,
                masked_tokens=float((mask * (1 - in_range)).sum()),
                clipped_tokens=float((clipped * keep).sum()),
                mismatch_kl=float((k3 * mask).sum()),
            )

    def per_token(self, ratio: "torch.Tensor", adv: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
        """Per-token loss (to be minimised) and a 0/1 tensor of clipped tokens."""
        raise NotImplementedError


class MaskedRatioLoss(PolicyLoss):
    """``-ratio * A`` on in-range tokens: importance-weighted policy gradient with out-of-range tokens masked."""

    name = "mask"

    def per_token(self, ratio, adv):
        import torch

        return -ratio * adv, torch.zeros_like(ratio)


class ClippedRatioLoss(PolicyLoss):
    """PPO-style ``-min(ratio * A, clip(ratio, 1-eps, 1+eps) * A)``, plus the same out-of-range masking."""

    name = "clip"

    def per_token(self, ratio, adv):
        import torch

        clipped_ratio = torch.clamp(ratio, 1 - self.clip_eps, 1 + self.clip_eps)
        unclipped = ratio * adv
        clipped = clipped_ratio * adv
        was_clipped = (clipped < unclipped).to(ratio.dtype)
        return -torch.minimum(unclipped, clipped), was_clipped


LOSSES: dict[str, type[PolicyLoss]] = {loss.name: loss for loss in (MaskedRatioLoss, ClippedRatioLoss)}
LOSS_NAMES = frozenset(LOSSES)


def make_loss(name: str, mask_low: float, mask_high: float, clip_eps: float) -> PolicyLoss:
    return LOSSES[name](mask_low=mask_low, mask_high=mask_high, clip_eps=clip_eps)

"""Policy losses: small named classes in the plain registry ``LOSSES``.

All share one contract. Inputs, shaped ``(batch, tokens)`` over completion positions:
``logprobs`` (trainer, with grad, logits divided by the sampling temperature), ``sampler_logprobs``
(what the rollout engine reported for the sampled token: the behaviour policy, pi_old), ``advantages``
(``(batch,)``), ``mask`` (1 for completion tokens that count). ``total_tokens`` / ``total_sequences``
are the counts of the *whole* step's batch, so that micro-batches add up to one loss with the loss's
own normalisation (:data:`NORMALIZERS`): per token of the batch (``token``), per sequence
(``sequence``) or a constant (``constant``, Dr. GRPO's ``sequences * max_tokens``).

With ``r = exp(logprobs - sampler_logprobs)`` (the importance ratio, which also corrects for the
sampler being a step behind and for numerical differences between engines), each class defines the
per-token loss it minimises. ``mask`` and ``clip`` (primekit's first two) additionally drop tokens
whose ratio is outside ``[mask_low, mask_high]``; the losses named after papers follow their paper
(their clipping is their trust region). Torch is imported inside the methods so that the config
can list the loss names without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import torch

NORMALIZERS = ("token", "sequence", "constant")
"""How summed per-token losses become one number: over the batch's tokens (DAPO, TRL's ``dapo``/``cispo``,
prime-rl), per sequence then over sequences (GRPO, TRL's ``grpo``), or over ``sequences * max_tokens``
(Dr. GRPO, TRL's ``dr_grpo``)."""


@dataclass
class LossOutput:
    loss: torch.Tensor
    masked_tokens: float
    """Tokens masked for an out-of-range ratio (summed, not normalised; ``mask``/``clip`` only)."""
    clipped_tokens: float
    """Counted tokens whose ratio (or importance weight) was clipped, so that they carry no gradient or a capped one."""
    mismatch_kl: float
    """Sum over counted tokens of the k3 estimate of KL(sampler || trainer)."""


@dataclass
class TokenTerms:
    """One batch's per-token terms: ``losses`` (already multiplied by ``keep``), the counted ``mask``, the
    tokens ``keep`` (the mask less ratio-masked ones), the 0/1 ``clipped`` tokens and the token ``log_ratio``."""

    losses: torch.Tensor
    mask: torch.Tensor
    keep: torch.Tensor
    clipped: torch.Tensor
    log_ratio: torch.Tensor


class PolicyLoss:
    """``__call__(logprobs, sampler_logprobs, advantages, mask, total_tokens, total_sequences) -> LossOutput``.

    A subclass names itself (``name``), says how it is normalised (``normalizer``), its clipping
    defaults, and implements :meth:`per_token`; :meth:`log_weight` is the per-token log importance
    weight (the token's own log-ratio, or GSPO's sequence mean).
    """

    name: ClassVar[str]
    normalizer: ClassVar[str] = "token"
    ratio_mask: ClassVar[bool] = False
    """Drop tokens whose ratio is outside ``[mask_low, mask_high]`` (primekit's ``mask`` and ``clip``)."""
    default_eps: ClassVar[tuple[float, float]] = (0.2, 0.2)
    """``(eps_low, eps_high)`` used where the config leaves ``clip_eps`` / ``clip_eps_high`` unset."""

    def __init__(self, mask_low: float = 0.125, mask_high: float = 8.0, clip_eps: float | None = None,
                 clip_eps_high: float | None = None, max_tokens: int | None = None):
        self.mask_low = mask_low
        self.mask_high = mask_high
        self.eps_low, self.eps_high = self.clip_range(clip_eps, clip_eps_high)
        self.max_tokens = max_tokens

    @classmethod
    def clip_range(cls, clip_eps: float | None, clip_eps_high: float | None) -> tuple[float, float]:
        """``(eps_low, eps_high)`` from the config's (possibly unset) values: an unset upper clip follows a set
        lower one for a loss whose defaults are symmetric, and keeps the loss's own default otherwise (DAPO)."""
        low, high = cls.default_eps
        symmetric = low == high
        low = low if clip_eps is None else clip_eps
        if clip_eps_high is not None:
            return low, clip_eps_high
        return low, (low if symmetric else high)

    @property
    def clip_eps(self) -> float:
        return self.eps_low

    def __call__(
        self,
        logprobs: torch.Tensor,
        sampler_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        total_tokens: int,
        total_sequences: int | None = None,
    ) -> LossOutput:
        import torch

        adv = advantages.to(logprobs.dtype).unsqueeze(-1)
        terms = self.token_losses(logprobs, sampler_logprobs, adv, mask)
        sequences = total_sequences if total_sequences is not None else logprobs.shape[0]
        loss = self.reduce(terms.losses, terms.mask, total_tokens, sequences)
        with torch.no_grad():
            detached = terms.log_ratio.detach()
            k3 = torch.exp(detached) - 1 - detached
            return LossOutput(
                loss=loss,
                masked_tokens=float((terms.mask - terms.keep).sum()),
                clipped_tokens=float((terms.clipped * terms.keep).sum()),
                mismatch_kl=float((k3 * terms.mask).sum()),
            )

    def token_losses(self, logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, adv: torch.Tensor,
                     mask: torch.Tensor) -> TokenTerms:
        """The per-token losses before normalisation (``adv`` broadcast against ``logprobs``): what both
        :meth:`__call__` and the prime-rl adapter (:mod:`rl_backend.prime_rl_loss`) sum."""
        import torch

        mask = mask.to(logprobs.dtype)
        log_ratio = logprobs - sampler_logprobs
        ratio = torch.exp(self.log_weight(log_ratio, mask))
        keep = mask
        if self.ratio_mask:
            token_ratio = torch.exp(log_ratio)
            keep = mask * ((token_ratio >= self.mask_low) & (token_ratio <= self.mask_high)).to(logprobs.dtype)
        per_token, clipped = self.per_token(ratio, adv, logprobs)
        return TokenTerms(losses=per_token * keep, mask=mask, keep=keep, clipped=clipped, log_ratio=log_ratio)

    def log_weight(self, log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The per-token log importance weight: the token's own log-ratio."""
        return log_ratio

    def reduce(self, losses: torch.Tensor, mask: torch.Tensor, total_tokens: int, total_sequences: int) -> torch.Tensor:
        """Masked per-token losses -> this micro-batch's share of the step's loss (see :data:`NORMALIZERS`)."""
        if self.normalizer == "sequence":
            lengths = mask.sum(-1).clamp(min=1)
            return (losses.sum(-1) / lengths).sum() / max(1, total_sequences)
        if self.normalizer == "constant":
            if not self.max_tokens:
                raise ValueError(f"loss '{self.name}' needs max_tokens (its constant normaliser)")
            return losses.sum() / max(1, total_sequences * self.max_tokens)
        return losses.sum() / max(1, total_tokens)

    def per_token(self, ratio: torch.Tensor, adv: torch.Tensor,
                  logprobs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token loss (to be minimised) and a 0/1 tensor of clipped tokens."""
        raise NotImplementedError

    def clipped_surrogate(self, ratio: torch.Tensor, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """PPO's ``-min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A)`` and where the clipped side won."""
        import torch

        clipped_ratio = torch.clamp(ratio, 1 - self.eps_low, 1 + self.eps_high)
        unclipped = ratio * adv
        clipped = clipped_ratio * adv
        was_clipped = (clipped < unclipped).to(ratio.dtype)
        return -torch.minimum(unclipped, clipped), was_clipped


class MaskedRatioLoss(PolicyLoss):
    """``-r * A`` on in-range tokens, over the batch's tokens: importance-weighted policy gradient with
    out-of-range tokens masked (the default; closest to prime-rl's masked default loss)."""

    name = "mask"
    ratio_mask = True

    def per_token(self, ratio, adv, logprobs):
        import torch

        return -ratio * adv, torch.zeros_like(ratio)


class ClippedRatioLoss(PolicyLoss):
    """PPO-style ``-min(r * A, clip(r, 1-eps, 1+eps) * A)`` over the batch's tokens, plus the same
    out-of-range masking as ``mask``."""

    name = "clip"
    ratio_mask = True

    def per_token(self, ratio, adv, logprobs):
        return self.clipped_surrogate(ratio, adv)


class GRPOLoss(PolicyLoss):
    """GRPO (Shao et al. 2024, DeepSeekMath, eq. 3; TRL ``loss_type="grpo"``): the clipped surrogate per
    token, averaged over each sequence's tokens, then over sequences:

    ``L = 1/G sum_i 1/|o_i| sum_t -min(r_it A_i, clip(r_it, 1-eps, 1+eps) A_i)``

    The per-sequence mean gives a short sequence's tokens more weight than a long one's (the length
    bias Dr. GRPO removes)."""

    name = "grpo"
    normalizer = "sequence"

    def per_token(self, ratio, adv, logprobs):
        return self.clipped_surrogate(ratio, adv)


class DrGRPOLoss(PolicyLoss):
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", eq. 4; TRL ``loss_type="dr_grpo"``):
    GRPO's clipped surrogate with no per-sequence length normalisation, divided by a constant:

    ``L = 1/(G * L_max) sum_i sum_t -min(r_it A_i, clip(r_it, 1-eps, 1+eps) A_i)``

    with ``L_max = sampling.max_tokens``. The paper's other half, no std normalisation of the
    advantage, is primekit's default (``trainer.advantage.std_normalize = false``)."""

    name = "dr_grpo"
    normalizer = "constant"

    def per_token(self, ratio, adv, logprobs):
        return self.clipped_surrogate(ratio, adv)


class DAPOLoss(PolicyLoss):
    """DAPO (Yu et al. 2025, eq. 8; TRL ``loss_type="dapo"``): decoupled clipping ("clip-higher",
    eps_low = 0.2, eps_high = 0.28) and a token-level mean over the whole batch:

    ``L = 1/sum_i |o_i| sum_i sum_t -min(r_it A_i, clip(r_it, 1-eps_low, 1+eps_high) A_i)``"""

    name = "dapo"
    default_eps = (0.2, 0.28)

    def per_token(self, ratio, adv, logprobs):
        return self.clipped_surrogate(ratio, adv)


class CISPOLoss(PolicyLoss):
    """CISPO (MiniMax-M1, 2025, eq. 4-5; TRL ``loss_type="cispo"``): REINFORCE on every token, weighted by
    the importance ratio clipped from above and detached, over the batch's tokens:

    ``L = 1/sum_i |o_i| sum_i sum_t -sg(min(r_it, 1 + eps_high)) A_i log pi(o_it)``

    No token loses its gradient (PPO's clip drops clipped tokens' gradients); only the weight is
    capped. ``eps_high`` defaults to 4.0 (a cap of 5); MiniMax-M1 sets no lower bound, nor does this."""

    name = "cispo"
    default_eps = (0.2, 4.0)

    def per_token(self, ratio, adv, logprobs):
        import torch

        weight = torch.clamp(ratio, max=1 + self.eps_high).detach()
        return -weight * adv * logprobs, (ratio > 1 + self.eps_high).to(ratio.dtype)


class GSPOLoss(PolicyLoss):
    """GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization", eq. 5-7; TRL
    ``importance_sampling_level="sequence"``): one importance ratio per sequence, the geometric mean of
    its tokens' ratios, in the clipped surrogate, averaged over sequences:

    ``s_i = exp(1/|o_i| sum_t log r_it)``, ``L = 1/G sum_i -min(s_i A_i, clip(s_i, 1-eps_low, 1+eps_high) A_i)``

    The clip range is the paper's (3e-4, 4e-4): sequence ratios stay much nearer 1 than token ones."""

    name = "gspo"
    normalizer = "sequence"
    default_eps = (3e-4, 4e-4)

    def log_weight(self, log_ratio, mask):
        mean = (log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
        return mean.expand_as(log_ratio)

    def per_token(self, ratio, adv, logprobs):
        return self.clipped_surrogate(ratio, adv)


class DPPOLoss(PolicyLoss):
    """prime-rl's default loss (DPPO-Binary-TV, arXiv:2602.04879, plus Kimi-K2.5's KL term, arXiv:2602.02276), over the
    batch's tokens:

    ``L = 1/sum_i |o_i| sum_i sum_t [-keep_it * adv_tau * A_i * r_it + kl_tau * log(r_it)^2]``

    The trust region is on probabilities, conditioned on the advantage's sign: with A > 0 a token whose probability
    rose more than ``dppo_mask_high`` above the sampler's is dropped from the policy-gradient term, with A < 0 one
    whose probability fell more than ``dppo_mask_low``. The KL term (squared log ratio) keeps every token near the
    sampler."""

    name = "dppo"

    def __init__(self, *args, dppo_mask_low: float = 0.2, dppo_mask_high: float = 0.2, adv_tau: float = 1.0,
                 kl_tau: float = 1e-3, **kwargs):
        super().__init__(*args, **kwargs)
        self.dppo_mask_low, self.dppo_mask_high = dppo_mask_low, dppo_mask_high
        self.adv_tau, self.kl_tau = adv_tau, kl_tau

    def token_losses(self, logprobs, sampler_logprobs, adv, mask):
        import torch

        mask = mask.to(logprobs.dtype)
        log_ratio = logprobs - sampler_logprobs
        ratio = torch.exp(log_ratio)
        diff = torch.exp(logprobs) - torch.exp(sampler_logprobs)
        adv = adv.expand_as(logprobs)
        invalid = torch.where(adv > 0, diff > self.dppo_mask_high, diff < -self.dppo_mask_low)
        keep = mask * (~invalid).to(logprobs.dtype)
        losses = -keep * self.adv_tau * adv * ratio + self.kl_tau * mask * log_ratio ** 2
        return TokenTerms(losses=losses, mask=mask, keep=keep, clipped=torch.zeros_like(ratio), log_ratio=log_ratio)


LOSSES: dict[str, type[PolicyLoss]] = {
    loss.name: loss
    for loss in (MaskedRatioLoss, ClippedRatioLoss, GRPOLoss, DrGRPOLoss, DAPOLoss, CISPOLoss, GSPOLoss, DPPOLoss)
}
LOSS_NAMES = frozenset(LOSSES)


def clip_range(name: str, clip_eps: float | None, clip_eps_high: float | None) -> tuple[float, float]:
    """``(eps_low, eps_high)`` the loss ``name`` clips with, given the config's (possibly unset) values."""
    return LOSSES[name].clip_range(clip_eps, clip_eps_high)


def make_loss(name: str, mask_low: float = 0.125, mask_high: float = 8.0, clip_eps: float | None = None,
              clip_eps_high: float | None = None, max_tokens: int | None = None, **knobs: float) -> PolicyLoss:
    """The loss ``name``; ``knobs`` are a loss's own settings (``dppo``: ``dppo_mask_low``/``high``, ``adv_tau``,
    ``kl_tau``)."""
    return LOSSES[name](mask_low=mask_low, mask_high=mask_high, clip_eps=clip_eps, clip_eps_high=clip_eps_high,
                        max_tokens=max_tokens, **knobs)

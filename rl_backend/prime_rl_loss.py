"""primekit's token-normalised losses as a prime-rl custom loss (``[trainer.loss] type = "custom"``).

prime-rl (the pinned ``v0.8.1.dev67``) calls ``import_path(inputs, **kwargs)`` once per sample with 1-D
tensors (``trainer_logprobs``, ``inference_logprobs``, per-token ``advantages``, a boolean
``loss_mask``, optional ``loss_weights``), sums what comes back over the step and divides by the step's
token count. That is exactly the token-level normalisation of ``clip``, ``dapo`` and ``cispo``, so
those three carry unchanged; the per-sequence (``grpo``, ``gspo``) and constant (``dr_grpo``)
normalisations cannot be expressed per sample, and the export refuses them.

This module imports only torch and :mod:`rl_backend.losses`, so it works in prime-rl's environment
with primekit installed there without its dependencies (``uv pip install --no-deps primekit``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rl_backend.losses import LOSSES, make_loss

IMPORT_PATH = "rl_backend.prime_rl_loss.primekit_loss"
"""What the export writes as ``[trainer.loss] import_path``."""
CARRIED = tuple(name for name, loss in LOSSES.items() if loss.normalizer == "token" and name not in ("mask", "dppo"))
"""Loss types carried as a custom loss (``mask`` and ``dppo`` map to prime-rl's default loss instead)."""


@dataclass
class _Outputs:
    """prime-rl's ``LossOutputs`` shape, used where prime-rl is not installed (tests)."""

    loss: Any
    metrics: dict[str, Any]


def primekit_loss(inputs: Any, type: str, mask_low: float = 0.125, mask_high: float = 8.0,
                  clip_eps: float | None = None, clip_eps_high: float | None = None) -> Any:
    """One sample's summed loss (prime-rl normalises by the step's tokens) and its clip/mask rates."""
    import torch

    if type not in CARRIED:
        raise ValueError(f"primekit loss '{type}' is not token-normalised; carried ones: {', '.join(CARRIED)}")
    loss = make_loss(type, mask_low=mask_low, mask_high=mask_high, clip_eps=clip_eps, clip_eps_high=clip_eps_high)
    mask = inputs.loss_mask.unsqueeze(0)
    terms = loss.token_losses(inputs.trainer_logprobs.unsqueeze(0), inputs.inference_logprobs.unsqueeze(0),
                              inputs.advantages.unsqueeze(0), mask)
    losses = terms.losses if inputs.loss_weights is None else terms.losses * inputs.loss_weights.unsqueeze(0)
    counted = terms.mask.sum().clamp(min=1)
    with torch.no_grad():
        metrics = {"is_clipped": (terms.clipped * terms.keep).sum() / counted,
                   "is_masked": (terms.mask - terms.keep).sum() / counted}
    try:
        from prime_rl.trainer.rl.loss import LossOutputs  # type: ignore[import-not-found]
    except ImportError:
        return _Outputs(loss=losses.sum(), metrics=metrics)
    return LossOutputs(loss=losses.sum(), metrics=metrics)

"""The log-probability of given tokens under a model: what a teacher answers for vLLM's ``prompt_logprobs``,
and what RL's trainer computes for the tokens it trains on (one function, so both read the same numbers).

``completion_logprobs`` is the trainer's form (a batch whose completions are the last positions, logits kept only
there); :func:`score_tokens` is a server's (one token list, every position after the first, with each token's
rank and the most likely alternatives).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


def completion_logprobs(model: Any, inputs: dict[str, Any], width: int, temperature: float = 1.0) -> torch.Tensor:
    """Temperature-scaled log-probabilities over the vocabulary at the last ``width`` positions' targets: the
    logits of positions ``-width-1 .. -2`` (each predicts the next token), so prompts' logits are never built."""
    out = model(**inputs, logits_to_keep=width + 1, use_cache=False)
    return torch.log_softmax(out.logits[:, :width].float() / temperature, dim=-1)


@dataclass(frozen=True)
class TokenScore:
    """One given token's log-probability after the tokens before it, its rank (1: the most likely) and the
    ``top`` most likely tokens there as ``(id, logprob)``."""

    token_id: int
    logprob: float
    rank: int
    top: tuple[tuple[int, float], ...] = ()


def score_tokens(model: Any, token_ids: list[int], top: int = 0) -> list[TokenScore | None]:
    """Each token's :class:`TokenScore` under ``model`` given the ones before it; ``None`` for the first (nothing
    precedes it), as vLLM's ``prompt_logprobs`` has it. Temperature 1: the model's own distribution."""
    if not token_ids:
        return []
    param = next(model.parameters())
    ids = torch.tensor([token_ids], dtype=torch.long, device=param.device)
    with torch.inference_mode():
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        logp = completion_logprobs(model, inputs, len(token_ids) - 1)[0] if len(token_ids) > 1 else None
    out: list[TokenScore | None] = [None]
    if logp is None:
        return out
    targets = ids[0, 1:]
    chosen = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ranks = (logp > chosen.unsqueeze(-1)).sum(-1) + 1
    best = torch.topk(logp, k=min(top, logp.shape[-1]), dim=-1) if top > 0 else None
    for i, (token, value, rank) in enumerate(zip(targets.tolist(), chosen.tolist(), ranks.tolist())):
        alternatives = tuple(zip(best.indices[i].tolist(), best.values[i].tolist())) if best is not None else ()
        out.append(TokenScore(int(token), float(value), int(rank), alternatives))
    return out

"""Choosing the next token for every sequence of a batch at once, with per-request settings.

Logprob policy (what :attr:`GenerationResult.logprobs` means):

* sampled rows (``temperature > 0``): ``log p(token)`` under the distribution the token was
  actually drawn from -- ``softmax(logits / temperature)``, restricted to the top-k / top-p set
  when those filters are on, and renormalised over that set. With no filter (the RL setting) this
  is the plain temperature-scaled log-softmax, which a trainer reproduces from its own logits.
* greedy rows (``temperature == 0``): ``log_softmax(logits)`` at temperature 1, the model's own
  probability of its argmax (the distribution of a point mass would say 0 and help nobody).

Randomness: each request owns a ``torch.Generator`` and draws exactly one uniform per sampled
token; the token is found by inverting that row's CDF. So a seeded request's stream does not
depend on its batch-mates (the logits themselves can still differ in the last bits between batch
sizes, which may rarely change a token that sits on a boundary).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from evalkit.model.requests import SamplingParams


def sample(
    logits: torch.Tensor,
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator],
) -> tuple[list[int], list[float]]:
    """Next token and its logprob for each row of float32 ``logits`` ``[B, vocab]``."""
    batch = logits.shape[0]
    tokens = torch.empty(batch, dtype=torch.long)
    chosen_logprobs = torch.empty(batch, dtype=torch.float32)
    greedy = [i for i, p in enumerate(params) if p.greedy]
    sampled = [i for i, p in enumerate(params) if not p.greedy]
    if greedy:
        index = torch.tensor(greedy)
        rows = logits if len(greedy) == batch else logits[index]  # a [32, 49k] copy costs ~1 ms
        best_logits, best = rows.max(dim=-1)  # two passes over the vocabulary, not three
        tokens[index] = best
        chosen_logprobs[index] = best_logits - torch.logsumexp(rows, dim=-1)
    if sampled:
        index = torch.tensor(sampled)
        row_params = [params[i] for i in sampled]
        temperature = torch.tensor([p.temperature for p in row_params], dtype=torch.float32)
        rows = logits if len(sampled) == batch else logits[index]
        logprobs = torch.log_softmax(rows / temperature[:, None], dim=-1)
        if any(p.filtered for p in row_params):
            logprobs = _filter(logprobs, row_params)
        uniforms = torch.stack([1.0 - torch.rand((), generator=generators[i]) for i in sampled])  # (0, 1]
        cdf = logprobs.exp().cumsum(dim=-1)
        drawn = torch.searchsorted(cdf, (uniforms * cdf[:, -1])[:, None]).squeeze(-1)
        drawn = drawn.clamp_(max=logits.shape[-1] - 1)
        tokens[index] = drawn
        chosen_logprobs[index] = _gather(logprobs, drawn)
    return tokens.tolist(), chosen_logprobs.tolist()


def _gather(logprobs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def _filter(logprobs: torch.Tensor, params: Sequence[SamplingParams]) -> torch.Tensor:
    """Keep each row's top-k and smallest top-p nucleus (the token crossing ``top_p`` stays in),
    drop the rest, and renormalise. Rows with no filter pass through unchanged."""
    vocab = logprobs.shape[-1]
    top_k = torch.tensor([p.top_k if p.top_k > 0 else vocab for p in params])
    top_p = torch.tensor([p.top_p for p in params], dtype=torch.float32)
    sorted_logprobs, order = logprobs.sort(dim=-1, descending=True)
    probs = sorted_logprobs.exp()
    mass_before = probs.cumsum(dim=-1) - probs
    ranks = torch.arange(vocab)[None, :]
    keep_sorted = (ranks < top_k[:, None]) & (mass_before < top_p[:, None])
    keep_sorted[:, 0] = True
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    filtered = logprobs.masked_fill(~keep, float("-inf"))
    return filtered - torch.logsumexp(filtered, dim=-1, keepdim=True)

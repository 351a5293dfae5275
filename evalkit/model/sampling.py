"""Choosing the next token for every sequence of a batch at once, on the engine's device.

Everything here is tensor arithmetic with no host synchronisation and no data-dependent shapes,
so one decode step (forward + sampling) can be captured in a CUDA graph. Per-request settings
arrive as per-row tensors; which kinds of rows are present (greedy, sampled, filtered) is a
:class:`SamplingMode` the host knows, so a batch pays only for the work its rows need.

Logprob policy (what :attr:`GenerationResult.logprobs` means):

* sampled rows (``temperature > 0``): ``log p(token)`` under the distribution the token was
  actually drawn from -- ``softmax(logits / temperature)`` of the logits after the repetition
  penalty, restricted to the top-k / top-p / min-p set when those filters are on, and
  renormalised over that set. With no filter or penalty (the RL default) this is the plain
  temperature-scaled log-softmax, which a trainer reproduces from its own logits.
* greedy rows (``temperature == 0``): ``log_softmax(logits)`` at temperature 1, the model's own
  probability of its argmax (the distribution of a point mass would say 0 and help nobody).

Randomness: counter-based. The uniform for a request's ``i``-th token is a hash of
``(seed, i)`` (splitmix64), computed on the device; the token is found by inverting that row's
CDF. So a seeded request's draws do not depend on its batch-mates, on the device, or on how many
steps run between host synchronisations (the logits themselves can still differ in the last bits
between batch sizes, which may rarely change a token that sits on a boundary).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import torch

from evalkit.model.requests import SamplingParams

_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed 64-bit integer
_MIX1 = -4658895280553007687  # 0xBF58476D1CE4E5B9
_MIX2 = -7723592293110705685  # 0x94D049BB133111EB


class SamplingMode(NamedTuple):
    """Which kinds of rows a batch holds; each is a separate code path (and CUDA graph)."""

    greedy: bool
    sampled: bool
    filtered: bool
    penalized: bool = False


class RowSettings(NamedTuple):
    """Per-row sampling tensors: ``temperature`` (0 = greedy), ``top_k`` (0 = off), ``top_p`` (1 = off),
    ``min_p`` (0 = off), ``penalty`` (repetition penalty, 1 = off) and ``seen`` (bool ``[B, vocab]``: the
    tokens of each row's prompt and completion so far; read only in penalized mode, else may be None)."""

    temperature: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor
    min_p: torch.Tensor
    penalty: torch.Tensor
    seen: torch.Tensor | None = None


def sampling_mode(params: Iterable[SamplingParams]) -> SamplingMode:
    greedy = sampled = filtered = penalized = False
    for p in params:
        greedy |= p.greedy
        sampled |= not p.greedy
        filtered |= p.filtered
        penalized |= p.penalized
    return SamplingMode(greedy, sampled, filtered, penalized)


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _mix(z: torch.Tensor) -> torch.Tensor:
    """The splitmix64 finaliser (int64 arithmetic wraps modulo 2**64 on CPU and CUDA)."""
    z = (z ^ _shift_right(z, 30)) * _MIX1
    z = (z ^ _shift_right(z, 27)) * _MIX2
    return z ^ _shift_right(z, 31)


def uniforms(seeds: torch.Tensor, counters: torch.Tensor) -> torch.Tensor:
    """float32 in ``(0, 1]``, a pure function of each row's ``(seed, counter)`` (int64 tensors)."""
    z = _mix(_mix(seeds) + (counters + 1) * _GOLDEN)
    return (_shift_right(z, 40) + 1).to(torch.float32) * (1.0 / (1 << 24))


def sample(
    logits: torch.Tensor, rows: RowSettings, seeds: torch.Tensor, counters: torch.Tensor, mode: SamplingMode
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next token (int64) and its logprob (float32) for each row of float32 ``logits`` ``[B, vocab]``.

    Per row: the settings ``rows``, ``seeds`` and ``counters`` (tokens this request has drawn so
    far). ``mode`` must cover every row.
    """
    if mode.penalized:
        logits = penalize(logits, rows.penalty, rows.seen)
    if not mode.sampled:
        return _greedy(logits)
    tokens, logprobs = _draw(logits, rows, uniforms(seeds, counters), mode.filtered)
    if mode.greedy:
        best, best_logprobs = _greedy(logits)
        is_greedy = rows.temperature == 0
        tokens = torch.where(is_greedy, best, tokens)
        logprobs = torch.where(is_greedy, best_logprobs, logprobs)
    return tokens, logprobs


def _greedy(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    best_logits, best = logits.max(dim=-1)  # two passes over the vocabulary, not three
    return best, best_logits - torch.logsumexp(logits, dim=-1)


def penalize(logits: torch.Tensor, penalty: torch.Tensor, seen: torch.Tensor | None) -> torch.Tensor:
    """vLLM's repetition penalty: at tokens already seen, a positive logit is divided by the row's
    ``penalty``, a negative one multiplied (rows with penalty 1 are unchanged)."""
    if seen is None:
        return logits
    scale = penalty[:, None].expand_as(logits)
    penalized = torch.where(logits > 0, logits / scale, logits * scale)
    return torch.where(seen[: logits.shape[0]], penalized, logits)


def _draw(
    logits: torch.Tensor, rows: RowSettings, u: torch.Tensor, filtered: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    temperature = rows.temperature
    scale = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
    logprobs = torch.log_softmax(logits / scale[:, None], dim=-1)
    if filtered:
        logprobs = _filter(logprobs, rows.top_k, rows.top_p, rows.min_p)
    cdf = logprobs.exp().cumsum(dim=-1)
    drawn = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(-1)
    drawn = drawn.clamp_(max=logits.shape[-1] - 1)
    return drawn, logprobs.gather(-1, drawn[:, None]).squeeze(-1)


def _filter(logprobs: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """Keep each row's top-k, smallest top-p nucleus (the token crossing ``top_p`` stays in) and the
    tokens at least ``min_p`` times as likely as its most likely one; drop the rest, and renormalise.
    Rows with no filter pass through unchanged."""
    vocab = logprobs.shape[-1]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, vocab))
    sorted_logprobs, order = logprobs.sort(dim=-1, descending=True)
    probs = sorted_logprobs.exp()
    mass_before = probs.cumsum(dim=-1) - probs
    ranks = torch.arange(vocab, device=logprobs.device)[None, :]
    keep_sorted = (ranks < k[:, None]) & (mass_before < top_p[:, None]) & (probs >= min_p[:, None] * probs[:, :1])
    keep_sorted[:, 0] = True
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    filtered = logprobs.masked_fill(~keep, float("-inf"))
    return filtered - torch.logsumexp(filtered, dim=-1, keepdim=True)


def row_tensors(params: Iterable[SamplingParams], device: torch.device | str = "cpu") -> RowSettings:
    """The per-row tensors of ``params`` (no ``seen``: the caller keeps that state)."""
    rows = list(params)

    def floats(name: str) -> torch.Tensor:
        return torch.tensor([getattr(p, name) for p in rows], dtype=torch.float32, device=device)

    top_k = torch.tensor([p.top_k for p in rows], dtype=torch.long, device=device)
    return RowSettings(floats("temperature"), top_k, floats("top_p"), floats("min_p"), floats("repetition_penalty"))

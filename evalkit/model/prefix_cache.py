"""Prefix reuse: K/V the engine computed, kept so a request that starts with the same tokens
prefills only what is new.

A multi-turn rollout sends the whole conversation again every turn; a group of rollouts sends one
prompt several times at once. Without reuse every request prefills all of its tokens, and on a
long conversation prefill is most of the work. The :class:`PrefixCache` keeps, per entry, a token
sequence and its K/V (all layers, positions ``[0, len)``), copied out of the engine's slot cache

* when a prompt has been prefilled (so the other rollouts of a group find the shared prompt), and
* when a sequence finishes (prompt plus completion: the next turn of that conversation starts
  with it, up to where the chat template re-renders the reply differently).

A new request takes the entry with the longest common prefix, has those positions copied into its
slot and prefills the rest (at least one token: the last prompt position's logits are needed).
Entries are copies, not shared blocks: simple, and a copy of a few thousand positions costs far less
than the prefill it saves.

Memory bound: the entries' K/V together never exceed ``budget_bytes`` (the engine's
``prefix_cache_gb``); the least recently used entries are evicted first, and an entry covered by a
newer, longer one is dropped when the newer one is saved. The bound is separate from (and on top
of) the live batch's KV cache. K/V depend on the weights, so a weight update clears the cache.

Reused K/V are the ones the engine computed for those tokens earlier (in a prefill or a decode
step), so results equal a full prefill's up to floating-point rounding (matmuls over different
shapes round differently); greedy outputs match, logprobs agree to ~1e-5 in float32.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from evalkit.model.kvcache import CacheShape, KVCache

MIN_REUSE = 16
"""Fewer common tokens than this are not worth a lookup's copies: prefill them."""
SLACK = 8
"""Saving an entry drops older ones it covers except for at most this many trailing tokens."""


def common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of two 1-D token tensors."""
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    differ = torch.nonzero(a[:n] != b[:n])
    return int(differ[0, 0]) if differ.numel() else n


@dataclass
class PrefixEntry:
    tokens: torch.Tensor
    """long ``[length]`` on the CPU."""
    k: torch.Tensor
    """``[layers, kv_heads, length, head_dim]`` on the cache's device (``v`` likewise)."""
    v: torch.Tensor

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() * 2


@dataclass
class PrefixStats:
    """Prompt tokens the engine was asked for, and how many of them it computed or reused."""

    prompt_tokens: int = 0
    prefilled_tokens: int = 0
    reused_tokens: int = 0


class PrefixCache:
    """Token prefixes and their K/V, LRU-evicted within ``budget_bytes`` (0 turns reuse off)."""

    def __init__(self, shape: CacheShape, dtype: torch.dtype, device: torch.device, budget_bytes: float):
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.budget_bytes = max(0.0, float(budget_bytes))
        self.entries: OrderedDict[int, PrefixEntry] = OrderedDict()
        self.nbytes = 0
        self.stats = PrefixStats()
        self._next_id = 0

    @property
    def enabled(self) -> bool:
        return self.budget_bytes > 0

    def lookup(self, prompt: Sequence[int]) -> tuple[PrefixEntry | None, int]:
        """The entry sharing the longest prefix with ``prompt`` and how many positions to reuse
        (at most ``len(prompt) - 1``); ``(None, 0)`` below :data:`MIN_REUSE`. Marks it recently used."""
        if not self.entries or len(prompt) <= MIN_REUSE:
            return None, 0
        ids = torch.tensor(list(prompt), dtype=torch.long)
        best, best_key, best_length = None, -1, 0
        for key, entry in self.entries.items():
            if entry.tokens[0] != ids[0]:
                continue
            length = common_prefix(entry.tokens, ids)
            if length > best_length:
                best, best_key, best_length = entry, key, length
        reuse = min(best_length, len(prompt) - 1)
        if best is None or reuse < MIN_REUSE:
            return None, 0
        self.entries.move_to_end(best_key)
        return best, reuse

    def restore(self, entry: PrefixEntry, cache: KVCache, slot: int, length: int) -> None:
        """Copy the entry's first ``length`` positions into ``slot`` of ``cache`` (room made by the caller)."""
        for layer in range(self.shape.num_layers):
            cache.k[layer][slot, :, :length].copy_(entry.k[layer, :, :length])
            cache.v[layer][slot, :, :length].copy_(entry.v[layer, :, :length])

    def save(self, cache: KVCache, slot: int, tokens: Sequence[int]) -> None:
        """Keep the K/V of ``tokens`` (positions ``[0, len(tokens))`` of ``slot``), evicting LRU
        entries to stay within budget; older entries the new one covers are dropped."""
        length = len(tokens)
        per_position = KVCache.bytes_per_position(self.shape, self.dtype)
        if not self.enabled or length <= MIN_REUSE or length * per_position > self.budget_bytes:
            return
        ids = torch.tensor(list(tokens), dtype=torch.long)
        for key, entry in list(self.entries.items()):
            if entry.tokens[0] != ids[0]:
                continue
            shared = common_prefix(entry.tokens, ids)
            if shared == length and entry.tokens.shape[0] >= length:  # already held: the new one adds nothing
                self.entries.move_to_end(key)
                return
            if shared >= entry.tokens.shape[0] - SLACK and length >= entry.tokens.shape[0]:
                self._drop(key)
        k = torch.stack([cache.k[layer][slot, :, :length] for layer in range(self.shape.num_layers)])
        v = torch.stack([cache.v[layer][slot, :, :length] for layer in range(self.shape.num_layers)])
        entry = PrefixEntry(ids, k, v)
        self.entries[self._next_id] = entry
        self._next_id += 1
        self.nbytes += entry.nbytes
        while self.nbytes > self.budget_bytes:
            self._drop(next(iter(self.entries)))

    def clear(self) -> None:
        """Forget everything (the weights changed, or the engine failed a batch)."""
        self.entries.clear()
        self.nbytes = 0

    def _drop(self, key: int) -> None:
        self.nbytes -= self.entries.pop(key).nbytes

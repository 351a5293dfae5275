"""The engine's slot KV cache: per layer, K and V of every sequence in the batch, preallocated.

One layout for both forward passes (the fused Llama one and the Hugging Face fallback):
``[slots, kv_heads, capacity, head_dim]`` per layer. A sequence owns one slot (its index in the
engine's batch) and writes position ``p`` at ``[slot, :, p]``; nothing is ever concatenated.
Slots and capacity grow on demand by doubling, so memory follows the live batch and its longest
sequence rather than ``max_batch x context``. Growing reallocates, which moves every tensor:
:attr:`KVCache.generation` counts reallocations so that captured CUDA graphs, which hold raw
pointers, know when they went stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

MIN_CAPACITY = 64


@dataclass(frozen=True)
class CacheShape:
    """What the cache needs to know about a model."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    max_positions: int


class KVCache:
    """Per-layer K and V of up to ``max_slots`` sequences on ``device``."""

    def __init__(self, shape: CacheShape, max_slots: int, dtype: torch.dtype, device: str | torch.device = "cpu"):
        self.shape = shape
        self.max_slots = max_slots
        self.dtype = dtype
        self.device = torch.device(device)
        self.slots = 0
        self.capacity = 0
        self.generation = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []

    @staticmethod
    def bytes_per_position(shape: CacheShape, dtype: torch.dtype) -> int:
        """Memory one sequence position takes across all layers (K and V)."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        return 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * itemsize

    def planned_capacity(self, length: int) -> int:
        """The capacity :meth:`ensure` would allocate for ``length`` positions."""
        capacity = max(self.capacity, MIN_CAPACITY)
        while capacity < length:
            capacity *= 2
        return min(capacity, max(self.shape.max_positions, length))

    def ensure(self, slots: int, length: int) -> None:
        """Make room for ``slots`` sequences of positions ``[0, length)``; contents are kept."""
        if slots <= self.slots and length <= self.capacity:
            return
        new_slots = max(self.slots, 1)
        while new_slots < slots:
            new_slots *= 2
        new_slots = min(max(new_slots, slots), max(self.max_slots, slots))
        new_capacity = self.planned_capacity(length)
        size = (new_slots, self.shape.num_kv_heads, new_capacity, self.shape.head_dim)
        for store in (self.k, self.v):
            for layer in range(self.shape.num_layers):
                fresh = torch.zeros(size, dtype=self.dtype, device=self.device)
                if layer < len(store):
                    fresh[: self.slots, :, : self.capacity] = store[layer]
                    store[layer] = fresh
                else:
                    store.append(fresh)
        self.slots, self.capacity = new_slots, new_capacity
        self.generation += 1

    def reset(self) -> None:
        """Give all memory back (the next :meth:`ensure` allocates afresh)."""
        self.k, self.v = [], []
        self.slots = self.capacity = 0
        self.generation += 1

    def move(self, sources: Sequence[int], targets: Sequence[int], length: int) -> None:
        """Copy the first ``length`` positions of each slot in ``sources`` into the matching slot
        of ``targets`` (batch compaction; the two sets must not overlap). One copy per tensor."""
        if not sources:
            return
        src = torch.tensor(list(sources), device=self.device)
        dst = torch.tensor(list(targets), device=self.device)
        for store in (self.k, self.v):
            for tensor in store:
                tensor[dst, :, :length] = tensor[src, :, :length]


def right_padded(cache: KVCache, slots: list[int], prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """A prefill batch: room in ``cache`` for ``slots``, and the prompts right-padded with 0 into
    ``[n, longest]`` token ids plus each prompt's last index ``[n]``, both on the cache's device."""
    lengths = [len(p) for p in prompts]
    longest = max(lengths)
    cache.ensure(max(slots) + 1, longest)
    ids = torch.zeros((len(prompts), longest), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = torch.tensor(prompt, dtype=torch.long)
    return ids.to(cache.device), torch.tensor(lengths, device=cache.device) - 1


@dataclass(frozen=True)
class Extension:
    """A prefill batch that continues sequences already ``starts[i]`` positions into their slots:
    only each prompt's new tokens ``prompt[start:]`` are computed.

    ``ids`` ``[n, longest new]`` right-padded with 0; ``positions`` the same shape, each token's
    position (a pad repeats its row's last one); ``valid`` marks real tokens; ``last`` each row's
    last new index ``[n]``; ``slots`` ``[n]``; ``total`` the positions the longest row spans."""

    ids: torch.Tensor
    positions: torch.Tensor
    valid: torch.Tensor
    last: torch.Tensor
    slots: torch.Tensor
    total: int


def extension(cache: KVCache, slots: list[int], prompts: list[list[int]], starts: list[int]) -> Extension:
    """An :class:`Extension` on the cache's device, with room in ``cache`` for every prompt."""
    fresh = [p[s:] for p, s in zip(prompts, starts)]
    longest = max(len(f) for f in fresh)
    total = max(len(p) for p in prompts)
    cache.ensure(max(slots) + 1, total)
    ids = torch.zeros((len(prompts), longest), dtype=torch.long)
    positions = torch.zeros((len(prompts), longest), dtype=torch.long)
    for row, (tokens, start) in enumerate(zip(fresh, starts)):
        ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        positions[row] = torch.clamp(torch.arange(start, start + longest), max=start + len(tokens) - 1)
    lengths = torch.tensor([len(f) for f in fresh])
    valid = torch.arange(longest)[None, :] < lengths[:, None]
    device = cache.device
    return Extension(ids.to(device), positions.to(device), valid.to(device), (lengths - 1).to(device),
                     torch.tensor(slots, dtype=torch.long, device=device), total)  # fmt: skip

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
of) the live batch's KV cache.

K/V depend on the weights: every entry is tagged with the weights version it was computed under
(:attr:`PrefixCache.version`). A weight update (:meth:`PrefixCache.new_weights`) empties the cache
and moves to the next version; a save tagged with an older version (a sequence that was in flight
during an update without draining, its first positions computed by the old weights) is dropped, and
a lookup never returns an entry of another version.

Reused K/V are the ones the engine computed for those tokens earlier (in a prefill or a decode
step), so results equal a full prefill's up to floating-point rounding (matmuls over different
shapes round differently); greedy outputs match, logprobs agree to ~1e-5 in float32.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from evalkit.model.kvcache import CacheShape, KVCache

MIN_REUSE = 16
"""Fewer common tokens than this are not worth a lookup's copies: prefill them."""
SLACK = 8
"""Saving an entry drops older ones it covers except for at most this many trailing tokens."""
BLOCK = MIN_REUSE
"""Token sequences are indexed by their whole blocks of this many tokens."""
CANDIDATES = 16
"""Most entries sharing the deepest run of blocks that are compared token by token (newest first)."""


def common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of two 1-D token tensors."""
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    differ = torch.nonzero(a[:n] != b[:n])
    return int(differ[0, 0]) if differ.numel() else n


def block_hashes(tokens: Sequence[int]) -> list[int]:
    """Chained hashes of ``tokens``' whole-block prefixes: item ``k`` stands for ``tokens[:(k+1)*BLOCK]``.

    Equal prefixes give equal hashes, so a dict finds every sequence sharing ``k`` whole blocks in
    one step. Linear scans did not scale: 256 requests sharing a chat header against 500 entries
    made lookups 90% of an H100 engine's time. A hash match only picks candidates; the shared
    length is always counted token by token, so a collision cannot reuse wrong K/V."""
    hashes, chained = [], 0
    for start in range(0, len(tokens) - BLOCK + 1, BLOCK):
        chained = hash((chained, tuple(tokens[start : start + BLOCK])))
        hashes.append(chained)
    return hashes


class PrefixIndex:
    """Keys of token sequences by each of their whole-block prefixes (see :func:`block_hashes`)."""

    def __init__(self) -> None:
        self._keys: dict[int, dict[int, None]] = {}

    def add(self, key: int, hashes: list[int]) -> None:
        for chained in hashes:
            self._keys.setdefault(chained, {})[key] = None

    def remove(self, key: int, hashes: list[int]) -> None:
        for chained in hashes:
            keys = self._keys.get(chained)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._keys[chained]

    def deepest(self, hashes: list[int]) -> list[int]:
        """The newest keys (at most :data:`CANDIDATES`) sharing the most whole blocks with ``hashes``."""
        found: dict[int, None] = {}
        for chained in hashes:
            keys = self._keys.get(chained)
            if keys is None:
                break
            found = keys
        return list(itertools.islice(reversed(found), CANDIDATES))

    def newest(self, chained: int) -> list[int]:
        """The newest keys (at most :data:`CANDIDATES`) listed under one hash."""
        return list(itertools.islice(reversed(self._keys.get(chained, {})), CANDIDATES))

    def at(self, chained: int) -> list[int]:
        return list(self._keys.get(chained, ()))

    def clear(self) -> None:
        self._keys.clear()


@dataclass
class PrefixEntry:
    tokens: torch.Tensor
    """long ``[length]`` on the CPU."""
    k: torch.Tensor
    """``[layers, kv_heads, length, head_dim]`` on the cache's device (``v`` likewise)."""
    v: torch.Tensor
    hashes: list[int]
    """:func:`block_hashes` of ``tokens``: where the cache's index lists this entry."""
    version: int = 0
    """The weights version the K/V were computed under (:attr:`PrefixCache.version` when saved)."""

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
        self._index = PrefixIndex()
        """Entries by every whole-block prefix: where lookups find the longest shared prefix."""
        self._covers = PrefixIndex()
        """Entries by their last whole block before the :data:`SLACK` tail: where a longer new entry
        finds the ones it makes redundant."""
        self.nbytes = 0
        self.stats = PrefixStats()
        self._next_id = 0
        self.version = 0
        """The weights version of the K/V the cache may hold and hand out (see :meth:`new_weights`)."""

    @property
    def enabled(self) -> bool:
        return self.budget_bytes > 0

    def lookup(self, prompt: Sequence[int]) -> tuple[PrefixEntry | None, int]:
        """The entry sharing the longest prefix with ``prompt`` and how many positions to reuse
        (at most ``len(prompt) - 1``); ``(None, 0)`` below :data:`MIN_REUSE`. Marks it recently used.

        Only the newest :data:`CANDIDATES` entries sharing the most whole blocks are compared, so
        when more share them the reuse can fall short of the longest by less than a block."""
        if not self.entries or len(prompt) <= MIN_REUSE:
            return None, 0
        ids = torch.tensor(list(prompt), dtype=torch.long)
        best, best_key, best_length = None, -1, 0
        for key in self._index.deepest(block_hashes(prompt)):
            entry = self.entries[key]
            if entry.version != self.version:
                continue
            length = common_prefix(entry.tokens, ids)
            if length > best_length:
                best, best_key, best_length = entry, key, length
            if best_length >= len(prompt) - 1:
                break  # nothing can reuse more than all but the last prompt position
        reuse = min(best_length, len(prompt) - 1)
        if best is None or reuse < MIN_REUSE:
            return None, 0
        self.entries.move_to_end(best_key)
        return best, reuse

    def restore(self, entry: PrefixEntry, cache: KVCache, slots: list[int], length: int) -> None:
        """Copy the entry's first ``length`` positions into each of ``slots`` of ``cache`` (room made
        by the caller). One copy per layer serves every slot: a group's rollouts restore the same
        prompt, and a copy per slot and layer was a third of an H100 engine's host time at 256."""
        first = slots[0]
        rows: slice | torch.Tensor = slice(first, first + len(slots))
        if slots != list(range(first, first + len(slots))):
            rows = torch.tensor(slots, device=cache.device)
        for layer in range(self.shape.num_layers):
            cache.k[layer][rows, :, :length] = entry.k[layer, :, :length]
            cache.v[layer][rows, :, :length] = entry.v[layer, :, :length]

    def save(self, cache: KVCache, slot: int, tokens: Sequence[int], version: int | None = None) -> None:
        """Keep the K/V of ``tokens`` (positions ``[0, len(tokens))`` of ``slot``), evicting LRU
        entries to stay within budget; older entries the new one covers are dropped. ``version``: the
        weights version the oldest of those positions was computed under (default: the current one);
        K/V of an older version are not kept."""
        length = len(tokens)
        per_position = KVCache.bytes_per_position(self.shape, self.dtype)
        if version is not None and version != self.version:
            return
        if not self.enabled or length <= MIN_REUSE or length * per_position > self.budget_bytes:
            return
        ids = torch.tensor(list(tokens), dtype=torch.long)
        hashes = block_hashes(tokens)
        for key in self._index.newest(hashes[-1]):
            entry = self.entries[key]
            if entry.tokens.shape[0] >= length and common_prefix(entry.tokens, ids) == length:
                self.entries.move_to_end(key)  # already held: the new one adds nothing
                return
        for key in {key: None for chained in hashes for key in self._covers.at(chained)}:
            entry = self.entries[key]
            if length >= entry.tokens.shape[0] and common_prefix(entry.tokens, ids) >= entry.tokens.shape[0] - SLACK:
                self._drop(key)
        k = torch.stack([cache.k[layer][slot, :, :length] for layer in range(self.shape.num_layers)])
        v = torch.stack([cache.v[layer][slot, :, :length] for layer in range(self.shape.num_layers)])
        entry = PrefixEntry(ids, k, v, hashes, self.version)
        self.entries[self._next_id] = entry
        self._index.add(self._next_id, hashes)
        self._covers.add(self._next_id, _covering_hash(entry))
        self._next_id += 1
        self.nbytes += entry.nbytes
        while self.nbytes > self.budget_bytes:
            self._drop(next(iter(self.entries)))

    def new_weights(self) -> None:
        """The weights changed: forget everything and take only K/V of the next version from now on."""
        self.clear()
        self.version += 1

    def clear(self) -> None:
        """Forget everything (the engine failed a batch; :meth:`new_weights` after a weight update)."""
        self.entries.clear()
        self._index.clear()
        self._covers.clear()
        self.nbytes = 0

    def _drop(self, key: int) -> None:
        entry = self.entries.pop(key)
        self._index.remove(key, entry.hashes)
        self._covers.remove(key, _covering_hash(entry))
        self.nbytes -= entry.nbytes


def _covering_hash(entry: PrefixEntry) -> list[int]:
    """The hash a newer sequence covering ``entry`` (all but at most :data:`SLACK` trailing tokens)
    must also have: that of the entry's last whole block before its slack."""
    blocks = (entry.tokens.shape[0] - SLACK) // BLOCK
    return entry.hashes[blocks - 1 : blocks] if blocks > 0 else []

"""The Llama forward pass the engine runs: batched prefill and one-token decode over a slot KV cache.

Written against :class:`~evalkit.model.weights.DecoderWeights` rather than the Hugging Face module
because the HF path spends most of a CPU decode step outside the matmuls (cache concatenation,
mask building, per-module dispatch). Here a decode step for the whole batch is ~20 tensor ops per
layer, the KV cache is preallocated per slot (written in place, never concatenated), and each
sequence keeps its own length, so requests can join and leave the batch between steps
(continuous batching). Numerics follow transformers' ``LlamaForCausalLM`` (RMSNorm in float32,
RoPE tables in float32 cast to the compute dtype); the tests compare logits with it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from evalkit.model.weights import DecoderShape, DecoderWeights


class KVCache:
    """Per-layer K and V of up to ``max_slots`` sequences: ``[slots, kv_heads, capacity, head_dim]``.

    Both the slot count and the capacity grow on demand (by doubling; capacity up to the model's
    context), so memory follows the live batch and its longest sequence rather than
    ``max_batch x context``: one 8k-token request must not allocate room for 32 of them.
    """

    def __init__(self, shape: DecoderShape, max_slots: int, dtype: torch.dtype):
        self.shape = shape
        self.max_slots = max_slots
        self.dtype = dtype
        self.slots = 0
        self.capacity = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []

    @staticmethod
    def bytes_per_position(shape: DecoderShape, dtype: torch.dtype) -> int:
        """Memory one sequence position takes across all layers (K and V)."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        return 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * itemsize

    def planned_capacity(self, length: int) -> int:
        """The capacity :meth:`ensure` would allocate for ``length`` positions."""
        capacity = max(self.capacity, 64)
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
                fresh = torch.zeros(size, dtype=self.dtype)
                if layer < len(store):
                    fresh[: self.slots, :, : self.capacity] = store[layer]
                    store[layer] = fresh
                else:
                    store.append(fresh)
        self.slots, self.capacity = new_slots, new_capacity

    def move(self, src: int, dst: int, length: int) -> None:
        """Copy slot ``src``'s first ``length`` positions into slot ``dst`` (batch compaction)."""
        for store in (self.k, self.v):
            for tensor in store:
                tensor[dst, :, :length] = tensor[src, :, :length]


class LlamaForward:
    """Stateless over requests: callers own slot assignment and lengths (see the engine)."""

    def __init__(self, shape: DecoderShape, weights: DecoderWeights, dtype: torch.dtype):
        self.shape = shape
        self.weights = weights
        self.dtype = dtype
        half = shape.head_dim // 2
        inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, shape.head_dim, 2, dtype=torch.int64).float() / shape.head_dim))
        angles = torch.arange(shape.max_positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
        self.cos = angles.cos().to(dtype)  # [positions, head_dim/2]; both halves of a head share it
        self.sin = angles.sin().to(dtype)
        self._half = half
        self._q_width = shape.num_heads * shape.head_dim
        self._kv_width = shape.num_kv_heads * shape.head_dim

    # -- pieces ---------------------------------------------------------------------------------

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # One fused op (float32 accumulation inside); transformers normalises in float32 and
        # multiplies by the weight after casting back, which differs only in bf16 rounding.
        return F.rms_norm(x, (x.shape[-1],), weight, self.shape.rms_norm_eps)

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate ``x[..., heads, head_dim]``; ``cos``/``sin`` broadcast over the heads axis."""
        x1, x2 = x[..., : self._half], x[..., self._half :]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def _mlp(self, x: torch.Tensor, layer) -> torch.Tensor:  # noqa: ANN001 - LayerWeights
        gate_up = layer.gate_up(self._norm(x, layer.mlp_norm))
        gate, up = gate_up.chunk(2, dim=-1)
        return x + layer.down(F.silu(gate).mul_(up))

    def _qkv(
        self, x: torch.Tensor, layer, cos: torch.Tensor, sin: torch.Tensor  # noqa: ANN001 - LayerWeights
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k (rotated) and v as ``[..., heads, head_dim]``; q and k are rotated in one go."""
        qkv = layer.qkv(self._norm(x, layer.attn_norm))
        lead = qkv.shape[:-1]
        d = self.shape.head_dim
        qk = self._rope(qkv[..., : self._q_width + self._kv_width].unflatten(-1, (-1, d)), cos, sin)
        q, k = qk.split((self.shape.num_heads, self.shape.num_kv_heads), dim=-2)
        v = qkv[..., self._q_width + self._kv_width :].reshape(*lead, self.shape.num_kv_heads, d)
        return q, k, v

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits of final hidden states ``[n, hidden]``."""
        return self.weights.lm_head(self._norm(hidden, self.weights.final_norm)).float()

    # -- passes ---------------------------------------------------------------------------------

    def prefill(self, cache: KVCache, slots: list[int], prompts: list[list[int]]) -> torch.Tensor:
        """Run whole prompts (right-padded into one batch), fill their slots' cache, and return the
        float32 logits at each prompt's last position, ``[len(prompts), vocab]``.

        Right padding needs no mask beyond causality: pad keys sit after every real query.
        """
        lengths = [len(p) for p in prompts]
        longest = max(lengths)
        cache.ensure(max(slots) + 1, longest)
        ids = torch.full((len(prompts), longest), 0, dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, : len(prompt)] = torch.tensor(prompt, dtype=torch.long)
        slot_index = torch.tensor(slots, dtype=torch.long)
        cos = self.cos[:longest, None, :]
        sin = self.sin[:longest, None, :]
        x = F.embedding(ids, self.weights.embed)
        for index, layer in enumerate(self.weights.layers):
            q, k, v = self._qkv(x, layer, cos, sin)  # [n, L, heads, d]
            k, v = k.transpose(1, 2), v.transpose(1, 2)
            cache.k[index][slot_index, :, :longest] = k
            cache.v[index][slot_index, :, :longest] = v
            attn = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, is_causal=True, enable_gqa=True)
            attn = attn.transpose(1, 2).reshape(x.shape[0], longest, self._q_width)
            x = x + layer.o(attn)
            x = self._mlp(x, layer)
        last = x[torch.arange(len(prompts)), torch.tensor(lengths) - 1]
        return self.logits(last)

    def decode(self, cache: KVCache, tokens: torch.Tensor, positions: torch.Tensor, longest: int) -> torch.Tensor:
        """One step for slots ``0..B-1``: ``tokens[b]`` sits at ``positions[b]``; ``longest`` is
        ``max(positions) + 1``. Returns float32 logits ``[B, vocab]``."""
        batch = tokens.shape[0]
        cache.ensure(batch, longest)
        rows = torch.arange(batch)
        cos = self.cos[positions][:, None, :]
        sin = self.sin[positions][:, None, :]
        # An additive mask built once per step: a boolean one is converted inside every layer's SDPA.
        hidden_keys = torch.arange(longest)[None, :] > positions[:, None]
        mask = torch.zeros(hidden_keys.shape, dtype=self.dtype).masked_fill_(hidden_keys, float("-inf"))[:, None, None, :]
        x = F.embedding(tokens, self.weights.embed)
        for index, layer in enumerate(self.weights.layers):
            q, k, v = self._qkv(x, layer, cos, sin)  # [B, heads, d]
            k_cache, v_cache = cache.k[index], cache.v[index]
            k_cache[rows, :, positions] = k
            v_cache[rows, :, positions] = v
            attn = F.scaled_dot_product_attention(
                q[:, :, None, :], k_cache[:batch, :, :longest], v_cache[:batch, :, :longest],
                attn_mask=mask, enable_gqa=True,
            )
            x = x + layer.o(attn.reshape(batch, self._q_width))
            x = self._mlp(x, layer)
        return self.logits(x)

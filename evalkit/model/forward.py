"""The fused Llama-family forward the engine runs: batched prefill and one-token decode over a slot KV cache.

Written against :class:`~evalkit.model.weights.DecoderWeights` rather than the Hugging Face module
because the HF path spends most of a CPU decode step outside the matmuls (cache concatenation,
mask building, per-module dispatch). Here a decode step for the whole batch is ~20 tensor ops per
layer, the KV cache is preallocated per slot (written in place, never concatenated), and each
sequence keeps its own length, so requests can join and leave the batch between steps
(continuous batching). Numerics follow transformers' ``LlamaForCausalLM`` (RMSNorm in float32,
RoPE tables in float32 cast to the compute dtype); the tests compare logits with it.

Decode attention is two batched matmuls per layer with the query heads grouped by their KV head
(``[B, kv_heads, group, d] @ [B, kv_heads, d, L]``): no K/V repetition, over a strided slice of
the cache that is multiplied in place, not copied (measured ~6x faster per layer than SDPA with
``enable_gqa`` on CPU). A
decode step does no host synchronisation and allocates nothing that depends on the data, so on
CUDA it can be captured in a graph (:attr:`LlamaForward.graph_safe`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from evalkit.model.kvcache import KVCache, extension, right_padded
from evalkit.model.tensors import model_config
from evalkit.model.weights import DENSE, DecoderShape, DecoderWeights, rope_tables


class LlamaForward:
    """Stateless over requests: callers own slot assignment and lengths (see the engine).

    The forward contract both backends (this one and :class:`~evalkit.model.hf_forward.HFForward`)
    keep: :meth:`prefill` and :meth:`decode` below, :meth:`load` for weight updates,
    ``name``, ``cache_shape``, ``vocab_size``, ``device`` and ``graph_safe``.
    """

    name = "fused"
    graph_safe = True

    def __init__(
        self,
        model: Any,
        dtype: torch.dtype,
        device: torch.device | str = "cpu",
        batch_hint: int = 32,
        weights: str = DENSE,
    ):
        """``model``: a module (peft-wrapped or not) or a :class:`~evalkit.model.tensors.StoredModel`;
        ``weights``: ``dense`` or ``q4`` (:meth:`DecoderWeights.build`)."""
        self.shape = DecoderShape.from_config(model_config(model))
        self.cache_shape = self.shape.cache_shape
        self.vocab_size = self.shape.vocab_size
        self.dtype = dtype
        self.device = torch.device(device)
        self._batch_hint = batch_hint
        self.weight_format = weights
        self.weights = DecoderWeights.build(model, dtype, batch_hint, self.device, weights)
        cos, sin = rope_tables(model, self.shape.max_positions, dtype, self.device)
        self.rot_cos = torch.cat((cos, cos), dim=-1)
        """``[positions, head_dim]``: the RoPE cosines for both halves of a head (:meth:`_rope`)."""
        self.rot_sin = torch.cat((-sin, sin), dim=-1)
        """``[positions, head_dim]``: the RoPE sines, negated for the first half (:meth:`_rope`)."""
        self._half = self.shape.head_dim // 2
        self._q_width = self.shape.num_heads * self.shape.head_dim
        self._kv_width = self.shape.num_kv_heads * self.shape.head_dim
        self._scale = self.shape.head_dim**-0.5

    def load(self, model: Any) -> None:
        """Re-snapshot ``model``'s effective weights: in place where possible (a captured CUDA
        graph keeps reading the same tensors), else by replacing the snapshot."""
        fresh = DecoderWeights.build(model, self.dtype, self._batch_hint, self.device, self.weight_format)
        if not self.weights.copy_(fresh):
            self.weights = fresh

    # -- pieces ---------------------------------------------------------------------------------

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # One fused op (float32 accumulation inside); transformers normalises in float32 and
        # multiplies by the weight after casting back, which differs only in bf16 rounding.
        # (Spelled out as six ops from Python it was slower: 21-38 us a call against 16-22, one row.)
        return F.rms_norm(x, (x.shape[-1],), weight, self.shape.rms_norm_eps)

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate ``x[..., heads, head_dim]`` into ``(x1 cos - x2 sin, x2 cos + x1 sin)``; ``cos``/``sin``
        are rows of the full-width tables (:attr:`rot_cos`, :attr:`rot_sin`) broadcast over the heads axis.
        ``x * cos + roll(x) * sin`` makes the same products and sums (``sin``'s first half is negated,
        and ``a + b * -s`` equals ``a - b * s`` exactly) in four ops instead of nine: 10-20 us a call
        against 19-36 at one row (AVX2, loaded), ~0.5 ms of a 30-layer decode step."""
        return (x * cos).add_(x.roll(self._half, -1).mul_(sin))

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

    def prefill(
        self, cache: KVCache, slots: list[int], prompts: list[list[int]], starts: list[int] | None = None
    ) -> torch.Tensor:
        """Run whole prompts (right-padded into one batch), fill their slots' cache, and return the
        float32 logits at each prompt's last position, ``[len(prompts), vocab]``.

        ``starts[i]`` > 0: slot ``slots[i]`` already holds the K/V of ``prompts[i][:starts[i]]``
        (a reused prefix) and only the rest is computed (:meth:`_extend`).
        Right padding needs no mask beyond causality: pad keys sit after every real query.
        """
        if starts is not None and any(starts):
            return self._extend(cache, slots, prompts, starts)
        ids, last = right_padded(cache, slots, prompts)
        longest = ids.shape[1]
        slot_index = torch.tensor(slots, dtype=torch.long, device=self.device)
        cos = self.rot_cos[:longest, None, :]
        sin = self.rot_sin[:longest, None, :]
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
        rows = torch.arange(len(prompts), device=self.device)
        return self.logits(x[rows, last])

    def _extend(self, cache: KVCache, slots: list[int], prompts: list[list[int]], starts: list[int]) -> torch.Tensor:
        """Prefill of the new tokens only: each row writes its tokens' K/V at their positions and
        attends to its slot's keys up to each query's position (an explicit mask, since rows start
        at different positions)."""
        batch = extension(cache, slots, prompts, starts)
        n, span = batch.ids.shape
        cos = self.rot_cos[batch.positions][:, :, None, :]
        sin = self.rot_sin[batch.positions][:, :, None, :]
        keys_at = torch.arange(batch.total, device=self.device)
        mask = (keys_at[None, None, :] <= batch.positions[:, :, None])[:, None]  # [n, 1, span, total]
        write_slots = batch.slots[:, None].expand(n, span)[batch.valid]
        write_positions = batch.positions[batch.valid]
        x = F.embedding(batch.ids, self.weights.embed)
        for index, layer in enumerate(self.weights.layers):
            q, k, v = self._qkv(x, layer, cos, sin)  # [n, span, heads, d]
            k_cache, v_cache = cache.k[index], cache.v[index]
            k_cache[write_slots, :, write_positions] = k[batch.valid]
            v_cache[write_slots, :, write_positions] = v[batch.valid]
            keys, values = k_cache[batch.slots, :, : batch.total], v_cache[batch.slots, :, : batch.total]
            attn = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=mask, enable_gqa=True)
            x = x + layer.o(attn.transpose(1, 2).reshape(n, span, self._q_width))
            x = self._mlp(x, layer)
        rows = torch.arange(n, device=self.device)
        return self.logits(x[rows, batch.last])

    def decode(self, cache: KVCache, tokens: torch.Tensor, positions: torch.Tensor, length: int) -> torch.Tensor:
        """One step for slots ``0..B-1``: ``tokens[b]`` sits at ``positions[b]``, and attends to
        keys ``[0, length)`` of its slot (masked beyond its position). ``length`` is at most the
        cache's capacity and more than every position. Returns float32 logits ``[B, vocab]``."""
        batch = tokens.shape[0]
        kv, d = self.shape.num_kv_heads, self.shape.head_dim
        rows = torch.arange(batch, device=self.device)
        cos = self.rot_cos[positions][:, None, :]
        sin = self.rot_sin[positions][:, None, :]
        hidden_keys = torch.arange(length, device=self.device)[None, :] > positions[:, None]
        mask = torch.zeros(hidden_keys.shape, dtype=torch.float32, device=self.device)
        mask = mask.masked_fill_(hidden_keys, float("-inf"))[:, None, None, :]
        # where each row's new K/V go in a layer's cache viewed as [slots * kv * capacity, d]: one
        # index_copy_ per tensor (an index_put_ over (row, position) pairs costs ~10x more on CPU)
        heads = torch.arange(kv, device=self.device)
        writes = ((rows[:, None] * kv + heads[None, :]) * cache.capacity + positions[:, None]).flatten()
        x = F.embedding(tokens, self.weights.embed)
        for index, layer in enumerate(self.weights.layers):
            q, k, v = self._qkv(x, layer, cos, sin)  # [B, heads, d]
            k_cache, v_cache = cache.k[index], cache.v[index]
            k_cache.view(-1, d).index_copy_(0, writes, k.reshape(-1, d))
            v_cache.view(-1, d).index_copy_(0, writes, v.reshape(-1, d))
            keys, values = k_cache[:batch, :, :length], v_cache[:batch, :, :length]
            scores = torch.matmul(q.view(batch, kv, -1, d), keys.transpose(-1, -2)).float()
            weights = torch.softmax(scores.mul_(self._scale).add_(mask), dim=-1).to(self.dtype)
            attn = torch.matmul(weights, values)  # [B, kv, group, d]
            x = x + layer.o(attn.reshape(batch, self._q_width))
            x = self._mlp(x, layer)
        return self.logits(x)

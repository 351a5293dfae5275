"""The fallback forward: any ``AutoModelForCausalLM`` run through its own Hugging Face modules.

For architectures the fused path cannot compute exactly (Qwen3's q/k norms, Gemma's scaled
embeddings and GeLU, Phi-3's fused projections, sliding-window layers, ...). It keeps the
engine's contract (see :class:`~evalkit.model.forward.LlamaForward`): the same slot
:class:`~evalkit.model.kvcache.KVCache`, the same continuous batching, the same logits.

How a Hugging Face module is made to decode a batch whose sequences sit at different positions:

* the model gets ``position_ids`` per row and a ready 4D additive attention mask (transformers
  returns a 4D mask as is), one per attention kind when the config lists ``layer_types``
  (``full_attention`` / ``sliding_attention``), so sliding windows are applied by the mask;
* ``past_key_values`` is a :class:`_SlotCache`: its ``update`` writes each row's new K/V into that
  row's slot at that row's position and hands attention the slot rows (decode), or hands the
  prompt's own K/V straight back after storing them (prefill, right-padded);
* prefill needs logits at each prompt's last position only: a pre-hook on the output embedding
  gathers those rows first, so the vocabulary projection (and any logit soft-capping after it)
  runs on ``[n, 1, hidden]``.

The engine samples from its own copy of the module (``copy_module``): built empty from the
config, filled with the effective weights (peft LoRA merged in), in the serving dtype and device.
A weight update copies into that copy in place. Not graph-safe (Hugging Face modules may
synchronise with the host), so on CUDA it runs eagerly.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from evalkit.core.errors import UserError
from evalkit.model.kvcache import CacheShape, Extension, KVCache, extension, right_padded
from evalkit.model.tensors import effective_linear

KNOWN_LAYER_TYPES = ("full_attention", "sliding_attention")


class HFForward:
    """The forward contract of :class:`~evalkit.model.forward.LlamaForward`, over a Hugging Face module."""

    name = "hf"
    graph_safe = False

    def __init__(self, model: Any, dtype: torch.dtype, device: torch.device | str = "cpu"):
        hf = model.get_base_model() if hasattr(model, "get_base_model") else model
        config = hf.config
        self.config = config
        self.layer_types = list(getattr(config, "layer_types", None) or [])
        unknown = sorted(set(self.layer_types) - set(KNOWN_LAYER_TYPES))
        if unknown:
            raise UserError(f"the embedded engine cannot run {config.model_type}: attention layer types {unknown}")
        self.window = getattr(config, "sliding_window", None)
        self.dtype = dtype
        self.device = torch.device(device)
        self.module = copy_module(model, dtype, self.device)
        text = getattr(config, "get_text_config", lambda: config)()
        heads = text.num_attention_heads
        self.cache_shape = CacheShape(
            num_layers=text.num_hidden_layers,
            num_kv_heads=getattr(text, "num_key_value_heads", None) or heads,
            head_dim=getattr(text, "head_dim", None) or text.hidden_size // heads,
            max_positions=int(text.max_position_embeddings),
        )
        self.vocab_size = int(text.vocab_size)
        self._gather: torch.Tensor | None = None
        self.module.get_output_embeddings().register_forward_pre_hook(self._gather_last)

    def load(self, model: Any) -> None:
        """Copy ``model``'s effective weights into the engine's copy, in place."""
        copy_weights(model, self.module)

    # -- passes ---------------------------------------------------------------------------------

    def prefill(
        self, cache: KVCache, slots: list[int], prompts: list[list[int]], starts: list[int] | None = None
    ) -> torch.Tensor:
        """Whole prompts, right-padded into one batch: fill their slots, return float32 logits at
        each prompt's last position ``[len(prompts), vocab]``. With ``starts`` (reused prefixes
        already in the slots), only each prompt's tokens from ``starts[i]`` on are computed."""
        if starts is not None and any(starts):
            return self._extend(extension(cache, slots, prompts, starts), cache)
        ids, self._gather = right_padded(cache, slots, prompts)
        positions = torch.arange(ids.shape[1], device=self.device)
        view = _SlotCache(cache, prefill_slots=torch.tensor(slots, device=self.device))
        try:
            out = self.module(
                input_ids=ids,
                position_ids=positions[None, :].expand(len(prompts), -1),
                attention_mask=self._masks(positions[None, :], positions),
                past_key_values=view,
                use_cache=True,
            )
        finally:
            self._gather = None
        return out.logits[:, -1].float()

    def _extend(self, batch: Extension, cache: KVCache) -> torch.Tensor:
        self._gather = batch.last
        view = _SlotCache(cache, extend=batch)
        try:
            out = self.module(
                input_ids=batch.ids,
                position_ids=batch.positions,
                attention_mask=self._masks(batch.positions, torch.arange(batch.total, device=self.device)),
                past_key_values=view,
                use_cache=True,
            )
        finally:
            self._gather = None
        return out.logits[:, -1].float()

    def decode(self, cache: KVCache, tokens: torch.Tensor, positions: torch.Tensor, length: int) -> torch.Tensor:
        """One token for slots ``0..B-1`` at ``positions``, attending keys ``[0, length)``."""
        keys = torch.arange(length, device=self.device)
        view = _SlotCache(cache, decode_positions=positions, length=length)
        out = self.module(
            input_ids=tokens[:, None],
            position_ids=positions[:, None],
            attention_mask=self._masks(positions[:, None], keys),
            past_key_values=view,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1].float()

    # -- pieces ---------------------------------------------------------------------------------

    def _gather_last(self, _module: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Prefill only: keep each row's last prompt position before the vocabulary projection."""
        if self._gather is None:
            return None
        hidden = args[0]
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        return (hidden[rows, self._gather][:, None, :], *args[1:])

    def _masks(self, queries: torch.Tensor, keys: torch.Tensor) -> Any:
        """Additive 4D masks ``[rows, 1, queries, keys]`` (0 = attend), by attention kind.

        ``queries`` holds each query's position (``[rows or 1, q]``); key ``j`` sits at position
        ``keys[j]``. A query sees keys at or before it, and within the sliding window on sliding
        layers."""
        distance = queries[:, :, None] - keys[None, None, :]  # [rows, q, k]
        lowest = torch.finfo(self.dtype).min

        def additive(allowed: torch.Tensor) -> torch.Tensor:
            mask = torch.zeros(allowed.shape, dtype=self.dtype, device=self.device)
            return mask.masked_fill_(~allowed, lowest)[:, None]

        causal = distance >= 0
        windowed = causal & (distance < self.window) if self.window else causal
        if not self.layer_types:
            return additive(windowed)
        kinds = {"full_attention": causal, "sliding_attention": windowed}
        return {kind: additive(kinds[kind]) for kind in set(self.layer_types)}


class _SlotCache:
    """Built per forward call; see the module docstring. Duck-types the parts of transformers'
    ``Cache`` that decoder modules call (``update``, ``get_seq_length``, ``get_mask_sizes``)."""

    is_compileable = False

    def __init__(
        self,
        cache: KVCache,
        *,
        prefill_slots: torch.Tensor | None = None,
        decode_positions: torch.Tensor | None = None,
        length: int = 0,
        extend: Extension | None = None,
    ):
        self.cache = cache
        self.extend = extend
        self.prefill_slots = prefill_slots
        self.positions = decode_positions
        self.length = length
        self.rows = None if decode_positions is None else torch.arange(decode_positions.shape[0], device=cache.device)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        k_cache, v_cache = self.cache.k[layer_idx], self.cache.v[layer_idx]
        if self.extend is not None:  # new tokens after reused prefixes: store them, attend to the slot rows
            batch = self.extend
            slots = batch.slots[:, None].expand(batch.valid.shape)[batch.valid]
            positions = batch.positions[batch.valid]
            k_cache[slots, :, positions] = key_states.transpose(1, 2)[batch.valid].to(k_cache.dtype)
            v_cache[slots, :, positions] = value_states.transpose(1, 2)[batch.valid].to(v_cache.dtype)
            return k_cache[batch.slots, :, : batch.total], v_cache[batch.slots, :, : batch.total]
        if self.prefill_slots is not None:
            span = key_states.shape[2]
            k_cache[self.prefill_slots, :, :span] = key_states.to(k_cache.dtype)
            v_cache[self.prefill_slots, :, :span] = value_states.to(v_cache.dtype)
            return key_states, value_states
        batch = key_states.shape[0]
        k_cache[self.rows, :, self.positions] = key_states[:, :, 0].to(k_cache.dtype)
        v_cache[self.rows, :, self.positions] = value_states[:, :, 0].to(v_cache.dtype)
        return k_cache[:batch, :, : self.length], v_cache[:batch, :, : self.length]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        if self.extend is not None:
            return self.extend.total - self.extend.ids.shape[1]
        return 0 if self.prefill_slots is not None else self.length - 1

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        if self.extend is not None:
            return self.extend.total, 0
        return (query_length if self.prefill_slots is not None else self.length), 0

    def get_query_offset(self, layer_idx: int = 0) -> int:
        return self.get_seq_length(layer_idx)


def copy_module(model: Any, dtype: torch.dtype, device: torch.device) -> Any:
    """A plain (adapter-free) module of ``model``'s class and config in ``dtype`` on ``device``,
    holding ``model``'s effective weights. Built on the meta device, so nothing is initialised twice."""
    hf = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = copy.deepcopy(hf.config)
    eager = getattr(config, "attn_logit_softcapping", None) is not None or not getattr(hf, "_supports_sdpa", True)
    with torch.device("meta"):
        fresh = type(hf)._from_config(config, dtype=dtype, attn_implementation="eager" if eager else "sdpa")
    fresh = fresh.to_empty(device=device).eval()
    fresh.requires_grad_(False)
    copy_weights(model, fresh)
    return fresh


def copy_weights(model: Any, target: Any) -> None:
    """Copy ``model``'s effective parameters and buffers into ``target`` (same architecture), by
    module name; a peft LoRA layer contributes its base weight plus its active delta."""
    hf = model.get_base_model() if hasattr(model, "get_base_model") else model
    with torch.no_grad():
        for name, module in target.named_modules():
            source = hf.get_submodule(name) if name else hf
            effective = effective_linear(source) if hasattr(source, "base_layer") else None
            for key, tensor in module.named_parameters(recurse=False):
                if effective is not None:
                    value = effective[0] if key == "weight" else effective[1]
                else:
                    value = getattr(source, key)
                tensor.copy_(value)
            for key, tensor in module.named_buffers(recurse=False):
                tensor.copy_(getattr(source, key))

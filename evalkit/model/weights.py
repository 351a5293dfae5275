"""The engine's inference copy of a Llama-architecture model: fused, in the serving dtype.

The engine never runs the Hugging Face module itself. It snapshots the module's *effective*
weights (peft LoRA deltas merged in, when the module is a peft model or holds LoRA layers) into a
few fused tensors -- q/k/v as one matrix, gate/up as one -- in bf16 or fp32. Fewer, larger matmuls
are what makes small-batch CPU decoding fast, and a snapshot lets the RL trainer keep training its
float32 module while the engine samples from a consistent copy until it is told to refresh.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from evalkit.errors import UserError

SUPPORTED_MODEL_TYPES = ("llama",)


@dataclass(frozen=True)
class DecoderShape:
    """The few numbers of a Llama config the engine's forward needs."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    max_positions: int

    @classmethod
    def from_config(cls, config: Any) -> "DecoderShape":
        model_type = getattr(config, "model_type", None)
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise UserError(
                f"the embedded engine runs Llama-architecture models; this one is '{model_type}' "
                "(serve it with vLLM and pass -b URL)"
            )
        rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise UserError(f"the embedded engine supports plain RoPE only; this model uses '{rope_type}' scaling")
        theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        heads = config.num_attention_heads
        return cls(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            num_layers=config.num_hidden_layers,
            num_heads=heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
            intermediate_size=config.intermediate_size,
            rms_norm_eps=float(config.rms_norm_eps),
            rope_theta=float(theta),
            max_positions=int(config.max_position_embeddings),
        )


class Linear:
    """``y = x @ W.T + b``, with ``W`` prepacked into oneDNN's blocked layout when this torch build
    can (AMX/AVX-512 kernels then skip re-laying out the weight on every call: 15-35% faster per
    matmul at decode sizes, measured). Falls back to ``F.linear`` when packing is unavailable."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, batch_hint: int = 32):
        self.out_features = weight.shape[0]
        self.bias = bias
        self.packed = _pack(weight, batch_hint) if _packing_works(weight.dtype) else None
        self.weight = weight if self.packed is None else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)


def _pack(weight: torch.Tensor, batch_hint: int) -> torch.Tensor | None:
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint)
    except (AttributeError, RuntimeError):
        return None


@functools.cache
def _packing_works(dtype: torch.dtype) -> bool:
    """Whether packed linears exist here and agree with ``F.linear`` (checked once per dtype)."""
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    try:
        generator = torch.Generator().manual_seed(0)
        weight = torch.randn(48, 64, generator=generator).to(dtype)
        x = torch.randn(3, 64, generator=generator).to(dtype)
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, 4)
        got = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        return bool(torch.allclose(got.float(), F.linear(x, weight).float(), rtol=1e-2, atol=1e-2))
    except (AttributeError, RuntimeError):
        return False


@dataclass
class LayerWeights:
    attn_norm: torch.Tensor
    qkv: Linear
    o: Linear
    mlp_norm: torch.Tensor
    gate_up: Linear
    down: Linear


@dataclass
class DecoderWeights:
    """All tensors of one snapshot; replaced as a whole on a weight update (never edited in place)."""

    embed: torch.Tensor
    layers: list[LayerWeights]
    final_norm: torch.Tensor
    lm_head: Linear

    @classmethod
    def from_module(cls, model: Any, dtype: torch.dtype, batch_hint: int = 32) -> "DecoderWeights":
        """Snapshot ``model`` (a ``LlamaForCausalLM``, possibly peft-wrapped) in ``dtype``;
        ``batch_hint`` is the batch size the packed layouts are tuned for."""
        hf = model.get_base_model() if hasattr(model, "get_base_model") else model
        body = hf.model

        def cast(*parts: torch.Tensor) -> torch.Tensor:
            """``parts`` stacked along dim 0 in ``dtype``: one allocation, cast while copying."""
            out = torch.empty((sum(p.shape[0] for p in parts), *parts[0].shape[1:]), dtype=dtype)
            offset = 0
            for part in parts:
                out[offset : offset + part.shape[0]].copy_(part.detach())
                offset += part.shape[0]
            return out

        def linear(weights: list[torch.Tensor], biases: list[torch.Tensor | None]) -> Linear:
            bias = cast(*biases) if all(b is not None for b in biases) else None  # type: ignore[arg-type]
            return Linear(cast(*weights), bias, batch_hint)

        layers = []
        with torch.no_grad():
            for layer in body.layers:
                attn, mlp = layer.self_attn, layer.mlp
                q, qb = effective_linear(attn.q_proj)
                k, kb = effective_linear(attn.k_proj)
                v, vb = effective_linear(attn.v_proj)
                o, ob = effective_linear(attn.o_proj)
                gate, gb = effective_linear(mlp.gate_proj)
                up, ub = effective_linear(mlp.up_proj)
                down, db = effective_linear(mlp.down_proj)
                layers.append(
                    LayerWeights(
                        attn_norm=cast(layer.input_layernorm.weight),
                        qkv=linear([q, k, v], [qb, kb, vb]),
                        o=linear([o], [ob]),
                        mlp_norm=cast(layer.post_attention_layernorm.weight),
                        gate_up=linear([gate, up], [gb, ub]),
                        down=linear([down], [db]),
                    )
                )
            head_weight, head_bias = effective_linear(hf.lm_head)
            return cls(
                embed=cast(body.embed_tokens.weight),
                layers=layers,
                final_norm=cast(body.norm.weight),
                lm_head=linear([head_weight], [head_bias]),
            )


def effective_linear(module: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight, bias) of a linear layer as it computes now: a peft LoRA layer's active, unmerged
    adapters are added to its base weight (a merged or disabled adapter adds nothing)."""
    base = getattr(module, "base_layer", module)
    weight = base.weight
    bias = getattr(base, "bias", None)
    if base is not module and not getattr(module, "merged", False) and not getattr(module, "disable_adapters", False):
        for name in getattr(module, "active_adapters", []):
            if name in getattr(module, "lora_A", {}):
                weight = weight + module.get_delta_weight(name).to(weight.dtype)
    return weight, bias

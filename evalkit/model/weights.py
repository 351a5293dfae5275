"""The engine's inference copy of a Llama-family model: fused, in the serving dtype and device.

The engine never runs the Hugging Face module itself. It snapshots the module's *effective*
weights (peft LoRA deltas merged in, when the module is a peft model or holds LoRA layers), or a
model folder's safetensors when no module exists (:mod:`evalkit.model.tensors`), into a
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

from evalkit.model.dtypes import DENSE, Q4
from evalkit.model.kvcache import CacheShape
from evalkit.model.tensors import layer_prefixes, rope_type, tensor_source

FUSED_MODEL_TYPES = ("llama", "mistral", "qwen2")
"""Architectures the fused forward computes exactly (when :func:`fused_unsupported` finds nothing
else in the way): a pre-norm decoder with RMSNorm, RoPE, grouped-query attention with optional
q/k/v/o biases, and a SiLU-gated MLP. Qwen2 is that with q/k/v biases."""

_STATIC_ROPE = ("default", "linear", "llama3", "yarn")
"""RoPE variants whose tables do not depend on the sequence length (dynamic NTK and LongRoPE do)."""


def fused_unsupported(model: Any) -> str | None:
    """Why the fused path cannot run ``model`` exactly (``None``: it can): a module (peft-wrapped or
    not) or a :class:`~evalkit.model.tensors.StoredModel`, judged by its config and its layout."""
    source = tensor_source(model)
    config = source.config
    model_type = getattr(config, "model_type", None)
    if model_type not in FUSED_MODEL_TYPES:
        return f"architecture '{model_type}'"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation '{config.hidden_act}'"
    layer_types = getattr(config, "layer_types", None) or []
    if any(kind != "full_attention" for kind in layer_types):
        return "sliding-window attention layers"
    window = getattr(config, "sliding_window", None)
    if window is not None and not layer_types and window < config.max_position_embeddings:
        return f"a {window}-token sliding window"
    if rope_type(config) not in _STATIC_ROPE:
        return f"RoPE type '{rope_type(config)}'"
    return source.layout_unsupported()


@dataclass(frozen=True)
class DecoderShape:
    """The few numbers of a Llama-family config the engine's forward needs."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    max_positions: int

    @classmethod
    def from_config(cls, config: Any) -> DecoderShape:
        heads = config.num_attention_heads
        return cls(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            num_layers=config.num_hidden_layers,
            num_heads=heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
            intermediate_size=getattr(config, "intermediate_size", 0),
            rms_norm_eps=float(getattr(config, "rms_norm_eps", 1e-6)),
            max_positions=int(config.max_position_embeddings),
        )

    @property
    def cache_shape(self) -> CacheShape:
        return CacheShape(self.num_layers, self.num_kv_heads, self.head_dim, self.max_positions)


def rope_tables(
    model: Any, positions: int, dtype: torch.dtype, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) ``[positions, head_dim / 2]`` from the model's rotary inverse frequencies and
    attention scaling (a module's own rotary embedding, or a stored model's config: every static
    RoPE variant transformers knows); computed in float32 and cast, as transformers does."""
    inv_freq, scaling = tensor_source(model).rope()
    angles = torch.arange(positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return (angles.cos() * scaling).to(device=device, dtype=dtype), (angles.sin() * scaling).to(
        device=device, dtype=dtype
    )


TRANSPOSED_MAX_ROWS = 2
"""Most rows a CPU float32 linear built with ``transposed=True`` computes from its ``[in, out]`` copy. The output head
of SmolLM2-135M ([49152 x 576], float32, AVX2, 1 thread, medians of 12 interleaved rounds under load 5-6) took
19.6 ms as ``x @ W_t`` against 39.4 ms as ``F.linear(x, W)`` at 1 row and 39.8 against 80.6 ms at 2 rows, but
137.6 against 97.8 ms at 4 rows and 125 against 113 ms at 8: torch picks another kernel for each layout, and the
row-major one only wins for a row or two. Same values up to summation order (max relative difference 1e-6)."""


class Linear:
    """``y = x @ W.T + b``. On CPU, ``W`` is prepacked into oneDNN's blocked layout when that pays
    (:func:`packing_pays`: AMX/AVX-512 kernels then skip re-laying out the weight on every call,
    15-35% faster per matmul at decode sizes, measured); elsewhere, and when packing is unavailable,
    ``F.linear``. An unpacked Linear can be overwritten in place (:meth:`copy_`), which keeps
    captured CUDA graphs valid across weight updates.

    ``owned=False``: ``weight`` belongs to someone else (the master module); packing copies it, and
    an unpacked Linear keeps a clone, so the snapshot never aliases the master.

    ``transposed=True`` (the output head, whose single-stream decode reads the largest matrix once per token): an
    unpacked float32 CPU weight also keeps an ``[in, out]`` copy for inputs of at most :data:`TRANSPOSED_MAX_ROWS`
    rows, where it is ~2x faster; the memory that costs is the head's size again."""

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None = None,
        batch_hint: int = 32,
        owned: bool = True,
        transposed: bool = False,
    ):
        self.out_features = weight.shape[0]
        self.bias = bias
        self.packed = _pack(weight, batch_hint) if packing_pays(weight.dtype, weight.device) else None
        self.weight = None if self.packed is not None else weight if owned else weight.clone()
        row_major = transposed and self.weight is not None and self.weight.dtype == torch.float32
        self.weight_t = self.weight.t().contiguous() if row_major and self.weight.device.type == "cpu" else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        if self.weight_t is not None and x.dim() == 2 and x.shape[0] <= TRANSPOSED_MAX_ROWS:
            y = torch.mm(x, self.weight_t)
            return y if self.bias is None else y.add_(self.bias)
        return F.linear(x, self.weight, self.bias)

    def tensors(self) -> list[torch.Tensor | None]:
        """The tensors an in-place update writes: the weight (``None`` when packed), the bias, the transposed copy."""
        return [self.weight, self.bias, self.weight_t]


def _pack(weight: torch.Tensor, batch_hint: int) -> torch.Tensor | None:
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint)
    except (AttributeError, RuntimeError):
        return None


def packing_pays(dtype: torch.dtype, device: torch.device | str) -> bool:
    """Whether a CPU linear in ``dtype`` is worth prepacking: always in bf16 (when packing works
    here); in fp32 only where oneDNN runs AVX-512 kernels. With oneDNN on AVX2 (``ONEDNN_MAX_CPU_ISA=
    AVX2``, as on an AVX2-only CPU) an fp32 decode step took the same time packed or not (15 and 32
    rows, SmolLM2-135M), while packing added ~0.9 s of CPU to every engine load; on AVX-512 packed
    fp32 was ~1.7x faster at 15 rows."""
    if torch.device(device).type != "cpu" or not _packing_works(dtype):
        return False
    return dtype != torch.float32 or _onednn_avx512()


@functools.cache
def _onednn_avx512() -> bool:
    from evalkit.model.dtypes import cpu_info

    cpu = cpu_info()
    isa = (cpu.onednn_isa or "").upper()
    capped = bool(isa) and not any(part in isa for part in ("AVX512", "AVX10", "AMX", "DEFAULT", "ALL"))
    return "avx512f" in cpu.flags and not capped


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

    def tensors(self) -> list[torch.Tensor | None]:
        return [
            self.attn_norm,
            self.mlp_norm,
            *(t for lin in (self.qkv, self.o, self.gate_up, self.down) for t in lin.tensors()),
        ]


@dataclass
class DecoderWeights:
    """All tensors of one snapshot. A weight update builds a new snapshot and either replaces this
    one (CPU) or copies it into this one's tensors (:meth:`copy_`, when nothing is packed)."""

    embed: torch.Tensor
    layers: list[LayerWeights]
    final_norm: torch.Tensor
    lm_head: Linear

    def tensors(self) -> list[torch.Tensor | None]:
        layers = [t for layer in self.layers for t in layer.tensors()]
        return [self.embed, self.final_norm, *layers, *self.lm_head.tensors()]

    def copy_(self, other: DecoderWeights) -> bool:
        """Overwrite this snapshot's tensors with ``other``'s; False (nothing written) when either
        holds packed tensors or their layouts differ (a tied output projection included)."""
        if any(lin.packed is not None for lin in self._linears() + other._linears()):
            return False
        if (self.lm_head.weight is self.embed) != (other.lm_head.weight is other.embed):
            return False  # a tied snapshot's lm_head is its embedding: writing an untied one into it would clobber it
        mine, theirs = self.tensors(), other.tensors()
        if len(mine) != len(theirs):
            return False
        for a, b in zip(mine, theirs):
            if (a is None) != (b is None) or (a is not None and (a.shape != b.shape or a.device != b.device)):
                return False
        for a, b in zip(mine, theirs):
            if a is not None:
                a.copy_(b)
        return True

    def _linears(self) -> list[Linear]:
        return [
            self.lm_head,
            *(lin for layer in self.layers for lin in (layer.qkv, layer.o, layer.gate_up, layer.down)),
        ]

    @classmethod
    def build(
        cls,
        model: Any,
        dtype: torch.dtype,
        batch_hint: int = 32,
        device: torch.device | str = "cpu",
        weights: str = DENSE,
    ) -> DecoderWeights:
        """Snapshot ``model`` (a Llama-family ``*ForCausalLM``, possibly peft-wrapped, or a
        :class:`~evalkit.model.tensors.StoredModel`) in ``dtype`` on ``device``; ``batch_hint`` is
        the batch size CPU packed layouts are tuned for. Every tensor is copied: the snapshot never
        aliases the master module nor the mapped file. ``weights="q4"``: the decoder layers' linears
        are 4-bit groups (:class:`~evalkit.model.quant.Q4Linear`, CPU) for small inputs, with a copy in
        ``dtype`` for large ones; the embedding and the output head stay in ``dtype``."""
        from evalkit.model.quant import Q4Linear, q4_fits

        source = tensor_source(model)

        def cast(*parts: torch.Tensor) -> torch.Tensor:
            """``parts`` stacked along dim 0 in ``dtype``: one allocation, cast while copying."""
            out = torch.empty((sum(p.shape[0] for p in parts), *parts[0].shape[1:]), dtype=dtype, device=device)
            offset = 0
            for part in parts:
                out[offset : offset + part.shape[0]].copy_(part)
                offset += part.shape[0]
            return out

        def linear(*prefixes: str, quantize: bool = weights == Q4, transposed: bool = False) -> Linear:
            pairs = [source.linear(p) for p in prefixes]
            biases = [b for _, b in pairs]
            bias = cast(*biases) if all(b is not None for b in biases) else None  # type: ignore[arg-type]
            weight = pairs[0][0]
            if quantize and q4_fits(weight):
                dense = cast(*(w for w, _ in pairs))  # also the path for large inputs (quant.MAX_ROWS)
                return Q4Linear(dense, bias, Linear(dense, bias, batch_hint))  # type: ignore[return-value]
            if len(pairs) == 1 and weight.dtype == dtype and weight.device == torch.device(device):
                return Linear(weight, bias, batch_hint, owned=False, transposed=transposed)  # one copy, not two
            return Linear(cast(*(w for w, _ in pairs)), bias, batch_hint, transposed=transposed)

        def layer(prefix: str) -> LayerWeights:
            attn, mlp = f"{prefix}.self_attn", f"{prefix}.mlp"
            return LayerWeights(
                attn_norm=cast(source.tensor(f"{prefix}.input_layernorm.weight")),
                qkv=linear(f"{attn}.q_proj", f"{attn}.k_proj", f"{attn}.v_proj"),
                o=linear(f"{attn}.o_proj"),
                mlp_norm=cast(source.tensor(f"{prefix}.post_attention_layernorm.weight")),
                gate_up=linear(f"{mlp}.gate_proj", f"{mlp}.up_proj"),
                down=linear(f"{mlp}.down_proj"),
            )

        def head(embedding: torch.Tensor, embed: torch.Tensor) -> Linear:
            """The output projection; a tied one (the same tensor as the embedding, no bias) shares
            the embedding's copy instead of making a second one."""
            weight, bias = source.linear("lm_head")
            tied = bias is None and weight.data_ptr() == embedding.data_ptr() and weight.shape == embedding.shape
            if tied:
                return Linear(embed, None, batch_hint, transposed=True)
            return linear("lm_head", quantize=False, transposed=True)

        with torch.no_grad():
            embedding = source.tensor("model.embed_tokens.weight")
            embed = cast(embedding)
            return cls(
                embed=embed,
                layers=[layer(prefix) for prefix in layer_prefixes(source.config)],
                final_norm=cast(source.tensor("model.norm.weight")),
                lm_head=head(embedding, embed),
            )

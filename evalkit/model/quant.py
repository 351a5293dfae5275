"""4-bit weights on CPU: the engine's linears as group-wise asymmetric 4-bit blocks, run by torch's int4 kernel.

Why: a decode step of a small model is bound by the bytes of weight it reads. The embedded model's file
stores every linear as Q4_1 blocks (32 weights, a scale ``d`` and a minimum ``m`` each: ``w = d * q + m``,
``q`` in 0..15); fp32 copies of them move 4 bytes a weight, the blocks ~0.6.

The blocks are recovered from the fp32 snapshot, not read from the file again: in every Q4_1 group the
smallest weight has ``q = 0`` and the largest ``q = 15``, so ``m = min`` and ``d = (max - min) / 15`` give
back the file's ``q`` exactly (:func:`quantize_q4`; 0.0 error on the embedded model's layers checked, and a
test checks it on Q4_1-shaped blocks). The same
function re-quantizes weights that were never 4-bit (a LoRA merge, a full-weight update, ``--dtype q4`` on
another model): there it rounds, as any 4-bit quantizer does.

Torch's CPU kernel (``_weight_int4pack_mm_for_cpu``) stores ``w = (q - 8) * scale + zero`` with
``scale`` and ``zero`` in bfloat16 and takes bfloat16 activations (its float32 path is ~5x slower than
fp32 ``F.linear``; its float16 path slower still, measured on AVX2). So a q4 linear differs from the
file's fp32 values by bf16 rounding of its input, its output and its group's scale and zero (relative
~2^-8); greedy tokens can differ from the fp32 path where two logits are that close (docs/engine-speed.md).
Everything else in the forward (norms, attention, the KV cache, the tied embedding and output head, which
the file stores as Q8_0) stays float32, and so does a float32 copy of each linear for inputs of more than
:data:`MAX_ROWS` rows (prefill, large decode batches), where the 4-bit kernel is slower than fp32's GEMM.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

GROUP = 32
"""Weights per 4-bit group: Q4_1's block size, one of the kernel's group sizes."""
_ZERO_AT = 8
"""The kernel's zero point: ``zero`` is the weight at ``q = 8``."""


def q4_fits(weight: torch.Tensor) -> bool:
    """Whether ``weight`` ([out, in]) can be a q4 linear: on CPU, ``in`` a whole number of groups."""
    return weight.device.type == "cpu" and weight.dim() == 2 and weight.shape[1] % GROUP == 0


def quantize_q4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(``q`` int32 [out, in] in 0..15, ``scale`` and ``minimum`` float32 [out, in / GROUP]): each group of
    ``GROUP`` weights along ``in`` as ``scale * q + minimum``, rounding to nearest (exact for Q4_1 blocks)."""
    out, width = weight.shape
    groups = weight.detach().float().reshape(out, width // GROUP, GROUP)
    low, high = groups.amin(dim=-1), groups.amax(dim=-1)
    scale = (high - low) / 15
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))  # a constant group: every q is 0
    q = ((groups - low[..., None]) / safe[..., None]).round_().clamp_(0, 15).to(torch.int32)
    return q.reshape(out, width), scale, low


def dequantize_q4(q: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor) -> torch.Tensor:
    """The float32 weights ``scale * q + minimum`` of :func:`quantize_q4`'s blocks."""
    out, width = q.shape
    groups = q.reshape(out, width // GROUP, GROUP).float() * scale[..., None] + minimum[..., None]
    return groups.reshape(out, width)


MAX_ROWS = 16
"""Most rows (batch x tokens) a q4 linear computes in 4 bits; more go to its float32 copy. One thread, the 30 layers'
linears of SmolLM2-135M, CPU ms at 1 / 8 / 16 / 32 rows (AVX2, load ~10): fp32 57-63 / 138-150 / 174-214 / 195-227,
q4 24-26 / 74-93 / 115-143 / 228-283. The kernel dequantizes every weight for each block of rows, so past ~20 rows
it loses to fp32's GEMM; prefill (a prompt's tokens at once) is always past it."""


class Q4Linear:
    """``y = x @ W.T + b`` with ``W`` in 4-bit groups (:func:`quantize_q4`), for float32 ``x`` and ``y``, when ``x`` has
    at most :data:`MAX_ROWS` rows; larger inputs go to ``dense`` (the same weight in float32), when given.

    Duck-types :class:`~evalkit.model.weights.Linear`: ``packed`` is set (so a weight update replaces
    the snapshot instead of copying into it) and :meth:`tensors` exposes only the bias."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, dense: Any = None):
        self.out_features, self.in_features = weight.shape
        self.dense = dense
        q, scale, minimum = quantize_q4(weight)
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
        zero = minimum + _ZERO_AT * scale
        self.scales_and_zeros = torch.stack([scale, zero], dim=-1).transpose(0, 1).contiguous().to(torch.bfloat16)
        """[in / GROUP, out, 2]: the kernel's layout."""
        self.bias = bias
        self.weight = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.dense is not None and x.numel() > MAX_ROWS * self.in_features:
            return self.dense(x)
        # as few aten calls as the kernel allows (a decode step makes 120 of these): no reshape of a 2-D input,
        # and one cast that also makes the rows contiguous
        rows = x if x.dim() == 2 else x.reshape(-1, self.in_features)
        rows = rows.to(torch.bfloat16, memory_format=torch.contiguous_format)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.packed, GROUP, self.scales_and_zeros).to(x.dtype)
        if x.dim() != 2:
            y = y.reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y.add_(self.bias)

    def tensors(self) -> list[torch.Tensor | None]:
        return [None, self.bias]


@functools.cache
def q4_kernel_works() -> bool:
    """Whether torch here has the CPU int4 kernel and it computes the dequantized product (checked once)."""
    if not hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu"):
        return False
    try:
        generator = torch.Generator().manual_seed(0)
        weight = torch.randn(48, 2 * GROUP, generator=generator)
        x = torch.randn(3, 2 * GROUP, generator=generator)
        expected = x @ dequantize_q4(*quantize_q4(weight)).T
        got = Q4Linear(weight)(x)
        return bool(torch.allclose(got, expected, rtol=3e-2, atol=3e-2 * float(expected.abs().max())))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False

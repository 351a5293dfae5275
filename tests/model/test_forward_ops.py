"""The fused forward's pieces spelled in fewer aten ops (evalkit/model/forward.py, quant.py) compute what their
plain spellings compute, bit for bit: a decode step makes each of them tens of times, so their op count is CPU
time, but their numbers must not move."""

from __future__ import annotations

import pytest
import torch

from evalkit.model import quant


@pytest.fixture(scope="module")
def forward(tmp_path_factory):
    from support.tiny_model import write_tiny_model
    from transformers import AutoModelForCausalLM

    from evalkit.model.forward import LlamaForward

    folder = write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")
    return LlamaForward(AutoModelForCausalLM.from_pretrained(str(folder)).eval(), torch.float32, "cpu", 4)


def _half_split_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' ``rotate_half`` RoPE, over half-width tables."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_in_four_ops_equals_the_half_split_rotation_bitwise(forward, dtype):
    half = forward.shape.head_dim // 2
    positions = torch.tensor([0, 3, 17, 40])
    cos, sin = forward.rot_cos[positions].to(dtype), forward.rot_sin[positions].to(dtype)
    assert torch.equal(cos[:, :half], cos[:, half:]) and torch.equal(sin[:, :half], -sin[:, half:])
    heads = forward.shape.num_heads + forward.shape.num_kv_heads
    # a strided view, as the forward passes it (q and k sliced out of the fused qkv output)
    wide = torch.randn(4, heads * forward.shape.head_dim + 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    x = wide[:, 8:].unflatten(-1, (heads, forward.shape.head_dim))
    got = forward._rope(x, cos[:, None, :], sin[:, None, :])
    expected = _half_split_rope(x, cos[:, None, :half], sin[:, None, half:])
    assert got.dtype == dtype and torch.equal(got, expected)


@pytest.mark.skipif(not quant.q4_kernel_works(), reason="this torch has no working int4 CPU kernel")
def test_a_q4_linear_takes_a_strided_input_as_its_contiguous_copy():
    """The MLP's ``silu(gate) * up`` and the attention's reshape can hand the linear a view; the one cast the linear
    makes must also make the kernel's rows contiguous."""
    generator = torch.Generator().manual_seed(3)
    linear = quant.Q4Linear(torch.randn(48, 64, generator=generator), torch.randn(48, generator=generator))
    strided = torch.randn(3, 128, generator=generator)[:, ::2]
    assert not strided.is_contiguous()
    assert torch.equal(linear(strided), linear(strided.contiguous()))

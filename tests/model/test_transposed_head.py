"""The output head's row-major copy (weights.Linear(transposed=True)): used for one or two rows on CPU float32,
equal to F.linear there, kept current by weight updates, and absent where it would not pay."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support.tiny_archs import build_arch

from evalkit.model import weights


@pytest.fixture
def unpacked(monkeypatch):
    """The AVX2 CPU case, where float32 linears are not prepacked (weights.packing_pays)."""
    monkeypatch.setattr(weights, "packing_pays", lambda dtype, device: False)


def test_one_or_two_rows_use_the_transposed_copy_and_give_f_linear_values(unpacked, monkeypatch):
    weight, bias = torch.randn(300, 64), torch.randn(300)
    linear = weights.Linear(weight, bias, transposed=True)
    assert linear.weight_t is not None and linear.weight_t.is_contiguous() and linear.weight_t.shape == (64, 300)
    calls: list[tuple[int, ...]] = []
    real_mm = torch.mm
    monkeypatch.setattr(torch, "mm", lambda a, b: calls.append(tuple(a.shape)) or real_mm(a, b))
    for rows in (1, 2, 3, 8):
        x = torch.randn(rows, 64)
        torch.testing.assert_close(linear(x), F.linear(x, weight, bias), rtol=1e-5, atol=1e-5)
    assert calls == [(1, 64), (2, 64)]  # three rows and more go to F.linear
    three_d = torch.randn(1, 2, 64)  # prefill's [batch, length, hidden] shape is not the decode head's
    torch.testing.assert_close(linear(three_d), F.linear(three_d, weight, bias), rtol=1e-5, atol=1e-5)


def test_no_transposed_copy_unless_asked_and_never_outside_cpu_float32(unpacked):
    assert weights.Linear(torch.randn(8, 16)).weight_t is None
    assert weights.Linear(torch.randn(8, 16, dtype=torch.bfloat16), transposed=True).weight_t is None
    assert weights.Linear(torch.randn(8, 16, device="meta"), transposed=True).weight_t is None


def test_the_tied_head_keeps_a_transposed_copy_that_a_weight_update_rewrites(unpacked):
    from evalkit.model.forward import LlamaForward

    model = build_arch("qwen2")  # tied embedding and head
    forward = LlamaForward(model, torch.float32)
    head = forward.weights.lm_head
    assert head.weight is forward.weights.embed and head.weight_t is not None
    assert torch.equal(head.weight_t, forward.weights.embed.t())
    kept = head.weight_t
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(2)
    forward.load(model)  # same layout: written in place, the transposed copy too
    assert forward.weights.lm_head.weight_t is kept
    assert torch.equal(kept, model.get_input_embeddings().weight.detach().t())
    hidden = torch.randn(1, model.config.hidden_size)
    expected = F.linear(F.rms_norm(hidden, (hidden.shape[-1],), forward.weights.final_norm, forward.shape.rms_norm_eps),
                        model.get_input_embeddings().weight.detach())
    torch.testing.assert_close(forward.logits(hidden), expected, rtol=1e-5, atol=1e-5)

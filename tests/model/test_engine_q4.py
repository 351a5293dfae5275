"""dtype ``q4``: the decoder linears as 4-bit groups run by torch's int4 CPU kernel (evalkit/model/quant.py);
``auto`` picks it for a model file that stores its linears 4-bit, and says so at start-up."""

from __future__ import annotations

import pytest
import torch
from support import cli

from evalkit.core.errors import UserError
from evalkit.core.types import SamplingArgs
from evalkit.model import dtypes, quant
from evalkit.model import engine as engine_module
from evalkit.model.dtypes import CpuInfo, DtypeChoice, choose_dtype
from evalkit.model.weights import Linear

AVX2 = CpuInfo("AVX2", frozenset({"avx", "avx2", "fma"}))
SAPPHIRE = CpuInfo("AVX512", frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}))
AUTO_Q4 = "auto: the file's linears are 4-bit; torch's int4 CPU kernel runs them"
GREEDY = SamplingArgs(max_tokens=12, temperature=0)

needs_kernel = pytest.mark.skipif(not quant.q4_kernel_works(), reason="this torch has no working int4 CPU kernel")


def _q4_blocks(rows: int, width: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(weight, q, d, m) as a Q4_1 file stores them: fp16 scale and minimum per 32 weights, q in 0..15 with a 0 and a
    15 in every group (the group's own minimum and maximum)."""
    generator = torch.Generator().manual_seed(seed)
    groups = width // quant.GROUP
    q = torch.randint(0, 16, (rows, groups, quant.GROUP), generator=generator, dtype=torch.int32)
    q[..., 0], q[..., 1] = 0, 15
    d = (torch.rand(rows, groups, generator=generator) * 0.05 + 1e-3).half().float()
    m = (-torch.rand(rows, groups, generator=generator) * 0.4).half().float()
    weight = (q.float() * d[..., None] + m[..., None]).reshape(rows, width)
    return weight, q.reshape(rows, width), d, m


def test_quantizing_q4_blocks_gives_them_back_exactly():
    weight, q, d, m = _q4_blocks(48, 96)
    got_q, got_d, got_m = quant.quantize_q4(weight)
    assert torch.equal(got_q, q) and torch.equal(got_m, m)
    assert torch.allclose(got_d, d, rtol=1e-6, atol=0)
    assert torch.equal(quant.dequantize_q4(got_q, got_d, got_m), weight)


@needs_kernel
@pytest.mark.parametrize("rows", [1, 5, 32])
def test_a_q4_linear_equals_the_dequantized_fp32_linear(rows):
    weight, *_ = _q4_blocks(96, 160, seed=1)
    bias = torch.randn(96)
    x = torch.randn(rows, 160, generator=torch.Generator().manual_seed(2))
    expected = torch.nn.functional.linear(x, weight, bias)
    got = quant.Q4Linear(weight, bias)(x)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    error = (got - expected).abs().max() / expected.abs().max()
    assert error < 1e-2, error  # bf16 activations and bf16 scales/zeros: ~2^-8 relative
    three_d = quant.Q4Linear(weight)(x.reshape(1, rows, 160))  # prefill's [batch, length, hidden]
    assert torch.allclose(three_d.reshape(rows, 96), got - bias, atol=1e-5)


@needs_kernel
def test_large_inputs_go_to_the_float32_copy():
    """Past quant.MAX_ROWS rows the 4-bit kernel is slower than fp32's GEMM (prefill, big decode batches)."""
    weight, *_ = _q4_blocks(64, 96, seed=3)
    linear = quant.Q4Linear(weight, None, Linear(weight))
    few, many = torch.randn(quant.MAX_ROWS, 96), torch.randn(2, quant.MAX_ROWS, 96)
    assert torch.equal(linear(many), torch.nn.functional.linear(many, weight))
    assert not torch.equal(linear(few), torch.nn.functional.linear(few, weight))  # bf16 rounding: the 4-bit kernel ran
    assert torch.equal(linear(few), quant.Q4Linear(weight)(few))


@pytest.mark.parametrize(("cpu", "device", "q4_file", "expected"), [
    (AVX2, "cpu", True, DtypeChoice("float32", AUTO_Q4, "q4")),
    (SAPPHIRE, "cpu", True, DtypeChoice("float32", AUTO_Q4, "q4")),
    (AVX2, "cpu", False, DtypeChoice("float32", "auto: this CPU has no native bf16: AVX2")),
    (SAPPHIRE, "cpu", False, DtypeChoice("bfloat16", "auto: this CPU has native bf16: AMX")),
    (AVX2, "cuda:0", True, DtypeChoice("bfloat16", "auto: CUDA")),
])  # fmt: skip
def test_auto_picks_q4_for_a_4bit_file_on_cpu(monkeypatch, cpu, device, q4_file, expected):
    monkeypatch.setattr(dtypes, "q4_kernel_works", lambda: True)
    assert choose_dtype("auto", device, cpu, q4_file=q4_file) == expected


def test_auto_keeps_todays_dtype_where_the_kernel_is_missing(monkeypatch):
    monkeypatch.setattr(dtypes, "q4_kernel_works", lambda: False)
    assert choose_dtype("auto", "cpu", AVX2, q4_file=True) == DtypeChoice(
        "float32", "auto: this CPU has no native bf16: AVX2"
    )


def test_the_q4_line_names_the_weights_and_why(monkeypatch):
    monkeypatch.setattr(dtypes, "q4_kernel_works", lambda: True)
    assert choose_dtype("auto", "cpu", AVX2, q4_file=True).line() == f"dtype float32, weights q4 ({AUTO_Q4})"
    assert choose_dtype("Q4", "cpu", AVX2).line() == "dtype float32, weights q4 (asked for)"
    assert choose_dtype("fp32", "cpu", AVX2, q4_file=True).line() == "dtype float32 (asked for)"


@pytest.mark.parametrize(("device", "kernel", "fragment"), [
    ("cuda:0", True, "dtype q4 runs on CPU only"),
    ("cpu", False, "dtype q4 needs torch's int4 CPU kernel"),
])  # fmt: skip
def test_q4_where_it_cannot_run_is_a_user_error(monkeypatch, device, kernel, fragment):
    monkeypatch.setattr(dtypes, "q4_kernel_works", lambda: kernel)
    with pytest.raises(UserError, match=fragment):
        choose_dtype("q4", device, AVX2)


@pytest.fixture
def tiny_folder(tmp_path):
    from support.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path / "tiny")


def test_prime_serve_refuses_q4_without_the_kernel_in_one_line(tiny_folder, monkeypatch):
    monkeypatch.setattr(dtypes, "q4_kernel_works", lambda: False)
    result = cli.prime("serve", "-m", str(tiny_folder), "--dtype", "q4", "--device", "cpu", "--port", "1")
    cli.assert_user_error(result, "dtype q4 needs torch's int4 CPU kernel", "use auto, bf16 or fp32")


@needs_kernel
def test_q4_on_the_hf_backend_is_a_user_error(tiny_folder):
    from evalkit.model.engine import Engine

    with pytest.raises(UserError, match=r"dtype q4 runs on the fused engine path only \(the hf backend"):
        Engine.from_name(str(tiny_folder), dtype="q4", max_batch=2, device="cpu", backend="hf")


@needs_kernel
def test_the_engine_says_q4_at_start_up_and_runs_it(tiny_folder, monkeypatch, capsys):
    from evalkit.model.engine import Engine

    monkeypatch.setattr(engine_module, "stores_q4", lambda source: True)  # as the embedded GGUF's source says
    engine = Engine.from_name(str(tiny_folder), dtype="auto", max_batch=2, device="cpu")
    try:
        assert f"on cpu, dtype float32, weights q4 ({AUTO_Q4})..." in capsys.readouterr().err
        assert engine.dtype_choice.line() == f"dtype float32, weights q4 ({AUTO_Q4})"
        assert isinstance(engine._forward.weights.layers[0].gate_up, quant.Q4Linear)
        assert len(engine.generate_many([[1, 2, 3]], GREEDY)[0].token_ids) == 12
    finally:
        engine.close()


def _four_bit_tiny(folder):
    """The tiny model with every decoder linear rounded to 4-bit groups, as the embedded model's file holds them."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear) and name.startswith("model.layers."):
                module.weight.copy_(quant.dequantize_q4(*quant.quantize_q4(module.weight)))
    return model


@needs_kernel
def test_the_q4_forward_matches_fp32_on_4bit_weights(tiny_folder):
    from evalkit.model.forward import LlamaForward
    from evalkit.model.kvcache import KVCache

    model = _four_bit_tiny(tiny_folder)
    forwards = {w: LlamaForward(model, torch.float32, "cpu", 4, weights=w) for w in ("dense", "q4")}
    prompts = [[1, 40, 41, 42, 43], [1, 50, 9]]
    logits = {}
    for name, forward in forwards.items():
        cache = KVCache(forward.cache_shape, 2, torch.float32)
        prefill = forward.prefill(cache, [0, 1], prompts)
        step = forward.decode(cache, prefill.argmax(-1), torch.tensor([5, 3]), 6)
        logits[name] = (prefill, step)
    for dense, q4 in zip(logits["dense"], logits["q4"]):
        assert (q4 - dense).abs().max() < 2e-2 * dense.abs().max()


@needs_kernel
def test_a_weight_update_requantizes_the_q4_snapshot(tiny_folder):
    from support.tiny_model import build_tokenizer

    from evalkit.model.engine import Engine
    from evalkit.model.forward import LlamaForward

    model = _four_bit_tiny(tiny_folder)
    engine = Engine(model, build_tokenizer(), dtype="q4", max_batch=2, device="cpu")
    try:
        before = engine._forward.weights.layers[0].qkv
        with torch.no_grad():
            model.model.layers[0].self_attn.q_proj.weight.mul_(-1)
        engine.update_weights()
        after = engine._forward.weights.layers[0].qkv
        assert isinstance(after, quant.Q4Linear) and after is not before
        fresh = LlamaForward(model, torch.float32, "cpu", 2, weights="q4").weights.layers[0].qkv
        assert torch.equal(after.packed, fresh.packed) and torch.equal(after.scales_and_zeros, fresh.scales_and_zeros)
    finally:
        engine.close()


@needs_kernel
def test_rl_samples_with_full_precision_weights(tiny_folder, monkeypatch):
    """RL's sampler is an engine over the trainer's module (rl_backend/sources/engine_source.py): its ``auto`` keeps
    dense weights even when the module's linears are 4-bit (a LoRA delta below half a 4-bit step would vanish in the
    rounding), and RL's config has no q4."""
    from support.tiny_model import build_tokenizer

    from evalkit.model.engine import Engine
    from rl_backend.config import InferenceConfig

    monkeypatch.setattr(engine_module, "stores_q4", lambda source: True)
    with pytest.raises(ValueError):
        InferenceConfig(dtype="q4")
    engine = Engine(_four_bit_tiny(tiny_folder), build_tokenizer(), dtype=InferenceConfig().dtype, max_batch=2,
                    device="cpu")  # fmt: skip
    try:
        assert engine.dtype_choice.weights == "dense"
        assert isinstance(engine._forward.weights.layers[0].qkv, Linear)
    finally:
        engine.close()


@needs_kernel
@pytest.mark.slow
def test_the_embedded_model_in_q4_keeps_fp32s_greedy_tokens_but_at_near_ties():
    """The file's Q4_1 blocks are kept exactly; what q4 rounds is bf16 (the kernel's activations, outputs, scales and
    zeros). Measured on 11 prompts x 64 tokens: 7 identical, the rest first differing where fp32's two candidates were
    0.03-0.05 apart in logit (bf16 weights: 4 identical). Here: each prompt's greedy tokens equal fp32's, or the first
    difference is such a near tie."""
    from evalkit.model.shared import get_engine

    fp32 = get_engine("local/smollm2-135m", dtype="fp32", max_batch=4, device="cpu")
    q4 = get_engine("local/smollm2-135m", dtype="q4", max_batch=4, device="cpu")
    assert q4 is not fp32 and q4.dtype_choice.weights == "q4" and fp32.dtype_choice.weights == "dense"
    args = SamplingArgs(max_tokens=32, temperature=0)
    identical = 0
    for text in ["What is the capital of France?", "Write one sentence about cats.", "Count from 1 to 5."]:
        prompt = fp32.encode_chat([{"role": "user", "content": text}])
        want, got = (e.generate_many([prompt], args)[0].token_ids for e in (fp32, q4))
        differ = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), None)
        if differ is None:
            identical += 1
            continue
        with torch.no_grad():
            logits = fp32.model(input_ids=torch.tensor([prompt + want[:differ]])).logits[0, -1]
        assert logits[want[differ]] - logits[got[differ]] < 0.25, (text, differ)
    assert identical >= 2

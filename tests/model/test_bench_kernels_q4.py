"""``bench/kernels_q4.py``: the block layouts it hands to other libraries hold the file's Q4_1 / Q8_0 values
exactly, onnxruntime's ``MatMulNBits`` (where installed) computes the Q4_1 product through them, and the bench
runs end to end with the project's venv alone, saying which optional paths it skipped."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from support import REPO, bench_module, with_pythonpath

BENCH = REPO / "bench" / "kernels_q4.py"
GROUP = 32


def _q4_1_blocks(out: int = 64, width: int = 3 * GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """(float32 weights made of Q4_1 blocks, their ``q`` [out, blocks, GROUP]): fp16 ``d`` and ``m`` as the file
    stores them, every block spanning q = 0..15 as the file's quantizer leaves it."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randint(0, 16, (out, width // GROUP, GROUP), generator=generator)
    q[..., 0], q[..., 1] = 0, 15
    d = (torch.rand(out, width // GROUP, 1, generator=generator) * 0.02 + 1e-3).half().float()
    m = (-torch.rand(out, width // GROUP, 1, generator=generator) * 0.1).half().float()
    return (q.float() * d + m).reshape(out, width), q


def _q4_1_weight() -> torch.Tensor:
    return _q4_1_blocks()[0]


def _unpack(blob: torch.Tensor) -> torch.Tensor:
    """[out, blocks, GROUP / 2] bytes, low nibble first -> q [out, blocks, GROUP]."""
    return torch.stack([blob & 0x0F, blob >> 4], dim=-1).reshape(*blob.shape[:2], -1).float()


def test_the_block_sums_layout_is_q4_1_exact():
    bench = bench_module(BENCH)
    weight, q = _q4_1_blocks()
    blob, scale, zeros = bench._nbits_blocks(weight, 4, "sums")
    out, width = weight.shape
    assert blob.shape == (out, width // GROUP, GROUP // 2) and blob.dtype == torch.uint8
    assert zeros.dtype == torch.uint8 and not zeros.any()
    assert torch.equal(_unpack(blob), q.float())  # the file's 4-bit values, nibble for nibble
    minima = bench.quantize_q4(weight)[2]
    rebuilt = _unpack(blob) * scale.reshape(out, -1, 1) + minima[..., None]
    torch.testing.assert_close(rebuilt.reshape(out, width), weight, rtol=0, atol=1e-7)


def test_float_zero_points_rebuild_the_minimum_and_rounded_ones_do_not():
    bench = bench_module(BENCH)
    weight = _q4_1_weight()
    out, width = weight.shape
    blob, scale, zp = bench._nbits_blocks(weight, 4, "float")
    rebuilt = (_unpack(blob) - zp.reshape(out, -1, 1)) * scale.reshape(out, -1, 1)
    torch.testing.assert_close(rebuilt.reshape(out, width), weight, rtol=0, atol=1e-6)
    _, _, packed = bench._nbits_blocks(weight, 4, "u8")
    assert packed.dtype == torch.uint8 and packed.numel() == out * ((width // GROUP + 1) // 2)


def test_q8_blocks_recover_q8_0_values_exactly():
    bench = bench_module(BENCH)
    generator = torch.Generator().manual_seed(1)
    q = torch.randint(-127, 128, (8, 2, GROUP), generator=generator)
    q[..., 0] = 127  # Q8_0's quantizer maps each block's largest magnitude to 127
    d = torch.rand(8, 2, 1, generator=generator).half().float()  # the file stores d as fp16
    weight = (q.float() * d).reshape(8, 2 * GROUP)
    assert torch.equal(bench.q8_exact(weight), weight)


def test_onnxruntime_matmul_nbits_computes_the_q4_1_product():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    bench = bench_module(BENCH)
    weights = [_q4_1_weight(), _q4_1_weight() * 2]
    x = torch.randn(3, weights[0].shape[1], generator=torch.Generator().manual_seed(2))
    run = bench.ort_matmul_nbits(4, 0, "sums")(weights, x, 1)  # accuracy_level 0: float32 activations
    for i, weight in enumerate(weights):
        expected = x.double() @ weight.double().T
        assert float((run(i).double() - expected).abs().max() / expected.abs().max()) < 1e-5


@pytest.mark.slow
def test_the_bench_runs_with_the_project_venv_alone():
    args = ["--threads", "1", "--rows", "1", "--rounds", "1", "--layers", "1", "--skip", "torchao", "ort "]
    result = subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600,
        cwd=REPO, env=with_pythonpath(REPO),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "threads=1 rows=1" in out and "load" in out
    for path in ("torch int4 bf16 (today)", "fp32 x @ W.T (today)", "fp32 x @ Wt (W stored transposed)"):
        assert path in out
    assert "decode step's matmuls" in out
    today = next(line for line in out.splitlines() if "qkv [960x576]" in line and "(today)" in line)
    assert today.split()[-2] == "1.00x"

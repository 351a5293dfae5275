"""dtype ``auto``: bf16 where the CPU does bf16 natively (or on CUDA), else fp32, with the reason at start-up;
``--dtype`` / ``inference.dtype`` still force one."""

from __future__ import annotations

import pytest
from support import REPO, free_port, with_pythonpath

from evalkit.core.errors import UserError
from evalkit.core.types import SamplingArgs
from evalkit.model import dtypes
from evalkit.model.dtypes import CpuInfo, choose_dtype

AVX2 = CpuInfo("AVX2", frozenset({"avx", "avx2", "fma"}))
SKYLAKE = CpuInfo("AVX512", frozenset({"avx2", "avx512f", "avx512bw"}))
COOPER = CpuInfo("AVX512", frozenset({"avx2", "avx512f", "avx512_bf16"}))
SAPPHIRE = CpuInfo("AVX512", frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}))


@pytest.mark.parametrize(
    ("cpu", "name", "reason"),
    [
        (AVX2, "float32", "auto: this CPU has no native bf16: AVX2"),
        (SKYLAKE, "float32", "auto: this CPU has no native bf16: AVX512"),
        (COOPER, "bfloat16", "auto: this CPU has native bf16: AVX512-BF16"),
        (SAPPHIRE, "bfloat16", "auto: this CPU has native bf16: AMX"),
        (CpuInfo("AVX2", SAPPHIRE.flags), "float32", "auto: the CPU has AMX but torch's kernels are capped at AVX2"),
        (CpuInfo("AVX512", SAPPHIRE.flags, "AVX2"), "float32", "auto: the CPU has AMX but ONEDNN_MAX_CPU_ISA=AVX2"),
        (CpuInfo("AVX512", SAPPHIRE.flags, "avx512_core_amx"), "bfloat16", "auto: this CPU has native bf16: AMX"),
        (
            CpuInfo("DEFAULT", frozenset({"fp", "asimd", "bf16"})),
            "float32",
            "auto: this CPU has no native bf16: DEFAULT",
        ),
    ],
)
def test_auto_follows_the_cpu(cpu, name, reason):
    choice = choose_dtype("auto", "cpu", cpu)
    assert (choice.name, choice.reason) == (name, reason)
    assert choice.line() == f"dtype {name} ({reason})"
    assert choose_dtype(None, "cpu", cpu) == choice


def test_auto_is_bf16_on_cuda_whatever_the_cpu():
    assert choose_dtype("auto", "cuda:0", AVX2) == dtypes.DtypeChoice("bfloat16", "auto: CUDA")


@pytest.mark.parametrize(
    ("asked", "name"), [("bf16", "bfloat16"), ("BF16", "bfloat16"), ("fp32", "float32"), ("float32", "float32")]
)
def test_an_asked_dtype_is_used_as_given(asked, name):
    for cpu in (AVX2, SAPPHIRE):
        assert choose_dtype(asked, "cpu", cpu) == dtypes.DtypeChoice(name, "asked for")


def test_an_unknown_dtype_is_a_user_error():
    with pytest.raises(UserError, match="use auto, bf16, fp32 or q4"):
        choose_dtype("fp16", "cpu", AVX2)


def test_proc_flags_reads_the_flags_line(tmp_path):
    text = "processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    (tmp_path / "cpuinfo").write_text(text)
    assert dtypes._proc_flags(tmp_path / "cpuinfo") == ["fpu", "avx2", "amx_bf16"]
    assert dtypes._proc_flags(tmp_path / "missing") == []


def test_this_machine_has_a_rule():
    info = dtypes.cpu_info()
    assert info.capability and choose_dtype("auto", "cpu").name in ("bfloat16", "float32")


@pytest.fixture
def tiny_folder(tmp_path):
    from support.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path / "tiny")


@pytest.mark.parametrize(("cpu", "asked", "line"), [
    (AVX2, "auto", "dtype float32 (auto: this CPU has no native bf16: AVX2)"),
    (SAPPHIRE, "auto", "dtype bfloat16 (auto: this CPU has native bf16: AMX)"),
    (SAPPHIRE, "fp32", "dtype float32 (asked for)"),
    (AVX2, "bf16", "dtype bfloat16 (asked for)"),
])
def test_the_startup_line_says_which_dtype_and_why(tiny_folder, monkeypatch, capsys, cpu, asked, line):
    import torch

    from evalkit.model.engine import Engine

    monkeypatch.setattr(dtypes, "cpu_info", lambda: cpu)
    engine = Engine.from_name(str(tiny_folder), dtype=asked, max_batch=2, device="cpu")
    try:
        assert f"on cpu, {line}..." in capsys.readouterr().err
        assert engine.dtype_choice.line() == line
        assert engine.dtype == (torch.float32 if "float32" in line else torch.bfloat16)
        assert engine.generate_many([[1, 2, 3]], SamplingArgs(max_tokens=2))  # it runs in that dtype
    finally:
        engine.close()


def test_shared_engines_are_keyed_by_the_chosen_dtype(tiny_folder, monkeypatch):
    from evalkit.model.shared import get_engine, shutdown_engines

    monkeypatch.setattr(dtypes, "cpu_info", lambda: AVX2)
    try:
        auto = get_engine(str(tiny_folder), device="cpu", max_batch=2)
        assert auto.dtype_name == "float32"
        assert get_engine(str(tiny_folder), dtype="fp32", device="cpu") is auto  # auto chose fp32: the same engine
        assert get_engine(str(tiny_folder), dtype="bf16", device="cpu").dtype_name == "bfloat16"
    finally:
        shutdown_engines()


def test_rl_sampler_dtype_defaults_to_auto_and_a_key_forces_one():
    from rl_backend.config import InferenceConfig

    assert InferenceConfig().dtype == "auto"
    assert InferenceConfig(dtype="float32").dtype == "float32"
    with pytest.raises(ValueError):
        InferenceConfig(dtype="fp16")


@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.parametrize(("flag", "reason"), [((), "(auto: "), (("--dtype", "fp32"), "dtype float32 (asked for)")])
def test_prime_serve_says_its_dtype_and_why(tiny_folder, tmp_path, flag, reason):
    import subprocess
    import sys
    import time

    port = free_port()
    log = tmp_path / "serve.log"
    env = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "primekit_cli", "serve", "-m", str(tiny_folder),
                                    "--port", str(port), "--device", "cpu", *flag],
                                   stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "serving " not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        text = log.read_text()
        serving = next(line for line in text.splitlines() if line.startswith("serving "))
        assert reason in serving and "on cpu, dtype" in text, text
    finally:
        process.kill()
        process.wait(timeout=30)

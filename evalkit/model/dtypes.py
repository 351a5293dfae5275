"""Which dtype the engine computes in when nobody forced one (``auto``): bf16 where the hardware does
bf16 natively, else fp32.

Why a rule and not one default: a decode step of a small model is a few matrix-vector products, and
a CPU without bf16 instructions (AVX2-only: many laptops and cloud CPUs) converts every bf16 weight to
fp32 on the fly. On such a CPU the engine decoded 2-4x slower in bf16 than in fp32; on a CPU with
AVX512-BF16 or AMX, oneDNN runs bf16 natively and bf16 moves half the bytes. docs/engine-speed.md
has the measurements the rule rests on.

The rule (:func:`choose_dtype`), in order:

* a dtype that was asked for (``--dtype``, ``inference.dtype``) is used as given; ``q4`` (4-bit decoder
  linears, the rest float32: :mod:`evalkit.model.quant`) only on CPU where torch's int4 kernel works,
  else a UserError;
* on CUDA: bf16;
* on CPU, for a model whose file stores its linears as 4-bit blocks (the embedded SmolLM2's Q4_1), when
  torch's int4 CPU kernel works here: ``q4``. Its linears read ~0.6 bytes a weight instead of 4; on an
  AVX2 CPU they ran ~2.4x faster than fp32 at one row and the engine decoded 1.2-1.7x more tokens per
  CPU-second (docs/engine-speed.md);
* on CPU: bf16 when the CPU has a native bf16 instruction set (``amx_bf16`` or ``avx512_bf16``) *and*
  torch's kernels and oneDNN may use it (``ATEN_CPU_CAPABILITY`` / ``ONEDNN_MAX_CPU_ISA`` can cap them
  below it); else fp32.

Every choice carries its reason, which the engine prints at start-up (:meth:`DtypeChoice.line`).
The CPU is read once per process (:func:`cpu_info`); :func:`choose_dtype` itself is pure, so tests
give it any capability and flags.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from evalkit.core.errors import UserError
from evalkit.model.loading import dtype_name

AUTO = "auto"
NATIVE_BF16 = {"amx_bf16": "AMX", "avx512_bf16": "AVX512-BF16"}
"""CPU flags (as /proc/cpuinfo spells them) that make bf16 native, best first, with their display names."""
ONEDNN_BF16_ISAS = ("BF16", "AMX", "FP16", "AVX10", "DEFAULT", "ALL")
"""Substrings of an ``ONEDNN_MAX_CPU_ISA`` value that still allow oneDNN's bf16 kernels."""


@dataclass(frozen=True)
class CpuInfo:
    """What decides bf16 on this CPU: torch's kernel capability (``AVX2``, ``AVX512``, ...), the CPU's
    flags, and oneDNN's ISA cap when one is set in the environment."""

    capability: str
    flags: frozenset[str]
    onednn_isa: str | None = None


Q4 = "q4"
"""The decoder linears as 4-bit groups (:mod:`evalkit.model.quant`)."""
DENSE = "dense"
"""The decoder linears in the compute dtype."""


@dataclass(frozen=True)
class DtypeChoice:
    name: str
    """``bfloat16`` or ``float32``: what the engine computes in (outside q4 linears)."""
    reason: str
    """Why, in a few words: ``asked for``, ``auto: this CPU has no native bf16: AVX2``, ..."""
    weights: str = DENSE
    """How the decoder linears are stored: ``dense`` (in ``name``) or ``q4`` (4-bit groups)."""

    def line(self) -> str:
        """The start-up line: ``dtype float32 (auto: this CPU has no native bf16: AVX2)``, or with q4
        weights ``dtype float32, weights q4 (auto: ...)``."""
        weights = f", weights {self.weights}" if self.weights != DENSE else ""
        return f"dtype {self.name}{weights} ({self.reason})"

    @property
    def spelling(self) -> str:
        """What to pass as ``dtype`` for this choice again (``q4``, ``float32``, ``bfloat16``)."""
        return Q4 if self.weights == Q4 else self.name


def is_auto(dtype: str | None) -> bool:
    return dtype is None or dtype.strip().lower() == AUTO


def choose_dtype(
    requested: str | None, device: str, cpu: CpuInfo | None = None, q4_file: bool = False
) -> DtypeChoice:
    """The dtype for an engine on ``device`` (``cpu`` or ``cuda[:N]``): ``requested`` unless it is
    ``auto``/``None``, else by the module's rule. ``cpu`` defaults to this machine's :func:`cpu_info`;
    ``q4_file``: the model's file stores its linears as 4-bit blocks (``GgufModel.q4_linears``).
    UserError for a dtype that is neither ``auto``, ``q4`` nor one :func:`~evalkit.model.loading.dtype_name`
    knows, and for ``q4`` where it cannot run."""
    if requested is not None and requested.strip().lower() == Q4:
        _check_q4(device)
        return DtypeChoice("float32", "asked for", Q4)
    if not is_auto(requested):
        return DtypeChoice(dtype_name(requested), "asked for")
    if device.startswith("cuda"):
        return DtypeChoice("bfloat16", "auto: CUDA")
    if q4_file and q4_kernel_works():
        return DtypeChoice("float32", "auto: the file's linears are 4-bit; torch's int4 CPU kernel runs them", Q4)
    cpu = cpu or cpu_info()
    native = next((name for flag, name in NATIVE_BF16.items() if flag in cpu.flags), None)
    if native is None:
        return DtypeChoice("float32", f"auto: this CPU has no native bf16: {cpu.capability}")
    if not cpu.capability.upper().startswith("AVX512"):
        return DtypeChoice("float32", f"auto: the CPU has {native} but torch's kernels are capped at {cpu.capability}")
    if cpu.onednn_isa and not any(part in cpu.onednn_isa.upper() for part in ONEDNN_BF16_ISAS):
        return DtypeChoice("float32", f"auto: the CPU has {native} but ONEDNN_MAX_CPU_ISA={cpu.onednn_isa}")
    return DtypeChoice("bfloat16", f"auto: this CPU has native bf16: {native}")


def _check_q4(device: str) -> None:
    if not device.startswith("cpu"):
        raise UserError(f"dtype q4 runs on CPU only (torch's int4 CPU kernel), not on {device}; use auto, bf16 or fp32")
    if not q4_kernel_works():
        import torch

        raise UserError(
            f"dtype q4 needs torch's int4 CPU kernel, which torch {torch.__version__} here lacks or gets wrong; "
            "use auto, bf16 or fp32"
        )


def q4_kernel_works() -> bool:
    from evalkit.model.quant import q4_kernel_works as works

    return works()


@functools.cache
def cpu_info() -> CpuInfo:
    """This machine's :class:`CpuInfo` (imports torch): /proc/cpuinfo's flags where there is one,
    plus what torch's own CPU probe reports (macOS, Windows)."""
    import torch

    flags = set(_proc_flags())
    probe = getattr(torch, "cpu", None)
    for flag, check in (("avx512_bf16", "_is_avx512_bf16_supported"), ("amx_bf16", "_is_amx_tile_supported")):
        try:
            if getattr(probe, check)():
                flags.add(flag)
        except (AttributeError, RuntimeError):
            pass
    return CpuInfo(
        torch.backends.cpu.get_cpu_capability(), frozenset(flags), os.environ.get("ONEDNN_MAX_CPU_ISA") or None
    )


def _proc_flags(path: Path = Path("/proc/cpuinfo")) -> list[str]:
    """The first ``flags`` line of /proc/cpuinfo (x86 Linux), split; empty where there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return value.split()
    return []

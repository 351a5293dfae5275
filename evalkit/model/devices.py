"""Which device the engine runs on: ``auto`` (CUDA when there is one, else CPU), ``cpu``, ``cuda``, ``cuda:N``.

:func:`check_device` only checks the spelling and imports nothing, so the CLI can refuse a typo
before loading anything; :func:`resolve_device` and :func:`cuda_available` import torch (the trainer's
placement and the RL plan ask here too).
"""

from __future__ import annotations

import re

from evalkit.core.errors import UserError

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def check_device(device: str | None) -> str:
    """``device`` lower-cased (``auto`` for ``None``/empty); UserError for anything else."""
    name = (device or "auto").strip().lower()
    if not _DEVICE.fullmatch(name):
        raise UserError(f"unknown device '{device}' (use {DEVICE_CHOICES})")
    return name


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU here (imports torch)."""
    import torch

    return torch.cuda.is_available()


def resolve_device(device: str | None) -> str:
    """The concrete device (``cpu`` or ``cuda:N``) ``device`` means on this machine.

    ``auto`` is ``cuda:0`` when torch sees a GPU, else ``cpu``; naming a GPU that is not there is a
    UserError (with the reason: a CPU-only torch build, or a device index out of range).
    """
    name = check_device(device)
    if name == "cpu":
        return "cpu"
    import torch

    available = cuda_available()
    if name == "auto":
        return "cuda:0" if available else "cpu"
    if not available:
        build = "this torch build has no CUDA" if torch.version.cuda is None else "no GPU is visible"
        raise UserError(f"--device {name}: {build}; use --device cpu (or auto)")
    index = int(name.split(":")[1]) if ":" in name else 0
    if index >= torch.cuda.device_count():
        raise UserError(f"--device {name}: only {torch.cuda.device_count()} GPU(s) visible (cuda:0..)")
    return f"cuda:{index}"

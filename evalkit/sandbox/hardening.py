"""What primekit does to itself when the model's commands run as the user, without a sandbox (``subprocess``).

Not dumpable (``prctl(PR_SET_DUMPABLE, 0)``): the kernel then owns ``/proc/<primekit pid>/`` (``environ``, ``mem``,
``cmdline`` stays readable), so another process of the same user (a command the model ran) cannot read primekit's
environment (the ``-k`` key, ``HF_TOKEN``...) or memory. A process with ``CAP_SYS_PTRACE`` still can: as root, the
model's commands run as root and read it anyway (the ``sandbox`` runtime is the answer there). Children started
with ``exec`` are dumpable again, as usual.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def _prctl(option: int, arg: int) -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return libc.prctl(option, arg, 0, 0, 0)


def make_undumpable() -> bool:
    """Make this process not dumpable; whether it is now (False where the OS has no prctl)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        _prctl(PR_SET_DUMPABLE, 0)
        return _prctl(PR_GET_DUMPABLE, 0) == 0
    except (OSError, AttributeError):
        return False

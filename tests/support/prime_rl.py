"""The interpreter where prime-rl's config package imports, for tests that validate exports with prime-rl's own
classes."""

from __future__ import annotations

import os
import subprocess
import sys


def prime_rl_python(module: str = "prime_rl.configs.rl") -> str | None:
    """PRIME_RL_PYTHON, else this interpreter, when ``module`` imports there; else None (docs/cluster.md: how to make
    one)."""
    candidate = os.environ.get("PRIME_RL_PYTHON") or sys.executable
    found = subprocess.run([candidate, "-c", f"import {module}"], capture_output=True)
    return candidate if found.returncode == 0 else None

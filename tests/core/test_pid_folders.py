"""Folders named after a process are removed only once that process is gone (a killed run's leftovers)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from evalkit.core.pid_folders import alive, remove_orphans


def test_only_the_folders_of_gone_processes_are_removed():
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    prefix = f"primekit-test-{os.getpid()}-orphans-"
    tmp = Path(tempfile.gettempdir())
    dead = tmp / f"{prefix}{dead_pid}-x"
    live = tmp / f"{prefix}{os.getpid()}-y"
    target = tmp / f"{prefix}target"
    link = tmp / f"{prefix}{dead_pid}-link"
    for folder in (dead, live, target):
        folder.mkdir()
    link.symlink_to(target)
    try:
        assert not alive(dead_pid) and alive(os.getpid())
        assert remove_orphans(prefix) == [str(dead)]
        assert not dead.exists() and live.is_dir() and link.is_symlink() and target.is_dir()
    finally:
        for path in (live, target):
            path.exists() and os.rmdir(path)
        link.unlink(missing_ok=True)

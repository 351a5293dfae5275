"""Temporary folders named after the process that made them (``<prefix><pid>-<random>``), so that a later start
can remove those whose process was killed before it could remove them itself (``kill -9`` runs no cleanup)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts: it may still use its folder)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphans(prefix: str) -> list[str]:
    """Remove this user's ``<prefix><pid>-*`` folders in the temp folder whose process is gone; the folders removed.
    Links and other users' folders are left alone."""
    removed: list[str] = []
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix):].split("-", 1)[0]
        try:
            if not pid.isdigit() or folder.is_symlink() or folder.stat().st_uid != os.getuid() or alive(int(pid)):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    return removed

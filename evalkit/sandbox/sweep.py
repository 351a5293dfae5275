"""Rollout folders left by a primekit that was killed (``kill -9``), found and removed by the next one.

verifiers keeps a rollout's working folder in its cache and removes it at teardown, which a killed process never
reaches. Each sandboxed rollout records its folder under ``<primekit home>/rollouts/<pid>/`` (one file per
rollout, holding the path); the first sandboxed rollout of a later process removes the folders recorded by
processes that are gone, then their records, and the private folders of their sandboxes (:func:`private_folder`).
A record is only followed to a folder under ``allowed_root`` (verifiers' runtime cache), never elsewhere.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from evalkit.core.pid_folders import alive, remove_orphans

FOLDER = "rollouts"
_lock = threading.Lock()
_swept: set[Path] = set()


def record(home: Path, name: str, workdir: str, allowed_root: str) -> None:
    """Note ``workdir`` as this process's rollout folder ``name``; the first call per ``home`` sweeps first."""
    mine = home / FOLDER / str(os.getpid())
    with _lock:
        if home not in _swept:
            _swept.add(home)
            sweep(home, allowed_root)
            atexit.register(shutil.rmtree, mine, True)
    mine.mkdir(parents=True, exist_ok=True)
    (mine / name).write_text(workdir)


PRIVATE_PREFIX = "primekit-sandbox-"
"""A sandboxed run's private host folder in the temporary folder: ``primekit-sandbox-<pid>-*``."""


def private_folder() -> str:
    """A new private host folder for one sandboxed run (bridge sockets, verdict), named by this process's pid so
    that :func:`sweep` finds it should this process be killed before removing it."""
    return tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-")


def sweep(home: Path, allowed_root: str) -> list[str]:
    """Remove the recorded rollout folders of processes that are gone, and their private folders; the folders
    removed."""
    removed = remove_orphans(PRIVATE_PREFIX)
    root = os.path.realpath(allowed_root)
    for pid_folder in (home / FOLDER).glob("*"):
        if not pid_folder.name.isdigit() or alive(int(pid_folder.name)):
            continue
        for entry in pid_folder.iterdir():
            try:
                target = os.path.realpath(entry.read_text().strip())
            except OSError:
                continue
            if target.startswith(root.rstrip("/") + "/") and os.path.isdir(target):
                shutil.rmtree(target, ignore_errors=True)
                removed.append(target)
        shutil.rmtree(pid_folder, ignore_errors=True)
    return removed


def record_rollout(workdir: Any) -> None:
    """:func:`record` for a verifiers runtime's working folder (``<cache>/runtimes/<kind>/<name>``), under primekit's
    home; nothing for a runtime without one."""
    if workdir is None:
        return
    from evalkit.model.registry import primekit_home

    path = os.path.abspath(str(workdir))
    record(primekit_home(), os.path.basename(path), path, os.path.dirname(path))

"""The processes of one harness run on the ``subprocess`` runtime, found and limited without a PID namespace or
cgroups. Standard library only: ``forkserver.py`` and ``launcher.py`` import it as a sibling (they run by path).

The run's first process (the harness child) is a child subreaper (``PR_SET_CHILD_SUBREAPER``): what its commands
detach (``setsid``, a double fork) is re-parented to it instead of init, so the run's processes are exactly its
descendants, and :func:`tree` finds them through ``/proc/<pid>/task/<tid>/children`` (a few files per process of the
run, not all of ``/proc``). The limits are the ``sandbox`` runtime's knobs with its meanings: :func:`apply_limits`
sets the per-process rlimits the run's processes inherit (``memory_mb``: ``RLIMIT_AS``, ``file_size_mb``:
``RLIMIT_FSIZE``, ``cpu_seconds``: ``RLIMIT_CPU``); ``processes`` is counted over the tree (:func:`over_processes`),
as the sandbox's supervisor counts its PID namespace, because ``RLIMIT_NPROC`` counts every process of the user and
root ignores it. A limit reached is a verdict (``{"limit": name, "value": n, "detail": ...}``), and the whole tree
is killed (:func:`kill_tree`).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal

PR_SET_CHILD_SUBREAPER = 36
END_ROUNDS = 10_000
"""The most rounds of killing :func:`end_descendants` and :func:`kill_tree` make (each round kills all it finds)."""
POLL_S = 0.1
"""How often a run's processes are counted: a count costs ~0.1-0.2 ms of CPU per run, so 32 runs at once cost a few
percent of a core; a flood between two counts overshoots the limit, and is then killed whole all the same."""
WALK_LIMIT = 20_000
"""The most entries of the working folder :func:`oversized` looks at."""
RLIMITS = (("memory_mb", resource.RLIMIT_AS, 2**20), ("file_size_mb", resource.RLIMIT_FSIZE, 2**20),
           ("cpu_seconds", resource.RLIMIT_CPU, 1))


def become_subreaper() -> None:
    """Make this process the parent of its orphaned descendants (``PR_SET_CHILD_SUBREAPER``), so that what a
    command detached with ``setsid`` or ``setpgid`` stays findable here instead of becoming init's. Best effort."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def children(parent: int) -> list[int]:
    """The pids whose parent is ``parent`` (from ``/proc/<pid>/stat``: any thread's children count)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        if int(stat[stat.rindex(b")") + 2:].split()[1]) == parent:
            found.append(int(name))
    return found


def end_descendants(keep: frozenset[int] = frozenset()) -> None:
    """SIGKILL and reap this process's children but ``keep``, round after round: a killed child's own children
    are orphaned to this process (a subreaper), so the next round finds them, until none is left."""
    for _ in range(END_ROUNDS):
        found = [pid for pid in children(os.getpid()) if pid not in keep]
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in found:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def tree(root: int) -> list[int]:
    """``root`` and its descendants alive now (any thread's children), ``root`` first; empty once it is gone."""
    found, queue = [], [root]
    while queue:
        pid = queue.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        found.append(pid)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as handle:
                    queue.extend(int(child) for child in handle.read().split())
            except (OSError, ValueError):
                continue
    return found


def kill_tree(root: int) -> None:
    """SIGKILL every descendant of ``root``, round after round until none is left (what a round's kills orphan is
    re-parented to ``root``, a subreaper, and found by the next), then ``root`` itself."""
    for _ in range(END_ROUNDS):
        found = tree(root)[1:]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    try:
        os.kill(root, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def apply_limits(limits: dict) -> None:
    """Set this process's ``memory_mb``, ``file_size_mb`` and ``cpu_seconds`` rlimits (0 or absent: left as they
    are); the processes it starts inherit them."""
    for name, rlimit, scale in RLIMITS:
        if limits.get(name):
            value, hard = int(limits[name]) * scale, resource.getrlimit(rlimit)[1]
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)  # an unprivileged process cannot raise its hard limit
            resource.setrlimit(rlimit, (value, value))


def over_processes(root: int, limits: dict) -> dict | None:
    """A verdict when the run of ``root`` has ``processes`` or more processes alive, else None."""
    most = int(limits.get("processes") or 0)
    if not most:
        return None
    count = len(tree(root))
    if count < most:
        return None
    return {"limit": "processes", "value": most, "detail": f"{count} processes alive at once"}


def verdict_after(status: int, cwd: str, limits: dict) -> dict | None:
    """A verdict for a run that ended with wait status ``status`` in ``cwd``: its program killed by ``SIGXCPU``
    (``cpu_seconds``), or a file of the working folder that reached ``file_size_mb``."""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU and limits.get("cpu_seconds"):
        return {"limit": "cpu_seconds", "value": int(limits["cpu_seconds"]), "detail": "the program's CPU time"}
    return oversized(cwd, int(limits.get("file_size_mb") or 0))


def oversized(folder: str, file_size_mb: int) -> dict | None:
    """A verdict naming a file under ``folder`` that reached the file-size limit, if one did (the first
    :data:`WALK_LIMIT` entries are looked at; links are not followed)."""
    if not file_size_mb:
        return None
    limit, seen = file_size_mb * 2**20, 0
    for where, folders, files in os.walk(folder):
        seen += len(folders) + len(files)
        for name in files:
            path = os.path.join(where, name)
            try:
                size = os.lstat(path).st_size
            except OSError:
                continue
            if size >= limit:
                return {"limit": "file_size_mb", "value": file_size_mb,
                        "detail": f"{os.path.relpath(path, folder)} reached {size} bytes"}
        if seen > WALK_LIMIT:
            break
    return None

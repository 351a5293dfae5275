"""A forked harness child entering a rollout's sandbox: the fork server's imports, bwrap's namespaces.

A fresh interpreter in each sandbox pays the chat program's imports (~2.3 s of CPU) every rollout. Instead the fork
server's child joins the namespaces of the sandbox bwrap made for the rollout (user, IPC, UTS, network, PID, mount:
``setns`` into those of the sandbox's supervisor, held open for the run), forks once more so the program is a
process of the sandbox's PID namespace, and drops what joining gave it: every capability (the bounding set too),
with ``no_new_privs``; then the sandbox's rlimits. From there it sees what a program bwrap started sees: the
sandbox's root, ``/proc``, network and limits. Standard library only: ``forkserver.py`` imports it by path.
"""

from __future__ import annotations

import ctypes
import os
import resource

NAMESPACES = ("user", "ipc", "uts", "net", "pid", "mnt")
"""In this order: the user namespace first (it grants the rights to join the others), the mount namespace last."""
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
CAP_LAST = 63
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
THREAD_ROOM = 64
"""As the supervisor: tasks beyond ``processes`` that ``RLIMIT_NPROC`` allows for threads."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def enter(holder_pid: int, limits: dict[str, int]) -> int | None:
    """Join the sandbox of ``holder_pid`` and fork: returns None in the new child (inside, confined), and in this
    process (outside) the child's exit code once it ends. Raises OSError where a step fails."""
    libc = ctypes.CDLL(None, use_errno=True)
    fds = [os.open(f"/proc/{holder_pid}/ns/{name}", os.O_RDONLY) for name in NAMESPACES]
    try:
        for name, fd in zip(NAMESPACES, fds):
            if libc.setns(fd, 0) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, f"setns({name}): {os.strerror(errno)}")
    finally:
        for fd in fds:
            os.close(fd)
    pid = os.fork()
    if pid != 0:
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    _drop_privileges(libc)
    _apply_limits(limits)
    return None


def _drop_privileges(libc: ctypes.CDLL) -> None:
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    for cap in range(CAP_LAST + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # past the last capability the kernel knows: EINVAL, ignored
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _apply_limits(limits: dict[str, int]) -> None:
    mib = 2**20
    for name, rlimit, scale in (("memory_mb", resource.RLIMIT_AS, mib), ("file_size_mb", resource.RLIMIT_FSIZE, mib),
                                ("cpu_seconds", resource.RLIMIT_CPU, 1)):
        if limits.get(name):
            resource.setrlimit(rlimit, (limits[name] * scale, limits[name] * scale))
    if limits.get("processes"):
        allowed = limits["processes"] + THREAD_ROOM
        resource.setrlimit(resource.RLIMIT_NPROC, (allowed, allowed))

"""The bubblewrap command line of one sandboxed run: what it sees, what it can reach, what it may use.

Inside: the system's programs and libraries read-only (``/usr`` and its ``/bin``, ``/lib*`` links, a short list
of ``/etc`` files: no ``shadow``, no keys), this interpreter's install read-only (its prefix, base prefix and
site-packages: where that lies under the user's home, only that folder is visible, nothing else of the home), the
rollout's folder read-write at its own path, a private ``/tmp`` (memory-backed, capped at the file-size limit), a
private ``/proc`` and ``/dev``. New user, PID, IPC, UTS, mount and network namespaces: no other process is
visible, and the network is a loopback of its own; the host loopback ports the run needs (the model endpoint, the
taskset's tool servers) are bridged in over unix sockets by :mod:`.supervisor` and :mod:`.bridge`, and nothing else
is reachable. ``--die-with-parent`` and the PID namespace end everything inside with the run (and with primekit,
also on ``kill -9``). The environment is only what the caller passes.

Limits (:class:`Limits`) are applied by the supervisor as rlimits, and the supervisor also watches the process
count (root ignores ``RLIMIT_NPROC``), so a limit reached ends the run with a verdict the runtime turns into a row
error.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from evalkit.core.errors import UserError

SUPERVISOR = Path(__file__).with_name("supervisor.py")
INSIDE = "/run/primekit"
"""Where the run's private host folder (bridge sockets, the verdict file, the supervisor) appears inside."""
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates", "ca-certificates.conf",
       "passwd", "group", "nsswitch.conf", "hosts", "host.conf", "localtime", "timezone", "mime.types", "bash.bashrc",
       "profile", "inputrc", "locale.alias", "python3", f"python3.{sys.version_info.minor}", "gai.conf", "protocols",
       "services")
"""``/etc`` entries a program needs (libraries, certificates, user names); nothing secret (no ``shadow``)."""
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
INSTALL_HINT = ("install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
                "Arch: pacman -S bubblewrap)")


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use; each is a knob of ``[env.agent.runtime]`` (0 turns one off)."""

    memory_mb: int = 8192
    """Address space of each process (``RLIMIT_AS``), MiB: room for an interpreter with the model's libraries."""
    processes: int = 512
    """Processes and threads alive at once in the sandbox (``RLIMIT_NPROC`` and the supervisor's count)."""
    file_size_mb: int = 1024
    """Largest file a process may write (``RLIMIT_FSIZE``), MiB; also the size of the private ``/tmp``."""
    cpu_seconds: int = 3600
    """CPU time of each process (``RLIMIT_CPU``), seconds."""

    @classmethod
    def from_knobs(cls, where: str, knobs: dict[str, object], runtime: str = "sandbox") -> Limits:
        """Limits from ``[env.agent.runtime]`` knobs (of the ``runtime`` named in a message: ``sandbox`` or
        ``subprocess`` take the same); UserError naming the knobs for an unknown or bad one."""
        names = list(cls.__dataclass_fields__)
        unknown = sorted(set(knobs) - set(names))
        if unknown:
            raise UserError(f"{where}: runtime setting(s) {unknown}: the {runtime} runtime takes 'type' and "
                            f"{', '.join(names)}")
        knobs = {k: int(v) if isinstance(v, str) and v.isdigit() else v for k, v in knobs.items()}  # dotted flags
        for name, value in knobs.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserError(f"{where}: runtime setting {name} = {value!r}: give a whole number >= 0 (0: no limit)")
        return cls(**knobs)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def unavailable() -> str | None:
    """Why bwrap cannot sandbox a run here (one sentence with what to do), or ``None`` when it can."""
    return _probe(shutil.which("bwrap"))


@functools.lru_cache(maxsize=4)
def _probe(path: str | None) -> str | None:
    if path is None:
        return f"the sandbox runtime needs bubblewrap (bwrap), which is not on PATH: {INSTALL_HINT}"
    argv = [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "true"]
    if os.getuid() == 0:
        argv.insert(1, "--unshare-user")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({path}) did not run: {exc}; {INSTALL_HINT}"
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[:200]
        return (f"bubblewrap cannot create namespaces here ({said}): enable unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ also "
                "kernel.apparmor_restrict_unprivileged_userns=0), or run where containers may create them")
    return None


def interpreter_paths() -> list[str]:
    """The folders this interpreter needs to run a program with its packages: prefixes and site-packages."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    found.update(p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p))
    paths = sorted(p for p in {os.path.realpath(p) for p in found} if os.path.isdir(p))
    return [p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)]


def interpreter() -> str:
    """The interpreter a sandboxed Python program runs with (this one, reachable inside)."""
    return sys.executable


def command(workdir: str, private: str, argv: list[str], env: dict[str, str], limits: Limits,
            ports: list[int], info_fd: int | None = None) -> list[str]:
    """The bwrap argv that runs ``argv`` under :mod:`.supervisor` in ``workdir`` (read-write, at its own path),
    with ``private`` (the run's host folder: bridge sockets, verdict) at :data:`INSIDE`, the environment ``env``
    only, ``limits``, and the host loopback ``ports`` bridged in. An empty ``argv``: the supervisor holds the
    sandbox for a program that joins it; ``info_fd``: where bwrap writes its JSON (``child-pid``)."""
    out = ["bwrap", *(["--info-fd", str(info_fd)] if info_fd is not None else []), "--unshare-user", "--unshare-pid",
           "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try", "--die-with-parent",
           "--new-session", "--clearenv"]
    for path in SYSTEM:
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    for name in ETC:
        if os.path.exists(f"/etc/{name}"):
            out += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for path in interpreter_paths():
        out += ["--ro-bind", path, path]
    out += ["--proc", "/proc", "--dev", "/dev"]
    if limits.file_size_mb:
        out += ["--size", str(limits.file_size_mb * 2**20)]
    out += ["--perms", "1777", "--tmpfs", "/tmp", "--bind", workdir, workdir, "--bind", private, INSIDE,
            "--ro-bind", str(SUPERVISOR), f"{INSIDE}/supervisor.py", "--chdir", workdir]
    for name, value in env.items():
        out += ["--setenv", name, value]
    spec = ",".join(str(p) for p in ports)
    return [*out, "--", interpreter(), "-I", "-S", f"{INSIDE}/supervisor.py", INSIDE, _limits_arg(limits), spec,
            "--", *argv]


def _limits_arg(limits: Limits) -> str:
    return ",".join(f"{k}={v}" for k, v in limits.as_dict().items())


def sandbox_env(workdir: str, env: dict[str, str]) -> dict[str, str]:
    """The environment inside: ``env`` (already an allowlist) with the paths that make sense there."""
    path = ":".join([os.path.dirname(sys.executable), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin",
                     "/sbin", "/bin"])
    out = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "TMPDIR", "PWD", "OLDPWD")}
    out.update(PATH=path, HOME=workdir, TMPDIR="/tmp")
    return out

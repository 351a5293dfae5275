"""The command verifiers' subprocess runtime starts for one harness run that primekit does not hand over itself
(``client.run_forked`` does that for ``run`` / ``run_program``; this covers any other way verifiers starts the
command, such as ``open_process``): it hands the run to the fork server.

Run as ``python -S launcher.py SOCKET PROGRAM [ARGS...]`` (standard library only, started in ~10 ms). It sends
its own argv (from PROGRAM on), working directory, environment and standard streams to the fork server
(``forkserver.py``, which documents the protocol), then waits and exits with the program's exit code, so to
verifiers it is the program: same streams, same code. SIGTERM is forwarded; if the launcher is killed, the
server kills the program.

The environment sent is the allowlist of :mod:`harness_env` (the base and the names the run declares; the
server applies it again). ``launcher.py --exec PROGRAM [ARGS...]`` (where no server runs) starts the program in
a fresh interpreter with that same environment instead, under a reaper that does what the fork server does for
a forked run (:func:`fresh`: a subreaper, the limits, everything the program detached ended with the run);
``--exec-no-stdin`` does too, with ``/dev/null`` as its stdin (a run verifiers starts without stdin would
otherwise read primekit's own, see ``client.run_forked``). The run's limits come in :data:`LIMITS_VAR`; a limit
reached is one :data:`LIMIT_MARK` line on stderr.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys

from harness_env import allowed  # sibling modules: this file runs by path
from process_tree import POLL_S, apply_limits, become_subreaper, end_descendants, tree, verdict_after

LIMITS_VAR = "PRIMEKIT_HARNESS_LIMITS"
"""The run's limits as JSON (the ``subprocess`` runtime's), read here and never passed on to the program."""
LIMIT_MARK = "primekit harness worker: limit reached: "
"""Starts the stderr line that reports a limit verdict (then its JSON); primekit turns it into a row error."""


def main(argv: list[str]) -> int:
    limits = json.loads(os.environ.get(LIMITS_VAR) or "{}")
    if argv[0] in ("--exec", "--exec-no-stdin"):
        if argv[0] == "--exec-no-stdin":
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        return fresh(argv[1:], allowed(dict(os.environ)), limits)
    path, program = argv[0], argv[1:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = {"argv": program, "cwd": os.getcwd(), "env": allowed(dict(os.environ)), "limits": limits}
    header = json.dumps(request).encode()
    socket.send_fds(conn, [struct.pack(">I", len(header))], [0, 1, 2])
    conn.sendall(header)
    signal.signal(signal.SIGTERM, lambda *_: conn.send(b"T"))
    answer = b""
    while not answer.endswith(b"\n"):
        try:
            more = conn.recv(64)
        except InterruptedError:
            continue
        if not more:
            print("primekit harness worker: the fork server went away", file=sys.stderr)
            return 1
        answer += more
    status, _, verdict = answer.decode().partition(" ")
    if verdict.strip():  # the run reached a limit and was killed (forkserver.py's protocol)
        print(f"{LIMIT_MARK}{verdict.strip()}", file=sys.stderr)
    code = int(status)
    return 128 - code if code < 0 else code  # killed by signal N: the shell's 128+N


def fresh(argv: list[str], env: dict[str, str], limits: dict) -> int:
    """The program in a fresh interpreter (no fork server), under a reaper: a child of this process in a session of
    its own (so the caller's ``killpg`` of this run reaches this process, not the reaper), a subreaper with the
    run's rlimits, whose child execs the program. The reaper counts the run's processes against ``processes``,
    and ends every process left once the program ends, once this process is gone (killed with its group: the
    reaper sees its pipe close) or once a limit is reached (then one :data:`LIMIT_MARK` line on stderr). Its exit
    code is the program's, as an exec'd program's would be."""
    alive_read, alive_write = os.pipe()
    reaper = os.fork()
    if reaper == 0:
        os.close(alive_write)
        os.setsid()
        become_subreaper()
        apply_limits(limits)
        program = os.fork()
        if program == 0:
            os.close(alive_read)
            os.execve(sys.executable, [sys.executable, *argv], env)
        os._exit(reap(program, alive_read, limits))
    os.close(alive_read)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: os.kill(reaper, number))
    while True:
        try:
            _, status = os.waitpid(reaper, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def reap(program: int, alive: int, limits: dict) -> int:
    """In the reaper: wait for ``program`` (signals forwarded), watching the run's processes and this launcher's
    pipe ``alive``; then end every process left; the exit code to give."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: os.kill(program, number))
    verdict, status = None, None
    while status is None:
        if select.select([alive], [], [], POLL_S)[0]:  # the launcher is gone: so is its run
            end_descendants()
            return 137
        pid, waited = os.waitpid(program, os.WNOHANG)
        if pid:
            status = waited
            break
        found = len(tree(os.getpid())) - 1  # what the program detached is re-parented here, not under it
        if limits.get("processes") and found >= int(limits["processes"]):
            verdict = {"limit": "processes", "value": int(limits["processes"]),
                       "detail": f"{found} processes alive at once"}
            end_descendants()
            status = 9  # as a SIGKILL'd program's wait status
    end_descendants()
    verdict = verdict or verdict_after(status, os.getcwd(), limits)
    if verdict is not None:
        print(f"{LIMIT_MARK}{json.dumps(verdict)}", file=sys.stderr, flush=True)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

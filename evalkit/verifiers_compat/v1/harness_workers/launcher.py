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
a fresh interpreter with that same environment instead; ``--exec-no-stdin`` does too, with ``/dev/null`` as its
stdin (a run verifiers starts without stdin would otherwise read primekit's own, see ``client.run_forked``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

from harness_env import allowed  # a sibling module: this file runs by path


def main(argv: list[str]) -> int:
    if argv[0] in ("--exec", "--exec-no-stdin"):
        if argv[0] == "--exec-no-stdin":
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        os.execve(sys.executable, [sys.executable, *argv[1:]], allowed(dict(os.environ)))
    path, program = argv[0], argv[1:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    header = json.dumps({"argv": program, "cwd": os.getcwd(), "env": allowed(dict(os.environ))}).encode()
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
    code = int(answer)
    return 128 - code if code < 0 else code  # killed by signal N: the shell's 128+N


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

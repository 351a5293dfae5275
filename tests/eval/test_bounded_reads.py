"""What primekit reads, and how much (issue 45, item 10): only regular files, bounded.

A file the user names (`--system-prompt-file`, `--tools-file`) that is a FIFO, a device (a symlink to /dev/zero)
or larger than 16 MiB is one `error:` line; a run dir whose `results.jsonl` or `metadata.json` is a FIFO or a link
to /dev/zero is shown with a warning, as a missing file is. Each command runs in a child process with a time limit
and a 3 GiB address-space limit, so a regression fails the test instead of blocking it or filling the host's memory.
"""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest
from support.cli import assert_user_error, prime_process
from support.report_runs import make_eval_runs

MEMORY = 3 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def prime(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``prime ARGS`` as a child under :func:`_limited`: a read without a bound fails it instead of the host."""
    try:
        return prime_process(*args, cwd=cwd, timeout=90, preexec_fn=_limited)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`prime {' '.join(args)}` was still running after 90 s (blocked on a FIFO?)")


def odd_files(folder: Path) -> dict[str, Path]:
    fifo, zero, big = folder / "fifo.txt", folder / "zero.txt", folder / "big.txt"
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    with big.open("wb") as handle:
        handle.truncate(17 * 2**20)  # sparse: 17 MiB of NUL bytes that take no disk
    return {"fifo": fifo, "zero": zero, "big": big}


WHY = {
    "fifo": "it is a FIFO, not a regular file; pass a text file",
    "zero": "it is a character device, not a regular file; pass a text file",
    "big": "it holds 17,825,792 bytes, more than the 16 MiB primekit reads from it; pass a text file",
}


@pytest.mark.parametrize("flag", ["--system-prompt-file", "--tools-file"])
@pytest.mark.parametrize("kind", ["fifo", "zero", "big"])
def test_a_user_file_that_is_not_a_bounded_regular_file_is_one_line(tmp_path: Path, flag: str, kind: str):
    path = odd_files(tmp_path)[kind]
    done = prime("eval", "run", "reverse-text", "-n", "1", flag, str(path), "--dry-run", cwd=tmp_path)
    line = assert_user_error(done)
    assert line == f"error: {flag} {path}: {WHY[kind]}"


@pytest.mark.parametrize("name", ["results.jsonl", "metadata.json"])
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_run_file_that_is_a_fifo_or_a_device_is_skipped_with_a_warning(tmp_path: Path, name: str, kind: str):
    run_dir = make_eval_runs(tmp_path / "runs")[0]
    (run_dir / name).unlink()
    if kind == "fifo":
        os.mkfifo(run_dir / name)
    else:
        (run_dir / name).symlink_to("/dev/zero")
    done = prime("eval", "view", str(run_dir), cwd=tmp_path)
    what = "a FIFO" if kind == "fifo" else "a character device"
    assert f"warning: {run_dir / name}: it is {what}, not a regular file" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr

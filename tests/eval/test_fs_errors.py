"""File-system trouble and odd input give one `error:` line and exit 2, with nothing half-written.

The full disk and the read-only folder are simulated in-process (a patched write raising ENOSPC, a
patched mkdir raising EROFS) because CI may run as root, where chmod stops no write, and cannot
mount a tmpfs. Where the test is not root, the read-only folder is a real chmod 0555 folder.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from support.cli import assert_user_error, prime
from support.fault_server import FaultServer

import evalkit.eval.results as results_module


@pytest.fixture(scope="module")
def server():
    started = FaultServer()
    yield started
    started.stop()


def eval_args(server, out: Path, *more: str) -> list[str]:
    return ["eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-n", "6", "-r", "2", "-c", "2",
            "-o", str(out), *more]


def test_output_dir_that_is_a_file(server, tmp_path):
    blocker = tmp_path / "out"
    blocker.write_text("not a folder")
    assert_user_error(prime(*eval_args(server, blocker)), f"{blocker} is a file, not a folder")
    assert blocker.read_text() == "not a folder"


def test_output_dir_below_a_file(server, tmp_path):
    blocker = tmp_path / "out"
    blocker.write_text("x")
    assert_user_error(prime(*eval_args(server, blocker / "deeper")), f"{blocker} is a file, not a folder")


def test_read_only_output_dir(server, tmp_path, monkeypatch):
    out = tmp_path / "ro"
    out.mkdir()
    if os.geteuid() != 0:
        out.chmod(0o555)
    else:  # root writes anywhere: make creating anything under `out` fail as a read-only mount would
        real_mkdir = Path.mkdir

        def read_only_mkdir(self, *args, **kwargs):
            if str(self).startswith(str(out) + os.sep):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
            return real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", read_only_mkdir)
    try:
        result = prime(*eval_args(server, out))
    finally:
        out.chmod(0o755)
    assert_user_error(result, "cannot write", "choose a writable --output-dir")
    assert list(out.iterdir()) == []


def test_full_disk_mid_run_leaves_whole_rows_and_resumes(server, tmp_path, monkeypatch):
    """The second group's write gets half its bytes out, then ENOSPC: the half line is cut away,
    metadata says incomplete, and -R (disk freed) finishes with every rollout exactly once."""
    real_write = os.write
    writes = {"n": 0}

    def full_disk_write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if not target.endswith("results.jsonl"):
            return real_write(fd, data)
        writes["n"] += 1
        if writes["n"] == 1:
            return real_write(fd, data)
        if writes["n"] == 2:
            return real_write(fd, bytes(data)[: len(data) // 2])  # a short write: the caller writes the rest...
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # ...and the disk is full

    monkeypatch.setattr(results_module.os, "write", full_disk_write)
    result = prime(*eval_args(server, tmp_path))
    assert_user_error(result, "No space left on device", "results.jsonl", "free some space", "-R")
    monkeypatch.undo()

    (run_dir,) = (tmp_path / "evals" / "reverse-text--stub").iterdir()
    text = (run_dir / "results.jsonl").read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 2  # the first group only: no half row
    assert all(json.loads(line) for line in text.splitlines())
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "incomplete"
    assert not list(run_dir.glob(".*.tmp")) and not (run_dir / ".lock").exists()

    resumed = prime(*eval_args(server, tmp_path), "-R")
    assert resumed.exit_code == 0, resumed.output
    keys = sorted((json.loads(line)["example_id"], json.loads(line)["rollout_idx"])
                  for line in (run_dir / "results.jsonl").read_text().splitlines())
    assert keys == [(e, i) for e in range(6) for i in range(2)]


def test_full_disk_on_metadata_write_is_one_line(server, tmp_path, monkeypatch):
    import evalkit.core.fileio as fileio

    real_fsync = os.fsync

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fileio.os, "fsync", no_space)
    result = prime(*eval_args(server, tmp_path))
    monkeypatch.setattr(fileio.os, "fsync", real_fsync)
    assert_user_error(result, "No space left on device")
    assert not list(tmp_path.rglob(".metadata.json.*.tmp"))  # the temp file went with the error


@pytest.mark.parametrize("env_id", ["foo.bar", "a.b.c", "../x.y"])
def test_env_id_that_is_not_a_module_name(server, env_id, tmp_path):
    result = prime("eval", "run", env_id, "-m", "stub", "-b", server.base_url, "-o", str(tmp_path))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: ")


def test_binary_system_prompt_file(server, tmp_path):
    binary = tmp_path / "prompt.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert_user_error(prime(*eval_args(server, tmp_path), "--system-prompt-file", str(binary)),
                          "is a binary file, not text")
    latin1 = tmp_path / "prompt.txt"
    latin1.write_bytes("Réponds en français".encode("latin-1"))
    assert_user_error(prime(*eval_args(server, tmp_path), "--system-prompt-file", str(latin1)), "is not UTF-8 text")
    assert_user_error(prime(*eval_args(server, tmp_path), "--system-prompt-file", str(tmp_path)), "is a folder")
    config = tmp_path / "eval.toml"
    config.write_text(f'model = "stub"\nbase_url = "{server.base_url}"\n\n[[eval]]\nid = "reverse-text"\n'
                      f'system_prompt_file = "{binary.name}"\n')
    assert_user_error(prime("eval", "run", str(config)), "system_prompt_file", "is a binary file")
    assert not (tmp_path / "evals").exists()

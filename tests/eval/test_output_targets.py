"""What primekit writes over (issue 45, items 1 and 11): only regular files.

A symlink at an output path is followed and the file it names is written; a FIFO, a device or a folder there is
refused with one `error:` line before anything is written; a failed write names the user's path, not the temp
file. Every target here lives in the test's own tmp_path: the device is a node made there (root only), never a
system file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from support.report_runs import make_eval_runs
from typer.testing import CliRunner

from evalkit.core import fileio
from evalkit.core.errors import UserError
from primekit_cli.app import app


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_eval_runs(tmp_path_factory.mktemp("evals"))[0]


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.output
    return lines[0]


def char_device(path: Path) -> Path:
    """A character device node (the null device's numbers) at ``path``, inside the test's tmp_path."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except OSError as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return path


WRITERS = {
    "write_text_atomic": lambda path: fileio.write_text_atomic(path, "new\n"),
    "write_bytes_atomic": lambda path: fileio.write_bytes_atomic(path, b"new\n"),
    "write_files_atomic": lambda path: fileio.write_files_atomic({path: b"new\n"}),
    "write_json_atomic": lambda path: fileio.write_json_atomic(path, {"new": 1}),
}


@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_refuses_a_fifo_and_leaves_it_a_fifo(tmp_path: Path, writer: str):
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="it is a FIFO, not a regular file"):
        WRITERS[writer](fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["out"]  # no temp file left either


@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_follows_a_symlink_to_the_file_it_names(tmp_path: Path, writer: str):
    target, link = tmp_path / "real.txt", tmp_path / "link.txt"
    target.write_text("old\n")
    link.symlink_to(target.name)
    WRITERS[writer](link)
    assert link.is_symlink() and os.readlink(link) == target.name
    assert "new" in target.read_text()
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to("created.txt")  # a link to a file not there yet: that file is created
    WRITERS[writer](dangling)
    assert dangling.is_symlink() and "new" in (tmp_path / "created.txt").read_text()


def test_keep_lines_refuses_a_fifo_and_follows_a_symlink(tmp_path: Path):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="FIFO"):
        fileio.keep_lines_atomic(fifo, lambda line: True)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    real.write_bytes(b"keep\ndrop\n")
    link.symlink_to(real)
    fileio.keep_lines_atomic(link, lambda line: line.startswith(b"keep"))
    assert link.is_symlink() and real.read_bytes() == b"keep\n"


def test_from_eval_refuses_a_fifo_a_device_and_a_folder_in_one_line_each(run_dir: Path, tmp_path: Path):
    fifo, folder = tmp_path / "fifo.jsonl", tmp_path / "folder.jsonl"
    os.mkfifo(fifo)
    folder.mkdir()
    line = one_error_line(CliRunner().invoke(app, ["data", "from-eval", str(run_dir), "-o", str(fifo), "--force"]))
    assert line == f"error: cannot write {fifo}: it is a FIFO, not a regular file; primekit writes only regular " \
                   "files, so name a file"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    line = one_error_line(CliRunner().invoke(app, ["data", "from-eval", str(run_dir), "-o", str(folder), "--force"]))
    assert line == f"error: cannot write {folder}: it is a folder; name a file (a new one, or a file to replace)"
    assert ".tmp" not in line and "--output-dir" not in line
    device = char_device(tmp_path / "null")
    line = one_error_line(CliRunner().invoke(app, ["data", "from-eval", str(run_dir), "-o", str(device), "--force"]))
    assert "it is a character device, not a regular file" in line
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_from_eval_writes_through_a_symlink(run_dir: Path, tmp_path: Path):
    target, link = tmp_path / "data" / "sft.jsonl", tmp_path / "sft.jsonl"
    target.parent.mkdir()
    link.symlink_to(target)
    result = CliRunner().invoke(app, ["data", "from-eval", str(run_dir), "-o", str(link), "--force"])  # a link is there
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and len(target.read_text().splitlines()) == 8
    assert json.loads(target.read_text().splitlines()[0])["provenance"]["run"] == str(run_dir)


def test_html_report_refuses_a_fifo_and_follows_a_symlink(run_dir: Path, tmp_path: Path):
    fifo = tmp_path / "report.html"
    os.mkfifo(fifo)
    line = one_error_line(CliRunner().invoke(app, ["eval", "view", str(run_dir), "--html", str(fifo)]))
    assert f"cannot write {fifo}: it is a FIFO, not a regular file" in line
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    real, link = tmp_path / "real.html", tmp_path / "link.html"
    link.symlink_to(real)
    result = CliRunner().invoke(app, ["eval", "view", str(run_dir), "--html", str(link)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and real.read_text().startswith("<!DOCTYPE html>")


def test_an_output_where_no_file_can_be_made_is_one_line_naming_it(run_dir: Path):
    """`/proc` takes no new files (ENOENT on create): one line naming `/proc/x`, never the temp file."""
    line = one_error_line(CliRunner().invoke(app, ["data", "from-eval", str(run_dir), "-o", "/proc/x"]))
    assert line.startswith("error: cannot write /proc/x: No such file or directory") and ".tmp" not in line
    assert "--output-dir" not in line

"""click's usage errors (an unknown flag, a missing value, an unknown command) are one `error:` line and exit 2, like
every other bad input; `--help`, `--version` and a bare group behave as before. Through the real entry point."""

from __future__ import annotations

import pytest
from support.cli import prime_process


@pytest.mark.parametrize("args, line", [
    (["eval", "run", "x", "--num", "5"], "error: No such option: --num"),
    (["eval", "run", "reverse-text", "-n"], "error: Option '-n' requires an argument"),
    (["nosuch"], "error: No such command 'nosuch'; see `"),
])
def test_a_usage_error_is_one_line_and_exit_2(args, line):
    result = prime_process(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(line) and result.stderr.count("\n") == 1, result.stderr
    assert "╭" not in result.stderr and "Traceback" not in result.stderr


def test_help_version_and_a_bare_group_are_unchanged():
    assert prime_process("--help").returncode == 0 and "Commands" in prime_process("--help").stdout
    assert prime_process("--version").stdout.startswith("primekit ")
    bare = prime_process("eval")
    assert bare.returncode == 2 and "run" in bare.stdout and "view" in bare.stdout

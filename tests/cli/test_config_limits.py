"""Config files and dotted flags a parser cannot take are one `error:` line (issue 45, item 14): bytes that are
not UTF-8, tables or arrays nested thousands deep, a dotted flag of thousands of parts, a config that is a FIFO;
for eval, GEPA, RL and verifiers 0.4's `@ config.toml`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import REPO
from typer.testing import CliRunner

from evalkit.core.errors import UserError
from primekit_cli.app import app
from primekit_cli.dialect.args import raw_config

COMMANDS = {"eval": ["eval", "run"], "gepa": ["gepa", "run"], "rl": ["rl", "run"], "eval @": ["eval", "run", "@"]}
DEEP = 5000


def configs(folder: Path) -> dict[str, tuple[Path, str]]:
    """name -> (config file, what its error line says)."""
    nested = "tables or arrays nest more than 64 deep"
    files = {
        "latin-1": (b'model = "caf\xe9"\n', "is not UTF-8 text (byte 12); save it as UTF-8"),
        "deep arrays": (b"x = " + b"[" * DEEP + b"]" * DEEP + b"\n", nested),
        "deep tables": (("[" + ".".join(["a"] * DEEP) + "]\nx = 1\n").encode(), nested),
        "deep inline": (b"x = " + b"{a = " * DEEP + b"1" + b"}" * DEEP + b"\n", nested),
    }
    out = {}
    for name, (data, why) in files.items():
        path = folder / f"{name.replace(' ', '-')}.toml"
        path.write_bytes(data)
        out[name] = (path, why)
    fifo = folder / "fifo.toml"
    os.mkfifo(fifo)
    out["fifo"] = (fifo, "it is a FIFO, not a regular file; pass a TOML file")
    return out


def error_line(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, RecursionError)
    (line,) = [line for line in result.output.splitlines() if line.startswith("error: ")]
    return line


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_config_no_parser_can_take_is_one_line_for_every_command(tmp_path: Path, command: str):
    for name, (path, why) in configs(tmp_path).items():
        line = error_line([*COMMANDS[command], str(path), "--dry-run"])
        assert str(path) in line and why in line, (name, line)


def test_a_dotted_flag_of_thousands_of_parts_is_one_line(tmp_path: Path):
    key = ".".join(["a"] * DEEP)
    config = REPO / "configs" / "rl" / "digit-sums.toml"
    line = error_line(["rl", "run", str(config), f"--{key}", "1", "--dry-run"])
    assert line == "error: --a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a...: a dotted key of more than 64 parts names no " \
                   "config field"
    with pytest.raises(UserError, match="a dotted key of more than 64 parts"):  # verifiers 0.4's dialect (eval, GEPA)
        raw_config([], [(key, 1)], None)

"""Names and secrets files as users write them: an ``--env-file`` follows dotenv's rules (a quoted value then a
comment, a UTF-8 BOM, ``export`` then a tab), and a name that ends in a newline is refused (``$`` matches before a
trailing newline; names are matched whole).

Real parts: ``prime`` as a subprocess, reading a real env file and writing a real folder.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evalkit.core.errors import UserError
from evalkit.core.secrets_file import parse_env_file

SECRET = "judge-secret-77c0d1a9"


@pytest.mark.parametrize("line, value", [
    (f'KEY="{SECRET}" # the judge\'s key', SECRET),
    (f"KEY='{SECRET}'   # single quotes", SECRET),
    (f'KEY="{SECRET}"#no space', SECRET),
    (f'KEY="{SECRET} # kept" ', f"{SECRET} # kept"),
    (f'KEY="a \\"quoted\\" {SECRET}"', f'a "quoted" {SECRET}'),
    (f"export\tKEY={SECRET}", SECRET),
    (f"export  KEY = {SECRET}  # spaced", SECRET),
    (f"KEY={SECRET}#not-a-comment", f"{SECRET}#not-a-comment"),
])
def test_dotenv_values(tmp_path, line, value):
    path = tmp_path / "secrets.env"
    path.write_text(line + "\n")
    assert parse_env_file(path) == {"KEY": value}


def test_a_utf8_bom_is_not_part_of_the_first_name(tmp_path):
    path = tmp_path / "secrets.env"
    path.write_bytes(b"\xef\xbb\xbf" + f"FIRST_KEY={SECRET}\nSECOND=2\n".encode())
    assert parse_env_file(path) == {"FIRST_KEY": SECRET, "SECOND": "2"}


@pytest.mark.parametrize("line", [f'KEY="{SECRET}', f'KEY="{SECRET}" trailing'])
def test_malformed_quoting_is_one_error_naming_the_line_not_the_value(tmp_path, line):
    path = tmp_path / "secrets.env"
    path.write_text("GOOD=1\n" + line + "\n")
    with pytest.raises(UserError) as err:
        parse_env_file(path)
    assert "line 2" in str(err.value) and SECRET not in str(err.value)


def test_a_quoted_value_with_a_comment_reaches_the_environment_and_is_redacted(tmp_path):
    """Through ``prime eval run --env-file``: the environment sees the bare value, and the bare value is what is
    scrubbed from every output (before, the variable held the quotes and the bare secret was written)."""
    env_dir = tmp_path / "environments" / "peek"
    env_dir.mkdir(parents=True)
    (env_dir / "peek.py").write_text(
        "import os\nfrom evalkit.envs import Rubric, SingleTurnEnv\n\n\n"
        "def sees_key(completion) -> float:\n"
        f"    return 1.0 if os.environ.get('PEEK_SECRET') == {SECRET!r} else 0.0\n\n\n"
        "def tells(prompt) -> float:\n"
        "    if 'q0' in str(prompt):\n"
        "        raise RuntimeError('the judge got ' + os.environ.get('PEEK_SECRET', '?').strip(chr(34)))\n"
        "    return 0.0\n\n\n"
        "def load_environment(**kwargs):\n"
        "    rows = [{'question': 'q0', 'answer': 'a'}, {'question': 'q1', 'answer': 'a'}]\n"
        "    return SingleTurnEnv(eval_dataset=rows, rubric=Rubric([sees_key, tells], weights=[1.0, 0.0]))\n"
    )
    secrets = tmp_path / "secrets.env"
    secrets.write_bytes(b"\xef\xbb\xbf" + f'export\tPEEK_SECRET="{SECRET}" # the judge\n'.encode())
    secrets.chmod(0o600)
    from support.fault_server import FaultServer

    server = FaultServer()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "primekit_cli",
                "eval",
                "run",
                "peek",
                "-m",
                "m",
                "-b",
                server.base_url,
                "-k",
                "NO_KEY",
                "-n",
                "2",
                "-r",
                "1",
                "--env-file",
                str(secrets),
                "-o",
                str(tmp_path / "out"),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**{k: v for k, v in os.environ.items() if k != "PEEK_SECRET"}, "NO_KEY": "x", "HF_HUB_OFFLINE": "1"},
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    (results,) = (tmp_path / "out").rglob("results.jsonl")
    rows = sorted((json.loads(line) for line in results.read_text().splitlines()), key=lambda r: r["example_id"])
    assert [row["metrics"]["sees_key"] for row in rows] == [1.0, 1.0]
    assert "the judge got [redacted]" in rows[0]["error"] and rows[1]["error"] is None
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert SECRET not in written and SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize("name", ["name\n", "my-env\n", "x\n"])
def test_env_init_refuses_a_name_ending_in_a_newline(tmp_path, name):
    done = subprocess.run([sys.executable, "-m", "primekit_cli", "env", "init", name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: invalid environment name"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "environments").exists() or not any((tmp_path / "environments").iterdir())


@pytest.mark.parametrize("target", ["owner\n/my-env"])
def test_env_install_refuses_a_package_name_ending_in_a_newline(target):
    from evalkit.loading.install import plan_install

    with pytest.raises(UserError, match="neither a folder nor a package name"):
        plan_install(target)

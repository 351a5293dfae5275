"""A GEPA run whose config sets headers saves their values as ``[redacted]`` (every configured header value is a
secret), so `--resume` takes them back from the config given, and without it says so instead of sending
``[redacted]`` to the server."""

from __future__ import annotations

from typer.testing import CliRunner

from primekit_cli.app import app

CONFIG = '''model = "mock/reverse"
reflection_model = "mock/text:```\\nReverse the text.\\n```"
headers = { X-Custom-Auth = "custom-auth-value-1" }
[[env]]
id = "reverse-text"
[gepa]
max_calls = 30
num_train = 4
num_val = 3
'''


def test_resume_restores_header_values_from_the_config(tmp_path):
    config = tmp_path / "g.toml"
    config.write_text(CONFIG)
    run_dir = tmp_path / "run"
    started = CliRunner().invoke(app, ["gepa", "run", str(config), "-o", str(run_dir)])
    assert started.exit_code == 0, started.output
    assert "custom-auth-value-1" not in (run_dir / "metadata.json").read_text()
    alone = CliRunner().invoke(app, ["gepa", "run", "--resume", str(run_dir), "-B", "40"])
    assert alone.exit_code == 2 and "header values that were saved as [redacted]" in alone.output
    again = CliRunner().invoke(app, ["gepa", "run", str(config), "-o", str(run_dir), "--resume", str(run_dir),
                                     "-B", "40"])
    assert again.exit_code == 0, again.output

"""Exported Tinker and SkyRL scripts treat every config value as data: hostile values (command
substitution, backticks, quotes, newlines, a ``$DATA_DIR`` of their own) pass ``bash -n`` and, when
the script runs with its trainer commands stubbed, reach the trainer as exactly the value, with no
command run. The stubs are a fake ``python`` and ``uv`` first on PATH that record their argv."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
from support import REPO

from rl_backend.config import load_rl_config
from rl_backend.export import export_config, write_export
from rl_backend.export.common import comment_word, shell_word

HOSTILE = "r$(touch PWNED_SUB)'\"`touch PWNED_TICK`\n touch PWNED_LINE; $DATA_DIR$(touch PWNED_DATA) $HOME"
needs_verifiers = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None,
                                     reason="needs the verifiers extra: pip install 'primekit[verifiers]'")
STUB = "#!/bin/sh\n{ printf '%s\\0' \"$(basename \"$0\")\" \"$@\"; printf '\\001'; } >> \"$ARGV_LOG\"\n"


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _config(tmp_path: Path, env_id: str, args: dict[str, str] | None) -> Path:
    text = (
        f'model = "Org/Model"\nmax_steps = 2\nbatch_size = 8\nrollouts_per_example = 2\nrun_name = {_toml(HOSTILE)}\n'
        f"[[env]]\nid = {_toml(env_id)}\n"
    )
    if args:
        text += "args = { " + ", ".join(f"{key} = {_toml(value)}" for key, value in args.items()) + " }\n"
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def _run_script(tmp_path: Path, script: Path) -> list[list[str]]:
    """Run ``script`` in a scratch folder with the trainers stubbed; the argv of each stubbed call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "uv"):
        (bin_dir / name).write_text(STUB)
        (bin_dir / name).chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "argv.log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(log), "HOME": str(tmp_path / "home")}
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    ran = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert sorted(path.name for path in work.rglob("*")) == [], "the script ran a command from the config"
    assert not list(tmp_path.rglob("PWNED*")) and not list(REPO.glob("PWNED*"))
    return [call.split("\0")[:-1] for call in log.read_text().split("\1")[:-1]]


@needs_verifiers
def test_tinker_script_passes_hostile_values_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    args = {"note": HOSTILE, "other": "'; touch PWNED_ARG; echo \\' \\\"$(touch PWNED_ESC)\\\""}
    result = export_config(load_rl_config(_config(tmp_path, "digit-sums-vf", args)), "tinker")
    script = tmp_path / "train.tinker.sh"
    write_export(result, script)
    [call] = _run_script(tmp_path, script)
    assert call[0] == "python" and f"wandb_name={HOSTILE}" in call
    assert json.loads(next(word for word in call if word.startswith("vf_env_args=")).split("=", 1)[1]) == args
    assert call[1:] == result.command[1:]


@needs_verifiers
def test_skyrl_script_passes_hostile_values_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The env id reaches the script as written (verifiers resolves ``owner/name`` by its name)."""
    monkeypatch.chdir(REPO)
    env_id = "x$(touch PWNED_ID)'\n touch PWNED_IDLINE; `touch PWNED_IDTICK`/digit-sums-vf"
    result = export_config(load_rl_config(_config(tmp_path, env_id, None)), "skyrl")
    script = tmp_path / "train.skyrl.sh"
    write_export(result, script)
    dataset, train = _run_script(tmp_path, script)
    data_dir = f"{tmp_path}/home/data/{env_id}"
    assert dataset[dataset.index("--env_id") + 1] == env_id and dataset[dataset.index("--output_dir") + 1] == data_dir
    assert f"trainer.run_name={HOSTILE}" in train and f"environment.env_class={env_id}" in train
    assert f"data.train_data=['{data_dir}/train.parquet']" in train


@pytest.mark.parametrize("value", [HOSTILE, "a\\'b\\", "", "plain", "a\tb\x7fc\r", "it's"])
def test_shell_and_comment_words_read_back_as_the_value(value: str, tmp_path: Path) -> None:
    """Each quoted form, read by bash (a comment's form on one line), is exactly the value."""
    script = tmp_path / "s.sh"
    script.write_text(f"printf '%s\\0' {shell_word(value)} {comment_word(value)}\n")
    assert "\n" not in comment_word(value)
    out = subprocess.run(["bash", str(script)], capture_output=True, cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    assert out.stdout.decode().split("\0")[:2] == [value, value] and not list(tmp_path.glob("PWNED*"))

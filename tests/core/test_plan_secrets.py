"""A secret of the run's ``--env-file`` that also sits in an environment's args never reaches the terminal or a
file: not the RL plan (``--dry-run`` too, both backends), not GEPA's plan, its ``--dry-run`` or its closing "Verify
the prompt" line, and not the gepa library's own ``state/candidates.json`` and ``state/gepa_state.bin``, even when
the environment builds its system prompt from that argument. The task model still runs the prompt the environment
wrote; the library and the teacher only see it with the secret as a placeholder.

Before: the plans printed env args as given, and gepa saved the seed prompt (and every proposal built on it) with
the secret in plain text.

Real parts: ``prime`` as a subprocess; GEPA's task model and teacher are tests/support/solver_server.py on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import VERIFIERS_ENVS
from support.cli import prime_process

SECRET = "envfile-secret-4d7e1a2b9c"
KEY_ENV = {"SOLVER_KEY": "solver-key-1"}
"""The key variable the configs name, for the child."""

ENV = """
from evalkit.envs import Rubric, SingleTurnEnv


def load_environment(token: str = "", **kwargs):
    rows = [{"question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)} for i in range(8)]

    def right(completion, answer) -> float:
        return float(answer in str(completion))

    return SingleTurnEnv(
        dataset=rows, system_prompt=f"Reply with the number. Sign with {token}.", rubric=Rubric([right])
    )
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "environments" / "signed"
    folder.mkdir(parents=True)
    (folder / "signed.py").write_text(ENV)
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"SIGNING_TOKEN={SECRET}\n")
    secrets.chmod(0o600)
    return tmp_path


def test_gepa_plan_run_verify_line_and_library_state_hold_no_env_file_secret(project):
    from support.solver_server import SolverServer

    server = SolverServer()
    try:
        (project / "gepa.toml").write_text(
            f'model = "solver"\nbase_url = "{server.base_url}"\napi_key_var = "SOLVER_KEY"\nenv_file = "secrets.env"\n'
            f'[[env]]\nid = "signed"\nargs = {{ token = "{SECRET}" }}\n'
            "[gepa]\nmax_calls = 14\nnum_train = 4\nnum_val = 2\nminibatch_size = 2\nperfect_score = 9.0\n"
        )
        dry = prime_process("gepa", "run", "gepa.toml", "--dry-run", cwd=project, env=KEY_ENV)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert SECRET not in dry.stdout + dry.stderr and '{"token": "[redacted]"}' in dry.stderr
        done = prime_process("gepa", "run", "gepa.toml", "-o", "run", cwd=project, env=KEY_ENV)
        requests = server.requests()
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    assert SECRET not in done.stdout + done.stderr
    verify = done.stdout[done.stdout.index("Verify the prompt:"):]
    assert "-a '{\"token\": \"[redacted]\"}'" in verify and f"--env-file {project / 'secrets.env'}" in verify
    for file in (project / "run").rglob("*"):
        assert not file.is_file() or SECRET.encode() not in file.read_bytes(), file
    candidates = json.loads((project / "run" / "state" / "candidates.json").read_text())
    seed = "Reply with the number. Sign with [redacted:1]."
    assert candidates[0] == {"system_prompt": seed}
    # the task model ran the prompts the environment wrote (the secret in place); the teacher never saw it
    systems = {r["messages"][0]["content"] for r in requests if r["messages"][0]["role"] == "system"}
    real = f"Reply with the number. Sign with {SECRET}."
    assert {real, f"{real} Double-check the sum."} <= systems
    teacher = [r for r in requests if "```" in r["messages"][-1]["content"]]
    assert teacher and all(SECRET not in json.dumps(r) for r in teacher)


def test_a_gepa_run_with_a_secret_in_its_env_args_resumes_with_the_secret(project):
    """The run saves its env args redacted; --resume with the config that started it (and its --env-file) runs
    the real prompt again, where it went on with ``[redacted]`` as the argument before; the run dir alone
    cannot say what the secret was, and says so in one line."""
    from support.solver_server import SolverServer

    server = SolverServer()
    try:
        (project / "gepa.toml").write_text(
            f'model = "solver"\nbase_url = "{server.base_url}"\napi_key_var = "SOLVER_KEY"\nenv_file = "secrets.env"\n'
            f'[[env]]\nid = "signed"\nargs = {{ token = "{SECRET}" }}\n'
            "[gepa]\nmax_calls = 8\nnum_train = 4\nnum_val = 2\nminibatch_size = 2\nperfect_score = 9.0\n"
        )
        first = prime_process("gepa", "run", "gepa.toml", "-o", "run", cwd=project, env=KEY_ENV)
        assert first.returncode == 0, first.stderr[-3000:]
        before = len(server.requests())
        bare = prime_process("gepa", "run", "--resume", "run", "-B", "16", cwd=project, env=KEY_ENV)
        assert bare.returncode == 2 and bare.stderr.count("\n") == 1 and "secret in its env args" in bare.stderr
        again = prime_process("gepa", "run", "gepa.toml", "--resume", "run", "-B", "16", cwd=project, env=KEY_ENV)
        requests = server.requests()[before:]
    finally:
        server.stop()
    assert again.returncode == 0, again.stderr[-3000:]
    systems = {r["messages"][0]["content"] for r in requests if r["messages"][0]["role"] == "system"}
    assert systems and all(SECRET in text for text in systems if "Sign with" in text)
    assert not any("Sign with [redacted" in text for text in systems)
    for file in (project / "run").rglob("*"):
        assert not file.is_file() or SECRET.encode() not in file.read_bytes(), file


def rl_dry_run(project: Path, env_table: str, *args: str) -> subprocess.CompletedProcess[str]:
    from support.tiny_model import write_tiny_model

    model = write_tiny_model(project / "model")
    (project / "rl.toml").write_text(
        f'model = "{model}"\nrun_name = "r"\nmax_steps = 1\nbatch_size = 2\nrollouts_per_example = 2\n'
        f'env_file = "secrets.env"\n[sampling]\nmax_tokens = 4\n{env_table}[baseline]\nenabled = false\n'
    )
    return prime_process("rl", "run", "rl.toml", "--dry-run", "-o", "out", *args, cwd=project, env=KEY_ENV)


def test_rl_dry_run_plan_holds_no_env_file_secret(project):
    done = rl_dry_run(
        project, f'[[env]]\nid = "{project / "environments" / "signed"}"\nargs = {{ token = "{SECRET}" }}\n'
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert SECRET not in done.stdout + done.stderr
    assert 'token = "[redacted]"' in done.stdout and 'environment  ' in done.stdout  # printed, the value scrubbed


@pytest.mark.verifiers
def test_prime_rl_dry_run_plan_holds_no_env_file_secret(project):
    import shutil

    pytest.importorskip("verifiers.v1")
    shutil.copytree(VERIFIERS_ENVS / "vf_v1_shared", project / "environments" / "vf_v1_shared")
    done = rl_dry_run(project, f'[[env]]\nid = "vf-v1-shared"\nargs = {{ tools = {{ log = "{SECRET}" }} }}\n',
                      "--backend", "prime-rl", "--skip-baseline")
    assert done.returncode == 0, done.stderr[-3000:]
    assert SECRET not in done.stdout + done.stderr
    assert "[redacted]" in done.stdout  # the env args were printed (plan and config), the value scrubbed

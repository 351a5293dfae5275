"""verifiers' ``bash`` harness in primekit, offline: it runs only on a runtime the user chose (it executes the model's
shell commands on this machine), the same rows come from env args, a TOML table and verifiers' dotted flags, and
every other harness program and runtime is refused in one line that says what it needs.

The model is tests/support/bash_server.py: it answers a user turn with one ``bash`` call and then with what the
command printed, so a right reward means the command really ran. Row parity with verifiers' own ``vf-eval`` (which
needs the package index for its uv) is in test_bash_harness_parity.py.

Every test but the first is marked ``verifiers`` (run again under 0.4 by ``make test``: the harness ids, the
dotted flags and the stdin verifiers' runtime hands a program differ between the generations). The first asserts
primekit's opt-in refusal and that ``-a`` and an eval TOML give the same rows: primekit's config layer, run once
under 0.3.1; under 0.4 the bash harness's rows are asserted by the dotted-flags test here and by the parity tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

verifiers = pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")

from support import REPO, with_pythonpath  # noqa: E402  (after the importorskip above)
from support.bash_server import BashServer  # noqa: E402  (after the importorskip above)
from support.cli import assert_user_error, prime_in_project, prime_process  # noqa: E402  (after the importorskip above)

from evalkit.core.errors import UserError  # noqa: E402  (after the importorskip above)

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs os.pidfd_open (Linux 5.3+)")

IS_04 = str(verifiers.__version__).startswith("0.4.")
KEY_VAR = "BASH_SERVER_KEY"
KEY_ENV = {KEY_VAR: "test-key"}
"""The key variable the commands name, for the child (the hash server takes any key)."""
BASH = {"harness": {"id": "bash"}, "runtime": {"type": "subprocess"}}
OPT_IN = ("the 'bash' harness runs the model's shell commands on this machine, so it runs only on a runtime you "
          "choose: add [env.agent.runtime] type = \"sandbox\" (--env.agent.runtime.type sandbox; ")


def _others() -> list[str]:
    """verifiers' harness programs primekit does not run (its package's harness modules but null, bash and the
    agents primekit runs on sandbox: tests/verifiers_compat/test_sandbox_agents.py)."""
    from verifiers.v1.utils.loaders import builtin_harness_ids

    from evalkit.verifiers_compat.v1.config import SANDBOX_AGENTS

    return [h for h in builtin_harness_ids() if h not in ("null", "bash", "node", "utils", *SANDBOX_AGENTS)]


@pytest.fixture(scope="module")
def server():
    started = BashServer()
    yield started
    started.stop()


def rows(project: Path, out: str) -> list[dict]:
    (results,) = (project / out).glob("evals/*/*/results.jsonl")
    found = [json.loads(line) for line in results.read_text().splitlines()]
    return sorted(
        (
            {"example": r["example_id"], "reward": r["reward"], "error": r["error"], "completion": r["completion"]}
            for r in found
        ),
        key=lambda r: r["example"],
    )


def test_bash_runs_the_models_commands_only_on_a_chosen_runtime(verifiers_project, server):
    project = verifiers_project
    model = ["-m", "hash-model", "-b", server.base_url, "-k", KEY_VAR, "-n", "3", "-r", "1"]
    refused = prime_in_project(project, "eval", "run", "vf-v1-math", *model, "-a", '{"harness": {"id": "bash"}}',
                               env=KEY_ENV)
    assert OPT_IN in assert_user_error(refused)
    done = prime_process("eval", "run", "vf-v1-math", *model, "-a", json.dumps(BASH), "-o", "flags", project=project,
                         env=KEY_ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    by_flags = rows(project, "flags")
    assert [r["reward"] for r in by_flags] == [1.0, 1.0, 1.0] and not any(r["error"] for r in by_flags)
    call, result, reply = by_flags[1]["completion"]
    assert call["tool_calls"][0]["function"] == {
        "name": "bash",
        "arguments": json.dumps({"command": "python3 -c 'print(1+2)'"}),
    }
    assert (result["role"], result["content"], reply["content"]) == ("tool", "3\n", "3")  # the command ran here
    (project / "eval.toml").write_text(
        f'model = "hash-model"\nbase_url = "{server.base_url}"\napi_key_var = "{KEY_VAR}"\nnum_examples = 3\n'
        f'rollouts_per_example = 1\noutput_dir = "toml"\n\n[[eval]]\nenv_id = "vf-v1-math"\n\n'
        '[eval.harness]\nid = "bash"\n\n[eval.runtime]\ntype = "subprocess"\n')
    done = prime_process("eval", "run", "eval.toml", project=project, env=KEY_ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(project, "toml") == by_flags


@pytest.mark.verifiers
@pytest.mark.skipif(not IS_04, reason="verifiers 0.4's dotted flags")
def test_verifiers_dotted_flags_choose_bash_and_its_runtime(verifiers_project, server):
    project = verifiers_project
    client = ["-m", "hash-model", "--client.base-url", server.base_url, "--client.api-key-var", KEY_VAR]
    refused = assert_user_error(prime_in_project(project, "eval", "run", "vf_v1_math", *client,
                                                 "--env.agent.harness.id", "bash", env=KEY_ENV))
    assert OPT_IN in refused
    done = prime_process("eval", "run", "vf_v1_math", *client, "--env.agent.harness.id", "bash",
                         "--env.agent.harness.edit", "false", "--env.agent.runtime.type", "subprocess", "-o", "dotted",
                         project=project, env=KEY_ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = rows(project, "dotted")
    assert [r["reward"] for r in found] == [1.0, 1.0, 1.0]
    (traces,) = (project / "dotted").glob("evals/*/*/traces.jsonl")
    tools = json.loads(traces.read_text().splitlines()[0])["traces"][0]["tools"]
    assert [t["name"] for t in tools] == ["bash"]  # edit false reached verifiers' bash harness config


@pytest.mark.verifiers
@pytest.mark.parametrize("harness", _others())
def test_every_other_harness_program_is_refused_with_what_it_needs(verifiers_project, monkeypatch, harness):
    from evalkit.loading.resolve import load_environment

    monkeypatch.chdir(verifiers_project)
    with pytest.raises(UserError) as refused:
        load_environment("vf-v1-math", {"harness": {"id": harness}, "runtime": {"type": "subprocess"}})
    message = str(refused.value)
    assert f"harness '{harness}' runs only in a container (verifiers marks it NEEDS_CONTAINER): it needs the docker " \
           "runtime with a docker daemon, or a hosted modal/prime sandbox (an account)" in message
    assert "\n" not in message
    if IS_04:
        from primekit_cli.dialect.args import DialectArgs
        from primekit_cli.dialect.config import eval_plan

        with pytest.raises(UserError, match=f"env.agent.harness.id = '{harness}': harness '{harness}' runs only in a "
                                            "container"):
            eval_plan("vf_v1_math", DialectArgs(overrides=[("env.agent.harness.id", harness)]))


@pytest.mark.verifiers
def test_runtimes_other_than_subprocess_are_refused_with_what_they_need(verifiers_project, monkeypatch):
    from evalkit.loading.resolve import load_environment
    from evalkit.verifiers_compat.v1.config import _docker_answers

    monkeypatch.chdir(verifiers_project)
    docker = ("one answers here, but primekit does not drive the docker runtime yet" if _docker_answers()
              else "`docker info` does not answer here")
    for runtime, needs in (("docker", f"a docker daemon ({docker})"), ("modal", "a Modal account"),
                           ("prime", "a Prime Intellect account")):
        with pytest.raises(UserError, match=re.escape(f"runtime '{runtime}' needs {needs}")):
            load_environment("vf-v1-math", {"harness": {"id": "bash"}, "runtime": {"type": runtime}})
    with pytest.raises(UserError, match=r"runtime setting\(s\) \['image'\]: the subprocess runtime takes 'type' and "
                                        "memory_mb, processes, file_size_mb, cpu_seconds"):
        load_environment("vf-v1-math", {**BASH, "runtime": {"type": "subprocess", "image": "x"}})


@pytest.mark.verifiers
def test_help_says_bash_runs_only_on_a_chosen_runtime(verifiers_project):
    done = prime_process("eval", "run", "--help", project=verifiers_project)
    text = " ".join(done.stdout.replace("│", " ").split())
    assert "verifiers' own default is bash" in text and "so it runs only with the runtime chosen explicitly" in text


EVALUATOR_STDIN = "text the evaluator itself was given on stdin\n"


@pytest.mark.verifiers
def test_the_models_commands_read_an_empty_stdin_not_the_evaluators(verifiers_project, server):
    """`vf_v1_stdin`'s commands (`wc -c`, `read`) read stdin. prime runs with a stdin that holds text: the commands
    still see none (/dev/null), where verifiers 0.4's runtime would hand them the evaluator's own (a deliberate
    difference, docs/verifiers-parity.md)."""
    project = verifiers_project
    env = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1", "HOME": str(project / "home"), KEY_VAR: "test-key"}
    done = subprocess.run([sys.executable, "-m", "primekit_cli", "eval", "run", "vf-v1-stdin", "-m", "hash-model",
                           "-b", server.base_url, "-k", KEY_VAR, "-n", "2", "-r", "1", "-a", json.dumps(BASH),
                           "-o", "out"], cwd=project, env=env, input=EVALUATOR_STDIN, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = rows(project, "out")
    assert [r["completion"][1]["content"] for r in found] == ["0\n", "[]\n"]  # what `wc -c` and `read` saw
    assert [r["reward"] for r in found] == [1.0, 1.0]


STDIN_PROBE = "import sys; print(len(sys.stdin.buffer.read()))\n"
RUN_BOTH_WAYS = """\
import asyncio, sys
from verifiers.v1.runtimes import SubprocessConfig
from verifiers.v1.runtimes.subprocess import SubprocessRuntime
from evalkit.verifiers_compat.v1.harness_workers import fallback_command, program_command
from evalkit.verifiers_compat.v1.harness import LocalInterpreterRuntime

async def main():
    inner = SubprocessRuntime(SubprocessConfig())
    await inner.start()
    runtime = LocalInterpreterRuntime(inner)
    try:
        await inner.write("stdin_probe.py", %r.encode())
        forked = await runtime.run_program(program_command("stdin_probe.py"), {})
        fresh = await runtime.run(fallback_command("stdin_probe.py"), {})  # where no fork server runs
        print(forked.stdout.strip(), fresh.stdout.strip(), forked.exit_code, fresh.exit_code)
    finally:
        await inner.teardown()

asyncio.run(main())
""" % STDIN_PROBE  # noqa: UP031  (a script with braces of its own)


@pytest.mark.verifiers
def test_a_harness_program_gets_an_empty_stdin_however_it_starts(tmp_path):
    """Forked by the server or started fresh (no server), a program verifiers runs without stdin reads nothing of
    the evaluator's. Before: the fresh interpreter read it (45 bytes here)."""
    done = subprocess.run([sys.executable, "-c", RUN_BOTH_WAYS], cwd=tmp_path, input=EVALUATOR_STDIN,
                          env=with_pythonpath(REPO) | {"HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["0", "0", "0", "0"]

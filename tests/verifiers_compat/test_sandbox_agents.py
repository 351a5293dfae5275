"""verifiers' third-party agent harnesses on primekit's ``sandbox`` runtime: their programs installed once on the
host into primekit's harness cache (evalkit/sandbox/installs.py), mini-swe-agent completing scripted tasks inside
bubblewrap (tests/support/bash_server.py plays the model: it runs the command in backquotes, then submits), and one
line for each harness that does not run here, the same as the table in docs/verifiers.md.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]'")

from support import REPO
from support.bash_server import BashServer
from support.shell_runs import run_commands

from evalkit.core.errors import UserError
from evalkit.model.registry import primekit_home
from evalkit.sandbox import bwrap
from evalkit.sandbox.installs import ensure_installed, install_folder, installed, script_metadata
from evalkit.verifiers_compat.v1.agents import HARNESSES, node_found

pytestmark = pytest.mark.verifiers


def _has_v04_harnesses() -> bool:
    """verifiers 0.4 is installed (0.3.1 ships some of the same harness modules, with other programs)."""
    return importlib.metadata.version("verifiers").startswith("0.4.")


v04 = pytest.mark.skipif(not _has_v04_harnesses(), reason="needs verifiers 0.4 (its harnesses)")


CONFIGS = {"mini_swe_agent": "MiniSWEAgentHarnessConfig", "terminus_2": "Terminus2HarnessConfig",
           "browser_use": "BrowserUseHarnessConfig"}


def agent_install(harness: str) -> tuple[Path, str, list[str], str]:
    """``(cache folder, version, requirements, requires-python)`` of verifiers' pinned ``harness`` program in this
    user's primekit home (browser_use has no version knob: its script pins browser-harness)."""
    module = importlib.import_module(f"verifiers.v1.harnesses.{harness}.harness")
    version = getattr(getattr(module, CONFIGS[harness])(), "version", None)
    requirements, requires_python = script_metadata(module.PROGRAM_SOURCE.replace("{version}", version or ""))
    version = version or requirements[0].split("==")[1]
    home = primekit_home().expanduser().resolve()
    return install_folder(home, harness, version, requirements), version, requirements, requires_python


def _cached(harness: str) -> bool:
    try:
        return installed(agent_install(harness)[0]) is not None
    except ImportError:
        return False


def run_agent(project: Path, harness: str, commands: list[str], out: str) -> dict[int, dict]:
    """The rows of ``commands`` (one task each) run by ``harness`` on sandbox, installed first if the user's
    harness cache lacks it (skipped when the package index cannot give it)."""
    folder, version, requirements, requires_python = agent_install(harness)
    if installed(folder) is None:
        try:
            ensure_installed(folder.parent.parent, harness, version, requirements, requires_python)
        except UserError as exc:
            pytest.skip(f"{harness} could not be installed from the package index: {exc}")
    server = BashServer()
    try:
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        done = run_commands(project, server, [c.replace("@PORT@", str(port)) for c in commands], {"type": "sandbox"},
                            out, extra_env={"PRIMEKIT_HOME": str(folder.parent.parent)}, harness={"id": harness})
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (project / out).glob("evals/*/*/results.jsonl")
    rows = {row["example_id"]: row for row in map(json.loads, results.read_text().splitlines())}
    assert [rows[i]["error"] for i in range(len(commands))] == [None] * len(commands)
    assert f"primekit-sandbox-{harness.replace('_', '-')}" in (results.parent / "traces.jsonl").read_text()
    return rows


LONG_INSTALLS = {"terminus_2": "harbor and Python 3.12, ~450 s", "browser_use": "browser-harness, ~180 s"}
"""Installs too long for every CI run (its 90 minutes hold the whole suite): run once a cache has them, or with
``PRIMEKIT_TEST_AGENT_INSTALLS=1``. mini_swe_agent's (~300 s on a loaded 2-core machine) always runs."""


def agent_test(harness: str):
    """The marks of a test that runs ``harness``: PyPI (network) only while the user's harness cache lacks it."""
    marks = [v04, pytest.mark.slow,
             pytest.mark.skipif(bwrap.unavailable() is not None, reason=f"needs bubblewrap: {bwrap.unavailable()}")]
    if not _cached(harness):
        marks.append(pytest.mark.network)
        if harness in LONG_INSTALLS and os.environ.get("PRIMEKIT_TEST_AGENT_INSTALLS") != "1":
            marks.append(pytest.mark.skip(reason=f"{harness} is not in the harness cache and its install "
                                                 f"({LONG_INSTALLS[harness]}) is left out: set "
                                                 "PRIMEKIT_TEST_AGENT_INSTALLS=1 to install it here"))

    def mark(test):
        for one in marks:
            test = one(test)
        return test
    return mark


PORT_COMMAND = "python3 -c \"import socket; socket.create_connection(('127.0.0.1', @PORT@), 3)\"; echo rc=$?"
"""Connects to the scripted model's own port: only the interception endpoint is bridged in, so it is refused."""


@agent_test("mini_swe_agent")
def test_mini_swe_agent_completes_scripted_tasks_inside_the_sandbox(verifiers_project):
    """Three tasks: the command's output is the reply (reward 1); the home of the prime process and the model
    server's own port are out of reach."""
    planted = verifiers_project / "home" / "planted.txt"
    planted.write_text("PLANTED-HOME\n")
    commands = ["echo hello-from-sandbox", f"cat {planted}; echo rc=$?", PORT_COMMAND]
    rows = run_agent(verifiers_project, "mini_swe_agent", commands, "msa")
    printed = {}
    for i, row in rows.items():
        calls = [json.loads(c["function"]["arguments"])["command"] for m in row["completion"]
                 for c in m.get("tool_calls") or []]
        assert len(calls) == 2 and calls[0].startswith(commands[i][:20]), calls  # ran the command,
        assert calls[1] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # then submitted
        observation = json.loads(next(m["content"] for m in row["completion"] if m["role"] == "tool"))
        printed[i] = observation["output"]  # mini-swe-agent's own JSON observation of the command
    assert printed[0] == "hello-from-sandbox\n" and rows[0]["reward"] == 1.0
    assert "PLANTED-HOME" not in printed[1] and "rc=1" in printed[1]
    assert "ConnectionRefusedError" in printed[2]


@agent_test("terminus_2")
def test_terminus_2_completes_scripted_tasks_inside_the_sandbox(verifiers_project):
    """Terminus 2 types each command into its tmux pane (the sandbox's own tmux server), then marks the task
    complete twice; its screen holds the output, and its tmux ends with the rollout."""
    planted = verifiers_project / "home" / "planted.txt"
    planted.write_text("PLANTED-HOME\n")
    commands = ["echo hello-from-terminus", f"cat {planted}; echo rc=$?", PORT_COMMAND]
    rows = run_agent(verifiers_project, "terminus_2", commands, "t2")
    screens = {}
    for i, row in rows.items():
        replies = [json.loads(m["content"]) for m in row["completion"] if m["role"] == "assistant"]
        assert replies[0]["commands"][0]["keystrokes"].startswith(commands[i][:20])
        assert [r["task_complete"] for r in replies] == [False, True, True]  # Terminus asks to confirm
        screens[i] = next(m["content"] for m in row["completion"] if m["role"] == "user")
    assert "\nhello-from-terminus\n" in screens[0] and rows[0]["reward"] == 1.0
    assert "PLANTED-HOME" not in screens[1] and "rc=1" in screens[1]
    assert "ConnectionRefusedError" in screens[2]
    tmux = [p for p in Path("/proc").glob("[0-9]*") if b"terminus-2" in _cmdline(p)]
    assert tmux == []  # no tmux server of Terminus outlived its sandbox


@agent_test("browser_use")
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium (apt-get install chromium)")
def test_browser_use_drives_the_systems_chromium_inside_the_sandbox(verifiers_project):
    """browser-harness code (the ``browser`` tool) opens a page in a headless Chromium started inside the sandbox;
    the sandbox's default address-space limit is off for it (Chromium reserves terabytes)."""
    planted = verifiers_project / "home" / "planted.txt"
    planted.write_text("PLANTED-HOME\n")
    code = 'goto_url("data:text/html,<title>hello-browser</title>"); wait_for_load(); print(js("document.title"))'
    rows = run_agent(verifiers_project, "browser_use", [code, f"print(open('{planted}').read())"], "bu")
    printed = {i: next(m["content"] for m in row["completion"] if m["role"] == "tool") for i, row in rows.items()}
    assert "hello-browser" in printed[0] and rows[0]["reward"] == 1.0
    assert "FileNotFoundError" in printed[1] and "PLANTED-HOME" not in printed[1]  # the prime process's home
    assert [p for p in Path("/proc").glob("[0-9]*") if b".vf-browser-" in _cmdline(p)] == []  # Chromium ended


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _wheel(folder: Path) -> Path:
    """A pure-Python wheel of one module (``primekit_probe``), made here: an install with no package index."""
    path = folder / "primekit_probe-0.1-py3-none-any.whl"
    info = "primekit_probe-0.1.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("primekit_probe.py", "VALUE = 'probe-ok'\n")
        wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: primekit-probe\nVersion: 0.1\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                        "Tag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


def test_a_program_is_installed_once_into_the_harness_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    said: list[str] = []
    wheel = str(_wheel(tmp_path))
    first = ensure_installed(tmp_path / "home", "probe", "0.1", [wheel], ">=3.10", say=said.append)
    assert said[0].startswith("installing harness 'probe' 0.1 (") and said[-1].startswith("installed harness 'probe'")
    ran = subprocess.run([first.python, "-c", "import primekit_probe; print(primekit_probe.VALUE)"],
                         capture_output=True, text=True)
    assert ran.stdout.strip() == "probe-ok"
    assert first.mounts[0] == str((tmp_path / "home" / "harnesses").resolve() / Path(first.mounts[0]).name)
    assert Path(first.mounts[1], "lib").is_dir()  # the base interpreter the environment needs, mounted too
    said.clear()
    assert ensure_installed(tmp_path / "home", "probe", "0.1", [wheel], ">=3.10", say=said.append) == first
    assert said == []  # reused, no pip


def test_a_failed_install_is_one_line_naming_the_package_and_pips_last_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(UserError) as caught:
        ensure_installed(tmp_path, "probe", "0.1", ["primekit-no-such-package==0.0.1"], ">=3.10", say=lambda _: None)
    assert str(caught.value) == ("harness 'probe' 0.1: pip could not install primekit-no-such-package==0.0.1: ERROR: "
                                 "No matching distribution found for primekit-no-such-package==0.0.1")
    assert not install_folder(tmp_path, "probe", "0.1", ["primekit-no-such-package==0.0.1"]).exists()  # no half


def test_no_interpreter_for_the_programs_python_is_one_line(tmp_path):
    with pytest.raises(UserError, match=r"harness 'probe' needs Python >=9\.0, and no interpreter here fits"):
        ensure_installed(tmp_path, "probe", "0.1", ["x"], ">=9.0", say=lambda _: None)


def test_script_metadata_reads_the_pep723_block():
    source = '# /// script\n# requires-python = ">=3.12"\n# dependencies = ["harbor==1.0", "a[b]"]\n# ///\nprint()\n'
    assert script_metadata(source) == (["harbor==1.0", "a[b]"], ">=3.12")


@v04
def test_every_harness_of_verifiers_has_a_line_and_the_docs_table_says_the_same():
    from verifiers.v1 import harnesses

    shipped = sorted(p.parent.name for p in Path(harnesses.__path__[0]).glob("*/harness.py"))  # not node.py, utils/
    assert len(shipped) == 13 and sorted(HARNESSES) == shipped
    docs = (REPO / "docs" / "verifiers.md").read_text()
    table = docs.split("| harness | runs here on, or why not |", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+?) \|$", table, re.M))
    assert sorted(rows) == sorted(HARNESSES)
    for name, entry in HARNESSES.items():
        runtimes = ", ".join(f"`{r}`" for r in entry.plugins)
        assert rows[name] == (runtimes or f"none: {entry.why_not}"), name


@v04
@pytest.mark.parametrize("harness, says", [
    ("codex", "needs Node.js >= 22.19 for @openai/codex and codex-acp (npm)"),
    ("hermes_agent", "its program is a source tarball of a git tag from github.com"),
    ("rlm", "installs from a git clone of github.com"),
])
def test_a_harness_that_does_not_run_here_is_one_line_saying_what_stopped_it(harness, says):
    from evalkit.verifiers_compat.v1.config import offline_program

    with pytest.raises(UserError) as caught:
        offline_program("t", harness, {"type": "sandbox"})
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"t: harness '{harness}' runs only in a container (verifiers marks it")
    assert f"; on primekit's sandbox runtime it does not run here: it {says}" in line
    assert (f"(this machine: {node_found()})" in line) == (harness == "codex")  # the Node.js found, where one is needed


@v04
def test_mini_swe_agent_off_the_sandbox_is_one_line_saying_to_choose_it():
    from evalkit.verifiers_compat.v1.config import offline_program

    assert offline_program("w", "mini_swe_agent", {"type": "sandbox"}) == "primekit-sandbox-mini-swe-agent"
    for runtime in ({}, {"type": "subprocess"}):
        with pytest.raises(UserError, match=r"harness 'mini_swe_agent' runs a third-party agent program, which "
                                            r"primekit runs only in its bubblewrap sandbox: add "
                                            r'\[env\.agent\.runtime\] type = "sandbox"'):
            offline_program("w", "mini_swe_agent", runtime)


@v04
def test_verifiers_flags_choose_an_agent_harness_on_sandbox(verifiers_project, monkeypatch):
    from primekit_cli.dialect.args import DialectArgs
    from primekit_cli.dialect.config import eval_plan

    monkeypatch.chdir(verifiers_project)
    plan = eval_plan("vf_v1_shell", DialectArgs(overrides=[("env.agent.harness.id", "terminus_2"),
                                                           ("env.agent.runtime.type", "sandbox")]))
    assert plan.fields["env_args"]["harness"]["id"] == "terminus_2"
    assert plan.fields["env_args"]["runtime"] == {"type": "sandbox"}
    with pytest.raises(UserError, match=r"harness 'terminus_2' runs a third-party agent program, which primekit "
                                        r"runs only in its bubblewrap sandbox"):
        eval_plan("vf_v1_shell", DialectArgs(overrides=[("env.agent.harness.id", "terminus_2"),
                                                        ("env.agent.runtime.type", "subprocess")]))

"""verifiers v1 tasksets under both verifiers generations (0.3.1 in `.venv`, 0.4 in `.venv-vf04`: `make test` runs
the tests marked `verifiers` in both): taskset-wide shared tool servers, a taskset with its own multi-agent Env,
a single-agent Env that scripts the user, `[env.taskset]`/`[env.harness]` configs, and verifiers' own
`traces.jsonl` read back with verifiers' own code (its reader and its replay command).

Real parts: `prime eval run` in a subprocess against tests/support/solver_server.py on 127.0.0.1 (a scripted model that
answers right), verifiers' chat program as a subprocess (under 0.4 it streams: the bridge answers SSE), and the
environments in tests/verifiers_envs/ (upstream shapes, written here).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import VERIFIERS_ENVS, with_pythonpath

verifiers = pytest.importorskip("verifiers", reason="needs a verifiers extra (make test installs both generations)")


from support.cli import prime_process  # noqa: E402  (after the importorskip above)

from evalkit.core.errors import UserError  # noqa: E402  (after the importorskip above)
from evalkit.loading.resolve import load_environment  # noqa: E402  (after the importorskip above)

pytestmark = pytest.mark.verifiers
CURRENT = str(verifiers.__version__).startswith("0.4.")
"""verifiers 0.4.x (v1 only) is installed, else 0.3.1."""


@pytest.fixture
def project(verifiers_project: Path) -> Path:
    return verifiers_project


def run_dir(project: Path, env_id: str) -> Path:
    outputs = project / "environments" / env_id.replace("-", "_") / "outputs" / "evals" / f"{env_id}--solver"
    (found,) = outputs.iterdir()
    return found


def rows_of(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return sorted(rows, key=lambda r: (r["example_id"], r["rollout_idx"]))


def test_shared_tool_server_serves_the_whole_run_and_traces_read_back_with_verifiers(project, solver, tmp_path):
    log = tmp_path / "calc.log"
    done = prime_process("eval", "run", "vf-v1-shared", "-m", "solver", "-b", solver.base_url, "-n", "2", "-r", "2",
                         "-a", json.dumps({"tools": {"log": str(log)}}), project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = log.read_text().splitlines()
    assert len([x for x in lines if x.startswith("start")]) == 1  # one server for all four rollouts
    assert len({x.split()[1] for x in lines}) == 1 and len([x for x in lines if x.startswith("add")]) == 4
    folder = run_dir(project, "vf-v1-shared")
    rows = rows_of(folder)
    assert [r["reward"] for r in rows] == [1.0] * 4 and all(r["error"] is None for r in rows)
    call = rows[0]["completion"][0]["tool_calls"][0]["function"]
    assert call["name"] == "calc_add" and json.loads(call["arguments"]) == {"a": 3, "b": 4}
    assert rows[0]["completion"][1]["role"] == "tool" and rows[0]["completion"][1]["content"] == "7"

    from evalkit.verifiers_compat.v1.api import read_episodes

    episodes = read_episodes(folder)  # verifiers' own reader, wire types: any taskset's file
    assert len(episodes) == 4 and len({e.id for e in episodes}) == 4
    assert all(e.ok and e.run.id == folder.name and len(e.traces) == 1 for e in episodes)
    assert sorted(e.traces[0].rewards["correct"].score for e in episodes) == [1.0] * 4
    assert (
        json.loads((folder / "configs" / "resolved" / "eval.json").read_text())["env"]["taskset"]["id"]
        == "vf_v1_shared"
    )

    # verifiers' replay re-scores the saved traces offline from the run dir alone
    replay = subprocess.run(
        [sys.executable, "-c", "import sys; from verifiers.v1.cli.replay import main; main(sys.argv[1:])",
         str(folder), "-o", str(tmp_path / "replay"), "--no-rich"],
        cwd=project, capture_output=True, text=True, timeout=120,
        env=with_pythonpath(project / "environments" / "vf_v1_shared"))
    assert replay.returncode == 0, replay.stderr[-3000:]
    rescored = [json.loads(line) for line in (tmp_path / "replay" / "traces.jsonl").read_text().splitlines()]
    assert [e["traces"][0]["rewards"]["correct"]["score"] for e in rescored] == [1.0] * 4


def test_multi_agent_env_runs_every_seat_through_primekits_client(project, solver):
    before = len(solver.requests())
    done = prime_process("eval", "run", "vf-v1-seats", "-m", "solver", "-b", solver.base_url, "-n", "2", "-r", "1",
                         "-a", '{"offset": 2}', "-C", "agents", project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(run_dir(project, "vf-v1-seats"))  # one row per seat per episode, as verifiers writes them
    assert [(r["example_id"], r["agent"], r["trainable"]) for r in rows] == [
        (0, "solver", True), (0, "checker", False), (1, "solver", True), (1, "checker", False)]
    assert [r["reward"] for r in rows] == [1.0] * 4  # each seat's own
    assert rows[0]["episode_id"] == rows[1]["episode_id"] != rows[2]["episode_id"] == rows[3]["episode_id"]
    assert rows[2]["metrics"] == {"correct": 1.0, "checked": 1.0} and rows[3]["metrics"] == {"correct": 1.0}
    assert rows[2]["prompt"][-1]["content"] == "What is 1+2?" and rows[3]["prompt"][-1]["content"] == "What is 3+2?"
    assert rows[2]["completion"] == [{"role": "assistant", "content": "3"}]
    assert rows[3]["completion"] == [{"role": "assistant", "content": "5"}]
    assert [(a["agent"], a["trainable"]) for a in rows[3]["agents"]] == [("solver", True), ("checker", False)]
    sent = solver.requests()[before:]
    asked = sorted(r["messages"][-1]["content"] for r in sent if r.get("max_tokens") != 1)  # not the preflight
    assert asked == ["What is 0+1?", "What is 1+2?", "What is 1+2?", "What is 3+2?"]
    episodes = [
        json.loads(line) for line in (run_dir(project, "vf-v1-seats") / "traces.jsonl").read_text().splitlines()
    ]
    assert sorted(t["agent"]["name"] for e in episodes for t in e["traces"]) == ["checker"] * 2 + ["solver"] * 2
    view = prime_process("eval", "view", str(run_dir(project, "vf-v1-seats")), project=project)
    shown = re.findall(r"completion/assistant: (\S+)", view.stdout)  # 3 samples of the 4 seat rows (all tied at 1.0)
    assert view.returncode == 0 and len(shown) == 3 and set(shown) <= {"1", "3", "5"}, view.stdout


def test_single_agent_env_with_a_scripted_user(project, solver):
    done = prime_process("eval", "run", "vf-v1-chat", "-m", "solver", "-b", solver.base_url, "-n", "1", "-r", "1",
                         project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = rows_of(run_dir(project, "vf-v1-chat"))
    assert row["reward"] == 1.0 and row["metrics"] == {"follows": 1.0, "turns": 2.0}
    assert [(m["role"], m["content"]) for m in row["completion"]] == [
        ("assistant", "0"), ("user", "Good. Now say the next number after 0."), ("assistant", "1")]


def test_an_env_that_opens_the_exchange_puts_its_opening_in_the_rows_prompt(project, solver):
    """A prompt-less task opened by the env's own ``turn(...)``: the row's prompt is what the model was shown
    before its first reply (verifiers' own rows), not the task's bare system prompt."""
    before = len(solver.requests())
    done = prime_process("eval", "run", "vf-v1-opener", "-m", "solver", "-b", solver.base_url, "-n", "2", "-r", "1",
                         project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = sorted(rows_of(run_dir(project, "vf-v1-opener")), key=lambda r: r["example_id"])
    assert [r["reward"] for r in rows] == [1.0, 1.0]
    assert rows[1]["prompt"] == [{"role": "system", "content": "Answer with the number only."},
                                 {"role": "user", "content": "Quick one: What is 1+2?"}]
    assert rows[1]["completion"] == [{"role": "assistant", "content": "3"}]
    sent = [r["messages"] for r in solver.requests()[before:] if r.get("max_tokens") != 1]  # not the preflight
    assert sorted(m[-1]["content"] for m in sent) == ["Quick one: What is 0+1?", "Quick one: What is 1+2?"]
    assert all(m[:len(rows[0]["prompt"]) - 1] == rows[0]["prompt"][:-1] for m in sent)


EVAL_TOML = """\
model = "solver"
base_url = "{url}"
rollouts_per_example = 1

[[eval]]
env_id = "vf-v1-chat"

[eval.taskset]
num_tasks = 3

[eval.harness]
max_turns = 1
"""


def test_eval_toml_taskset_and_harness_tables(project, solver):
    (project / "eval.toml").write_text(EVAL_TOML.format(url=solver.base_url))
    done = prime_process("eval", "run", "eval.toml", project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(run_dir(project, "vf-v1-chat"))
    assert len(rows) == 3  # [eval.taskset] num_tasks
    # [eval.harness] max_turns = 1: the scripted user's second turn finds the seat's turns spent
    assert all(r["metrics"].get("turns") == 1.0 and r["reward"] == 0.0 for r in rows), rows


def test_v1_env_args_by_part_and_their_errors(tmp_path, monkeypatch):
    import shutil

    envs = VERIFIERS_ENVS
    shutil.copytree(envs, tmp_path / "environments", ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    monkeypatch.chdir(tmp_path)
    flat = load_environment("vf-v1-chat", {"num_tasks": 3})
    by_part = load_environment("vf-v1-chat", {"taskset": {"num_tasks": 3}, "harness": {"max_turns": 4}})
    nested = load_environment("vf-v1-chat", {"config": {"taskset": {"num_tasks": 3}, "harness": {"tool_timeout": 9}}})
    assert len(flat.get_eval_dataset()) == len(by_part.get_eval_dataset()) == len(nested.get_eval_dataset()) == 3
    assert by_part.vf_env.config.agent.max_turns == 4 and nested.vf_env.config.agent.harness.tool_timeout == 9
    assert by_part.vf_env.config.agent.harness.id == "primekit-harness"
    seats = load_environment("vf-v1-seats", {"offset": 5, "harness": {"max_turns": 3}})
    assert seats.vf_env.config.offset == 5 and seats.multi_seat
    assert (seats.vf_env.config.solver.max_turns, seats.vf_env.config.checker.max_turns) == (3, 3)
    assert {seats.vf_env.config.solver.harness.id, seats.vf_env.config.checker.harness.id} == {"primekit-harness"}
    with pytest.raises(UserError, match=r"unknown harness setting\(s\) \['max_turn'\]; a \[env.harness\] table takes "
                                        r"a seat's limits \(max_turns, .*\) and the harness program's settings"):
        load_environment("vf-v1-chat", {"harness": {"max_turn": 4}})
    with pytest.raises(UserError, match=r"the 'bash' harness runs the model's shell commands on this machine, so it "
                                        r"runs only on a runtime you choose: add \[env.agent.runtime\]"):
        load_environment("vf-v1-chat", {"harness": {"id": "bash"}})
    with pytest.raises(UserError, match=r"harness 'codex' runs only in a container"):
        load_environment("vf-v1-chat", {"harness": {"id": "codex"}, "runtime": {"type": "subprocess"}})
    bash = load_environment("vf-v1-chat", {"harness": {"id": "bash", "edit": False}, "runtime": {"type": "subprocess"}})
    assert bash.vf_env.config.agent.harness.id == "primekit-bash-harness" and not bash.vf_env.config.agent.harness.edit
    with pytest.raises(UserError, match=r"\['num_tasks'\] set both as env args and in 'taskset'"):
        load_environment("vf-v1-chat", {"num_tasks": 2, "taskset": {"num_tasks": 3}})
    with pytest.raises(UserError, match=r"env args for v1 taskset 'vf-v1-chat' are invalid: taskset.num_taskz"):
        load_environment("vf-v1-chat", {"num_taskz": 2})


def test_a_taskset_that_ships_its_own_harness_runs_on_the_chat_program_only_when_asked(tmp_path, monkeypatch):
    """verifiers runs an unpinned seat on the taskset's own Harness (web_search_interception ships Codex's): a
    silent swap to the chat program would give other rows than verifiers, so it takes an explicit harness id."""
    math = (VERIFIERS_ENVS / "vf_v1_math" / "vf_v1_math.py").read_text()
    folder = tmp_path / "environments" / "vf_v1_bundled"
    folder.mkdir(parents=True)
    (folder / "vf_v1_bundled.py").write_text(math.replace('__all__ = ["AddTaskset"]', (
        'class OwnHarness(vf.Harness):\n    """A program of its own (verifiers would run the seat on it)."""\n\n\n'
        '__all__ = ["AddTaskset", "OwnHarness"]')))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"v1 taskset 'vf-v1-bundled' ships its own harness program .* pass "
                                        r"-a '\{\"harness\": \{\"id\": \"null\"\}\}'"):
        load_environment("vf-v1-bundled", {})
    chosen = load_environment("vf-v1-bundled", {"harness": {"id": "null"}})
    assert chosen.vf_env.config.agent.harness.id == "primekit-harness" and len(chosen.get_eval_dataset()) == 3


def test_a_seat_pinned_to_bash_runs_on_a_chosen_runtime_and_another_program_is_one_line(tmp_path, monkeypatch):
    folder = tmp_path / "environments" / "vf_v1_coder"
    folder.mkdir(parents=True)
    (folder / "vf_v1_coder.py").write_text(
        "import verifiers.v1 as vf\n\n"
        "class CoderConfig(vf.EnvConfig):\n"
        "    coder: vf.AgentConfig = vf.AgentConfig(harness={'id': 'bash'})\n\n"
        "class CoderEnv(vf.Env[CoderConfig]):\n"
        "    async def run(self, task, agents):\n"
        "        await agents.coder.run(task)\n\n"
        "class Tasks(vf.Taskset[vf.Task, vf.TasksetConfig]):\n"
        "    def load(self):\n"
        "        return [vf.Task(vf.TaskData(idx=0, prompt='hi'))]\n\n"
        "__all__ = ['CoderEnv', 'Tasks']\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"v1 taskset 'vf-v1-coder': seat 'coder': the 'bash' harness runs the "
                                        r"model's shell commands on this machine"):
        load_environment("vf-v1-coder", {})
    chosen = load_environment("vf-v1-coder", {"runtime": {"type": "subprocess"}})
    assert chosen.vf_env.config.coder.harness.id == "primekit-bash-harness"
    (folder / "vf_v1_coder.py").write_text((folder / "vf_v1_coder.py").read_text().replace("'bash'", "'codex'"))
    sys.modules.pop("vf_v1_coder", None)
    with pytest.raises(UserError, match=r"seat 'coder': harness 'codex' runs only in a container"):
        load_environment("vf-v1-coder", {"runtime": {"type": "subprocess"}})


def test_taskset_and_harness_tables_in_gepa_and_rl_toml(tmp_path):
    from gepa_cli.config import load_gepa_toml
    from rl_backend.config import load_rl_config

    body = '[[env]]\nid = "vf-v1-chat"\n\n[env.taskset]\nsplit = "train"\n\n[env.harness]\nmax_turns = 8\n'
    (tmp_path / "rl.toml").write_text('model = "m"\nmax_steps = 1\nbatch_size = 2\nrollouts_per_example = 2\n\n' + body)
    (rl_env,) = load_rl_config(tmp_path / "rl.toml").env
    assert rl_env.args == {"taskset": {"split": "train"}, "harness": {"max_turns": 8}}
    (tmp_path / "gepa.toml").write_text('model = "m"\n\n' + body)
    (gepa_env,) = load_gepa_toml(tmp_path / "gepa.toml")[0].env
    assert gepa_env.args == {"taskset": {"split": "train"}, "harness": {"max_turns": 8}}
    (tmp_path / "twice.toml").write_text('model = "m"\n\n[[env]]\nid = "x"\nargs = { taskset = {} }\n\n[env.taskset]\n')
    with pytest.raises(UserError, match="taskset is set both as a table and in args; set it once"):
        load_gepa_toml(tmp_path / "twice.toml")


@pytest.mark.skipif(not CURRENT, reason="the legacy API is there in verifiers 0.3.1")
def test_legacy_env_under_verifiers_0_4_is_one_line_with_the_install_command(project):
    done = prime_process("eval", "run", "vf-single", "-n", "1", project=project)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: environment 'vf-single' is written for verifiers' legacy API (`import verifiers as "
                           "vf`: SingleTurnEnv, ToolEnv, rubrics, ...), which verifiers 0.4.")
    assert line.endswith("run it with verifiers 0.3.1 in its own venv: pip install 'primekit[verifiers-legacy]'")


def test_resumed_run_keeps_one_trace_line_per_row(tmp_path, monkeypatch):
    """Rows that run again (errored without a score) lose their trace line; the rerun writes the new one."""
    import shutil

    from support.scripted_client import ScriptedClient

    from evalkit.core.errors import ModelCallError
    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import run_eval
    from evalkit.verifiers_compat.v1.traces import episode_id

    envs = VERIFIERS_ENVS
    shutil.copytree(envs / "vf_v1_math", tmp_path / "environments" / "vf_v1_math")
    monkeypatch.chdir(tmp_path)
    config = EvalConfig(env_id="vf-v1-math", num_examples=2, rollouts_per_example=1, output_dir=str(tmp_path / "out"))

    def flaky(messages, sampling, tools):
        return ModelCallError("HTTP 503") if "1+2" in messages[-1]["content"] else "1"

    first = run_eval(config, client=ScriptedClient(flaky))
    assert [r["error_kind"] for r in first.rows] == [None, "model"]
    assert len((first.run_dir / "traces.jsonl").read_text().splitlines()) == 2
    again = run_eval(config.model_copy(update={"resume": str(first.run_dir)}), client=ScriptedClient(["1", "3"]))
    assert [r["error"] for r in again.rows] == [None, None]
    lines = [json.loads(line) for line in (first.run_dir / "traces.jsonl").read_text().splitlines()]
    assert [e["id"] for e in lines] == [episode_id(first.run_dir, 0, 0), episode_id(first.run_dir, 1, 0)]
    assert all(e["ok"] for e in lines)

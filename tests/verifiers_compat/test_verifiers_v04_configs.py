"""verifiers 0.4's run-config dialect on `prime eval run` / `prime gepa run`: `@ config.toml`, a v1-shaped TOML as
the positional, a taskset id with dotted overrides, `--dry-run`; each shape of verifiers' own `configs/` files
plans, maps, notes or is refused in one line (docs/verifiers-configs.md has the table for every upstream file).

The config is validated by verifiers 0.4's own classes, so those tests skip under verifiers 0.3.1 (where the
dialect is one `error:` line naming the extra, tested here too). Real parts: `prime` in a subprocess where a run or
the process's exit is the subject, the deterministic tests/support/hash_server.py model on 127.0.0.1, the v1
tasksets of tests/verifiers_envs/. Plans (`--dry-run`) and refusals are read from `prime` run in this process
(:func:`planned`): a child would import verifiers' config classes again (~8 s of CPU each).
"""

from __future__ import annotations

import json
import subprocess
from functools import partial
from pathlib import Path

import pytest
from click.testing import Result
from support.cli import assert_user_error, prime_in_project, prime_process

from evalkit.core.errors import UserError
from primekit_cli.dialect.args import DialectArgs, is_v1_file, raw_config, take_dialect_tokens

verifiers = pytest.importorskip("verifiers", reason="needs a verifiers extra (make test installs both generations)")

pytestmark = pytest.mark.verifiers
CURRENT = str(verifiers.__version__).startswith("0.4.")
needs_04 = pytest.mark.skipif(not CURRENT, reason="verifiers 0.4's own config classes read the dialect; "
                                                  f"verifiers {verifiers.__version__} is installed")

CHAT_TOML = """\
model = "hash"
num_tasks = 2
num_rollouts = 1
max_concurrent = 4
shuffle = false

[sampling]
temperature = 0.0
max_tokens = 24

[client]
base_url = "{url}"
api_key_var = "HASH_KEY"

[env.taskset]
id = "vf-v1-chat"

[env.agent]
max_turns = 4

[env.agent.harness]
id = "null"

[env.agent.runtime]
type = "subprocess"
"""


@pytest.fixture
def project(verifiers_project: Path) -> Path:
    return verifiers_project


@pytest.fixture(autouse=True)
def hash_key(monkeypatch):
    """The key variable the configs name (the hash server takes any key)."""
    monkeypatch.setenv("HASH_KEY", "x")


@pytest.fixture
def hash_server():
    from support.hash_server import HashServer

    server = HashServer()
    yield server
    server.stop()


@pytest.fixture
def planned(project: Path):
    """``prime ARGS`` in this process, run from ``project`` as :func:`ran` runs it (support.cli.prime_in_project);
    its exit code is the test's to check."""
    return partial(prime_in_project, project)


def planned_ok(result: Result) -> Result:
    """``result`` asserted to have exited 0."""
    assert result.exit_code == 0, result.output[-3000:]
    return result


def ran(project, *args: str) -> subprocess.CompletedProcess:
    """``prime *args`` that must exit 0."""
    done = prime_process(*args, project=project)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# ----- the command line (no verifiers classes needed) ---------------------------------------------
def test_dialect_tokens_leave_primekits_own_flags_to_its_parser():
    rest, found = take_dialect_tokens(["vf-v1-chat", "-m", "x", "--sampling.temperature", "0.5", "@", "a.toml",
                                       "--env.taskset.num-tasks=3", "--rich.show-logs", "-n", "2", "@b.toml",
                                       "--reflection_columns.x", '["a", "b"]'])
    assert rest == ["vf-v1-chat", "-m", "x", "-n", "2"]
    assert found.files == ["a.toml", "b.toml"]
    assert found.overrides == [("sampling.temperature", "0.5"), ("env.taskset.num-tasks", "3"),
                               ("rich.show-logs", "true"), ("reflection_columns.x", ["a", "b"])]
    assert raw_config([], found.overrides[:2], "vf-v1-chat") == {
        "sampling": {"temperature": "0.5"}, "env": {"taskset": {"num_tasks": "3", "id": "vf-v1-chat"}}}
    with pytest.raises(UserError, match="'@' must be followed by a config file path"):
        take_dialect_tokens(["@"])


def test_v1_files_are_told_apart_from_primekits_own_toml():
    assert is_v1_file({"num_tasks": 1, "env": {"taskset": {"id": "gsm8k"}}})
    assert is_v1_file({"env": {"player": {"max_turns": 8}}})
    assert is_v1_file({"model": "m", "num_rollouts": 2})
    assert not is_v1_file({"model": "m", "eval": [{"env_id": "x"}]})
    assert not is_v1_file(
        {"env": {"id": "x", "args": {"a": 1}, "taskset": {"split": "train"}}}
    )  # primekit's GEPA [env]
    assert not is_v1_file({"env": [{"id": "x"}], "gepa": {"max_calls": 5}})


@pytest.mark.skipif(CURRENT, reason="under verifiers 0.4 the dialect runs (the tests below)")
def test_under_verifiers_0_3_1_the_dialect_is_one_line_naming_the_extra(project, planned):
    (project / "chat.toml").write_text(CHAT_TOML.format(url="http://127.0.0.1:9/v1"))
    for args in (["eval", "run", "@", "chat.toml"], ["eval", "run", "chat.toml"],
                 ["eval", "run", "vf-v1-chat", "--sampling.temperature", "0.5"], ["gepa", "run", "@", "chat.toml"]):
        line = assert_user_error(planned(*args, "--dry-run"))
        assert "verifiers 0.3.1 is installed" in line and "pip install 'primekit[verifiers]'" in line


# ----- verifiers 0.4: plans -------------------------------------------------------------------------
@needs_04
def test_file_positional_file_and_dotted_flags_plan_the_same_run(project, planned):
    (project / "chat.toml").write_text(CHAT_TOML.format(url="http://127.0.0.1:9/v1"))
    forms = {
        "@": ["@", "chat.toml"],
        "positional": ["chat.toml"],
        "dotted": ["vf-v1-chat", "-m", "hash", "--client.base-url", "http://127.0.0.1:9/v1",
                   "--client.api_key_var", "HASH_KEY", "--select.limit", "2", "-c", "4",
                   "--sampling.temperature", "0.0", "--sampling.max_tokens", "24", "--env.agent.max_turns", "4",
                   "--env.agent.harness.id", "null", "--env.agent.runtime.type", "subprocess"],
    }
    plans = {}
    for name, args in forms.items():
        done = planned_ok(planned("eval", "run", *args, "--dry-run"))
        plans[name] = json.loads(done.stdout)["evals"]
    assert plans["@"] == plans["positional"] == plans["dotted"]
    (plan,) = plans["@"]
    assert (plan["env_id"], plan["model"], plan["base_url"], plan["api_key_var"]) == (
        "vf-v1-chat", "hash", "http://127.0.0.1:9/v1", "HASH_KEY")
    assert (plan["num_examples"], plan["rollouts_per_example"], plan["max_concurrent"]) == (2, 1, 4)
    assert plan["sampling"] == {"temperature": 0.0, "max_tokens": 24}
    assert plan["env_args"] == {
        "taskset": {},
        "harness": {"max_turns": 4, "id": "null"},
        "runtime": {"type": "subprocess"},
    }


@needs_04
def test_dotted_overrides_lay_over_the_file_and_primekit_flags_over_both(project, planned):
    (project / "chat.toml").write_text(CHAT_TOML.format(url="http://127.0.0.1:9/v1"))
    done = planned_ok(planned("eval", "run", "@", "chat.toml", "--sampling.temperature", "0.5",
                              "--env.taskset.num_tasks", "3", "-n", "3", "-S", '{"top_p": 0.9}', "--dry-run"))
    document = json.loads(done.stdout)
    (plan,) = document["evals"]
    assert plan["sampling"] == {"temperature": 0.5, "max_tokens": 24, "top_p": 0.9}
    assert plan["env_args"]["taskset"] == {"num_tasks": 3} and plan["num_examples"] == 3
    assert document["verifiers"]["env"]["taskset"]["num_tasks"] == 3  # verifiers' own resolved config
    assert document["verifiers"]["select"]["limit"] == 2  # the file's num_tasks, as verifiers spells it
    assert "note: num_tasks -> select.limit" in done.stderr


@needs_04
def test_keys_primekit_does_not_use_are_notes(project, planned):
    (project / "notes.toml").write_text('push = true\nrich = { show_logs = true }\n[serve]\nworkers = 2\n'
                                        '[run]\nname = "mine"\n[env.taskset]\nid = "vf-v1-chat"\n'
                                        '[env.agent]\nmodel = "other"\n')
    done = planned_ok(planned("eval", "run", "@", "notes.toml", "--dry-run"))
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    for expected in ("[serve]: no env-server pool here", "push: no effect: runs stay local",
                     "rich: no effect", "model: not set here", "env.agent.model: no effect: the run's model plays "
                     "every seat", "env.agent.harness: unset; verifiers would run 'bash', primekit runs verifiers' "
                     "'null' chat program", "env.agent.runtime: unset; verifiers would use the hosted 'prime' sandbox",
                     "run.name/run.dir: no effect"):
        assert any(expected in note for note in notes), (expected, notes)
    (plan,) = json.loads(done.stdout)["evals"]
    assert (
        plan["model"] is None and plan["num_examples"] == -1 and plan["rollouts_per_example"] == 1
    )  # verifiers' defaults


# ----- verifiers 0.4: refusals, one line each --------------------------------------------------------
REFUSED = [
    (
        '[env.agent.harness]\nid = "bash"\n',
        "the 'bash' harness runs the model's shell commands on this machine, so it runs only on a runtime you choose",
    ),
    ('[env.agent.harness]\nid = "codex"\n', "env.agent.harness.id = 'codex': harness 'codex' runs only in a container"),
    (
        '[env.agent.harness]\nid = "compact"\n',
        "env.agent.harness.id = 'compact'",
    ),  # refused before verifiers imports it
    ('[env.agent.runtime]\ntype = "docker"\n', "env.agent.runtime: runtime 'docker' needs a docker daemon"),
    ('[env]\nid = "best-of-n"\n', "[env] id = 'best-of-n': primekit runs the taskset's own env"),
    ('[run]\nattach = "ev-1"\n', "run.attach streams into a run on the Prime Intellect platform"),
    ("[select]\nskip = 1\n", "select.skip: primekit takes the first num_tasks tasks"),
    ('[client]\nheaders_from_env = { X-Team = "TEAM" }\n', "client.headers_from_env is not supported"),
    ('max_concurrent = "None"\n', "max_concurrent = None (no limit) is not supported"),
    ("[env.agent]\nmax_turn = 4\n", "unknown key 'env.agent.max_turn'"),
    ("[env.timeout]\nfinalize = 5.0\n", "[env] timeout.finalize: primekit runs one agent at a time"),
]


@needs_04
@pytest.mark.parametrize("body, message", REFUSED, ids=[m.split(":")[0][:40] for _, m in REFUSED])
def test_what_primekit_does_not_run_is_refused_in_one_line(project, monkeypatch, body, message):
    from primekit_cli.dialect.config import eval_plan

    (project / "c.toml").write_text(body + '[env.taskset]\nid = "vf-v1-chat"\n')
    monkeypatch.chdir(project)
    with pytest.raises(UserError) as refused:
        eval_plan(None, DialectArgs(files=["c.toml"]))
    assert message in str(refused.value) and "\n" not in str(refused.value)


@needs_04
def test_a_refusal_on_the_command_line_is_one_error_line_and_exit_2(project):
    (project / "c.toml").write_text('[env.taskset]\nid = "vf-v1-chat"\n[env.agent.harness]\nid = "codex"\n')
    for args in (["eval", "run", "@", "c.toml"], ["gepa", "run", "c.toml", "--dry-run"]):
        assert "env.agent.harness.id = 'codex'" in assert_user_error(prime_process(*args, project=project))


@needs_04
def test_a_multi_seat_env_with_one_limit_set_for_every_seat_plans_and_differing_seats_are_refused(project, planned):
    base = '[env.taskset]\nid = "vf-v1-seats"\n[env]\noffset = 2\n'
    (project / "same.toml").write_text(base + '[env.solver]\nmax_turns = 3\n[env.checker]\nmax_turns = 3\n')
    done = planned_ok(planned("eval", "run", "same.toml", "--dry-run"))
    (plan,) = json.loads(done.stdout)["evals"]
    assert plan["env_args"] == {"offset": 2, "taskset": {}, "harness": {"max_turns": 3}}
    (project / "differ.toml").write_text(base + '[env.solver]\nmax_turns = 3\n')
    refused = assert_user_error(planned("eval", "run", "differ.toml", "--dry-run"))
    assert "seats solver, checker would get different limits" in refused


@needs_04
def test_a_builtin_environment_or_no_taskset_is_one_line(project, planned):
    # --sampling.* applies to any environment (tests/eval/test_dotted_flags_any_env.py); a taskset setting does not
    line = assert_user_error(planned("eval", "run", "reverse-text", "--env.taskset.split", "train", "--dry-run"))
    assert "'reverse-text' is not a v1 taskset" in line
    (project / "none.toml").write_text("num_rollouts = 2\n")
    assert "no taskset: give one" in assert_user_error(planned("eval", "run", "@", "none.toml"))


# ----- verifiers 0.4: the same rows ------------------------------------------------------------------
@needs_04
@pytest.mark.slow
def test_a_v1_file_and_the_same_run_as_flags_give_the_same_rows(project, hash_server, monkeypatch):
    (project / "chat.toml").write_text(CHAT_TOML.format(url=hash_server.base_url))
    ran(project, "eval", "run", "@", "chat.toml", "-o", "by_file")
    ran(project, "eval", "run", "vf-v1-chat", "-m", "hash", "-b", hash_server.base_url, "-k", "HASH_KEY",
        "-n", "2", "-r", "1", "-c", "4", "-S", '{"temperature": 0.0, "max_tokens": 24}',
        "-a", '{"harness": {"id": "null", "max_turns": 4}}', "-o", "by_flags")

    def rows(folder: str) -> list[dict]:
        (results,) = (project / folder).glob("evals/*/*/results.jsonl")
        found = [json.loads(line) for line in results.read_text().splitlines()]
        for row in found:
            row.pop("timing")
        return sorted(found, key=lambda r: (r["example_id"], r["rollout_idx"]))

    file_rows, flag_rows = rows("by_file"), rows("by_flags")
    assert len(file_rows) == 2 and file_rows == flag_rows
    assert {len(r["completion"]) for r in file_rows} == {3}  # two model turns: the scripted user's second ran
    assert not list((project / "by_flags").glob("evals/*/*/logs"))  # verifiers' layout only for its own configs
    (run_dir,) = (project / "by_file").glob("evals/*/*")
    check_verifiers_layout(project, run_dir, monkeypatch)


def check_verifiers_layout(project, run_dir, monkeypatch):
    """The launch TOML, verifiers' resolved config (read back by its own classes, pointing at the run dir) and the
    attempt's eval.log, where verifiers' eval puts them."""
    from verifiers.v1.cli.output import output_path, saved_config_path
    from verifiers.v1.configs.cli.eval import EvalConfig

    assert (run_dir / "configs" / "eval.toml").read_text() == (project / "chat.toml").read_text()
    monkeypatch.syspath_prepend(str(project / "environments" / "vf_v1_chat"))
    saved = EvalConfig.model_validate_json(saved_config_path(run_dir).read_text())
    assert output_path(saved).resolve() == run_dir.resolve() and saved.env.taskset.id == "vf-v1-chat"
    assert (saved.model, saved.num_rollouts, saved.select.limit, saved.env.agent.max_turns) == ("hash", 1, 2, 4)
    log = (run_dir / "logs" / "latest" / "eval.log").read_text()
    assert "note: num_tasks -> select.limit" in log and "status: complete, 2 rows" in log


# ----- verifiers 0.4: GEPA ---------------------------------------------------------------------------
GEPA_TOML = """\
max_total_rollouts = 12
reflection_minibatch_size = 2
reflection_columns = ["turns"]
initial_prompt = "Answer with the number only."
num_train = 2
num_val = 2
reflection_model = "hash"
""" + CHAT_TOML.replace("num_tasks = 2\n", "").replace("num_rollouts = 1\n", "").replace(
    'id = "vf-v1-chat"\n', 'id = "vf-v1-chat"\nnum_tasks = 6\n'
)


@needs_04
def test_gepa_reads_the_v1_gepa_keys(project, monkeypatch, planned):
    from primekit_cli.dialect.config import gepa_plan

    toml = GEPA_TOML.replace(
        "[sampling]", '[reflection_client]\nbase_url = "{url}"\napi_key_var = "HASH_KEY"\n\n[sampling]'
    )
    (project / "gepa.toml").write_text(toml.format(url="http://127.0.0.1:9/v1"))
    done = planned_ok(planned("gepa", "run", "@", "gepa.toml", "--dry-run"))
    assert "budget 12 buys" in done.stderr and "minibatch 2" in done.stderr and "train 2, val 2" in done.stderr
    monkeypatch.chdir(project)
    fields = gepa_plan(None, DialectArgs(files=["gepa.toml"])).fields
    assert (fields["max_calls"], fields["minibatch_size"], fields["state_columns"], fields["initial_prompt"]) == (
        12, 2, ["turns"], "Answer with the number only.")
    assert fields["envs"] == [{"id": "vf-v1-chat", "args": {"taskset": {"num_tasks": 6},
                                                            "harness": {"max_turns": 4, "id": "null"},
                                                            "runtime": {"type": "subprocess"}},
                               "extra_env_kwargs": {}}]
    (project / "other.toml").write_text(toml.format(url="http://127.0.0.1:9/v1").replace(
        '[reflection_client]\nbase_url = "http://127.0.0.1:9/v1"', '[reflection_client]\nbase_url = "http://127.0.0.1:8/v1"'))
    assert "reflection_client: primekit's GEPA sends the reflection model" in assert_user_error(
        planned("gepa", "run", "@", "other.toml", "--dry-run"))


@needs_04
@pytest.mark.slow
def test_the_initial_prompt_is_the_seed_candidate(project, hash_server):
    (project / "gepa.toml").write_text(GEPA_TOML.format(url=hash_server.base_url))
    ran(project, "gepa", "run", "@", "gepa.toml", "-o", "gepa_run")
    first = json.loads((project / "gepa_run" / "results.jsonl").read_text().splitlines()[0])
    assert first["info"]["system_prompt"] == "Answer with the number only."

"""`prime gepa run` as a user types it: configs, bad input (one `error:` line, exit 2), the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import REPO
from support.gepa_job import gepa_run
from support.scripted_client import ScriptedClient
from typer.testing import CliRunner

from gepa_cli import runner as runner_module
from gepa_cli.config import GepaJobConfig, build_job_config, load_gepa_toml, toml_to_job_fields
from gepa_cli.data import build_examples

cli = CliRunner()


@pytest.mark.parametrize(
    "args, message",
    [
        (["nosuchenv"], "unknown environment 'nosuchenv'"),
        (["arithmetic", "-N", "0"], "'num_val'"),
        (["arithmetic", "-B", "5", "-N", "8"], "budget 5 buys no proposal"),
        (["arithmetic", "-B", "21", "-N", "8"], "raise -B/--max-calls to at least 22, or lower -N/--num-val"),
        (["arithmetic", "-S", "{bad"], "-S/--sampling-args is not valid JSON"),
        (["arithmetic", "-a", "[1]"], "env args must be a JSON object"),
        (["missing.toml"], "config file not found"),
    ],
)
def test_bad_input_is_one_error_line(args, message):
    code, output = gepa_run(*args)
    assert code == 2
    assert "error:" in output and message in output
    assert "Traceback" not in output


def test_bad_toml(tmp_path):
    bad_key = tmp_path / "bad.toml"
    bad_key.write_text('[[env]]\nid = "arithmetic"\n[gepa]\nmax_callz = 3\n')
    code, output = gepa_run(str(bad_key))
    assert code == 2 and "unknown key 'gepa.max_callz'" in output
    broken = tmp_path / "broken.toml"
    broken.write_text('model = "x\n')
    code, output = gepa_run(str(broken))
    assert code == 2 and "is not valid TOML" in output


@pytest.mark.parametrize("name", ["arithmetic.toml", "reverse-text.toml"])
def test_shipped_configs_parse(name):
    parsed, base = load_gepa_toml(REPO / "configs" / "gepa" / name)
    config = build_job_config(toml_to_job_fields(parsed, base), name)
    assert config.model == "local/smollm2-135m" and config.sampling["max_tokens"] == 64


def test_toml_single_env_table_and_flags_win(tmp_path):
    file = tmp_path / "g.toml"
    file.write_text(
        'model = "m1"\nendpoints_path = "ep.toml"\n[env]\nid = "arithmetic"\nargs = {difficulty = "easy"}\n'
        "[gepa]\nmax_calls = 40\nnum_val = 4\nstate_columns = ['x']\n[sampling]\nmax_tokens = 8\n"
    )
    parsed, base = load_gepa_toml(file)
    fields = toml_to_job_fields(parsed, base)
    fields.update(max_calls=99)
    config = build_job_config(fields, str(file))
    assert config.envs[0].args == {"difficulty": "easy"} and config.max_calls == 99 and config.num_val == 4
    assert config.endpoints_path == str(tmp_path / "ep.toml") and config.state_columns == ["x"]
    assert config.sampling == {"max_tokens": 8} and config.teacher == "m1"


def test_examples_are_uniform_by_environment():
    from evalkit.loading.resolve import load_environment

    envs = [load_environment("arithmetic"), load_environment("reverse-text")]
    train, val = build_examples(envs, ["arithmetic", "reverse-text"], num_train=7, num_val=4, seed=0)
    assert [e.env_id for e in train].count("arithmetic") == 4 and [e.env_id for e in train].count("reverse-text") == 3
    assert [e.env_id for e in val] == ["arithmetic", "reverse-text"] * 2
    assert [e.uid for e in val] == [0, 1, 2, 3]


def test_single_split_env_is_split_disjointly():
    from evalkit.envs import SingleTurnEnv

    env = SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": str(i)} for i in range(10)])
    train, val = build_examples([env], ["one"], num_train=20, num_val=4, seed=1)
    assert len(val) == 4 and len(train) == 6
    assert not {e.row["question"] for e in train} & {e.row["question"] for e in val}


def _fake_clients(teacher_reply):
    def factory(config: GepaJobConfig):
        task = ScriptedClient(lambda m, s, t: "42")
        return task, ScriptedClient(teacher_reply, model="teacher")

    return factory


def test_reflection_failure_exits_2(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_module, "open_clients", _fake_clients(lambda m, s, t: ""))
    code, output = gepa_run("arithmetic", "-B", "40", "-n", "6", "-N", "4", "-o", str(tmp_path / "r"))
    assert code == 2
    assert "error: reflection model 'teacher' gave no usable proposal in 3 attempts (last: empty reply)" in output
    assert json.loads((tmp_path / "r" / "metadata.json").read_text())["status"] == "failed"


def test_summary_and_resume_flag(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_module, "open_clients", _fake_clients(lambda m, s, t: "```\nSay 42.\n```"))
    monkeypatch.chdir(tmp_path)
    code, output = gepa_run("arithmetic", "-B", "20", "-n", "6", "-N", "4", "-S", '{"max_tokens": 8}')
    assert code == 0, output
    runs = list((tmp_path / "outputs" / "gepa").glob("arithmetic--local--smollm2-135m/*"))
    assert len(runs) == 1
    assert "seed val score" in output and "rollouts" in output
    relative = runs[0].relative_to(tmp_path)
    assert (
        f"prime eval run arithmetic -m local/smollm2-135m -S '{{\"max_tokens\": 8}}' "
        f"--system-prompt-file {relative}/system_prompt.txt"
        in output
    )
    meta = json.loads((runs[0] / "metadata.json").read_text())
    assert meta["total_metric_calls"] <= 20 and meta["model"] == "local/smollm2-135m"
    # `--resume` alone continues the newest run of this env+model and spends nothing once it is done
    code, output = gepa_run("arithmetic", "--resume")
    assert code == 0, output
    assert "resuming" in output
    assert json.loads((runs[0] / "metadata.json").read_text())["total_metric_calls"] == meta["total_metric_calls"]
    reads = []
    from evalkit.core import runs as run_dirs

    read_metadata = run_dirs.read_metadata
    monkeypatch.setattr(run_dirs, "read_metadata", lambda path: reads.append(Path(path)) or read_metadata(path))
    code, output = gepa_run("--resume", str(runs[0]))
    assert code == 0, output
    assert reads == [runs[0]]  # resolving the run reads its metadata; the CLI and the job reuse that
    monkeypatch.setattr(run_dirs, "read_metadata", read_metadata)
    code, output = gepa_run("arithmetic", "--resume", str(tmp_path / "nope"))
    assert code == 2 and "not a GEPA run directory" in output
    code, output = gepa_run("arithmetic", "-o", str(runs[0]))
    assert code == 2 and "already holds a GEPA run; continue it with --resume" in output
    code, output = gepa_run("arithmetic", "extra")
    assert code == 2 and "unexpected extra argument 'extra'" in output


def test_no_keys_in_outputs(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_module, "open_clients", _fake_clients(lambda m, s, t: "```\nSay 42.\n```"))
    monkeypatch.setenv("MY_SECRET_KEY", "sk-very-secret-123")
    code, output = gepa_run("arithmetic", "-B", "14", "-n", "6", "-N", "4", "-k", "MY_SECRET_KEY", "-o",
                            str(tmp_path / "r"))
    assert code == 0, output
    for file in (tmp_path / "r").rglob("*"):
        if file.is_file() and file.suffix != ".bin":
            assert "sk-very-secret-123" not in file.read_text(errors="ignore")

"""Several components: GEPA rewrites a native tool environment's tool descriptions beside the system prompt,
writes them to tools.json, and ``prime eval run --tools-file`` sends them in a later eval's requests.

The scripted task model calls the tool only when the tool's description says ``CALL ME`` (and answers
easy questions only when the system prompt holds ``KEYWORD``); the scripted teacher adds what is
missing to whichever component gepa asks it to rewrite.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.gepa_job import config, read_jsonl, run
from support.gepa_tools import SEED_PROMPT, component_teacher, exact, lookup, merge_task, tool_env, tool_task
from support.scripted_client import ScriptedClient
from typer.testing import CliRunner

from evalkit.core.errors import UserError
from evalkit.envs import Rubric, ToolEnv
from evalkit.eval.config import EvalConfig
from evalkit.eval.runner import run_eval


def test_components_optimize_tool_descriptions_and_write_tools_json(tmp_path):
    cfg = config(tmp_path, max_calls=120, components=["system_prompt", "tools"], stop_at_score=1.0)
    outcome, _, teach = run(cfg, env=tool_env(), task=ScriptedClient(tool_task),
                            teach=ScriptedClient(component_teacher, model="teacher"))
    run_dir = tmp_path / "run"
    assert outcome.best_val_score == 1.0 and outcome.seed_val_score == 0.0
    tools = json.loads((run_dir / "tools.json").read_text())
    assert set(tools) == {"lookup"} and "CALL ME" in tools["lookup"]
    assert "KEYWORD" in (run_dir / "system_prompt.txt").read_text()
    rows = read_jsonl(run_dir / "results.jsonl")
    assert json.loads(rows[0]["info"]["components"]["tools"]) == {"lookup": "Does something."}
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert f"--tools-file {run_dir / 'tools.json'}" in meta["verify_command"]
    asked = [r["messages"][0]["content"] for r in teach.requests]
    assert any('"lookup": "Does something."' in a for a in asked)  # the teacher was shown the descriptions


def test_a_tools_proposal_that_is_not_the_json_object_is_asked_again(tmp_path):
    replies = iter(["```\nnot json\n```", '```\n{"other": "x"}\n```'])

    def picky(messages, sampling, tools):
        current = messages[0]["content"].split("```")[1].strip()
        if current.startswith("{"):
            return next(replies, None) or component_teacher(messages, sampling, tools)
        return component_teacher(messages, sampling, tools)

    teach = ScriptedClient(picky, model="teacher")
    outcome, _, _ = run(config(tmp_path, max_calls=120, components=["system_prompt", "tools"], stop_at_score=1.0),
                        env=tool_env(), task=ScriptedClient(tool_task), teach=teach)
    assert outcome.best_val_score == 1.0
    log = (tmp_path / "run" / "gepa.log").read_text()
    assert "not usable: not a JSON object" in log and "exactly the keys ['lookup']" in log


def test_unknown_or_missing_components_are_refused(tmp_path):
    with pytest.raises(Exception, match="unknown component 'prompt'"):
        config(tmp_path, components=["system_prompt", "prompt"])
    with pytest.raises(UserError, match="has no tools component.*offers: system_prompt"):
        run(config(tmp_path, components=["system_prompt", "tools"]))  # the plain toy env has no tools
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("use_merge", [True, False])
def test_use_merge_joins_two_candidates(tmp_path, use_merge):
    rows = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(80)]
    env = ToolEnv(dataset=rows[:40], eval_dataset=rows[40:], system_prompt=SEED_PROMPT, rubric=Rubric([exact]),
                  tools=[lookup], max_turns=3)
    cfg = config(tmp_path, max_calls=200, num_val=8, components=["system_prompt", "tools"], use_merge=use_merge,
                 acceptance_criterion="improvement_or_equal", seed=1)
    run(cfg, env=env, task=ScriptedClient(merge_task), teach=ScriptedClient(component_teacher, model="teacher"))
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    merged = [r["info"] for r in rows if len(r["info"]["parent_candidate_idxs"]) == 2]
    assert bool(merged) == use_merge
    for info in merged:  # a merge takes each component from one of its parents
        first, second = (rows[p]["info"] for p in info["parent_candidate_idxs"])
        assert info["system_prompt"] in (first["system_prompt"], second["system_prompt"])
        assert info["components"]["tools"] in (first["components"]["tools"], second["components"]["tools"])


def test_eval_tools_file_changes_the_requests(tmp_path):
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps({"lookup": "CALL ME for every question."}))

    def described(descriptions):
        client = ScriptedClient(lambda m, s, t: "a1")
        cfg = EvalConfig(env_id="toy", model="scripted", num_examples=2, rollouts_per_example=1,
                         output_dir=str(tmp_path / "out"), tool_descriptions=descriptions)
        run_eval(cfg, client=client, env=tool_env())
        return {t["function"]["description"] for r in client.requests for t in r["tools"]}

    from evalkit.envs.tool_descriptions import read_tools_file

    assert described(None) == {"Does something."}
    assert described(read_tools_file(tools_file)) == {"CALL ME for every question."}


def test_eval_tools_file_errors_are_one_line(tmp_path):
    from primekit_cli.app import app

    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps({"nope": "x"}))
    result = CliRunner().invoke(app, ["eval", "run", "fact-search", "-m", "m", "-b", "http://127.0.0.1:9/v1",
                                      "-n", "1", "-r", "1", "--tools-file", str(bad), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "error: --tools-file: no tool named 'nope'" in result.output
    assert "its tools: search, read" in " ".join(result.output.split())
    Path(bad).write_text("[1]")
    result = CliRunner().invoke(app, ["eval", "run", "fact-search", "--tools-file", str(bad)])
    assert result.exit_code == 2 and "must be a JSON object" in result.output


def test_list_components_shows_the_tool_descriptions():
    from primekit_cli.app import app

    result = CliRunner().invoke(app, ["gepa", "run", "fact-search", "--list-components"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("system_prompt:\n    Answer the question using the tools.")
    assert '"search": "Find documents' in result.output and '"read": "Read the full text' in result.output

"""The eval runner as a library: rows, metadata, summary numbers, failures as data, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import REPO
from support.fault_server import FaultServer
from support.scripted_client import ScriptedClient

from evalkit.clients.openai_client import OpenAIClient
from evalkit.core.errors import ConfigError, ModelCallError, UserError
from evalkit.envs import MultiTurnEnv, Rubric, SingleTurnEnv
from evalkit.eval.config import EvalConfig, load_eval_file
from evalkit.eval.results import read_rows
from evalkit.eval.runner import run_eval
from evalkit.eval.summary import error_lines, summarize

ROWS = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(4)]


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


def make_env(**kwargs) -> SingleTurnEnv:
    return SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([exact]), **kwargs)


def answer_or_wrong(messages, sampling, tools):
    """Right for every question but q2."""
    question = messages[-1]["content"]
    return "nope" if question == "q2" else "a" + question[1:]


def config(tmp_path: Path, **kwargs) -> EvalConfig:
    return EvalConfig(env_id="test-env", model="scripted", output_dir=str(tmp_path), num_examples=4,
                      rollouts_per_example=2, **kwargs)


def test_rows_metadata_and_summary(tmp_path):
    result = run_eval(config(tmp_path, state_columns=["turn"]), client=ScriptedClient(answer_or_wrong), env=make_env())
    rows = [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and len({(r["example_id"], r["rollout_idx"]) for r in rows}) == 8
    assert set(rows[0]) >= {"example_id", "rollout_idx", "prompt", "completion", "answer", "info", "reward", "metrics",
                            "error", "stop_condition", "is_truncated", "timing", "token_usage", "turn"}
    meta = json.loads((result.run_dir / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["num_errors"] == 0
    assert meta["avg_reward"] == pytest.approx(0.75)
    assert meta["pass_at_k"] == {"1": 0.75, "2": 0.75}
    assert meta["avg_metrics"] == {"exact": 0.75}
    assert (
        meta["total_usage"]["output_tokens"] == 8 and meta["usage"]["output_tokens"] == 1.0
    )  # vf-eval: mean per rollout
    assert result.run_dir.parent.name == "test-env--scripted"
    assert len(result.states) == 8 and result.complete


def test_pass_at_k_unbiased_and_diversity():
    rows = [{"example_id": 0, "rollout_idx": i, "reward": r} for i, r in enumerate([1.0, 0.0, 0.0, 0.0])]
    rows += [{"example_id": 1, "rollout_idx": i, "reward": 0.5} for i in range(4)]
    summary = summarize(rows, 4)
    assert summary["pass_at_k"]["1"] == pytest.approx((0.25 + 0) / 2)
    assert summary["pass_at_k"]["2"] == pytest.approx((1 - 3 / 6) / 2)
    assert summary["pass_at_k"]["4"] == pytest.approx(0.5)
    assert summary["pass_all_k"]["1"] == pytest.approx(0.125) and summary["pass_all_k"]["2"] == 0.0
    assert summary["reward_diversity"] == 0.5
    assert summarize(rows, 4, pass_threshold=0.5)["pass_at_k"]["1"] == pytest.approx(0.625)


def test_failures_are_rows_not_crashes(tmp_path):
    def boom(completion) -> float:
        if completion[-1]["content"] == "a1":
            raise ValueError("bad reward")
        return 1.0

    def reply(messages, sampling, tools):
        return ModelCallError("server gone") if messages[-1]["content"] == "q2" else {"q0": "a0", "q1": "a1"}.get(
            messages[-1]["content"], "z")

    env = SingleTurnEnv(eval_dataset=ROWS, rubric=Rubric([boom]))
    result = run_eval(config(tmp_path), client=ScriptedClient(reply), env=env)
    by_example = {r["example_id"]: r for r in result.rows}
    assert "bad reward" in by_example[1]["error"] and by_example[1]["reward"] == 0.0
    assert "server gone" in by_example[2]["error"] and by_example[2]["reward"] == 0.0
    assert by_example[0]["error"] is None and by_example[0]["reward"] == 1.0
    assert result.metadata["num_errors"] == 4 and result.metadata["status"] == "complete_with_errors"
    assert {r["example_id"]: r["error_kind"] for r in result.rows if r["error"]} == {1: "reward", 2: "model"}
    # the model errors are not scores: 6 scored rows (2 of them with a raising reward function, scored 0)
    assert result.metadata["num_scored"] == 6 and result.metadata["avg_reward"] == pytest.approx(4 / 6)
    assert result.metadata["errors_by_kind"] == {"model": 2, "reward": 2} and result.metadata["avg_error"] == 0.5
    assert sorted(error_lines(result.rows)) == ["2 × [model] model call failed: server gone",
                                                "2 × [reward] reward function boom raised ValueError: bad reward"]


class Game(MultiTurnEnv):
    def env_response(self, messages, state):
        if state["answer"] == "a1":
            raise RuntimeError("env exploded")
        return {"role": "user", "content": "again"}


def test_env_response_that_raises_errors_only_its_rollout(tmp_path):
    env = Game(eval_dataset=ROWS, rubric=Rubric([exact]), max_turns=2)
    result = run_eval(config(tmp_path), client=ScriptedClient(["x"]), env=env)
    errors = {r["example_id"] for r in result.rows if r["error"]}
    assert errors == {1}
    assert all("env exploded" in r["error"] for r in result.rows if r["error"])
    assert {r["stop_condition"] for r in result.rows if not r["error"]} == {"max_turns"}


def test_model_faults_end_to_end_against_http_server(tmp_path):
    """Each prompt's first five requests fail, one fault of each kind; the sixth succeeds.

    With five retries every rollout recovers, except the prompt the server always fails, which
    becomes an error row with reward 0 while the run completes.
    """
    server = FaultServer("--faults", "429,503,drop,badjson,empty")
    try:
        rows = [{"question": f"w{i}", "answer": f"w{i}"[::-1]} for i in range(5)] + [
            {"question": "ALWAYS_FAIL", "answer": "x"}]
        env = SingleTurnEnv(eval_dataset=rows, rubric=Rubric([exact]))
        client = OpenAIClient("m", server.base_url, max_retries=5, backoff_base_s=0.01)
        cfg = EvalConfig(env_id="faulty", model="m", output_dir=str(tmp_path), num_examples=-1, rollouts_per_example=1)
        result = run_eval(cfg, client=client, env=env)
    finally:
        server.stop()
    assert len(result.rows) == 6
    assert [r["example_id"] for r in result.rows if r["error"]] == [5]
    assert "HTTP 500" in result.rows[5]["error"] and "after 6 attempts" in result.rows[5]["error"]
    assert [r["reward"] for r in result.rows] == [1.0] * 5 + [0.0]
    assert result.rows[5]["error_kind"] == "model"
    assert result.metadata["num_errors"] == 1 and result.metadata["status"] == "complete_with_errors"
    assert result.metadata["avg_reward"] == 1.0 and result.metadata["num_scored"] == 5  # the failure is not a 0


def test_resume_drops_half_line_and_duplicates(tmp_path):
    client = ScriptedClient(answer_or_wrong)
    first = run_eval(config(tmp_path), client=client, env=make_env())
    path = first.run_dir / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # Keep example 0's group and a duplicate of it, then half a row, as a kill mid-write would leave.
    kept = [line for line in lines if json.loads(line)["example_id"] == 0]
    path.write_text("".join(kept + kept[:1]) + kept[0][: len(kept[0]) // 2])
    meta = json.loads((first.run_dir / "metadata.json").read_text())
    meta["status"] = "incomplete"
    (first.run_dir / "metadata.json").write_text(json.dumps(meta))

    second = run_eval(config(tmp_path, resume="latest"), client=client, env=make_env())
    assert second.run_dir == first.run_dir
    assert second.resumed_rows == 2 and len(second.states) == 6
    rows = read_rows(second.run_dir)
    assert sorted((r["example_id"], r["rollout_idx"]) for r in rows) == [(e, i) for e in range(4) for i in range(2)]
    raw = path.read_text().splitlines()
    assert all(json.loads(line) for line in raw)  # the half line was truncated away
    assert second.metadata["status"] == "complete" and second.metadata["avg_reward"] == pytest.approx(0.75)


def test_resume_with_other_settings_is_refused(tmp_path):
    first = run_eval(config(tmp_path), client=ScriptedClient(["a0"]), env=make_env())
    with pytest.raises(UserError, match="different settings.*rollouts_per_example"):
        run_eval(config(tmp_path, resume=str(first.run_dir)).model_copy(update={"rollouts_per_example": 3}),
                 client=ScriptedClient(["a0"]), env=make_env())
    # latest with other sampling starts a new run rather than mixing settings
    other = run_eval(config(tmp_path, resume="latest", sampling={"temperature": 0.3}), client=ScriptedClient(["a0"]),
                     env=make_env())
    assert other.run_dir != first.run_dir and other.notes


def test_system_prompt_is_used_and_hashed(tmp_path):
    client = ScriptedClient(["a0"])
    result = run_eval(config(tmp_path, system_prompt="Be brief."), client=client, env=make_env(system_prompt="Old"))
    assert client.requests[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert result.metadata["system_prompt_sha256"] is not None and len(result.metadata["system_prompt_sha256"]) == 64


def test_toml_config_entries_defaults_and_relative_paths(tmp_path):
    (tmp_path / "prompt.txt").write_text("From file.")
    (tmp_path / "eval.toml").write_text(
        'model = "m1"\nnum_examples = 3\noutput_dir = "out"\n[sampling]\ntemperature = 0.5\n\n'
        '[[eval]]\nid = "reverse-text"\nargs = { num_eval_examples = 7 }\nsystem_prompt_file = "prompt.txt"\n'
        '[eval.sampling]\nmax_tokens = 9\n\n'
        '[[eval]]\nid = "alphabet-sort"\nrollouts_per_example = 1\nmodel = "m2"\n'
    )
    first, second = load_eval_file(tmp_path / "eval.toml", {"num_examples": 2})
    assert first.env_args == {"num_eval_examples": 7} and first.sampling == {"temperature": 0.5, "max_tokens": 9}
    assert first.system_prompt == "From file." and first.output_dir == str(tmp_path / "out")
    assert first.num_examples == 2 and second.model == "m2" and second.rollouts_per_example == 1


def test_toml_errors_name_the_problem(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('model = "m"\n[[eval]]\nid = "x"\nbogus = 1\n')
    with pytest.raises(ConfigError, match="unknown key 'eval.0.bogus'"):
        load_eval_file(bad)
    bad.write_text('model = "m"\n[[eval]\nid = "x"\n')
    with pytest.raises(ConfigError, match="line 2"):
        load_eval_file(bad)


def test_shipped_eval_configs_load():
    root = REPO / "configs" / "eval"
    files = sorted(root.glob("*.toml"))
    assert files
    for file in files:
        for cfg in load_eval_file(file):
            assert cfg.env_id and cfg.rollouts_per_example >= 1


def test_zero_valued_sampling_settings_are_recorded_and_kept(tmp_path):
    """Greedy (temperature 0) and seed 0 are settings: recorded, matched on resume, and passed on
    (the RL trainer's greedy evals hand their sampling to the eval runner as a dict)."""
    from evalkit.core.types import SamplingArgs

    greedy = SamplingArgs(temperature=0.0, seed=0, logprobs=False)
    assert greedy.to_dict() == {"temperature": 0.0, "seed": 0}
    assert SamplingArgs.from_dict(greedy.to_dict()).temperature == 0.0
    client = ScriptedClient(["a0"])
    first = run_eval(config(tmp_path, sampling={"temperature": 0}), client=client, env=make_env())
    assert first.metadata["sampling_args"] == {"temperature": 0}
    assert client.requests[0]["sampling"].temperature == 0

"""What models, environments and reward functions hand back is untrusted: stored as valid UTF-8
JSON with finite numbers, whatever they return.

Model replies come from a real HTTP server on 127.0.0.1 (tests/support/fault_server.py): its ``surrogate``
fault answers with a lone UTF-16 surrogate (an emoji cut in half), which real servers emit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import prime
from support.fault_server import FaultServer
from support.scripted_client import ScriptedClient

from evalkit.core.untrusted import REPLACEMENT, json_bytes, row_line, valid_text
from evalkit.envs import Rubric, SingleTurnEnv
from evalkit.eval.config import EvalConfig
from evalkit.eval.runner import run_eval

HALF_EMOJI = "\ud83d"


def strict_rows(path: Path) -> list[dict]:
    """Rows of a JSONL file that must be valid UTF-8 and strict JSON (no NaN, no lone surrogates)."""
    text = path.read_bytes().decode("utf-8")  # raises on invalid UTF-8

    def refuse(constant: str):
        raise AssertionError(f"{path} holds a bare {constant}")

    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


def test_a_reply_with_a_lone_surrogate_is_stored_repaired_and_the_row_says_so(tmp_path):
    """Before: UnicodeEncodeError in ResultsWriter.write_group, results.jsonl empty, every rollout lost."""
    server = FaultServer("--always", "surrogate")
    try:
        result = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-n", "2", "-r", "2",
                       "--max-retries", "0", "-o", str(tmp_path))
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "evals" / "reverse-text--stub").iterdir()
    rows = strict_rows(run_dir / "results.jsonl")
    assert len(rows) == 4
    for row in rows:
        assert row["completion"][-1]["content"] == f"half an emoji: {REPLACEMENT}, then more"
        assert row["replaced_code_points"] == 1 and row["error"] is None
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "complete"
    view = prime("eval", "view", str(run_dir))
    html = prime("eval", "view", str(run_dir), "--html")
    again = prime("eval", "run", "reverse-text", "-m", "stub", "-b", "http://127.0.0.1:9/v1", "-n", "2", "-r", "2",
                  "-o", str(tmp_path), "-R")
    assert view.exit_code == 0 and REPLACEMENT in view.output
    assert html.exit_code == 0 and (run_dir / "report.html").read_bytes().decode("utf-8")
    assert again.exit_code == 0 and "nothing to resume" in again.output  # every row is there


def test_rows_that_escape_a_lone_surrogate_are_read_back_repaired(tmp_path):
    """A results.jsonl written by another tool (``ensure_ascii`` JSON escapes the surrogate): view and HTML
    used to crash printing it."""
    env = SingleTurnEnv(eval_dataset=[{"question": "q", "answer": "a"}], rubric=Rubric([lambda completion: 1.0]))
    config = EvalConfig(env_id="t", model="m", output_dir=str(tmp_path), num_examples=1, rollouts_per_example=1)
    run_dir = run_eval(config, client=ScriptedClient(["fine"]), env=env).run_dir
    row = json.loads((run_dir / "results.jsonl").read_text())
    row["completion"][0]["content"] = "cut " + HALF_EMOJI
    (run_dir / "results.jsonl").write_text(json.dumps(row) + "\n")  # ASCII: "cut \ud83d" as an escape
    view = prime("eval", "view", str(run_dir))
    html = prime("eval", "view", str(run_dir), "--html")
    assert view.exit_code == 0 and f"cut {REPLACEMENT}" in view.output, view.output
    assert html.exit_code == 0 and f"cut {REPLACEMENT}" in (run_dir / "report.html").read_text(encoding="utf-8")


def test_gepa_stores_a_teacher_prompt_with_a_lone_surrogate(tmp_path):
    from support import report_runs

    def teacher(messages, sampling, tools):
        current = messages[0]["content"].split("```")[1].strip()
        return f"Better:\n```\n{current} Use KEYWORD {HALF_EMOJI}.\n```"

    from gepa_cli.config import EnvSpec, GepaJobConfig
    from gepa_cli.runner import run_gepa

    config = GepaJobConfig(envs=[EnvSpec(id="toy")], model="scripted", max_calls=40, num_train=6, num_val=4,
                           minibatch_size=2, max_concurrent=4, run_dir=str(tmp_path / "run"), stop_at_score=1.0)
    clients = (ScriptedClient(report_runs.gepa_task), ScriptedClient(teacher, model="teacher"))
    run_dir = run_gepa(config, clients=clients, envs=[report_runs.gepa_env()], show_progress=False).run_dir
    assert (run_dir / "system_prompt.txt").read_bytes().decode("utf-8").endswith(f"Use KEYWORD {REPLACEMENT}.")
    best = [row for row in strict_rows(run_dir / "results.jsonl") if row["info"]["is_best"]]
    assert best[0]["replaced_code_points"] == 2  # in the prompt and in its diff from the seed
    assert REPLACEMENT in best[0]["info"]["system_prompt"]


def test_writers_repair_text_and_numbers_only_when_needed():
    assert valid_text("\ud83d\ude00") == ("\U0001F600", 0)  # a pair written as two code points: joined
    assert valid_text(f"a{HALF_EMOJI}b{HALF_EMOJI}") == (f"a{REPLACEMENT}b{REPLACEMENT}", 2)
    row = {"x": 1.0}
    assert row_line(row) == (b'{"x": 1.0}\n', row)  # nothing to repair: the same dict, no marker
    line, written = row_line({"info": {HALF_EMOJI: float("inf")}, "t": [float("nan")]})
    assert json.loads(line) == written == {"info": {REPLACEMENT: None}, "t": [None], "replaced_code_points": 1,
                                           "nulled_numbers": 2}
    assert json.loads(json_bytes({"m": float("-inf")}, indent=2)) == {"m": None}


NAN_ENV = '''
from evalkit.envs import Rubric, SingleTurnEnv


def score(completion, answer) -> float:
    return {"a0": float("nan"), "a1": float("inf")}.get(answer, 1.0)


def load_environment(**kwargs):
    rows = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(4)]
    return SingleTurnEnv(dataset=rows, eval_dataset=rows, rubric=Rubric([score]))
'''


def test_nan_and_inf_rewards_are_reward_errors_never_bare_nan(tmp_path):
    """Before: `reward inf ± nan`, bare NaN/Infinity in results.jsonl and metadata.json, --html crashed."""
    env_dir = tmp_path / "environments" / "nan_env"
    env_dir.mkdir(parents=True)
    (env_dir / "nan_env.py").write_text(NAN_ENV)
    server = FaultServer()
    try:
        result = prime("eval", "run", str(env_dir), "-m", "stub", "-b", server.base_url, "-n", "4", "-r", "2",
                       "-o", str(tmp_path / "out"))
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "out" / "evals" / "nan_env--stub").iterdir()
    rows = {(r["example_id"], r["rollout_idx"]): r for r in strict_rows(run_dir / "results.jsonl")}
    assert rows[(0, 0)]["error"] == "reward function score returned nan, not a finite number (scored 0)"
    assert rows[(1, 1)]["error"] == "reward function score returned inf, not a finite number (scored 0)"
    assert {rows[(e, 0)]["error_kind"] for e in (0, 1)} == {"reward"} and rows[(2, 0)]["error"] is None
    assert all(
        row["reward"] == row["metrics"]["score"] == (0.0 if row["example_id"] < 2 else 1.0) for row in rows.values()
    )
    meta = json.loads((run_dir / "metadata.json").read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert meta["avg_reward"] == 0.5 and meta["errors_by_kind"] == {"reward": 4}
    assert "0.5000 ± 0.5000" in result.output
    html = prime("eval", "view", str(run_dir), "--html")
    assert html.exit_code == 0, html.output


def test_a_group_rubric_that_sets_nan_is_caught_for_every_job(tmp_path):
    """Rewards from any rubric (a wrapped verifiers environment's, a group-scored one) pass one check in
    run_groups, the core eval, GEPA and RL share."""
    import asyncio

    from evalkit.eval.rollouts import run_groups

    class GroupScored(SingleTurnEnv):
        async def score_group(self, states):
            for state in states:
                state.reward, state.metrics = float("nan"), {"judge": float("-inf"), "length": 3.0}

    env = GroupScored(eval_dataset=[{"question": "q", "answer": "a"}], rubric=Rubric([lambda completion: 1.0]))
    (group,) = asyncio.run(run_groups(env, ScriptedClient(["x", "y"]), env.get_eval_dataset(), rollouts_per_example=2))
    for state in group:
        assert state.reward == 0.0 and state.metrics == {"judge": 0.0, "length": 3.0}
        assert state.error_kind == "reward" and state.error == (
            "reward function results are not finite numbers (reward nan, judge -inf); scored 0")


def test_gepa_with_nan_rewards_reports_finite_scores(tmp_path):
    """Before: GEPA reported "best val nan"."""
    from support import report_runs

    from gepa_cli.config import EnvSpec, GepaJobConfig
    from gepa_cli.runner import run_gepa

    def shaky(completion, answer) -> float:
        return float("nan") if answer in ("a10", "a11") else float(completion[-1]["content"] == answer)

    env = SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": f"a{i}"} for i in range(10)],
                        eval_dataset=[{"question": f"q{i}", "answer": f"a{i}"} for i in range(10, 14)],
                        system_prompt=report_runs.SEED_PROMPT, rubric=Rubric([shaky]))
    config = GepaJobConfig(envs=[EnvSpec(id="toy")], model="scripted", max_calls=40, num_train=6, num_val=4,
                           minibatch_size=2, run_dir=str(tmp_path / "run"), stop_at_score=0.5)
    clients = (ScriptedClient(report_runs.gepa_task), ScriptedClient(report_runs.gepa_teacher, model="teacher"))
    outcome = run_gepa(config, clients=clients, envs=[env], show_progress=False)
    assert outcome.seed_val_score == 0.0 and outcome.best_val_score == 0.5  # nan scored 0 on 2 of 4
    meta = json.loads(
        (outcome.run_dir / "metadata.json").read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}")
    )
    assert meta["best_score"] == 0.5


@pytest.mark.slow
def test_rl_trains_on_nan_rewards_as_reward_errors(tmp_path):
    """Before: "baseline ok: mean reward nan", then a crash at step 0."""
    from support import report_runs

    code = report_runs.RL_ENV.replace(
        "return sum(c.isdigit() for c in text) / max(1, len(text))",
        "return float('nan') if len(text) % 2 else sum(c.isdigit() for c in text) / max(1, len(text))",
    )
    assert code != report_runs.RL_ENV
    run_dir = report_runs.make_rl_run(tmp_path, code)
    metrics = strict_rows(run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics if "loss" in m] == [1, 2]
    baseline = json.loads((run_dir / "baseline.json").read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert baseline and strict_rows(run_dir / "rollouts" / "step_1.jsonl")


def test_metric_names_with_dollars_are_drawn_as_text(tmp_path):
    """Before: `$\\frac{a}{$` crashed --html in matplotlib's mathtext; `cost $5 or $6` was drawn as math."""
    from evalkit.report import plots

    def named(name: str, value: float):
        def func(completion) -> float:
            return value

        func.__name__ = name
        return func

    names = ["$\\frac{a}{$", "cost $5 or $6"]
    env = SingleTurnEnv(
        eval_dataset=[{"question": "q", "answer": "a"}], rubric=Rubric([named(names[0], 1.0), named(names[1], 0.5)])
    )
    config = EvalConfig(env_id="t", model="m", output_dir=str(tmp_path), num_examples=1, rollouts_per_example=1)
    run_dir = run_eval(config, client=ScriptedClient(["x"]), env=env).run_dir
    html = prime("eval", "view", str(run_dir), "--html")
    assert html.exit_code == 0, html.output
    svg = plots.grouped_bars(names, [[1.0, 0.5]], ["run"], "mean")
    for name in names:  # each drawn as one text element holding the string itself (mathtext draws glyphs)
        assert f">{name}</text>" in svg

"""GEPA's search options, each shown by what it changes in a run on scripted models (not only that it parses).

Models from :mod:`test_gepa_job`: the task model answers correctly when its system prompt holds the
right words; the scripted teachers here rewrite the prompt in ways that make each option's effect
visible in the run's files and request counts.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from support import REPO
from support.gepa_job import config, make_env, read_jsonl, run, task_model
from support.scripted_client import ScriptedClient

from evalkit.core.errors import ConfigError
from evalkit.envs import Rubric, SingleTurnEnv


def current_text(messages) -> str:
    return messages[0]["content"].split("```")[1].strip()


def residue_task(messages, sampling, tools):
    """Correct on question q<n> when the system prompt lists ``R<n % 4>``."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    number = int(re.search(r"q(\d+)", messages[-1]["content"]).group(1))
    return f"a{number}" if f"R{number % 4}" in system.split() else "dunno"


def residue_teacher(messages, sampling, tools):
    """Replaces the prompt with the residues of the minibatch's questions: candidates that solve different
    examples, none dominating the others (a frontier of several)."""
    numbers = sorted({int(n) % 4 for n in re.findall(r"q(\d+)", messages[0]["content"])})
    return "```\nSolve " + " ".join(f"R{n}" for n in numbers) + "\n```"


def parents_and_scores(run_dir):
    rows = read_jsonl(run_dir / "results.jsonl")
    return [(r["info"]["parent_candidate_idxs"], r["score"]) for r in rows]


@pytest.mark.parametrize("strategy", ["current_best", "pareto"])
def test_candidate_selection_strategy_picks_the_parent(tmp_path, strategy):
    cfg = config(tmp_path, max_calls=120, num_val=8, candidate_selection_strategy=strategy, seed=0)
    run(cfg, task=ScriptedClient(residue_task), teach=ScriptedClient(residue_teacher, model="teacher"))
    found = parents_and_scores(tmp_path / "run")
    assert len(found) >= 4
    # current_best: every child's parent had the best score of the candidates before it (the first such)
    off_best = [idx for idx, (parents, _) in enumerate(found) if idx and parents and
                parents[0] != max(range(idx), key=lambda i: (found[i][1], -i))]
    assert (off_best == []) == (strategy == "current_best")


def test_acceptance_criterion_improvement_or_equal_accepts_ties(tmp_path):
    same = ScriptedClient(lambda m, s, t: f"```\n{current_text(m)} (same)\n```", model="teacher")
    strict, task1, _ = run(config(tmp_path, max_calls=40), teach=same)
    assert strict.num_candidates == 1  # an equal child never reaches the validation pass
    tie = ScriptedClient(lambda m, s, t: f"```\n{current_text(m)} (same)\n```", model="teacher")
    equal, _, _ = run(config(tmp_path, max_calls=40, run_dir=str(tmp_path / "r2"),
                             acceptance_criterion="improvement_or_equal"), teach=tie)
    assert equal.num_candidates > 1


def test_cache_evaluation_reuses_scores(tmp_path):
    # the teacher proposes the parent's own text: with ties accepted, each child is validated on examples the
    # parent was already scored on; with the cache those rollouts are not run again
    def echo():
        return ScriptedClient(lambda m, s, t: f"```\n{current_text(m)}\n```", model="teacher")

    plain, task_plain, _ = run(
        config(tmp_path, max_calls=60, acceptance_criterion="improvement_or_equal"), teach=echo()
    )
    cached, task_cached, _ = run(config(tmp_path, max_calls=60, run_dir=str(tmp_path / "r2"), cache_evaluation=True,
                                        acceptance_criterion="improvement_or_equal"), teach=echo())
    assert cached.total_metric_calls == len(task_cached.requests)

    def val_rollouts(task):  # validation questions are q20..q39
        return sum(int(re.search(r"q(\d+)", r["messages"][-1]["content"]).group(1)) >= 20 for r in task.requests)

    # every child has its parent's text: without the cache each is validated again; with it only the seed
    # (gepa scores the seed before its cache exists) and the first child are, and more iterations fit the budget
    assert plain.num_candidates > 1 and val_rollouts(task_plain) == 6 * plain.num_candidates
    assert cached.num_candidates > plain.num_candidates and val_rollouts(task_cached) == 12


def test_val_subsample_scores_children_on_fewer_examples(tmp_path):
    cfg = config(tmp_path, max_calls=60, num_val=8, val_evaluation_policy="subsample", val_subsample_size=3,
                 stop_at_score=1.0)
    outcome, task, _ = run(cfg)
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert rows[0]["info"]["num_val_examples"] == 8  # the seed on every example
    assert len(rows) > 1 and all(r["info"]["num_val_examples"] == 3 for r in rows[1:])
    assert outcome.total_metric_calls == len(task.requests) == 8 + (len(rows) - 1) * (3 + 6)


def test_val_subsample_needs_a_size(tmp_path):
    with pytest.raises(Exception, match="needs val_subsample_size"):
        config(tmp_path, val_evaluation_policy="subsample")


def test_reflection_prompt_template_is_what_the_teacher_reads(tmp_path):
    template = "TEMPLATE start\n```\n<curr_param>\n```\nRollouts:\n<side_info>\nWrite the new prompt in a block."
    outcome, _, teach = run(config(tmp_path, max_calls=40, reflection_prompt_template=template))
    asked = teach.requests[0]["messages"][0]["content"]
    assert asked.startswith("TEMPLATE start\n```\nAnswer the question.\n```\nRollouts:")
    assert "I provided an assistant" not in asked and outcome.best_val_score == 1.0


def test_template_without_placeholders_is_refused(tmp_path):
    with pytest.raises(Exception, match="lacks <curr_param> and <side_info>"):
        config(tmp_path, reflection_prompt_template="just text")


class InFlight(ScriptedClient):
    """Counts the most requests it had in flight at once."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.now = self.most = 0

    async def chat(self, messages, sampling, tools=None):
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0.05)
            return await super().chat(messages, sampling, tools)
        finally:
            self.now -= 1


@pytest.mark.parametrize("proposals", [1, 3])
def test_proposals_per_iteration_run_together(tmp_path, proposals):
    useless = ScriptedClient(lambda m, s, t: "```\nSomething else.\n```", model="teacher")
    task = InFlight(task_model)
    cfg = config(tmp_path, max_calls=60, num_val=2, max_concurrent=16, proposals_per_iteration=proposals)
    outcome, _, teach = run(cfg, task=task, teach=useless)
    # every proposal of an iteration is reflected on, and their minibatches run at once
    assert len(teach.requests) % proposals == 0 and len(teach.requests) >= proposals
    assert task.most == 3 * proposals
    assert outcome.total_metric_calls == len(task.requests) <= 60


def test_proposal_selection_best_validates_one_child_per_iteration(tmp_path):
    cfg = config(tmp_path, max_calls=80, proposals_per_iteration=2, proposal_selection="best")
    outcome, task, teach = run(cfg, env=make_env(hard_every=3))
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    iterations = len(teach.requests) // 2
    assert len(rows) - 1 <= iterations and outcome.best_val_score == 1.0


def two_function_env():
    def exact(completion, answer) -> float:
        return float(completion[-1]["content"].strip() == answer)

    def short(completion) -> float:
        return float(len(completion[-1]["content"]) <= 3)

    rows = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(40)]
    return SingleTurnEnv(dataset=rows[:20], eval_dataset=rows[20:], system_prompt="Answer the question.",
                         rubric=Rubric([exact, short]))


def test_frontier_type_objective_keeps_a_front_per_reward_function(tmp_path):
    outcome, _, _ = run(config(tmp_path, max_calls=40, frontier_type="objective"), env=two_function_env())
    from gepa.core.state import GEPAState

    state = GEPAState.load(str(tmp_path / "run" / "state"))
    assert state.frontier_type == "objective"
    assert set(state.objective_pareto_front) == {"exact", "short", "reward"}
    assert state.objective_pareto_front["exact"] == 1.0 and outcome.best_val_score > 0


def test_budget_preflight_counts_subsample_and_proposals():
    from gepa_cli.budget import BudgetPlan

    plain = BudgetPlan(budget=60, val=8, minibatch=3)
    sub = BudgetPlan(budget=60, val=8, minibatch=3, accept=3)
    many = BudgetPlan(budget=60, val=8, minibatch=3, proposals=2, accepts=2)
    merge = BudgetPlan(budget=60, val=8, minibatch=3, merges=2)
    assert (plain.min_proposals, sub.min_proposals, many.min_proposals, merge.min_proposals) == (3, 5, 1, 1)
    assert "2x2x3 + 16 on acceptance" in many.line() and "up to 2 merges, 26 in all" in merge.line()
    assert BudgetPlan(budget=20, val=8, minibatch=3, proposals=2, accepts=2).max_proposals == 0


def test_toml_keys_and_flags_reach_the_config(tmp_path):
    from gepa_cli.config import build_job_config, load_gepa_toml, toml_to_job_fields

    path = tmp_path / "g.toml"
    path.write_text('model = "m"\n[env]\nid = "toy"\n[gepa]\nuse_merge = true\ncandidate_selection_strategy = '
                    '"current_best"\nval_evaluation_policy = "subsample"\n')
    parsed, base = load_gepa_toml(path)
    job = build_job_config({**toml_to_job_fields(parsed, base), "val_subsample_size": 4}, "x")
    assert job.use_merge and job.candidate_selection_strategy == "current_best" and job.val_subsample_size == 4
    path.write_text('[env]\nid = "toy"\n[gepa]\nfrontier_type = "pareto"\n')
    with pytest.raises(ConfigError, match="frontier_type"):
        load_gepa_toml(path)


def test_every_search_key_and_flag_is_documented_and_in_help():

    from typer.testing import CliRunner

    from gepa_cli.search_options import search_field_names
    from primekit_cli.app import app

    doc = (REPO / "docs" / "gepa.md").read_text()
    help_text = " ".join(CliRunner().invoke(app, ["gepa", "run", "--help"], env={"COLUMNS": "300"}).output.split())
    for name in search_field_names():
        flag = "--" + name.replace("_", "-")
        assert f"`{name}`" in doc and f"`{flag}`" in doc, name
        assert flag in help_text, flag


def test_flags_reach_the_plan(tmp_path):
    from typer.testing import CliRunner

    from primekit_cli.app import app

    result = CliRunner().invoke(app, [
        "gepa", "run", "arithmetic", "-B", "120", "-n", "10", "-N", "8", "--dry-run", "-o", str(tmp_path / "r"),
        "--use-merge", "--max-merge-invocations", "2", "--candidate-selection-strategy", "current_best",
        "--val-evaluation-policy", "subsample", "--val-subsample-size", "4", "--proposals-per-iteration", "2",
        "--proposal-selection", "best", "--no-improvement-stop", "3", "--reflection-prices", '{"t": [1, 2]}',
    ], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert ("search: candidate_selection_strategy='current_best', use_merge=True, max_merge_invocations=2, "
            "val_evaluation_policy='subsample', val_subsample_size=4, proposals_per_iteration=2, "
            "proposal_selection='best', no_improvement_stop=3, reflection_prices={'t': (1.0, 2.0)}") in text
    # seed 8, each iteration 2x2x3 rollouts + 4 on acceptance (one child kept), merges 2 x (5 + 4)
    assert "each proposal 2x2x3 + 4 on acceptance; up to 2 merges, 18 in all" in text
    bad = CliRunner().invoke(app, ["gepa", "run", "arithmetic", "--dry-run", "--proposals-per-iteration", "0"])
    assert (
        bad.exit_code == 2
        and "error: command line: 'proposals_per_iteration': Input should be greater than or equal to 1" in bad.output
    )


def test_resume_keeps_the_frontier_and_the_components():
    from evalkit.core.errors import UserError
    from primekit_cli.commands.gepa_cmd import _check_resume_unchanged

    saved = {"envs": [{"id": "toy"}], "model": "m", "frontier_type": "instance", "components": ["system_prompt"],
             "use_merge": False}
    _check_resume_unchanged(saved, {**saved, "use_merge": True})  # a search setting that may change at a resume
    for changed in ({"frontier_type": "objective"}, {"components": ["system_prompt", "tools"]}):
        with pytest.raises(UserError, match=f"--resume cannot change {next(iter(changed))}"):
            _check_resume_unchanged(saved, {**saved, **changed})

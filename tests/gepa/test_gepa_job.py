"""GEPA job end to end on scripted models: a better prompt is found, budgets hold, failures are loud.

The task model answers correctly only when its system prompt holds the keyword ``KEYWORD`` (and, for
"hard" questions, also ``HARDWORD``); the scripted teacher adds the next missing keyword inside a
fenced block. So progress is deterministic and each test can say exactly what must happen.
"""

from __future__ import annotations

import json
import re

import pytest
from support.gepa_job import SEED_PROMPT, config, make_env, read_jsonl, run, task_model, teacher
from support.scripted_client import ScriptedClient

from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import Completion
from gepa_cli.reflection import OPEN_BLOCK_SUFFIX, extract_continued_block, extract_fenced_block


def test_finds_better_prompt_and_writes_files(tmp_path):
    cfg = config(tmp_path, max_calls=80, stop_at_score=1.0)
    outcome, task, teach = run(cfg, env=make_env(hard_every=3))
    run_dir = tmp_path / "run"
    assert outcome.seed_val_score == 0.0
    assert outcome.best_val_score == 1.0
    assert outcome.status == "stop_at_score"
    best = (run_dir / "system_prompt.txt").read_text()
    assert "KEYWORD" in best and "HARDWORD" in best
    rows = read_jsonl(run_dir / "results.jsonl")
    infos = [r["info"] for r in rows]
    assert [r["example_id"] for r in rows] == [i["candidate_idx"] for i in infos] == list(range(len(rows)))
    assert infos[0]["system_prompt"] == SEED_PROMPT and infos[0]["parent_candidate_idxs"] == []
    assert infos[0]["discovered_at_calls"] == 6 and infos[0]["diff_from_initial"] == ""
    assert "+" in infos[-1]["diff_from_initial"] and infos[-1]["parent_candidate_idxs"]
    assert [i["is_best"] for i in infos].count(True) == 1 and infos[outcome.best_idx]["is_best"]
    assert rows[outcome.best_idx]["score"] == rows[outcome.best_idx]["reward"] == 1.0
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "stop_at_score"
    assert meta["total_metric_calls"] == len(task.requests) <= 80
    assert meta["num_reflection_calls"] == len(teach.requests) >= 2
    assert meta["best_idx"] == outcome.best_idx and meta["seed_val_score"] == 0.0 and meta["best_score"] == 1.0
    assert meta["best_prompt_sha256"] == infos[outcome.best_idx]["system_prompt_sha256"]
    assert "--system-prompt-file" in meta["verify_command"]
    assert (run_dir / "gepa.log").read_text().strip()
    assert (run_dir / "state" / "gepa_state.bin").is_file()


def test_frontier_keeps_per_example_bests(tmp_path):
    # val examples 20..39; hard ones (i % 3 == 0) need HARDWORD. Candidate 1 (KEYWORD) solves the easy ones,
    # candidate 2 (both) solves all, so every example's best is 1.0 and hard examples list only candidate 2.
    cfg = config(tmp_path, max_calls=80, num_val=6)
    outcome, _, _ = run(cfg, env=make_env(hard_every=3))
    frontier = read_jsonl(tmp_path / "run" / "pareto_frontier.jsonl")
    results = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert len(frontier) == 6
    for row in frontier:
        per_candidate = [r["info"]["val_subscores"][str(row["valset_row"])] for r in results]
        assert row["best_score"] == max(per_candidate)
        winners = [b["candidate_idx"] for b in row["best_candidates"]]
        assert winners == [i for i, s in enumerate(per_candidate) if s == row["best_score"]]
        assert row["num_best_candidates"] == len(winners)
        assert all(b["score"] == row["best_score"] for b in row["best_candidates"])
    assert any(row["num_best_candidates"] > 1 for row in frontier)  # easy examples: candidates 1 and 2 tie


@pytest.mark.parametrize("max_calls", [18, 19, 20, 27, 41])
def test_budget_never_exceeded(tmp_path, max_calls):
    # a teacher that never helps: every iteration costs minibatches, nothing is accepted, budget is the only stop
    useless = ScriptedClient(lambda m, s, t: "```\nSomething else entirely.\n```", model="teacher")
    outcome, task, _ = run(config(tmp_path, max_calls=max_calls), teach=useless)
    assert len(task.requests) == outcome.total_metric_calls <= max_calls
    assert outcome.status == "budget_exhausted"
    # it stops only when the next iteration (2 minibatches + a validation pass) no longer fits
    assert max_calls - outcome.total_metric_calls < 2 * 3 + 6


@pytest.mark.parametrize("max_calls", [5, 6, 13, 17])
def test_budget_that_buys_no_proposal_is_refused_before_any_rollout(tmp_path, max_calls):
    # seed validation 6 + one proposal 2x3 + 6 on acceptance = 18
    with pytest.raises(
        UserError, match=r"buys no proposal.*raise -B/--max-calls to at least 18, or lower -N/--num-val"
    ):
        run(config(tmp_path, max_calls=max_calls))
    assert not (tmp_path / "run").exists()


def test_stop_at_score_on_perfect_seed(tmp_path):
    env = make_env()
    env.system_prompt = "KEYWORD already"
    outcome, task, teach = run(config(tmp_path, max_calls=500, stop_at_score=1.0), env=env)
    assert outcome.status == "stop_at_score"
    assert len(task.requests) == 6  # the seed's validation pass, nothing more
    assert teach.requests == []


def test_perfect_score_skips_perfect_minibatches_and_the_run_goes_on(tmp_path):
    # verifiers' --perfect-score: a minibatch the parent already aces is not reflected on; the run does not stop
    env = make_env()
    env.system_prompt = "KEYWORD already"  # perfect on every example
    outcome, task, teach = run(config(tmp_path, max_calls=40, perfect_score=1.0), env=env)
    assert teach.requests == []  # every minibatch was perfect: nothing to reflect on
    assert outcome.status == "budget_exhausted" and outcome.total_metric_calls == len(task.requests) <= 40
    assert len(task.requests) > 6 + 3  # the run went on past the seed and one minibatch
    assert "All subsample scores perfect" in (tmp_path / "run" / "gepa.log").read_text()
    # without --perfect-score the same minibatches are reflected on
    outcome, _, teach = run(config(tmp_path, max_calls=40, run_dir=str(tmp_path / "run2")), env=env)
    assert (
        len(teach.requests) >= 1 and "All subsample scores perfect" not in (tmp_path / "run2" / "gepa.log").read_text()
    )


def test_reflection_failure_fails_the_run(tmp_path):
    # a teacher that answers the first request without a block, then nothing at all
    replies = iter([Completion(text="Read the input. " * 20, finish_reason="length")])
    rambling = ScriptedClient(lambda m, s, t: next(replies, ""), model="teacher")
    with pytest.raises(UserError, match="no usable proposal in 3 attempts.*last: empty reply"):
        run(config(tmp_path), teach=rambling)
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["status"] == "failed" and "ReflectionError" in meta["error"]
    assert len(rambling.requests) == 3  # retried, then failed; never asked again by the library's own retry
    assert meta["num_reflection_calls"] == 3 and meta["total_metric_calls"] == 6 + 3


def test_empty_teacher_fails_the_run(tmp_path):
    silent = ScriptedClient(lambda m, s, t: "", model="teacher")
    with pytest.raises(UserError, match="last: empty reply"):
        run(config(tmp_path), teach=silent)


def test_teacher_without_fences_gets_the_block_opened(tmp_path):
    def small_teacher(messages, sampling, tools):
        prompt = messages[0]["content"]
        return (
            "Use KEYWORD always.\n```\nand some trailing talk"
            if prompt.endswith(OPEN_BLOCK_SUFFIX)
            else "Sure, I can help!"
        )

    teach = ScriptedClient(small_teacher, model="teacher")
    outcome, _, _ = run(config(tmp_path, max_calls=40), teach=teach)
    assert outcome.best_val_score == 1.0
    assert (tmp_path / "run" / "system_prompt.txt").read_text() == "Use KEYWORD always."
    # an embedded teacher gets the opened block from its first request on
    embedded = ScriptedClient(small_teacher, model="local/smollm2-135m")
    run(config(tmp_path, max_calls=40, model="local/smollm2-135m", run_dir=str(tmp_path / "run2")), teach=embedded)
    assert embedded.requests[0]["messages"][0]["content"].endswith(OPEN_BLOCK_SUFFIX)
    assert not teach.requests[0]["messages"][0]["content"].endswith(OPEN_BLOCK_SUFFIX)
    assert teach.requests[1]["messages"][0]["content"].endswith(OPEN_BLOCK_SUFFIX)


def test_unreachable_teacher_fails_the_run(tmp_path):
    down = ScriptedClient([ModelCallError("connection refused")], model="teacher")
    with pytest.raises(UserError, match="request failed: connection refused"):
        run(config(tmp_path), teach=down)


def test_reflection_retry_recovers(tmp_path):
    replies = iter(["", "no block here"])

    def flaky(messages, sampling, tools):
        reply = next(replies, None)
        return teacher(messages, sampling, tools) if reply is None else reply

    teach = ScriptedClient(flaky, model="teacher")
    outcome, _, _ = run(config(tmp_path, max_calls=40, stop_at_score=1.0), teach=teach)
    assert outcome.best_val_score == 1.0
    assert len(teach.requests) == 3
    assert teach.requests[0]["sampling"].temperature is None
    assert teach.requests[1]["sampling"].temperature == pytest.approx(0.7)  # retries are not greedy repeats


def test_budget_plan_numbers():
    from gepa_cli.budget import BudgetPlan

    plan = BudgetPlan(budget=60, val=8, minibatch=3)
    assert (plan.min_proposals, plan.max_proposals) == (3, 7) and plan.warning() is None
    assert plan.line() == "budget 60 buys about 3-7 proposals (seed validation 8, each proposal 2x3 + 8 on acceptance)"
    small = BudgetPlan(
        budget=40, val=8, minibatch=3
    )  # 32 after the seed: 2 accepted (28) or 4 rejected (24 + room for 8)
    assert (small.min_proposals, small.max_proposals) == (2, 4)
    assert "pays for only 2 accepted proposal(s)" in small.warning() and "to 50 for 3" in small.warning()
    assert BudgetPlan(budget=22, val=8, minibatch=3).max_proposals == 1
    none = BudgetPlan(budget=50, val=100, minibatch=3)  # the case: -B 50 with 100 validation examples
    assert none.max_proposals == 0 and none.minimum_budget == 206
    with pytest.raises(UserError, match="budget 50 buys no proposal .*at least 206"):
        none.check()
    resumed = BudgetPlan(budget=60, val=8, minibatch=3, used=30, seed_done=True)
    assert (resumed.min_proposals, resumed.max_proposals) == (2, 3) and "30 already spent" in resumed.line()


def test_block_extraction():
    assert extract_fenced_block("Here:\n```text\nBe brief.\n```\nbye") == "Be brief."
    assert extract_fenced_block("```\nBe brief.") == "Be brief."  # the reply ended inside its block
    assert extract_fenced_block("```\nBe brief.", finished=False) is None  # ...but not if cut off
    assert extract_fenced_block("no block") is None and extract_fenced_block("```\n```") is None
    assert extract_continued_block("Be brief.\n```\nchatter") == "Be brief."
    assert extract_continued_block("Be brief.") == "Be brief."
    assert extract_continued_block("Be brief. And", finished=False) == "Be brief. And"
    assert extract_continued_block("```\nBe brief.") == "Be brief."
    assert extract_continued_block("```\n```\nchatter") is None


class _Unreachable(ScriptedClient):
    """A remote-looking client whose one-request preflight fails, as a down server would."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.base_url = "http://127.0.0.1:9/v1"

    async def preflight(self) -> None:
        raise ModelCallError("cannot connect to http://127.0.0.1:9/v1")


def test_preflight_checks_both_models_before_any_rollout(tmp_path):
    task = ScriptedClient(task_model)
    with pytest.raises(UserError, match="preflight request to model 'teacher' failed"):
        run(config(tmp_path), task=task, teach=_Unreachable(teacher, model="teacher"))
    assert task.requests == []


def test_reflective_dataset_has_what_the_teacher_needs():
    from gepa.core.adapter import EvaluationBatch

    from evalkit.core.types import RolloutState
    from gepa_cli.adapter import SystemPromptAdapter

    adapter = SystemPromptAdapter([], None, None, None, state_columns=["guesses", "missing"])  # type: ignore[arg-type]
    state = RolloutState(
        example_id=0,
        rollout_idx=0,
        prompt=[{"role": "system", "content": "sys"}, {"role": "user", "content": "What is 2+2?"}],
        answer="4",
        completion=[{"role": "assistant", "content": "5"}],
        reward=0.0,
        error="reward function raised ValueError: x",
        extra={"guesses": ["5"]},
    )
    batch = EvaluationBatch(outputs=[{}], scores=[0.0], trajectories=[state])
    records = adapter.make_reflective_dataset({"system_prompt": "sys"}, batch, ["system_prompt"])["system_prompt"]
    assert records == [
        {
            "query": "What is 2+2?",
            "completion": "5",
            "expected_answer": "4",
            "reward": 0.0,
            "error": "reward function raised ValueError: x",
            "guesses": ["5"],
            "missing": None,
        }
    ]


def test_errored_rollouts_score_0_and_are_counted(tmp_path):
    """A task server failing some requests: gepa gets 0 for those rollouts (it needs a number), and
    the run says how many there were instead of reading them as a bad prompt."""

    def flaky(messages, sampling, tools):
        number = int(re.search(r"q(\d+)", messages[-1]["content"]).group(1))
        return ModelCallError("HTTP 503") if number % 2 == 0 else task_model(messages, sampling, tools)

    cfg = config(tmp_path, max_calls=30)
    run(cfg, task=ScriptedClient(flaky))
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["num_rollout_errors"] >= 2 and meta["rollout_errors_by_kind"] == {"model": meta["num_rollout_errors"]}
    log = (tmp_path / "run" / "gepa.log").read_text()
    assert "rollouts errored (scored 0 for gepa); first: [model] model call failed: HTTP 503" in log


def test_max_concurrent_is_one_bound_shared_by_the_environments():
    """-c bounds a batch's rollouts together, whichever environments they come from (vf-eval's -c),
    instead of splitting it between them: 3 + 1 examples of two environments under -c 4 run 4 at once."""
    import asyncio

    from evalkit.core.aio import LoopThread, Slots
    from gepa_cli.adapter import COMPONENT, SystemPromptAdapter
    from gepa_cli.budget import RolloutBudget
    from gepa_cli.data import Example

    class Counting(ScriptedClient):
        in_flight = peak = 0

        async def chat(self, messages, sampling, tools=None):
            Counting.in_flight += 1
            Counting.peak = max(Counting.peak, Counting.in_flight)
            for _ in range(50):  # every rollout that may start has started before any ends
                await asyncio.sleep(0)
            Counting.in_flight -= 1
            return await super().chat(messages, sampling, tools)

    envs = [make_env(), make_env()]
    batch = [Example(i, "val", 0 if i < 3 else 1, "toy", {"question": f"q{i}", "answer": f"a{i}"}, i) for i in range(4)]
    with LoopThread() as loop:
        adapter = SystemPromptAdapter(envs, Counting(task_model), loop, RolloutBudget(10), bound=Slots(4))
        adapter.evaluate(batch, {COMPONENT: SEED_PROMPT})
        assert Counting.peak == 4
        Counting.peak = 0
        one_at_a_time = SystemPromptAdapter(envs, Counting(task_model), loop, RolloutBudget(10), bound=Slots(1))
        one_at_a_time.evaluate(batch, {COMPONENT: "x"})
        assert Counting.peak == 1  # not one per environment

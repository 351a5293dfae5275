"""Built-in environments: deterministic data, parsers, rubrics, and the model-free self-check
(reference answers written the way a model would write them score 1.0 through a real rollout)."""

from __future__ import annotations

import json

import pytest
from support.scripted_client import ScriptedClient, tool_call_reply

from evalkit.builtin import alphabet_sort, arithmetic, fact_search, reverse_text, wordle
from evalkit.builtin._util import lcs_length, lcs_ratio
from evalkit.core.errors import UserError
from evalkit.envs import MultiTurnEnv, SingleTurnEnv, ToolEnv
from evalkit.eval.rollouts import run_groups
from evalkit.loading.resolve import BUILTIN_IDS, load_environment

MODULES = {
    "reverse-text": reverse_text,
    "alphabet-sort": alphabet_sort,
    "arithmetic": arithmetic,
    "wordle": wordle,
    "fact-search": fact_search,
}


def _reference_reply(env_id: str, row: dict) -> str:
    """The answer as a model following the system prompt would write it."""
    if env_id == "reverse-text":
        return f"<reversed_text>\n{row['answer']}\n</reversed_text>"
    if env_id == "alphabet-sort":
        return row["answer"]
    if env_id == "arithmetic":
        return f"{row['info']['expression']} = {row['answer']}"
    if env_id == "wordle":
        return f"<guess>{row['answer']}</guess>"
    raise AssertionError(env_id)


def _by_question(env_id: str, rows: list[dict]):
    answers = {row["question"]: _reference_reply(env_id, row) for row in rows}
    return lambda messages, sampling, tools: answers[messages[-1]["content"]]


def test_every_builtin_id_has_a_module():
    assert set(BUILTIN_IDS) == set(MODULES)


@pytest.mark.parametrize("env_id", sorted(MODULES))
def test_dataset_is_deterministic_and_splits_differ(env_id):
    module = MODULES[env_id]
    first = module.load_environment(num_train_examples=20, num_eval_examples=10, seed=7)
    again = module.load_environment(num_train_examples=20, num_eval_examples=10, seed=7)
    other = module.load_environment(num_train_examples=20, num_eval_examples=10, seed=8)
    assert first.get_dataset() == again.get_dataset() and first.get_eval_dataset() == again.get_eval_dataset()
    assert len(first.get_dataset()) == 20 and len(first.get_eval_dataset()) == 10
    train_q = [(r["question"], r["answer"]) for r in first.get_dataset()]
    eval_q = [(r["question"], r["answer"]) for r in first.get_eval_dataset()]
    assert train_q[:10] != eval_q
    assert first.get_dataset() != other.get_dataset()
    assert all(r["answer"] for r in first.get_dataset() + first.get_eval_dataset())


@pytest.mark.parametrize("env_id", sorted(MODULES))
def test_loads_by_id_with_bad_args_rejected(env_id, tmp_path):
    env = load_environment(env_id, {"num_train_examples": 3, "num_eval_examples": 2}, tmp_path)
    assert env.env_id == env_id
    with pytest.raises(UserError, match="num_train_examples must be a non-negative integer"):
        load_environment(env_id, {"num_train_examples": -1}, tmp_path)
    only_eval = load_environment(env_id, {"num_train_examples": 0, "num_eval_examples": 2}, tmp_path)
    assert len(only_eval.get_dataset()) == 2  # falls back to the eval split


@pytest.mark.parametrize("env_id", ["reverse-text", "alphabet-sort", "arithmetic"])
async def test_single_turn_self_check_scores_one(env_id):
    env = MODULES[env_id].load_environment(num_train_examples=5, num_eval_examples=25, seed=3)
    assert isinstance(env, SingleTurnEnv)
    rows = env.get_eval_dataset()
    groups = await run_groups(env, ScriptedClient(_by_question(env_id, rows)), rows, rollouts_per_example=2)
    rewards = [state.reward for group in groups for state in group]
    errors = [state.error for group in groups for state in group]
    assert rewards == [1.0] * 50 and errors == [None] * 50


@pytest.mark.parametrize("env_id", ["reverse-text", "alphabet-sort", "arithmetic"])
async def test_single_turn_wrong_answers_score_below_one(env_id):
    env = MODULES[env_id].load_environment(num_train_examples=5, num_eval_examples=5, seed=3)
    rows = env.get_eval_dataset()
    states = [await env.rollout(ScriptedClient(["I am not sure."]), row) for row in rows]
    assert all(state.reward < 1.0 for state in states)


# ----- reverse-text ---------------------------------------------------------------------------
def test_lcs_helpers():
    assert lcs_length("abcde", "ace") == 3 and lcs_length("", "abc") == 0
    assert lcs_ratio("abc", "abc") == 1.0 and lcs_ratio("", "") == 1.0
    assert lcs_ratio("abcd", "abdc") == pytest.approx(0.75)
    assert lcs_ratio(["a", "b"], ["b", "a"]) == 0.5


async def test_reverse_text_partial_credit_and_untagged_reply():
    env = reverse_text.load_environment(num_train_examples=1, num_eval_examples=1)
    row = {"question": "cat dog", "answer": "god tac"}
    plain = await env.rollout(ScriptedClient(["god tac"]), row)
    assert plain.reward == 1.0 and plain.metrics["exact_match"] == 1.0
    near = await env.rollout(ScriptedClient(["<reversed_text>god ta</reversed_text>"]), row)
    assert near.reward == pytest.approx(2 * 6 / 13) and near.metrics["exact_match"] == 0.0
    assert env.system_prompt.startswith("Reverse the given text")


# ----- alphabet-sort --------------------------------------------------------------------------
def test_alphabet_sort_parser_tolerates_lists():
    assert alphabet_sort.parse_name_list("1. Ava\n2. Bella\n- Zoe.") == ["Ava", "Bella", "Zoe"]
    assert alphabet_sort.parse_name_list("Sorted: <answer>Ava, Bella</answer>") == ["Ava", "Bella"]


async def test_alphabet_sort_partial_credit():
    env = alphabet_sort.load_environment(num_train_examples=1, num_eval_examples=1)
    row = {"question": "Zoe, Ava, Mia", "answer": "Ava, Mia, Zoe"}
    swapped = await env.rollout(ScriptedClient(["Ava\nZoe\nMia"]), row)
    assert swapped.metrics == {"exact_order": 0.0, "partial_order": pytest.approx(2 / 3)}
    assert swapped.reward == pytest.approx(1 / 3)
    lower = await env.rollout(ScriptedClient(["ava, mia, zoe"]), row)
    assert lower.reward == 1.0


def test_alphabet_sort_rejects_bad_sizes():
    with pytest.raises(UserError, match="min_names"):
        alphabet_sort.load_environment(min_names=5, max_names=3)


# ----- arithmetic -----------------------------------------------------------------------------
def test_arithmetic_levels_and_overrides():
    easy = arithmetic.load_environment(num_train_examples=50, num_eval_examples=1).get_dataset()
    assert all(" + " in r["question"] and len(r["info"]["expression"].split()) == 3 for r in easy)
    assert all(0 <= int(r["answer"]) <= 18 for r in easy)
    hard = arithmetic.load_environment(num_train_examples=50, num_eval_examples=1, difficulty="hard").get_dataset()
    assert all(len(r["info"]["expression"].split()) == 5 for r in hard)
    custom = arithmetic.load_environment(num_train_examples=30, num_eval_examples=1, digits=2, operators=["*"])
    for row in custom.get_dataset():
        a, op, b = row["info"]["expression"].split()
        assert op == "*" and 10 <= int(a) <= 99 and int(row["answer"]) == int(a) * int(b)


def test_arithmetic_precedence():
    assert arithmetic.evaluate([2, 3, 4], ["+", "*"]) == 14
    assert arithmetic.evaluate([10, 2, 3], ["-", "*"]) == 4
    assert arithmetic.evaluate([5, 7], ["-"]) == -2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3 + 5 = 8", "8"),
        ("The answer is 1,234.", "1234"),
        ("5-3=2", "2"),
        ("It is -7", "-7"),
        ("\\boxed{12}, not 5", "12"),
        ("<answer>42</answer> (7 steps)", "42"),
        ("no number", None),
    ],
)
def test_arithmetic_answer_parser(text, expected):
    assert arithmetic.extract_integer(text) == expected


def test_arithmetic_rejects_bad_knobs():
    with pytest.raises(UserError, match="operators"):
        arithmetic.load_environment(operators="/")
    with pytest.raises(UserError, match="digits"):
        arithmetic.load_environment(digits=0)


# ----- wordle ---------------------------------------------------------------------------------
def test_wordle_marks_repeated_letters_like_wordle():
    assert wordle.score_guess("crane", "crane") == "GGGGG"
    assert wordle.score_guess("eerie", "crane") == "--Y-G"
    assert wordle.score_guess("speed", "abide") == "--Y-Y"  # only one 'e' in the secret: one yellow
    assert wordle.score_guess("lolly", "allow") == "YYG--"  # the green 'l' uses one of the two


def test_wordle_word_list_and_disjoint_splits():
    words = wordle.word_list()
    assert 300 <= len(words) <= 600 and all(len(w) == 5 and w.isalpha() and w.islower() for w in words)
    train, evals = wordle.split_words()
    assert not set(train) & set(evals) and len(train) + len(evals) == len(set(words))
    env = wordle.load_environment(num_train_examples=50, num_eval_examples=50)
    assert {r["answer"] for r in env.get_eval_dataset()} <= set(evals)
    assert {r["answer"] for r in env.get_dataset()} <= set(train)
    assert len({r["answer"] for r in env.get_eval_dataset()}) == 50  # no repeats while the pool lasts


async def test_wordle_self_check_first_guess_scores_one():
    env = wordle.load_environment(num_train_examples=1, num_eval_examples=3)
    for row in env.get_eval_dataset():
        state = await env.rollout(ScriptedClient([_reference_reply("wordle", row)]), row)
        assert state.reward == pytest.approx(1.0) and state.stop_condition == "solved" and state.turns == 1


async def test_wordle_full_game():
    env = wordle.load_environment(num_train_examples=1, num_eval_examples=1)
    assert isinstance(env, MultiTurnEnv) and env.max_turns == 6
    row = {"question": "Guess the secret five-letter word.", "answer": "crane", "info": {}}
    client = ScriptedClient(
        ["I think it is a bird", "<guess>toolong</guess>", "<guess>eerie</guess>", "<guess>CRANE</guess>"]
    )
    state = await env.rollout(client, row)
    assert state.error is None and state.stop_condition == "solved" and state.turns == 4
    feedback = [m["content"] for m in state.completion if m["role"] == "user"]
    assert feedback[0].startswith("Invalid guess: no <guess>...</guess>") and "Turns left: 5" in feedback[0]
    assert feedback[1].startswith("Invalid guess: 'toolong'")
    assert feedback[2] == "EERIE\n- - Y - G\nTurns left: 3."
    assert state.extra["guesses"] == ["eerie", "crane"] and state.extra["solved"] is True
    # the model saw the feedback of every earlier turn
    assert client.requests[3]["messages"][-1]["content"] == feedback[2]
    assert state.metrics["solved_reward"] == 1.0
    assert state.metrics["efficiency_reward"] == pytest.approx((6 - 4) / 5)
    assert state.metrics["format_reward"] == pytest.approx(3 / 4)
    assert state.metrics["letters_correct"] == 1.0
    assert state.reward == pytest.approx(0.7 + 0.2 * 0.4 + 0.1 * 0.75)


async def test_wordle_last_turn_guess_counts_and_failure_scores_format_only():
    env = wordle.load_environment(num_train_examples=1, num_eval_examples=1)
    row = {"question": "Guess.", "answer": "crane", "info": {}}
    last = await env.rollout(ScriptedClient(["<guess>eerie</guess>"] * 5 + ["<guess>crane</guess>"]), row)
    assert last.stop_condition == "solved" and last.turns == 6 and last.reward == pytest.approx(0.8)
    lost = await env.rollout(ScriptedClient(["<guess>eerie</guess>"]), row)
    assert lost.stop_condition == "max_turns" and lost.turns == 6
    assert lost.reward == pytest.approx(0.1) and lost.metrics["letters_correct"] == pytest.approx(0.2)


# ----- fact-search ----------------------------------------------------------------------------
def test_fact_search_answers_live_in_their_document():
    env = fact_search.load_environment(num_train_examples=40, num_eval_examples=20, seed=2)
    assert isinstance(env, ToolEnv) and set(env.tools) == {"search", "read"}
    train_q = {r["question"] for r in env.get_dataset()}
    eval_rows = env.get_eval_dataset()
    assert not train_q & {r["question"] for r in eval_rows}
    for row in eval_rows:
        doc = env.tools["read"](row["info"]["doc_id"])
        assert row["answer"] in doc
        assert env.tools["search"](row["question"])[0]["doc_id"] == row["info"]["doc_id"]


def test_fact_search_normalisation():
    assert fact_search.normalize("The Kessel River.") == fact_search.normalize("kessel river")
    assert fact_search.normalize("1743") != fact_search.normalize("1744")


async def test_fact_search_tool_rollout_self_check():
    env = fact_search.load_environment(num_train_examples=5, num_eval_examples=5, seed=4)
    row = env.get_eval_dataset()[0]
    doc_id = row["info"]["doc_id"]
    client = ScriptedClient(
        [
            tool_call_reply("search", json.dumps({"query": row["question"]}), "s1"),
            tool_call_reply("read", json.dumps({"doc_id": doc_id}), "r1"),
            f"<answer>{row['answer']}</answer>",
        ]
    )
    state = await env.rollout(client, row)
    assert state.error is None and state.stop_condition == "no_tool_calls"
    assert state.reward == 1.0
    assert state.metrics == {"exact_answer": 1.0, "tool_calls": 2.0, "read_gold_doc": 1.0}
    hits = json.loads(state.completion[1]["content"])
    assert hits[0] == {"doc_id": doc_id, "title": env.corpus[doc_id]["title"]}
    assert row["answer"] in state.completion[3]["content"]
    assert [t["function"]["name"] for t in client.requests[0]["tools"]] == ["search", "read"]


async def test_fact_search_bad_doc_id_is_text_for_the_model():
    env = fact_search.load_environment(num_train_examples=5, num_eval_examples=5)
    row = env.get_eval_dataset()[0]
    client = ScriptedClient([tool_call_reply("read", '{"doc_id": "doc-9999"}'), "<answer>no idea</answer>"])
    state = await env.rollout(client, row)
    assert state.completion[1]["content"].startswith("Error: read raised ValueError: no document 'doc-9999'")
    assert state.reward == 0.0 and state.error is None and state.metrics["read_gold_doc"] == 0.0

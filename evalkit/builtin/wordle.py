"""Wordle as a multi-turn game: guess a hidden five-letter word in six turns from letter feedback.

The model answers each turn with ``<guess>word</guess>``. The environment replies with the guess and
one mark per letter: ``G`` right letter in the right place, ``Y`` in the word elsewhere, ``-`` not in
the word (repeated letters are marked the way Wordle does). Any five-letter alphabetic guess is
accepted (the bundled list of ~500 common words is only where secret words come from); a reply
without a valid guess gets a message and still uses up the turn.

Reward (max 1.0): 0.7 for solving, up to 0.2 for solving in fewer turns, 0.1 for the ``<guess>``
format (averaged over turns). ``letters_correct`` (greens of the best guess / 5) is logged only.

Env args: ``num_train_examples``, ``num_eval_examples``, ``seed``, ``max_turns``.
"""

from __future__ import annotations

import random
from functools import lru_cache
from importlib import resources
from typing import Any

from evalkit.builtin._game import JudgedGameEnv
from evalkit.builtin._util import check_counts, split_rng
from evalkit.core.errors import UserError
from evalkit.envs import Rubric, XMLParser

SYSTEM_PROMPT = (
    "You are playing Wordle. Guess the secret five-letter English word. After each guess you get one "
    "mark per letter: G = right letter, right place; Y = in the word, wrong place; - = not in the word. "
    "Reply with exactly one guess per turn in this format: <guess>crane</guess>"
)
WORD_LENGTH = 5


@lru_cache(maxsize=1)
def word_list() -> tuple[str, ...]:
    """The bundled secret words (lowercase, five letters, sorted)."""
    text = resources.files("evalkit.builtin").joinpath("data/wordle_words.txt").read_text(encoding="utf-8")
    return tuple(word.strip().lower() for word in text.split() if word.strip())


def score_guess(guess: str, secret: str) -> str:
    """Wordle marks: greens first, then yellows only while unmatched copies of the letter remain."""
    marks = ["-"] * WORD_LENGTH
    remaining: dict[str, int] = {}
    for i, (g, s) in enumerate(zip(guess, secret)):
        if g == s:
            marks[i] = "G"
        else:
            remaining[s] = remaining.get(s, 0) + 1
    for i, g in enumerate(guess):
        if marks[i] != "G" and remaining.get(g, 0) > 0:
            marks[i] = "Y"
            remaining[g] -= 1
    return "".join(marks)


def _valid(guess: str | None) -> bool:
    return guess is not None and len(guess) == WORD_LENGTH and guess.isascii() and guess.isalpha()


class WordleEnv(JudgedGameEnv):
    """Game state lives in ``state``: ``guesses`` (valid ones), ``marks``, ``solved``, ``feedback``."""

    def setup_state(self, state: dict[str, Any]) -> None:
        state.update({"guesses": [], "marks": [], "solved": False, "feedback": ""})

    def judge(self, text: str, state: dict[str, Any]) -> str:
        raw = self.parser.parse_answer(text)
        guess = raw.strip().lower() if raw else None
        turns_left = self.max_turns - state["turn"]
        if not _valid(guess):
            shown = f"'{raw}'" if raw else "no <guess>...</guess>"
            return (
                f"Invalid guess: {shown}. Reply with one five-letter word as <guess>word</guess>. "
                f"Turns left: {turns_left}."
            )
        marks = score_guess(guess, state["answer"])
        state["guesses"].append(guess)
        state["marks"].append(marks)
        state["solved"] = guess == state["answer"]
        return f"{guess.upper()}\n{' '.join(marks)}\nTurns left: {turns_left}."


def solved_reward(state: dict) -> float:
    """1.0 when the secret word was guessed."""
    return float(state.get("solved", False))


def make_efficiency_reward(max_turns: int):
    def efficiency_reward(state: dict) -> float:
        """1.0 for solving on the first turn, falling linearly to 0 for solving on the last."""
        if not state.get("solved"):
            return 0.0
        return 1.0 if max_turns == 1 else (max_turns - state["turn"]) / (max_turns - 1)

    return efficiency_reward


def make_format_reward(parser: XMLParser):
    def format_reward(completion) -> float:
        """The parser's format score averaged over every model turn (not just the last)."""
        turns = [m for m in completion if m.get("role") == "assistant"]
        return sum(parser.format_score([m]) for m in turns) / len(turns) if turns else 0.0

    return format_reward


def letters_correct(state: dict) -> float:
    """Logged only: greens in the best valid guess, as a fraction of five."""
    return max((marks.count("G") / WORD_LENGTH for marks in state.get("marks", [])), default=0.0)


def split_words() -> tuple[list[str], list[str]]:
    """(train, eval) secret words: a fixed fifth held out, the same for every seed, so no seed leaks."""
    words = list(word_list())
    random.Random(1234).shuffle(words)
    cut = len(words) // 5
    return sorted(words[cut:]), sorted(words[:cut])


def make_rows(count: int, pool: list[str], seed: int, split: str) -> list[dict]:
    rng = split_rng(seed, split)
    rows = []
    for i in range(count):
        # Walk a shuffled copy first, so small datasets have no repeated words.
        if i % len(pool) == 0:
            order = pool[:]
            rng.shuffle(order)
        secret = order[i % len(pool)]
        rows.append({"question": "Guess the secret five-letter word.", "answer": secret, "info": {}})
    return rows


def load_environment(
    num_train_examples: int = 500,
    num_eval_examples: int = 100,
    seed: int = 0,
    max_turns: int = 6,
    system_prompt: str | None = None,
) -> WordleEnv:
    """Wordle; eval secrets come from a fixed fifth of the word list that training never uses."""
    check_counts(num_train_examples, num_eval_examples)
    if not isinstance(max_turns, int) or not 1 <= max_turns <= 20:
        raise UserError(f"max_turns must be an integer from 1 to 20, got {max_turns!r}")
    train_pool, eval_pool = split_words()
    parser = XMLParser(["guess"])
    rubric = Rubric(
        funcs=[solved_reward, make_efficiency_reward(max_turns), make_format_reward(parser), letters_correct],
        weights=[0.7, 0.2, 0.1, 0.0],
        parser=parser,
    )
    return WordleEnv(
        dataset=make_rows(num_train_examples, train_pool, seed, "train") or None,
        eval_dataset=make_rows(num_eval_examples, eval_pool, seed, "eval") or None,
        system_prompt=SYSTEM_PROMPT if system_prompt is None else system_prompt,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        sampling_args={"max_tokens": 48},  # a default; -t and [sampling] override it
        env_id="wordle",
    )

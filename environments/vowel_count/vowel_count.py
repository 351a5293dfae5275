"""Count the vowels in a word: a minimal environment written the way a user writes one.

Copy this folder to start your own. It uses only the public API (``evalkit.envs``) and ``datasets``:
build rows, pick a parser, write reward functions, return an environment from ``load_environment``.

Env args: ``num_examples``, ``seed``.
"""

from __future__ import annotations

import random
import re

from datasets import Dataset

from evalkit.envs import Parser, Rubric, SingleTurnEnv

WORDS = (
    "banana elephant computer umbrella kitchen orange mountain library holiday penguin "
    "tomato avocado giraffe notebook sandwich volcano dinosaur airplane harmony education "
    "rhythm strength question universe calendar butterfly chocolate adventure tornado festival"
).split()


def last_integer(text: str) -> str | None:
    """The last whole number in the reply, so "There are 3 vowels." and "3" both count."""
    numbers = re.findall(r"\d+", text)
    return numbers[-1] if numbers else None


def correct_count(completion, answer: str, parser: Parser) -> float:
    """1.0 when the reply's last number equals the vowel count."""
    return float(parser.parse_answer(completion) == answer)


def off_by_one(completion, answer: str, parser: Parser) -> float:
    """Logged only (weight 0): the count was wrong by exactly one."""
    got = parser.parse_answer(completion)
    return float(got is not None and abs(int(got) - int(answer)) == 1)


def load_environment(num_examples: int = 200, seed: int = 0) -> SingleTurnEnv:
    rng = random.Random(seed)
    rows = []
    for _ in range(num_examples):
        word = rng.choice(WORDS)
        rows.append(
            {
                "question": f"How many vowels (a, e, i, o, u) are in the word '{word}'?",
                "answer": str(sum(c in "aeiou" for c in word)),
            }
        )
    dataset = Dataset.from_list(rows)
    split = (
        dataset.train_test_split(test_size=0.2, seed=seed) if num_examples >= 5 else {"train": dataset, "test": dataset}
    )
    parser = Parser(extract_fn=last_integer)
    return SingleTurnEnv(
        dataset=split["train"],
        eval_dataset=split["test"],
        system_prompt="Count the vowels in the word. Answer with a single number.",
        parser=parser,
        rubric=Rubric(funcs=[correct_count, off_by_one], weights=[1.0, 0.0], parser=parser),
        sampling_args={"max_tokens": 16},  # a default; -t and [sampling] override it
    )

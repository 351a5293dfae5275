"""Sort a list of first names alphabetically; exact order scores 1.0, near misses get partial credit.

The reply is read as a list separated by commas or new lines (bullets, numbering and ``<answer>``
tags are tolerated). Reward = 0.5 * exact order + 0.5 * LCS similarity of the name sequence, so a
list with one name out of place still earns most of the partial half.

Env args: ``num_train_examples``, ``num_eval_examples``, ``seed``, ``min_names``, ``max_names``.
"""

from __future__ import annotations

import re

from evalkit.builtin._util import check_counts, lcs_ratio, split_rng
from evalkit.core.errors import UserError
from evalkit.envs import Parser, Rubric, SingleTurnEnv, fast_reward

SYSTEM_PROMPT = (
    "Sort the given names in alphabetical order. "
    "Reply with only the sorted names, separated by commas."
)

NAMES = (
    "Aaron Abigail Adam Alice Amelia Andrew Anna Arthur Ava Benjamin Bella Caleb Carla Charlotte Chloe "
    "Daniel David Diana Dylan Edward Eleanor Elijah Ella Emily Emma Ethan Felix Fiona Frank Gabriel Grace "
    "Hannah Harry Hazel Henry Isaac Isabel Ivy Jack Jacob James Jasmine Julia Kevin Laura Leah Leo Liam "
    "Lily Lucas Lucy Maria Mason Maya Mia Nathan Nina Noah Nora Oliver Olivia Oscar Paul Peter Quinn "
    "Rachel Rose Ruby Ryan Samuel Sarah Sofia Sophie Thomas Tyler Victor Violet William Zoe"
).split()

_ITEM_PREFIX = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")
_ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*(?:</answer>|$)", re.DOTALL)


def parse_name_list(text: str) -> list[str]:
    """Names in reply order; splits on commas and new lines, drops bullets, numbers and a final period."""
    tagged = _ANSWER_TAG.findall(text)
    body = tagged[-1] if tagged else text
    items = []
    for piece in re.split(r"[,\n;]", body):
        piece = _ITEM_PREFIX.sub("", piece).strip().strip(".").strip()
        if piece:
            items.append(piece)
    return items


class NameListParser(Parser):
    """``parse_answer`` returns the names joined by ``", "`` (a canonical form reward functions split)."""

    def parse(self, text: str) -> str:
        return ", ".join(parse_name_list(text))


def _names(parser: Parser, completion) -> list[str]:
    parsed = parser.parse_answer(completion) or ""
    return [name.lower() for name in parsed.split(", ") if name]


@fast_reward
def exact_order(completion, answer: str, parser: Parser) -> float:
    """1.0 when the reply lists exactly the expected names in the expected order."""
    return float(_names(parser, completion) == [n.lower() for n in answer.split(", ")])


@fast_reward
def partial_order(completion, answer: str, parser: Parser) -> float:
    """LCS similarity between the reply's name sequence and the sorted one (0..1)."""
    return lcs_ratio(_names(parser, completion), [n.lower() for n in answer.split(", ")])


def make_rows(count: int, seed: int, split: str, min_names: int, max_names: int) -> list[dict]:
    rng = split_rng(seed, split)
    rows = []
    for _ in range(count):
        names = rng.sample(NAMES, rng.randint(min_names, max_names))
        rows.append({"question": ", ".join(names), "answer": ", ".join(sorted(names)), "info": {"names": names}})
    return rows


def load_environment(
    num_train_examples: int = 500,
    num_eval_examples: int = 100,
    seed: int = 0,
    min_names: int = 3,
    max_names: int = 5,
    system_prompt: str | None = None,
) -> SingleTurnEnv:
    """Alphabet-sort: lists of distinct names drawn from ``seed`` (eval from a different stream)."""
    check_counts(num_train_examples, num_eval_examples)
    if not 2 <= min_names <= max_names <= len(NAMES):
        raise UserError(f"need 2 <= min_names <= max_names <= {len(NAMES)}, got {min_names} and {max_names}")
    parser = NameListParser()
    rubric = Rubric(funcs=[exact_order, partial_order], weights=[0.5, 0.5], parser=parser)
    return SingleTurnEnv(
        dataset=make_rows(num_train_examples, seed, "train", min_names, max_names) or None,
        eval_dataset=make_rows(num_eval_examples, seed, "eval", min_names, max_names) or None,
        system_prompt=SYSTEM_PROMPT if system_prompt is None else system_prompt,
        parser=parser,
        rubric=rubric,
        sampling_args={"max_tokens": 128},  # a default; -t and [sampling] override it
        env_id="alphabet-sort",
    )

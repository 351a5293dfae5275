"""Integer arithmetic with a difficulty knob; the answer is the last integer in the reply.

Levels: ``easy`` = two one-digit numbers added (sized so SmolLM2-135M scores inside 10-80%),
``medium`` = two two-digit numbers with + or -, ``hard`` = three three-digit numbers with +, - or *.
``digits``, ``operators`` and ``num_terms`` override the level. The parser is lenient: it takes
``\\boxed{...}``, then ``<answer>...</answer>``, then the last integer anywhere in the reply.

Measured with the embedded SmolLM2-135M-Instruct through ``prime eval run`` (30 eval examples,
seed 0, env system prompt, max_tokens 64): greedy 0.50; temperature 1.0, 4 rollouts each: 0.19,
pass@4 0.50, reward varying inside 50% of groups. With max_tokens 32 (the RL example): greedy 0.23,
temperature 1.0 0.21 (engine measured directly).

Env args: ``num_train_examples``, ``num_eval_examples``, ``seed``, ``difficulty``, ``digits``,
``operators``, ``num_terms``.
"""

from __future__ import annotations

import re

from evalkit.builtin._util import check_counts, split_rng
from evalkit.core.errors import UserError
from evalkit.envs import Parser, Rubric, SingleTurnEnv, fast_reward

SYSTEM_PROMPT = "Solve the arithmetic problem. End your reply with the final answer as a single number."

LEVELS: dict[str, dict] = {
    "easy": {"digits": 1, "operators": "+", "num_terms": 2},
    "medium": {"digits": 2, "operators": "+-", "num_terms": 2},
    "hard": {"digits": 3, "operators": "+-*", "num_terms": 3},
}
ALLOWED_OPERATORS = "+-*"

_BOXED = re.compile(r"\\boxed\{\s*([^{}]*?)\s*\}")
_ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
_INTEGER = re.compile(r"(?<![\d\w])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)")


def extract_integer(text: str) -> str | None:
    """``\\boxed{}`` first, then ``<answer>``, then the last integer; thousands commas removed."""
    for pattern in (_BOXED, _ANSWER_TAG):
        found = pattern.findall(text)
        if found:
            text = found[-1]
            break
    numbers = _INTEGER.findall(text)
    if not numbers:
        return None
    return numbers[-1].replace(",", "")


@fast_reward
def correct_answer(completion, answer: str, parser: Parser) -> float:
    """1.0 when the parsed integer equals the expected one (leading zeros and '+' ignored)."""
    got = parser.parse_answer(completion)
    return float(got is not None and int(got) == int(answer))


@fast_reward
def has_number(completion, parser: Parser) -> float:
    """Logged only (weight 0): did the reply contain any integer at all?"""
    return float(parser.parse_answer(completion) is not None)


def evaluate(numbers: list[int], operators: list[str]) -> int:
    """Value of ``n0 op0 n1 op1 ...`` with * before + and -, without ``eval``."""
    terms: list[int] = [numbers[0]]
    signs: list[int] = [1]
    for op, number in zip(operators, numbers[1:]):
        if op == "*":
            terms[-1] *= number
        else:
            terms.append(number)
            signs.append(1 if op == "+" else -1)
    return sum(sign * term for sign, term in zip(signs, terms))


def make_rows(count: int, seed: int, split: str, digits: int, operators: str, num_terms: int) -> list[dict]:
    rng = split_rng(seed, split)
    low, high = (0 if digits == 1 else 10 ** (digits - 1)), 10**digits - 1
    rows = []
    for _ in range(count):
        numbers = [rng.randint(low, high) for _ in range(num_terms)]
        ops = [rng.choice(operators) for _ in range(num_terms - 1)]
        expression = str(numbers[0]) + "".join(f" {op} {n}" for op, n in zip(ops, numbers[1:]))
        rows.append(
            {
                "question": f"What is {expression}?",
                "answer": str(evaluate(numbers, ops)),
                "info": {"expression": expression},
            }
        )
    return rows


def load_environment(
    num_train_examples: int = 500,
    num_eval_examples: int = 100,
    seed: int = 0,
    difficulty: str = "easy",
    digits: int | None = None,
    operators: str | list[str] | None = None,
    num_terms: int | None = None,
    system_prompt: str | None = None,
) -> SingleTurnEnv:
    """Arithmetic at ``difficulty`` (easy/medium/hard), with explicit knobs overriding the level."""
    check_counts(num_train_examples, num_eval_examples)
    if difficulty not in LEVELS:
        raise UserError(f"unknown difficulty {difficulty!r}; use one of: {', '.join(LEVELS)}")
    level = LEVELS[difficulty]
    digits = level["digits"] if digits is None else digits
    ops = "".join(operators) if operators is not None else level["operators"]
    num_terms = level["num_terms"] if num_terms is None else num_terms
    if not isinstance(digits, int) or not 1 <= digits <= 9:
        raise UserError(f"digits must be an integer from 1 to 9, got {digits!r}")
    if not ops or any(op not in ALLOWED_OPERATORS for op in ops):
        raise UserError(f"operators must be a non-empty combination of {ALLOWED_OPERATORS!r}, got {operators!r}")
    if not isinstance(num_terms, int) or not 2 <= num_terms <= 10:
        raise UserError(f"num_terms must be an integer from 2 to 10, got {num_terms!r}")
    parser = Parser(extract_fn=extract_integer)
    rubric = Rubric(funcs=[correct_answer, has_number], weights=[1.0, 0.0], parser=parser)
    return SingleTurnEnv(
        dataset=make_rows(num_train_examples, seed, "train", digits, ops, num_terms) or None,
        eval_dataset=make_rows(num_eval_examples, seed, "eval", digits, ops, num_terms) or None,
        system_prompt=SYSTEM_PROMPT if system_prompt is None else system_prompt,
        parser=parser,
        rubric=rubric,
        sampling_args={"max_tokens": 64},  # a default; -t and [sampling] override it
        env_id="arithmetic",
    )

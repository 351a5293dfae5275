"""Add two one-digit numbers: a legacy verifiers environment (``load_environment`` returning a
``vf.SingleTurnEnv``), the kind the Tinker and SkyRL recipes train on.

The same task as ``environments/digit_sums`` (a v1 taskset, which prime-rl loads), written the way
those recipes load environments: ``vf.load_environment("digit-sums-vf", **env_args)``.

Env args: ``num_examples``, ``seed``.
"""

import random
import re

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = "Solve the arithmetic problem. End your reply with the final answer as a single number."
_INTEGER = re.compile(r"-?\d+")


def last_integer(text: str) -> str | None:
    numbers = _INTEGER.findall(text or "")
    return numbers[-1] if numbers else None


def correct(completion, answer: str, parser: vf.Parser) -> float:
    """1.0 when the last integer in the reply is the sum."""
    return float(parser.parse_answer(completion) == answer)


def load_environment(num_examples: int = 500, seed: int = 0) -> vf.SingleTurnEnv:
    rng = random.Random(seed)
    rows = []
    for _ in range(num_examples):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        rows.append({"question": f"What is {a} + {b}?", "answer": str(a + b)})
    parser = vf.Parser(extract_fn=last_integer)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt=SYSTEM_PROMPT, parser=parser,
                            rubric=vf.Rubric(funcs=[correct], weights=[1.0], parser=parser))

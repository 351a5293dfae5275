"""A bug in a reward function: it divides by zero on every rollout."""

import verifiers as vf
from datasets import Dataset


def load_environment(num_examples: int = 2):
    def broken(completion, answer) -> float:
        return 1.0 / 0

    def length(completion) -> float:
        return float(len(completion[-1]["content"] or ""))

    rows = [{"question": f"What is {i}+1?", "answer": str(i + 1)} for i in range(num_examples)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[broken, length]))

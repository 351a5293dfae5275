"""Planted flaw: a reward with a random component (a sampled judge without a seed, say)."""

import random

from evalkit.envs import Rubric, SingleTurnEnv


def load_environment():
    def exact(completion, answer) -> float:
        return float((completion[-1]["content"] or "").strip() == answer)

    def noisy(completion) -> float:
        return random.random() * 0.01

    rows = [{"question": f"What is {i}+{i + 2}?", "answer": str(2 * i + 2)} for i in range(6)]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[exact, noisy], weights=[0.99, 1.0]))

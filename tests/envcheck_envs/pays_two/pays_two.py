"""Planted flaw: a correct answer pays 2.0 where the declared range is [0, 1]."""

from evalkit.envs import Rubric, SingleTurnEnv


def load_environment():
    def exact(completion, answer) -> float:
        return 2.0 if (completion[-1]["content"] or "").strip() == answer else 0.0

    rows = [{"question": f"What is {i}+{i + 2}?", "answer": str(2 * i + 2)} for i in range(6)]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[exact]))

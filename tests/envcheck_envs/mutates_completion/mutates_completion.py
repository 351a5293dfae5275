"""Planted flaw: a reward function that "normalizes" the completion in place (later functions, and the
stored row, then see text the model never wrote)."""

from evalkit.envs import Rubric, SingleTurnEnv


def load_environment():
    def exact(completion, answer) -> float:
        completion[-1]["content"] = (completion[-1]["content"] or "").strip().lower() + " "
        return float(completion[-1]["content"].strip() == answer)

    rows = [{"question": f"What is {i}+{i + 2}?", "answer": str(2 * i + 2)} for i in range(6)]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[exact]))

"""The control: addition, exact-match reward."""

from evalkit.envs import Parser, Rubric, SingleTurnEnv


def rows(n: int = 6) -> list[dict]:
    return [{"question": f"What is {i}+{i + 2}?", "answer": str(2 * i + 2)} for i in range(n)]


def load_environment(num_examples: int = 6):
    def exact(completion, answer) -> float:
        return float((completion[-1]["content"] or "").strip() == answer)

    return SingleTurnEnv(dataset=rows(num_examples), parser=Parser(), rubric=Rubric(funcs=[exact]))

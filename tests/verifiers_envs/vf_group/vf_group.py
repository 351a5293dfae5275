"""A rubric with a group-level reward function: it sees every rollout of an example at once."""

import verifiers as vf
from datasets import Dataset


def load_environment(num_examples: int = 2):
    def correct(completion, answer) -> float:
        return 1.0 if (completion[-1]["content"] or "").strip() == answer else 0.0

    def consensus(completions) -> list[float]:
        texts = [c[-1]["content"] for c in completions]
        return [1.0 if texts.count(t) == len(texts) else 0.0 for t in texts]

    def group_size(completions) -> list[float]:
        return [float(len(completions))] * len(completions)

    rubric = vf.Rubric(funcs=[correct, consensus, group_size], weights=[1.0, 0.5, 0.0])
    rows = [{"question": f"What is {i}+{i}?", "answer": str(2 * i)} for i in range(num_examples)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=rubric)

"""MathRubric (math-verify) on boxed answers."""

import verifiers as vf
from datasets import Dataset


def load_environment(num_examples: int = 2):
    rows = [{"question": f"What is {i}+{2 * i}?", "answer": str(3 * i)} for i in range(1, num_examples + 1)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt="Put the final answer in boxed{}.",
                            rubric=vf.MathRubric())

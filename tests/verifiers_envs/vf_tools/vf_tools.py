"""ToolEnv with an async tool; the dataset comes from a builder function."""

import asyncio
import re

import verifiers as vf
from datasets import Dataset


async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    await asyncio.sleep(0)
    return a + b


def load_environment(num_examples: int = 3):
    def build_dataset() -> Dataset:
        return Dataset.from_list(
            [{"question": f"What is {10 * i + 3}+{i + 4}? Use the add tool.", "answer": str(11 * i + 7)}
             for i in range(num_examples)]
        )

    def correct(completion, answer) -> float:
        numbers = re.findall(r"-?\d+", completion[-1]["content"] or "")
        return 1.0 if numbers and numbers[-1] == answer else 0.0  # the last number stated, as gsm8k-style rubrics read

    return vf.ToolEnv(dataset=build_dataset, tools=[add], rubric=vf.Rubric(funcs=[correct]), max_turns=4)

"""Rows whose `info` carries a serialized task payload with the task's own string id (`example_id`), the shape
of environments built from exported task sets: verifiers reads the rollout's input (prompt, answer, info,
example_id) from that payload, so the rows it writes carry the task's id, not a position."""

import json

import verifiers as vf
from datasets import Dataset

SPLITS = ("train", "test")


def _payload(split: str, i: int) -> str:
    question = f"What is {i}+{2 * i + 1}?"
    return json.dumps({
        "example_id": f"{split}-{i:05d}",
        "prompt": [{"role": "user", "content": question}],
        "answer": str(3 * i + 1),
        "info": {"source": split, "number": i},
    })


def load_environment(num_examples: int = 5, offset: int = 3) -> vf.Environment:
    rows = [{"question": f"placeholder {i}", "answer": "", "info": {"task": _payload("train", i)}}
            for i in range(offset, offset + num_examples)]

    def correct(completion, answer) -> float:
        text = completion[-1]["content"] or "" if completion else ""
        return 1.0 if answer and answer in text else 0.0

    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt="Answer with the sum.",
                            rubric=vf.Rubric(funcs=[correct]))

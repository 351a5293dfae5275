"""A Hub math environment's shape: a plain-string `task` column naming the dataset, an empty system prompt,
rows imported from a sibling module, a boxed-answer reward."""

import verifiers as vf
from datasets import Dataset
from verifiers.utils.data_utils import extract_boxed_answer
from vf_task_str_rows import ROWS


def load_environment(system_prompt: str | None = "") -> vf.Environment:
    dataset = Dataset.from_list(ROWS).map(
        lambda x: {"question": x["problem"] + "\nPut the final answer in \\boxed{}.", "task": "hub-math"}
    )
    dataset = dataset.select_columns(["question", "answer", "task"])
    parser = vf.Parser(extract_fn=extract_boxed_answer)

    def correct(completion, answer) -> float:
        return 1.0 if (parser.parse_answer(completion) or "") == answer else 0.0

    return vf.SingleTurnEnv(dataset=dataset, system_prompt=system_prompt, parser=parser,
                            rubric=vf.Rubric(funcs=[correct], parser=parser))

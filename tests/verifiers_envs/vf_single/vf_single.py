"""Single-turn addition with an XML answer format, a system prompt, few-shot messages, weights and a metric."""

import verifiers as vf
from datasets import Dataset


def load_environment(num_examples: int = 4):
    parser = vf.XMLParser(["think", "answer"], answer_field="answer")

    def correct_answer(parser, completion, answer) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    def answer_length(completion) -> float:
        return float(len(completion[-1]["content"] or ""))

    rubric = vf.Rubric(funcs=[correct_answer, parser.get_format_reward_func()], weights=[1.0, 0.5], parser=parser)
    rubric.add_metric(answer_length)
    rows = [{"question": f"What is {i}+{i + 3}?", "answer": str(2 * i + 3)} for i in range(num_examples)]
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(rows),
        system_prompt="Think step by step, then give the final number in answer tags.",
        few_shot=[
            {"role": "user", "content": "What is 1+1?"},
            {"role": "assistant", "content": "<think>\none plus one\n</think>\n<answer>\n2\n</answer>"},
        ],
        parser=parser,
        rubric=rubric,
    )

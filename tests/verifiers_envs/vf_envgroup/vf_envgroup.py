"""An EnvGroup of two single-turn environments with their own rubrics (verifiers' math_group shape)."""

import verifiers as vf
from datasets import Dataset
from verifiers.utils.data_utils import extract_boxed_answer


def load_environment():
    parser = vf.Parser(extract_fn=extract_boxed_answer)

    def sum_correct(completion, answer) -> float:
        return 1.0 if (parser.parse_answer(completion) or "") == answer else 0.0

    def echoed(completion, prompt) -> float:
        return 1.0 if prompt[-1]["content"].split()[-1] in str(completion[-1]["content"]) else 0.0

    sums = vf.SingleTurnEnv(
        dataset=Dataset.from_list(
            [{"question": f"What is {a}+{b}?", "answer": str(a + b)} for a, b in [(2, 3), (7, 5)]]
        ),
        system_prompt="Put the final answer in \\boxed{}.",
        parser=parser,
        rubric=vf.Rubric(funcs=[sum_correct, parser.get_format_reward_func()], weights=[1.0, 0.0], parser=parser),
    )
    echoes = vf.SingleTurnEnv(
        dataset=Dataset.from_list([{"question": f"Say the word {w}"} for w in ("delta", "kilo")]),
        rubric=vf.Rubric(funcs=[echoed]),
    )
    return vf.EnvGroup([sums, echoes], env_names=["sums", "echoes"])

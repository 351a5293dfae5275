"""SingleTurnEnv that rewrites the prompt in ``setup_state`` (the shape of clockbench: a system message
prepended to ``state["prompt"]``): verifiers sends and records the rewritten prompt."""

import verifiers as vf
from datasets import Dataset
from verifiers.types import SystemMessage


class PrefixedEnv(vf.SingleTurnEnv):
    async def setup_state(self, state):
        state["prompt"] = [SystemMessage(content="Answer with the sum in <answer></answer> tags."), *state["prompt"]]
        return await super().setup_state(state)


def load_environment(num_examples: int = 3):
    dataset = Dataset.from_list([{"question": f"What is {i}+{i + 2}?", "answer": str(2 * i + 2)}
                                 for i in range(num_examples)])
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def correct(completion, answer) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    return PrefixedEnv(dataset=dataset, parser=parser, rubric=vf.Rubric(funcs=[correct], parser=parser))

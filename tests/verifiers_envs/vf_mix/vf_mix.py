"""An EnvGroup: two environments with their own rubrics, rows routed by info["env_id"]."""

import verifiers as vf
from datasets import Dataset


def load_environment():
    def exact(completion, answer) -> float:
        return float((completion[-1]["content"] or "").strip() == answer)

    def double_exact(completion, answer) -> float:
        return 2.0 * exact(completion, answer)

    small = vf.SingleTurnEnv(dataset=Dataset.from_list([{"question": "What is 1+1?", "answer": "2"}]),
                             rubric=vf.Rubric(funcs=[exact]))
    large = vf.SingleTurnEnv(dataset=Dataset.from_list([{"question": "What is 20+5?", "answer": "25"}]),
                             rubric=vf.Rubric(funcs=[double_exact]))
    return vf.EnvGroup(envs=[small, large], env_names=["small", "large"])

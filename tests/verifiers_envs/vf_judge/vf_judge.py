"""JudgeRubric: an LLM judge (its own OpenAI client) decides whether the answer is right."""

import verifiers as vf
from datasets import Dataset
from openai import AsyncOpenAI


def load_environment(judge_base_url: str, num_examples: int = 2):
    rubric = vf.JudgeRubric(judge_client=AsyncOpenAI(base_url=judge_base_url, api_key="unused"), judge_model="judge")

    async def judged_correct(judge, prompt, completion, answer, state) -> float:
        verdict = await judge(prompt, completion, answer, state)
        return 1.0 if "yes" in verdict.lower() else 0.0

    rubric.add_reward_func(judged_correct)
    rows = [{"question": f"What is {i}+5?", "answer": str(i + 5)} for i in range(num_examples)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=rubric)

"""Multi-turn counting game: a @vf.stop condition reads state["trajectory"]; setup_state is async."""

import verifiers as vf
from datasets import Dataset


class CounterEnv(vf.MultiTurnEnv):
    async def setup_state(self, state: vf.State) -> vf.State:
        state["target"] = int(state["answer"])
        return state

    @vf.stop
    async def reached_target(self, state: vf.State) -> bool:
        if not state["trajectory"]:
            return False
        last = state["trajectory"][-1]["completion"][-1]
        return (last.content or "").strip() == str(state["target"])

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs) -> vf.Messages:
        said = (messages[-1].content or "").strip()
        return [{"role": "user", "content": f"Good. Now say the next number after {said}."}]


def load_environment(num_examples: int = 3):
    rows = [{"question": "Say the next number after 0.", "answer": str(n + 2)} for n in range(num_examples)]

    def reached(state) -> float:
        return 1.0 if state["stop_condition"] == "reached_target" else 0.0

    return CounterEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[reached]), max_turns=8)

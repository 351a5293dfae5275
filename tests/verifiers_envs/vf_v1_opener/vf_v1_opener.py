"""A v1 taskset whose env opens the exchange itself (the shape of verifiers' user-sim env).

Its tasks carry no prompt: the scenario stays on a scoring-side field, and the env's ``run`` speaks first
with ``interaction.turn(...)``, so the model's first request holds a user message the task never had.
"""

import verifiers.v1 as vf


class AddData(vf.TaskData):
    question: str
    answer: str


class AddTask(vf.Task[AddData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float((trace.last_reply or "").strip() == self.data.answer)


class OpenerEnv(vf.SingleAgentEnv):
    async def run(self, task, agents):
        async with agents.agent.interaction(task) as chat:
            await chat.turn(f"Quick one: {task.data.question}")


class AddConfig(vf.TasksetConfig):
    num_tasks: int = 2


class AddTaskset(vf.Taskset[AddTask, AddConfig]):
    def load(self):
        return [AddTask(AddData(idx=i, system_prompt="Answer with the number only.", question=f"What is {i}+{i + 1}?",
                                answer=str(2 * i + 1)), self.config.task)
                for i in range(self.config.num_tasks)]


__all__ = ["OpenerEnv", "AddTaskset"]

"""A v1 taskset whose single-agent Env scripts the user (``SingleAgentEnv.run`` over an interaction).

The env opens the task, reads the agent's first reply, then asks a follow-up built from it, as a
scripted user would; the task's reward checks both replies.
"""

import verifiers.v1 as vf


class CountData(vf.TaskData):
    answer: str


class CountTask(vf.Task[CountData]):
    @vf.reward(weight=1.0)
    async def follows(self, trace: vf.Trace) -> float:
        return float((trace.last_reply or "").strip() == str(int(self.data.answer) + 1))

    @vf.metric
    async def turns(self, trace: vf.Trace) -> float:
        return float(trace.num_turns)


class ScriptedUserEnv(vf.SingleAgentEnv):
    async def run(self, task, agents):
        async with agents.agent.interaction(task) as chat:
            first = await chat.turn()
            await chat.turn(f"Good. Now say the next number after {first.last_reply.strip()}.")


class CountConfig(vf.TasksetConfig):
    num_tasks: int = 2


class CountTaskset(vf.Taskset[CountTask, CountConfig]):
    def load(self):
        return [CountTask(CountData(idx=i, prompt=f"What is {i}+{i}?", answer=str(2 * i)), self.config.task)
                for i in range(self.config.num_tasks)]


__all__ = ["ScriptedUserEnv", "CountTaskset"]

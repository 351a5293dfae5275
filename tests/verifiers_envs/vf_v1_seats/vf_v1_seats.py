"""A v1 taskset with its own multi-agent Env: two seats (the shape of verifiers' proposer_solver).

The ``solver`` seat answers the task; the env mints a follow-up task from its reply for the ``checker`` seat
(pinned to verifiers' ``null`` harness, and not trained on: ``setup``). ``finalize`` judges across the two
traces. ``offset`` is the env's own knob (``--env.offset`` in verifiers' CLI).
"""

import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float((trace.last_reply or "").strip() == self.data.answer)


class SeatsEnvConfig(vf.EnvConfig):
    solver: vf.AgentConfig = vf.AgentConfig()
    checker: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, max_turns=2)
    offset: int = 1


class SeatsEnv(vf.Env[SeatsEnvConfig]):
    async def setup(self, agents):
        agents.checker.trainable = False

    async def run(self, task, agents):
        solved = await agents.solver.run(task)
        reply = (solved.last_reply or "").strip() or "0"
        follow = SumTask(SumData(idx=task.data.idx, prompt=f"What is {reply}+{self.config.offset}?",
                                 answer=str(int(reply) + self.config.offset if reply.isdigit() else -1)))
        await agents.checker.run(follow)

    async def finalize(self, task, episode):
        checker = next(t for t in episode.traces if t.agent.name == "checker")
        for trace in episode.traces:
            if trace.agent.name == "solver":
                trace.record_metric("checked", float(checker.reward))


class SeatsConfig(vf.TasksetConfig):
    num_tasks: int = 2


class SeatsTaskset(vf.Taskset[SumTask, SeatsConfig]):
    def load(self):
        return [SumTask(SumData(idx=i, prompt=f"What is {i}+{i + 1}?", answer=str(2 * i + 1)), self.config.task)
                for i in range(self.config.num_tasks)]


__all__ = ["SeatsEnv", "SeatsTaskset"]

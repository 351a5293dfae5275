"""A verifiers v1 taskset: typed task data, a weighted @vf.reward and a @vf.metric."""

import verifiers.v1 as vf


class AddData(vf.TaskData):
    answer: str


class AddTask(vf.Task[AddData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == self.data.answer)

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class AddConfig(vf.TasksetConfig):
    num_tasks: int = 3


class AddTaskset(vf.Taskset[AddTask, AddConfig]):
    def load(self):
        return [
            AddTask(AddData(idx=i, prompt=f"What is {i}+{i + 1}?", answer=str(2 * i + 1),
                            system_prompt="Reply with the number only."), self.config.task)
            for i in range(self.config.num_tasks)
        ]


__all__ = ["AddTaskset"]

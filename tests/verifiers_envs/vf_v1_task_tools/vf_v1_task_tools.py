"""A v1 taskset whose tool server belongs to each rollout (``Task.toolsets``; verifiers starts one per rollout, as
``python -m vf_v1_task_tools``), advertised without a server prefix (``TOOL_PREFIX = None``: the tool is ``add``)."""

import re

import verifiers.v1 as vf


class AddTools(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = None  # advertised bare: ``add``

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @classmethod
    def toolsets(cls, config):
        return [AddTools(vf.ToolsetConfig())]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        numbers = re.findall(r"-?\d+", trace.last_reply or "")
        return float(bool(numbers) and numbers[0] == self.data.answer)


class TaskToolsConfig(vf.TasksetConfig):
    num_tasks: int = 2


class TaskToolsTaskset(vf.Taskset[SumTask, TaskToolsConfig]):
    def load(self):
        return [SumTask(SumData(idx=i, prompt=f"What is {i + 1}+{i + 2}?", answer=str(2 * i + 3)), self.config.task)
                for i in range(self.config.num_tasks)]


__all__ = ["TaskToolsTaskset"]

if __name__ == "__main__":
    AddTools.run()

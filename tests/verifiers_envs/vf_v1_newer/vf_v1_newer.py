"""A v1 taskset written against verifiers 0.4: it imports a module only 0.4 has (`verifiers.v1.configs.select`, for
the idx ranges its config keeps), as environments tracking verifiers' main branch do. Under 0.3.1 the import
fails: verifiers is installed, that module is not."""

import verifiers.v1 as vf
from verifiers.v1.configs.select import TaskMatchConfig


class EchoData(vf.TaskData):
    answer: str


class EchoTask(vf.Task[EchoData]):
    @vf.reward(weight=1.0)
    async def echoed(self, trace: vf.Trace) -> float:
        return float(self.data.answer in trace.last_reply)


class EchoConfig(vf.TasksetConfig):
    num_tasks: int = 3
    keep: TaskMatchConfig = TaskMatchConfig()


class EchoTaskset(vf.Taskset[EchoTask, EchoConfig]):
    def load(self):
        words = ["apple", "river", "stone", "cloud"][: self.config.num_tasks]
        return [EchoTask(EchoData(idx=i, prompt=f"Say the word {word}.", answer=word), self.config.task)
                for i, word in enumerate(words)]


__all__ = ["EchoTaskset"]

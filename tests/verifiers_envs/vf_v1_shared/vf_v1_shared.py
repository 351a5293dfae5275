"""A v1 taskset whose tool server is shared by every rollout (``Taskset.toolsets``; the shape of verifiers' own
wiki_search): verifiers starts the server once for the whole run, as a subprocess (``python -m vf_v1_shared``)."""

import os
import re
from pathlib import Path

import verifiers.v1 as vf


class CalcToolsConfig(vf.SharedToolsetConfig):
    log: str = ""
    """A file the server appends one line to when it starts and one per tool call (empty: no log)."""
    echo: str = ""
    """Text appended to every result (tests of what reaches the run's files)."""
    echo_env: str = ""
    """The name of a variable whose value is appended to every result (empty: none)."""
    big: int = 0
    """How many filler characters are appended to every result."""


class CalcToolset(vf.Toolset[CalcToolsConfig]):
    TOOL_PREFIX = "calc"

    async def setup(self) -> None:
        self._note(f"start {os.getpid()}")

    def _note(self, line: str) -> None:
        if self.config.log:
            with Path(self.config.log).open("a") as f:
                f.write(line + "\n")

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Add two integers."""
        self._note(f"add {os.getpid()}")
        extra = [
            self.config.echo,
            os.environ.get(self.config.echo_env, "") if self.config.echo_env else "",
            "x" * self.config.big,
        ]
        return " ".join([str(a + b), *filter(None, extra)])


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        numbers = re.findall(r"-?\d+", trace.last_reply or "")
        # the first number stated: a reply quotes the tool's result, which may carry more text and numbers after it
        return float(bool(numbers) and numbers[0] == self.data.answer)


class SharedCalcConfig(vf.TasksetConfig):
    tools: CalcToolsConfig = CalcToolsConfig()
    num_tasks: int = 2


class SharedCalcTaskset(vf.Taskset[SumTask, SharedCalcConfig]):
    @classmethod
    def toolsets(cls, config: SharedCalcConfig) -> list[vf.Toolset]:
        return [CalcToolset(config.tools)]

    def load(self):
        return [SumTask(SumData(idx=i, prompt=f"What is {i + 3}+{i + 4}? Use the calculator.", answer=str(2 * i + 7)),
                        self.config.task)
                for i in range(self.config.num_tasks)]


__all__ = ["SharedCalcTaskset"]

if __name__ == "__main__":
    CalcToolset.run()

"""A v1 taskset for a shell agent whose commands read standard input (`wc -c`, `read`), as a careless command does:
what they see is whatever the harness program was given as stdin. Right when that input is empty."""

import verifiers.v1 as vf


class ShellData(vf.TaskData):
    expected: str


class ShellTask(vf.Task[ShellData]):
    @vf.reward(weight=1.0)
    async def saw_nothing(self, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == self.data.expected)


class ShellTaskset(vf.Taskset[ShellTask, vf.TasksetConfig]):
    def load(self):
        commands = [("wc -c", "0"), ('read -r line; echo "[$line]"', "[]")]
        return [ShellTask(ShellData(idx=i, prompt=f"Run `{command}` in the shell and reply with what it printed.",
                                    expected=expected), self.config.task)
                for i, (command, expected) in enumerate(commands)]


__all__ = ["ShellTaskset"]

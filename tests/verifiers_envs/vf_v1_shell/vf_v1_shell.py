"""A verifiers v1 taskset whose tasks ask for shell commands: the ``commands`` knob, one task each ("Run `CMD`").

Played by tests/support/bash_server.py, which runs the command in backquotes with the ``bash`` tool and replies
with what it printed; the reward is 1 when the reply holds ``expect`` (the knob; empty: any reply). For checking
what the model's commands can reach on a runtime.
"""

import verifiers.v1 as vf


class ShellData(vf.TaskData):
    command: str
    expect: str = ""


class ShellTask(vf.Task[ShellData]):
    @vf.reward(weight=1.0)
    async def printed(self, trace: vf.Trace) -> float:
        return float(self.data.expect in trace.last_reply)


class ShellConfig(vf.TasksetConfig):
    commands: list[str] = ["echo hello"]
    expect: str = ""


class ShellTaskset(vf.Taskset[ShellTask, ShellConfig]):
    def load(self):
        return [ShellTask(ShellData(idx=i, prompt=f"Run `{command}`", command=command, expect=self.config.expect),
                          self.config.task)
                for i, command in enumerate(self.config.commands)]


__all__ = ["ShellTaskset"]

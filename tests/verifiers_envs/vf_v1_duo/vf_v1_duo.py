"""A v1 taskset that brings its own two-seat env (the shape of verifiers' kuhn_poker / proposer_solver)."""

import verifiers.v1 as vf


class DuoConfig(vf.EnvConfig):
    first: vf.AgentConfig = vf.AgentConfig()
    second: vf.AgentConfig = vf.AgentConfig()


class DuoEnv(vf.Env[DuoConfig]):
    async def run(self, task, agents):
        async with agents.first.interaction(task) as first, agents.second.interaction(task) as second:
            said = (await first.turn("Say a word.")).last_reply
            await second.turn(f"Repeat: {said}")


class DuoTaskset(vf.Taskset[vf.Task, vf.TasksetConfig]):
    def load(self):
        return [vf.Task(vf.TaskData(idx=i, prompt=None)) for i in range(2)]


__all__ = ["DuoEnv", "DuoTaskset"]

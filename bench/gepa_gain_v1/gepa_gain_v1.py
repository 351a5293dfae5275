"""A verifiers v1 taskset for bench/gepa_vs_verifiers.py: ``KIND: word`` tasks whose answers depend on a rule.

The tasks come from ``tasks.json`` beside this file (the bench writes it from bench/gepa_gain.py's rules), so
verifiers' process imports nothing of primekit's. Each task's system prompt is the seed prompt; the reward is
an exact match of the last reply.
"""

import json
from pathlib import Path

import verifiers.v1 as vf


class GainData(vf.TaskData):
    answer: str


class GainTask(vf.Task[GainData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == self.data.answer)


class GainConfig(vf.TasksetConfig):
    pass


class GainTaskset(vf.Taskset[GainTask, GainConfig]):
    def load(self):
        rows = json.loads((Path(__file__).parent / "tasks.json").read_text())
        return [
            GainTask(
                GainData(idx=i, prompt=row["prompt"], answer=row["answer"], system_prompt=row["system_prompt"]),
                self.config.task,
            )
            for i, row in enumerate(rows)
        ]


__all__ = ["GainTaskset"]

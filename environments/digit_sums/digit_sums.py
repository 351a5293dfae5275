"""Add two one-digit numbers: a verifiers v1 taskset, the kind of environment prime-rl trains on.

Written with ``import verifiers.v1 as vf`` only (no primekit import), so the same folder runs under
`prime eval run` / `prime rl run` (primekit wraps v1 tasksets) and, once installed where prime-rl
runs, under prime-rl (`prime rl export --target prime-rl` names it by its id, ``digit-sums``).
Rows are generated from a seed: no dataset download.

Taskset config (primekit's ``[[env]] args``): ``num_tasks``, ``seed``.
"""

import random
import re

import verifiers.v1 as vf

SYSTEM_PROMPT = "Solve the arithmetic problem. End your reply with the final answer as a single number."
_INTEGER = re.compile(r"-?\d+")


class SumData(vf.TaskData):
    answer: str
    """The sum, as digits."""


class SumTask(vf.Task[SumData]):
    @vf.stop
    async def single_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        """1.0 when the last integer in the reply is the sum."""
        numbers = _INTEGER.findall(trace.last_reply or "")
        return float(bool(numbers) and numbers[-1] == self.data.answer)


class SumConfig(vf.TasksetConfig):
    num_tasks: int = 500
    """Problems generated."""
    seed: int = 0
    """Seed of the generated problems."""


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self) -> list[SumTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        for index in range(self.config.num_tasks):
            a, b = rng.randint(0, 9), rng.randint(0, 9)
            data = SumData(idx=index, prompt=f"What is {a} + {b}?", system_prompt=SYSTEM_PROMPT, answer=str(a + b))
            tasks.append(SumTask(data, self.config.task))
        return tasks


__all__ = ["SumTaskset"]

"""What is A+B? Rewarded when the reply holds the sum (the shape of gsm8k_v1)."""

import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.stop
    async def one_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(self.data.answer in (trace.last_reply or ""))


class SumTaskset(vf.Taskset[SumTask, vf.TasksetConfig]):
    def load(self) -> list[SumTask]:
        return [SumTask(SumData(idx=i, prompt=f"What is {i}+{3 * i}?", answer=str(4 * i)), self.config.task)
                for i in range(4)]

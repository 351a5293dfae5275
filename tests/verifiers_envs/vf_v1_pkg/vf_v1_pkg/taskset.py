"""Repeat a word inside <word> tags; rewarded by how much of it came back."""

import verifiers.v1 as vf

from vf_v1_pkg.scoring import overlap, tagged

SYSTEM = "Repeat the word you are given inside <word></word> tags."
WORDS = ["lantern", "harbor", "meadow", "quartz"]


class WordData(vf.TaskData):
    answer: str


class WordTask(vf.Task[WordData]):
    @vf.stop
    async def one_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def repeated(self, trace: vf.Trace) -> float:
        return overlap(tagged(trace.last_reply), self.data.answer)

    @vf.metric
    async def tagged_chars(self, trace: vf.Trace) -> float:
        return float(len(tagged(trace.last_reply)))


class WordTaskset(vf.Taskset[WordTask, vf.TasksetConfig]):
    def load(self) -> list[WordTask]:
        return [
            WordTask(WordData(idx=i, prompt=f"The word is: {w}", system_prompt=SYSTEM, answer=w), self.config.task)
            for i, w in enumerate(WORDS)
        ]

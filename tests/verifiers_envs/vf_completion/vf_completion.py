"""A completion-mode environment (message_type="completion"): each row's prompt is text to continue, with a
stop string and a reward on the continuation: its first word must be the word the sentence was cut before."""

import verifiers as vf
from datasets import Dataset

TEXTS = [
    "Once there were 3 foxes and 4 owls in the old forest by the river",
    "The recipe needs 2 eggs, 5 spoons of sugar and a pinch of salt",
    "Our train left the station at 7 and arrived in the city at 9",
]


def load_environment(max_words: int = 12):
    rows = [{"prompt": text.rsplit(" ", 1)[0], "answer": text.rsplit(" ", 1)[1]} for text in TEXTS]

    def short_continuation(completion) -> float:
        return 1.0 if 0 < len(str(completion[-1]["content"]).split()) <= max_words else 0.0

    def next_word(completion, answer) -> float:
        words = str(completion[-1]["content"]).split()
        return 1.0 if words and words[0].strip(".,;:!?").lower() == answer.lower() else 0.0

    return vf.SingleTurnEnv(
        message_type="completion",
        dataset=Dataset.from_list(rows),
        # the length is a metric (weight 0): a short reply is no achievement on its own
        rubric=vf.Rubric(funcs=[short_continuation, next_word], weights=[0.0, 1.0]),
        sampling_args={"stop": ["\n"]},
    )

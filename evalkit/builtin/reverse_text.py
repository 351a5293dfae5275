"""Reverse a short text character by character; reward is the LCS similarity to the exact reversal.

The reply may wrap the answer in ``<reversed_text>...</reversed_text>``; without the tags the whole
reply is the answer. Small models (SmolLM2-135M) rarely keep a tag format, and the continuous LCS
reward still gives them a gradient, which is what makes this a good first RL environment.
Measured with the embedded SmolLM2-135M-Instruct (``configs/eval/reverse-text.toml``: 20 examples
of 1-2 words, 4 rollouts at temperature 1.0, max_tokens 64): reward 0.09, varying inside every group.
The symmetric ratio is deliberate: a reply padded with chatter scores less than the bare answer.

Env args: ``num_train_examples``, ``num_eval_examples``, ``seed``, ``min_words``, ``max_words``.
"""

from __future__ import annotations

import re

from evalkit.builtin._util import check_counts, lcs_ratio, split_rng
from evalkit.core.errors import UserError
from evalkit.envs import Parser, Rubric, SingleTurnEnv, fast_reward

SYSTEM_PROMPT = (
    "Reverse the given text character by character. "
    "Reply with only the reversed text inside <reversed_text>...</reversed_text>."
)

WORDS = (
    "apple river stone light green quiet music paper table water bread cloud dream house night plant "
    "smile story sweet train world chair glass happy heart horse lemon money ocean piano radio sheep "
    "tiger voice about after bring clean dance early field grass honey juice knife laugh magic north "
    "party quick round sugar sunny thank under visit watch young cat dog sun sea sky red blue gold "
    "tree bird fish book door road rain snow wind fire moon star leaf milk rice salt ship frog lamp "
    "kite drum ring bell nest hill lake farm town park yard coat shoe sock king queen baby bear duck "
    "goat lion wolf owl bee ant pen cup box hat map key egg pie tea jam"
).split()

_TAG = re.compile(r"<reversed_text>\s*(.*?)\s*(?:</reversed_text>|$)", re.DOTALL)


def extract_reversed(text: str) -> str:
    """The tagged answer when the model used the tag, else the whole reply (stripped)."""
    matches = _TAG.findall(text)
    return matches[-1].strip() if matches else text.strip()


@fast_reward
def lcs_reward(completion, answer: str, parser: Parser) -> float:
    """Partial credit: 2*LCS / (len(reply) + len(target)) over characters; 1.0 only when exact."""
    return lcs_ratio(parser.parse_answer(completion) or "", answer)


@fast_reward
def exact_match(completion, answer: str, parser: Parser) -> float:
    """Logged only (weight 0): did the model reverse the text exactly?"""
    return float((parser.parse_answer(completion) or "") == answer)


def make_rows(count: int, seed: int, split: str, min_words: int, max_words: int) -> list[dict]:
    rng = split_rng(seed, split)
    rows = []
    for _ in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(min_words, max_words)))
        rows.append({"question": text, "answer": text[::-1], "info": {"text": text}})
    return rows


def load_environment(
    num_train_examples: int = 500,
    num_eval_examples: int = 100,
    seed: int = 0,
    min_words: int = 1,
    max_words: int = 3,
    system_prompt: str | None = None,
) -> SingleTurnEnv:
    """Reverse-text: rows generated from ``seed`` (eval from a different stream than train)."""
    check_counts(num_train_examples, num_eval_examples)
    if not 1 <= min_words <= max_words:
        raise UserError(f"need 1 <= min_words <= max_words, got min_words={min_words}, max_words={max_words}")
    parser = Parser(extract_fn=extract_reversed)
    rubric = Rubric(funcs=[lcs_reward, exact_match], weights=[1.0, 0.0], parser=parser)
    train = make_rows(num_train_examples, seed, "train", min_words, max_words)
    evals = make_rows(num_eval_examples, seed, "eval", min_words, max_words)
    return SingleTurnEnv(
        dataset=train or None,
        eval_dataset=evals or None,
        system_prompt=SYSTEM_PROMPT if system_prompt is None else system_prompt,
        parser=parser,
        rubric=rubric,
        sampling_args={"max_tokens": 64},  # a default; -t and [sampling] override it
        env_id="reverse-text",
    )

"""Mastermind as a 7-turn game: the bench's multi-turn workload (``bench/multiturn.py``).

A long rules prompt, then one guess and one feedback message per turn: the shape of a multi-turn RL
environment whose conversation grows turn by turn, which is what prefix reuse in the engine is for.
The secret is four digits from 1 to 6 (repeats allowed). The model answers each turn with four
digits; the environment replies with the guess, its black pegs (right digit, right place) and white
pegs (right digit, wrong place). A reply without four digits gets a message and uses up the turn.
The game ends when the code is cracked or after ``max_turns`` guesses.

Reward: 1.0 for cracking the code; ``best_blacks`` (most black pegs of any guess / 4) is logged only.
Env args: ``num_examples``, ``seed``, ``max_turns``. Load it by path: ``prime eval run ./bench/mastermind``.
"""

from __future__ import annotations

import random
import re
from typing import Any

from evalkit.builtin._game import JudgedGameEnv
from evalkit.envs import Parser, Rubric

CODE_LENGTH = 4
DIGITS = "123456"
RULES = """You are playing Mastermind, a code-breaking game, against the game master.

The game master has chosen a secret code. The code is a sequence of exactly four digits. Each digit
is one of 1, 2, 3, 4, 5 or 6. A digit may appear more than once in the code, so 1124 and 6666 are
both possible codes. Your job is to find the secret code in as few guesses as possible.

How a turn works:
1. You reply with one guess: exactly four digits, each from 1 to 6, for example 1234.
2. The game master answers with feedback on your guess:
   - black pegs: how many digits of your guess are the right digit in the right place;
   - white pegs: how many of the remaining digits of your guess are in the code but in another place.
   Each digit of the code is counted at most once, first as a black peg, then as a white peg.
3. You use the feedback to make a better guess on the next turn.

Examples of feedback, for the secret code 1223:
   - guess 1234 gets 2 black pegs (the 1 and the 2 in places one and two) and 1 white peg (the 3);
   - guess 2211 gets 1 black peg (the 2 in place two) and 2 white pegs (one 2 and one 1);
   - guess 5566 gets 0 black pegs and 0 white pegs: none of 5 or 6 is in the code;
   - guess 1223 gets 4 black pegs: the code is cracked and the game is over.

Strategy hints: start with a guess that tests several digits at once, such as 1122. When a guess
gets 0 pegs, none of its digits is in the code, so never use them again. When the total number of
pegs (black plus white) goes up, the new digits you tried are in the code. Keep the digits that
earned black pegs in their places and move the digits that earned white pegs.

You have seven guesses. Answer every turn with the four digits of your guess and nothing else:
no words, no explanations, no punctuation. A reply that is not four digits from 1 to 6 wastes
the turn."""


def score(guess: str, secret: str) -> tuple[int, int]:
    """(black, white) pegs of ``guess`` against ``secret``."""
    black = sum(g == s for g, s in zip(guess, secret))
    common = sum(min(guess.count(d), secret.count(d)) for d in DIGITS)
    return black, common - black


def parse_guess(text: str) -> str | None:
    """The first run of four digits 1-6 in the reply, if any."""
    found = re.search(r"[1-6]{4}", text or "")
    return found.group(0) if found else None


class MastermindEnv(JudgedGameEnv):
    """State: ``guesses``, ``pegs`` (black, white per valid guess), ``solved``, ``feedback``."""

    def setup_state(self, state: dict[str, Any]) -> None:
        state.update({"guesses": [], "pegs": [], "solved": False, "feedback": ""})

    def judge(self, text: str, state: dict[str, Any]) -> str:
        left = self.max_turns - state["turn"]
        guess = parse_guess(text)
        if guess is None:
            return f"That is not a guess. Reply with four digits from 1 to 6, like 1234. Guesses left: {left}."
        black, white = score(guess, state["answer"])
        state["guesses"].append(guess)
        state["pegs"].append((black, white))
        state["solved"] = black == CODE_LENGTH
        return f"Guess {guess}: {black} black, {white} white. Guesses left: {left}."


def solved(state: dict) -> float:
    """1.0 when the code was cracked."""
    return float(state.get("solved", False))


def best_blacks(state: dict) -> float:
    """Logged only: the most black pegs any guess earned, as a fraction of four."""
    return max((b / CODE_LENGTH for b, _ in state.get("pegs", [])), default=0.0)


def load_environment(num_examples: int = 64, seed: int = 0, max_turns: int = 7) -> MastermindEnv:
    rng = random.Random(seed)
    rows = [
        {"question": "I have chosen my secret code. Make your first guess.",
         "answer": "".join(rng.choice(DIGITS) for _ in range(CODE_LENGTH)), "info": {}}
        for _ in range(num_examples)
    ]  # fmt: skip
    return MastermindEnv(
        dataset=rows,
        eval_dataset=rows,
        system_prompt=RULES,
        parser=Parser(extract_fn=parse_guess),
        rubric=Rubric(funcs=[solved, best_blacks], weights=[1.0, 0.0]),
        max_turns=max_turns,
        sampling_args={"max_tokens": 24, "stop": [".", ",", ":", ";", "!", "?", "\n"]},
        env_id="mastermind",
    )

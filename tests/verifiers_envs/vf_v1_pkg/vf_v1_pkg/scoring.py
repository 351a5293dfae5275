"""Scoring helpers in their own module (imported as vf_v1_pkg.scoring)."""

import re

_TAG = re.compile(r"<word>(.*?)</word>", re.DOTALL)


def tagged(reply: str | None) -> str:
    match = _TAG.search(reply or "")
    return match.group(1).strip() if match else ""


def overlap(a: str, b: str) -> float:
    """Share of b's characters found, in order, in a (a cheap similarity in [0, 1])."""
    it = iter(a)
    return sum(1 for ch in b if ch in it) / len(b) if b else 0.0

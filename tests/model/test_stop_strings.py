"""Stop strings cost the same per token however long the text grows: the engine's finisher decodes only
the tail a stop string could end in, and the stream's detokenizer searches only the text added since its
last search (with the caps of :mod:`evalkit.core.sampling_rules`, the work per token is bounded)."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

from support.tiny_model import build_tokenizer

from evalkit.core.sampling_rules import MAX_STOP_CHARS, MAX_STOP_STRINGS
from evalkit.model.detokenize import IncrementalText
from evalkit.model.requests import SamplingParams
from evalkit.model.scheduler import Finisher, Sequence

STOPS = tuple("a" * (MAX_STOP_CHARS - 1) + chr(ord("A") + i) for i in range(MAX_STOP_STRINGS))
"""The longest stops allowed, each almost all made of the text's own character (the worst case of a search)."""


def _time_pushes(text: IncrementalText, token: int, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        text.push([token])
    return time.perf_counter() - started


def test_the_streamed_texts_stop_search_does_not_grow_with_the_text() -> None:
    tokenizer = build_tokenizer()
    token = tokenizer.convert_tokens_to_ids("a")
    text = IncrementalText(tokenizer, stop=STOPS)
    text.push([token] * 1000)
    early = min(_time_pushes(text, token, 100) for _ in range(3))
    for _ in range(4):
        text.push([token] * 100_000)
    late = min(_time_pushes(text, token, 100) for _ in range(3))
    assert len(text.text) > 400_000
    assert late < 5 * early + 0.02, f"100 pushes: {early * 1000:.1f} ms at 1k characters, {late * 1000:.1f} ms at 400k"
    text.push([tokenizer.convert_tokens_to_ids("C")])
    assert text.finish(text.text[: text.text.index(STOPS[2])]) == ""  # what was sent stops before the stop string


class _Counting:
    """A tokenizer that records how many ids each decode was given."""

    def __init__(self, tokenizer: Any):
        self.tokenizer, self.sizes = tokenizer, []

    def decode(self, ids: list[int], **kwargs: Any) -> str:
        self.sizes.append(len(ids))
        return self.tokenizer.decode(ids, **kwargs)


def test_the_engines_stop_check_decodes_a_bounded_tail() -> None:
    tokenizer = _Counting(build_tokenizer())
    finisher = Finisher(tokenizer, frozenset(), lambda: 0)
    params = SamplingParams(max_tokens=100_000, stop=STOPS)
    sequence = Sequence([1], params, concurrent.futures.Future(), seed=0, submitted=0.0)
    token = tokenizer.tokenizer.convert_tokens_to_ids("a")
    assert finisher.extend(sequence, [token] * 3000, [0.0] * 3000) is None
    assert max(tokenizer.sizes) == params.stop_window == MAX_STOP_CHARS + 4
    assert finisher.extend(sequence, [tokenizer.tokenizer.convert_tokens_to_ids("Q")], [0.0]) == "stop"

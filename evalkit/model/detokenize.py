"""A generation's text as its tokens arrive: the deltas a stream sends, never one it must take back.

Contract: the deltas :meth:`IncrementalText.push` returns, followed by what :meth:`IncrementalText.finish`
returns for the generation's final text, concatenate to that final text. To keep it, a delta is only
text that can no longer change: a token that ends inside a UTF-8 character waits for the next one
(decoding stops at ``U+FFFD``), and the tail that could still become a stop string is held back (the
final text is cut before a stop string). With ``markers`` (the tool-call opener), everything from a
marker on is held until the end, where the caller passes the final content, the calls taken out.
``hold_whitespace`` holds trailing whitespace back (a tool-call reply's content is stripped).

Decoding uses two offsets (the way vLLM detokenizes incrementally): the new text is what decoding
``ids[prefix:]`` adds to decoding ``ids[prefix:read]``, so tokenizers whose pieces depend on their
left neighbour (SentencePiece's leading space) decode as they do in the whole text. Torch-free.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any


class IncrementalText:
    """See the module docstring."""

    def __init__(self, tokenizer: Any, *, stop: Sequence[str] = (), markers: Sequence[str] = (),
                 hold_whitespace: bool = False, skip_ids: Collection[int] = ()):
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.markers = tuple(m for m in markers if m)
        self.hold_whitespace = hold_whitespace
        self.skip_ids = frozenset(skip_ids)
        self.text = ""
        """Everything decoded so far (what is stable; some of it may not be sent yet)."""
        self.sent = ""
        self._ids: list[int] = []
        self._prefix = 0
        self._read = 0
        self._frozen = False
        self._found: dict[str, int] = {}
        self._searched = 0
        """Length of ``text`` at the last search: a stop string not found then can only end past it."""

    def push(self, token_ids: Sequence[int]) -> str:
        """The new text that is safe to send after ``token_ids`` (often ``""``)."""
        self._ids.extend(t for t in token_ids if t not in self.skip_ids)
        if len(self._ids) > self._read:
            before = self._decode(self._ids[self._prefix:self._read])
            after = self._decode(self._ids[self._prefix:])
            if len(after) > len(before) and not after.endswith("\ufffd"):
                self.text += after[len(before):]
                self._prefix, self._read = self._read, len(self._ids)
        if self._frozen:
            return ""
        end = self._safe_end()
        delta = self.text[len(self.sent):end]
        self.sent += delta
        return delta

    def finish(self, final_text: str) -> str:
        """The rest of ``final_text`` after what was sent; ``""`` if what was sent is not its prefix (a
        tokenizer whose whole-text decoding differs from its piecewise one)."""
        rest = final_text[len(self.sent):] if final_text.startswith(self.sent) else ""
        self.sent += rest
        return rest

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True) if ids else ""

    def _safe_end(self) -> int:
        text = self.text
        end = len(text)
        for stop in self.stop:
            found = self._first(stop)
            end = min(end, found if found >= 0 else len(text) - _partial(text, stop))
        for marker in self.markers:
            found = self._first(marker)
            if found >= 0:
                self._frozen = True
            end = min(end, found if found >= 0 else len(text) - _partial(text, marker))
        self._searched = len(text)
        if self.hold_whitespace:
            end = len(text[:end].rstrip())
        return max(end, len(self.sent))


    def _first(self, word: str) -> int:
        """Where ``word`` first occurs in ``text`` (-1: nowhere), searching only the tail it could end in
        since the last search: the work per token is bounded by the word's length, not the text's."""
        found = self._found.get(word)
        if found is None:
            found = self.text.find(word, max(0, self._searched - len(word) + 1))
            if found >= 0:
                self._found[word] = found
        return found


def _partial(text: str, word: str) -> int:
    """The length of the longest end of ``text`` that ``word`` starts with (short of all of ``word``);
    only the last ``len(word) - 1`` characters are read."""
    tail = text[-(len(word) - 1):] if len(word) > 1 else ""
    start = tail.find(word[0]) if tail else -1
    while start >= 0:
        if word.startswith(tail[start:]):
            return len(tail) - start
        start = tail.find(word[0], start + 1)
    return 0

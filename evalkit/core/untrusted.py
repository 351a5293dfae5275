"""What a model, an environment, a tool or a reward function hands back is untrusted data.

The rules, applied where such data is stored:

- **Text is valid UTF-8.** A Python ``str`` may hold lone UTF-16 surrogates (``"\\ud83d"``: an emoji
  cut in half, which real servers emit, and which ``json.loads`` accepts). They cannot be encoded as
  UTF-8, so writing them would raise half-way through a run. Surrogate pairs are joined into their
  character; a lone surrogate becomes U+FFFD. Files always hold valid UTF-8 JSON; a results row
  that needed this says so in ``replaced_code_points`` (how many were replaced).
- **Sizes are capped.** A message an environment adds (a tool result, an ``env_response``) and every
  message stored keeps at most ``max_message_chars`` characters (:mod:`evalkit.core.defaults`), cut with a
  marker that says how much was left out (:func:`cap_message`).
- **Names are names.** A name from a config (``run_name``, an environment's ``name``) becomes one
  folder under the output folder; :func:`name_problem` refuses separators, ``.`` and ``..``.
- **No secrets.** Every string written goes through :func:`evalkit.core.redact.redact` (API keys, auth
  header values, credentials in URLs), whatever raised or returned it: a judge that echoes the request
  headers in its error, a tool that prints its token.
- **Numbers are finite.** ``NaN`` and ``inf`` are not JSON (``json.dumps`` writes bare ``NaN``, which
  other readers reject); a reward that is not finite is an error of kind ``reward``
  (:func:`non_finite_scores`); any other non-finite number reaches a file as ``null``, and a results
  row that needed this says so in ``nulled_numbers``.

The fast path costs one ``json.dumps`` and one scan for secrets: the walk over a value happens only when
the text needs a repair or holds something to redact.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from evalkit.core.redact import contains_secret, redact

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a surrogate (``\\ud83d``), what a file written by another tool may hold."""

REPLACED_FIELD = "replaced_code_points"
NULLED_FIELD = "nulled_numbers"


@dataclass
class Repairs:
    """What :func:`clean` changed: lone surrogates replaced, non-finite numbers written as null."""

    code_points: int = 0
    non_finite: int = 0

    def __bool__(self) -> bool:
        return bool(self.code_points or self.non_finite)


def valid_text(text: str) -> tuple[str, int]:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD; how many were replaced."""
    if not _SURROGATE.search(text):
        return text, 0
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed, fixed.count(REPLACEMENT) - text.count(REPLACEMENT)


def utf8(text: str) -> bytes:
    """``text`` as UTF-8 bytes, redacted, bad code points replaced (for plain text files: prompts, logs)."""
    text = redact(text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return valid_text(text)[0].encode("utf-8")


def clean(value: Any, repairs: Repairs | None = None) -> tuple[Any, Repairs]:
    """A copy of a JSON-like value that :func:`json.dumps` writes as valid, finite, UTF-8 JSON, redacted.

    Strings (keys too) go through :func:`valid_text` and :func:`evalkit.core.redact.redact`; non-finite floats
    become ``None``; objects that are not JSON types become their ``str`` (as ``default=str`` would write them).
    """
    repairs = repairs if repairs is not None else Repairs()
    return _clean(value, repairs), repairs


def _clean(value: Any, repairs: Repairs) -> Any:
    if isinstance(value, str):
        text, replaced = valid_text(value)
        repairs.code_points += replaced
        return redact(text)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        repairs.non_finite += 1
        return None
    if isinstance(value, dict):
        return {_clean(key if isinstance(key, str) else str(key), repairs): _clean(item, repairs)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(item, repairs) for item in value]
    return _clean(str(value), repairs)


def json_bytes(data: Any, *, indent: int | None = None) -> bytes:
    """``data`` as UTF-8 JSON bytes; bad text and non-finite numbers repaired, secrets redacted (see :func:`clean`)."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str, indent=indent)
        if not contains_secret(text):
            return text.encode("utf-8")
    except (UnicodeEncodeError, ValueError):
        pass
    cleaned, _ = clean(data)
    return json.dumps(cleaned, ensure_ascii=False, allow_nan=False, indent=indent).encode("utf-8")


def row_line(row: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """One JSONL line for a results row, and the row as written.

    A row that needed repairs or redaction is written (and returned) cleaned, with :data:`REPLACED_FIELD` /
    :data:`NULLED_FIELD` set to what was repaired; otherwise the same dict comes back.
    """
    try:
        text = json.dumps(row, ensure_ascii=False, allow_nan=False, default=str)
        if not contains_secret(text):
            return text.encode("utf-8") + b"\n", row
    except (UnicodeEncodeError, ValueError):
        pass
    cleaned, repairs = clean(row)
    mark_repairs(cleaned, repairs)
    return json.dumps(cleaned, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n", cleaned


def mark_repairs(row: dict[str, Any], repairs: Repairs) -> None:
    """Record on ``row`` what :func:`clean` changed in it (counts add to what the row already says)."""
    if repairs.code_points:
        row[REPLACED_FIELD] = _count(row.get(REPLACED_FIELD)) + repairs.code_points
    if repairs.non_finite:
        row[NULLED_FIELD] = _count(row.get(NULLED_FIELD)) + repairs.non_finite


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def may_hold_surrogates(line: bytes) -> bool:
    """Whether a JSON line read back may decode to text with surrogates (it escapes one)."""
    return _ESCAPED_SURROGATE.search(line) is not None


def is_finite_number(value: Any) -> bool:
    """An int or float (not a bool) that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def cap_text(text: str, limit: int | None) -> str:
    """``text``, or its first ``limit`` characters and a marker saying how many were cut and why (a
    text this already cut to ``limit`` comes back as it is)."""
    if limit is None or len(text) <= limit:
        return text
    if len(text) <= limit + _MARKER_ROOM and _CUT_MARKER.search(text, limit):
        return text
    return text[:limit] + f"\n[... {len(text) - limit:,} more characters cut: max_message_chars is {limit:,}]"


_CUT_MARKER = re.compile(r"\n\[\.\.\. [\d,]+ more characters cut: max_message_chars is [\d,]+\]\Z")
_MARKER_ROOM = 100


def cap_message(message: Any, limit: int | None) -> Any:
    """A chat message whose text content (a string, or the text parts of a list) is at most ``limit``
    characters (:func:`cap_text`); the same object when nothing is cut."""
    if limit is None or not isinstance(message, dict):
        return message
    content = message.get("content")
    if isinstance(content, str) and len(content) > limit:
        return {**message, "content": cap_text(content, limit)}
    if isinstance(content, list) and any(_long_part(part, limit) for part in content):
        parts = [
            {**part, "text": cap_text(part["text"], limit)} if _long_part(part, limit) else part for part in content
        ]
        return {**message, "content": parts}
    return message


def cap_strings(value: Any, limit: int | None) -> Any:
    """A copy of a JSON-like value whose every string is at most ``limit`` characters (:func:`cap_text`), for
    files a library writes on our behalf (verifiers' traces), where messages sit in its own structures."""
    if limit is None:
        return value
    if isinstance(value, str):
        return cap_text(value, limit)
    if isinstance(value, dict):
        return {key: cap_strings(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [cap_strings(item, limit) for item in value]
    return value


def _long_part(part: Any, limit: int) -> bool:
    return isinstance(part, dict) and isinstance(part.get("text"), str) and len(part["text"]) > limit


def name_problem(name: str) -> str | None:
    """Why ``name`` (from a config: a run name, an environment label) cannot name one folder, or ``None``.

    Names are names, not paths: no path separator, not ``.`` or ``..``, no NUL, not empty. A name that
    passes stays inside the folder it is joined to.
    """
    if not name.strip():
        return "it is empty"
    if "/" in name or "\\" in name or "\0" in name:
        return "it holds a path separator" if "\0" not in name else "it holds a NUL character"
    if name in (".", ".."):
        return f"'{name}' names a folder that is already there"
    return None


def non_finite_scores(reward: Any, metrics: dict[str, Any]) -> list[str]:
    """The names (``reward``, metric names) whose values are not finite numbers, for an error row."""
    bad = [] if is_finite_number(reward) else ["reward"]
    return bad + [name for name, value in metrics.items() if not is_finite_number(value)]

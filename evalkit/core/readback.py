"""Reading run files back (``prime eval view``, ``--html``, the TUI, ``-R``, GEPA and RL resume): no traceback.

A run file may be cut by a killed writer, damaged by a disk, edited by hand, or written by another
tool or an older version. Every reader goes through here and gets only what has the expected shape:

- A JSONL file is read line by line. A line that is not UTF-8, not JSON, not an object, or whose
  fields fail the file's :data:`Schema` is skipped; a last line without its newline (a cut write)
  is skipped silently. Each file with skipped lines gets one warning line naming the file, the
  first few line numbers and why (``warning: .../results.jsonl: skipped 2 damaged lines (line 3:
  reward is 'abc', not a finite number; line 7: not valid JSON)``).
- A JSON object file (``metadata.json``, ``budget.json``, ...) that is missing reads as ``{}``; one
  that does not parse reads as ``{}`` with a warning; a field that fails its schema is left out,
  with a warning naming it.
- Only regular files are read (a symlink is followed): a FIFO, a device (``results.jsonl`` linked to
  ``/dev/zero``) or a folder is not opened, and reads as missing with a warning. A JSON object file is
  read up to :data:`evalkit.core.fileio.MAX_RUN_OBJECT_BYTES`; a JSONL file up to the size it has when
  opened (:func:`evalkit.core.fileio.read_regular`).
- Text that escapes lone surrogates (``"\\ud83d"``) is repaired, and secrets are redacted, as writers do
  (:mod:`evalkit.core.untrusted`), so nothing read back breaks a terminal or an HTML page or shows a key
  (a file written by another tool or an older primekit may hold either).

Warnings go to the ``evalkit.core.readback`` logger (printed to stderr as they are when logging is not
configured; the TUI shows them in the app); each distinct warning once per process.

A schema maps a field (``info.candidate_idx`` reaches into an object) to a check and what the value
should be; a field that is absent passes unless it is required. Only fields the readers rely on are
checked: what a report shows as text (``answer``, message contents) is shown through ``str``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core import dotted
from evalkit.core.fileio import MAX_RUN_OBJECT_BYTES, FileRefused, read_regular
from evalkit.core.redact import contains_secret, redact
from evalkit.core.untrusted import clean, is_finite_number, mark_repairs, may_hold_surrogates

logger = logging.getLogger("evalkit.core.readback")
MAX_LINES_NAMED = 3
"""Damaged lines named in a file's warning; the rest are counted."""


@dataclass(frozen=True)
class Field:
    """One checked field: ``ok(value)`` must hold; ``what`` says what it should be."""

    ok: Callable[[Any], bool]
    what: str
    required: bool = False


Schema = Mapping[str, Field]


# ----- checks ------------------------------------------------------------------------------------
def whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def example_id(value: Any) -> bool:
    """An example id: a whole number (an index), or the task's own id as non-empty text (what verifiers writes
    for a task payload that carries one)."""
    return whole(value) or (isinstance(value, str) and value != "")


def _or_none(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _finite(value: Any) -> bool:
    """:func:`evalkit.core.untrusted.is_finite_number`, inlined for the types JSON gives (read per row)."""
    kind = type(value)
    return (
        kind is int or (kind is float and math.isfinite(value)) or (kind not in (bool, str) and is_finite_number(value))
    )


def _numbers(value: Any) -> bool:
    return type(value) is dict and all(map(_finite, value.values()))


def _numbers_or_none(value: Any) -> bool:
    return type(value) is dict and all(v is None or _finite(v) for v in value.values())


def _messages(value: Any) -> bool:
    """A list of message objects (``tool_calls``, when set, a list of objects), or text (verifiers'
    completion-format environments)."""
    if type(value) is str:
        return True
    if type(value) is not list:
        return False
    for message in value:
        if type(message) is not dict:
            return False
        calls = message.get("tool_calls")
        if calls is not None and (type(calls) is not list or any(type(call) is not dict for call in calls)):
            return False
    return True


def _wholes(value: Any) -> bool:
    return isinstance(value, list) and all(v is None or whole(v) for v in value)


def _wholes_object(value: Any) -> bool:
    return isinstance(value, dict) and all(whole(v) for v in value.values())


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)


WHOLE = Field(whole, "a whole number")
NUMBER = Field(is_finite_number, "a finite number")
NUMBER_OR_NULL = Field(_or_none(is_finite_number), "a finite number or null")
WHOLE_OR_NULL = Field(_or_none(whole), "a whole number or null")
TEXT = Field(lambda v: isinstance(v, str), "text")
TEXT_OR_NULL = Field(_or_none(lambda v: isinstance(v, str)), "text or null")
OBJECT = Field(lambda v: isinstance(v, dict), "an object")
OBJECT_OR_NULL = Field(_or_none(lambda v: isinstance(v, dict)), "an object or null")
NUMBERS = Field(_numbers, "an object of finite numbers")
MESSAGES = Field(_messages, "a list of messages or text")
FLAG = Field(lambda v: isinstance(v, bool), "true or false")

EVAL_ROW: Schema = {
    "example_id": Field(example_id, "a whole number or a task id", required=True),
    "rollout_idx": WHOLE,
    "reward": NUMBER_OR_NULL, "metrics": NUMBERS, "prompt": MESSAGES, "completion": MESSAGES,
    "error": TEXT_OR_NULL, "error_kind": TEXT_OR_NULL, "info": OBJECT_OR_NULL, "token_usage": NUMBERS,
    "timing": OBJECT, "stop_condition": TEXT_OR_NULL, "is_truncated": FLAG,
}
"""A row of an eval ``results.jsonl`` (also RL's ``rollouts/step_N.jsonl``, which add ``advantage``). verifiers'
own rows have no ``rollout_idx``: :func:`evalkit.eval.results.read_rows` numbers them."""
RL_ROLLOUT_ROW: Schema = {**EVAL_ROW, "rollout_idx": Field(whole, "a whole number", required=True),
                          "advantage": NUMBER_OR_NULL, "kept": FLAG, "env": TEXT_OR_NULL}

EVAL_METADATA: Schema = {
    "env_id": TEXT, "model": TEXT, "status": TEXT, "date": TEXT, "rollouts_per_example": WHOLE,
    "num_examples": WHOLE, "num_rollouts": WHOLE, "pass_threshold": NUMBER, "duration_s": NUMBER,
    "avg_reward": NUMBER_OR_NULL, "std_reward": NUMBER_OR_NULL, "sampling_args": OBJECT, "env_args": OBJECT,
}

GEPA_ROW: Schema = {
    "example_id": WHOLE,
    "idx": WHOLE,
    "reward": NUMBER_OR_NULL,
    "score": NUMBER_OR_NULL,
    "val_score": NUMBER_OR_NULL,
    "val_subscores": Field(_numbers_or_none, "an object of finite numbers"),
    "parents": Field(_wholes, "a list of whole numbers"),
    "system_prompt": TEXT,
    "discovered_at_calls": WHOLE_OR_NULL,
    "info": OBJECT,
    "info.candidate_idx": WHOLE,
    "info.is_best": FLAG,
    "info.system_prompt": TEXT,
    "info.val_subscores": Field(_numbers_or_none, "an object of finite numbers"),
    "info.parent_candidate_idxs": Field(_wholes, "a list of whole numbers"),
    "info.discovered_at_calls": WHOLE_OR_NULL,
    "info.discovery_metric_calls": WHOLE_OR_NULL,
}
"""A candidate row of a GEPA ``results.jsonl``, in either layout (see :mod:`evalkit.report.gepa_data`)."""
GEPA_FRONTIER_ROW: Schema = {
    "best_score": NUMBER_OR_NULL,
    "valset_row": WHOLE,
    "example_id": WHOLE,
    "candidate_idxs": Field(_wholes, "a list of whole numbers"),
    "best_candidates": Field(_objects, "a list of objects"),
}
GEPA_METADATA: Schema = {
    "best_idx": WHOLE_OR_NULL,
    "budget": WHOLE_OR_NULL,
    "total_metric_calls": WHOLE_OR_NULL,
    "duration_s": NUMBER_OR_NULL,
    "best_score": NUMBER_OR_NULL,
    "best_val_score": NUMBER_OR_NULL,
    "seed_val_score": NUMBER_OR_NULL,
    "num_candidates": WHOLE_OR_NULL,
    "num_reflection_calls": WHOLE_OR_NULL,
    "status": TEXT_OR_NULL,
    "num_rollout_errors": WHOLE_OR_NULL,
    "rollout_errors_by_kind": Field(_wholes_object, "an object of whole numbers"),
    "started_at": TEXT_OR_NULL,
    "reflection_cost_usd": NUMBER_OR_NULL,
    "stopped_by": TEXT_OR_NULL,
}
BUDGET: Schema = {"max_calls": WHOLE_OR_NULL, "used": WHOLE, "reserved": WHOLE, "reflection_calls": WHOLE}
"""GEPA's ``budget.json``: the rollouts a run has spent and reserved (what ``--resume`` must not lose)."""
RL_METRICS_ROW: Schema = {
    "step": Field(whole, "a whole number", required=True), "loss": NUMBER_OR_NULL, "eval_reward": NUMBER_OR_NULL,
    "reward_mean": NUMBER_OR_NULL,
}
RL_CHECKPOINT_STATE: Schema = {
    "step": Field(whole, "a whole number", required=True), "cursor": Field(whole, "a whole number", required=True),
    "eval_rewards": NUMBERS,
}
"""``checkpoints/step_N/state.json`` of an RL run."""


# ----- readers -----------------------------------------------------------------------------------
def problem(data: Mapping[str, Any], schema: Schema) -> str | None:
    """Why ``data`` fails ``schema`` (the first failing field), or ``None``."""
    for name, parts, field in _compiled(schema):
        if len(parts) == 1:
            value = data.get(name, dotted.MISSING)
        else:
            value = dotted.get(data, name)
        if value is dotted.MISSING:
            if field.required:
                return f"no {name}"
            continue
        if not field.ok(value):
            return f"{name} is {_show(value)}, not {field.what}"
    return None


_COMPILED: dict[int, tuple[Schema, list[tuple[str, list[str], Field]]]] = {}


def _compiled(schema: Schema) -> list[tuple[str, list[str], Field]]:
    """``(name, name split at dots, field)`` per field; computed once per schema (a reader checks every row)."""
    entry = _COMPILED.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = _COMPILED[id(schema)] = (schema, [(name, name.split("."), field) for name, field in schema.items()])
    return entry[1]


def read_jsonl(path: Path, schema: Schema | None = None) -> list[dict[str, Any]]:
    """The object rows of a JSONL file that pass ``schema``, in file order (see the module docstring)."""
    rows, _ = read_jsonl_lines(path, schema)
    return rows


def read_jsonl_lines(path: Path, schema: Schema | None = None) -> tuple[list[dict[str, Any]], list[int]]:
    """:func:`read_jsonl` plus the numbers (1-based) of the lines it skipped as damaged."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return [], []
    except FileRefused as exc:
        warn(f"{path}: {exc.why}; nothing in it is shown")
        return [], []
    except OSError as exc:
        warn(f"{path}: cannot read it ({exc.strerror or exc}); nothing in it is shown")
        return [], []
    complete = data[:data.rfind(b"\n") + 1]  # a last line without its newline is a cut write, not damage
    rows: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(complete.splitlines(), 1):
        if not line.strip():
            continue
        row, why = parse_line(line, schema)
        if row is None:
            bad.append((number, why or "damaged"))
        else:
            rows.append(row)
    if bad:
        named = "; ".join(f"line {n}: {why}" for n, why in bad[:MAX_LINES_NAMED])
        more = f"; {len(bad) - MAX_LINES_NAMED} more" if len(bad) > MAX_LINES_NAMED else ""
        warn(f"{path}: skipped {len(bad)} damaged line{'s' if len(bad) > 1 else ''} ({named}{more})")
    return rows, [n for n, _ in bad]


def parse_line(line: bytes, schema: Schema | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """One JSONL line as a checked row, or ``(None, why not)``."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte {exc.start})"
    try:
        row = json.loads(text)
    except ValueError:
        return None, "not valid JSON"
    if not isinstance(row, dict):
        return None, f"a JSON {type(row).__name__}, not an object"
    if may_hold_surrogates(line) or contains_secret(text):  # another tool's file, or an older primekit's
        row, repairs = clean(row)
        mark_repairs(row, repairs)
    why = problem(row, schema) if schema else None
    return (None, why) if why else (row, None)


def read_object(path: Path, schema: Schema | None = None) -> dict[str, Any]:
    """A JSON object file: ``{}`` when missing or damaged (with a warning), fields failing ``schema``
    left out (with one warning naming them)."""
    try:
        data = read_regular(path, MAX_RUN_OBJECT_BYTES)
    except FileNotFoundError:
        return {}
    except FileRefused as exc:
        warn(f"{path}: {exc.why}; ignored")
        return {}
    except OSError as exc:
        warn(f"{path}: cannot read it ({exc.strerror or exc}); ignored")
        return {}
    row, why = parse_line(data)
    if row is None:
        warn(f"{path}: {why}; ignored")
        return {}
    return checked_object(row, schema, path)


def checked_object(row: dict[str, Any], schema: Schema | None, path: Path) -> dict[str, Any]:
    """``row`` (read from ``path``) with the fields failing ``schema`` left out, with one warning naming them."""
    dropped = []
    for name, field in (schema or {}).items():
        value = dotted.get(row, name)
        if value is not dotted.MISSING and "." not in name and not field.ok(value):
            dropped.append(f"{name} is {_show(value)}, not {field.what}")
            del row[name]
    if dropped:
        warn(f"{path}: ignored {'; '.join(dropped)}")
    return row


_warned: set[str] = set()


def warn(message: str) -> None:
    """One ``warning: ...`` line (once per process for each distinct message)."""
    if message in _warned:
        return
    _warned.add(message)
    logger.warning("warning: %s", redact(message))


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."

"""An eval run dir as the report reads it: header facts, summary numbers, examples, errors, rollouts.

Every field is read defensively: runs of older and newer versions (``duration_s`` or ``time``,
``version`` or ``version_info``, a ``status`` of ``complete_with_errors``), killed runs (no
metadata.json, a half-written last row), and errors written as a string (ours) or as verifiers'
``{"error": TYPE, "message": ...}``. The summary numbers come from :func:`evalkit.eval.summary.summarize`
over the rows, the same function that wrote metadata.json, so the report and the run agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.errors import error_kind, is_scored
from evalkit.core.readback import EVAL_METADATA, read_object
from evalkit.core.runs import METADATA
from evalkit.core.types import ExampleId, id_order, row_order
from evalkit.eval.results import read_rows
from evalkit.eval.summary import summarize


@dataclass
class EvalRun:
    """One eval run: its files, parsed; ``label`` names it in comparisons."""

    path: Path
    label: str
    meta: dict[str, Any]
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    rollouts_per_example: int


@dataclass
class ExampleStat:
    """One example (a group of rollouts): what the reward-by-example table shows."""

    example_id: ExampleId
    question: str
    answer: str
    rewards: list[float] = field(default_factory=list)
    errors: int = 0
    passed: int = 0

    @property
    def mean(self) -> float:
        return sum(self.rewards) / len(self.rewards) if self.rewards else 0.0


@dataclass
class ErrorGroup:
    """Rollouts that failed the same way: a kind (whose fault), a message, how many, and which."""

    kind: str
    message: str
    count: int
    example_ids: list[ExampleId]


def load_eval_run(path: Path, label: str | None = None) -> EvalRun:
    """Read ``results.jsonl`` and ``metadata.json`` (either may be missing on a killed run)."""
    meta = read_object(path / METADATA, EVAL_METADATA)
    rows = read_rows(path)
    rows.sort(key=row_order)
    rpe = _int(meta.get("rollouts_per_example")) or max((int(r["rollout_idx"]) for r in rows), default=0) + 1
    threshold = _float(meta.get("pass_threshold"))
    summary = summarize(rows, rpe, 1.0 if threshold is None else threshold)
    return EvalRun(path, label or default_label(path, meta), meta, rows, summary, rpe)


def default_label(path: Path, meta: dict[str, Any]) -> str:
    """``model · run-id``: enough to tell runs apart side by side."""
    model = str(meta.get("model") or path.parent.name)
    return f"{model} · {path.name}"


def header(run: EvalRun) -> list[tuple[str, str]]:
    """The run header as (name, value) pairs, skipping what the run does not record."""
    meta = run.meta
    sampling = meta.get("effective_sampling_args") or meta.get("sampling_args") or {}
    duration = _float(meta.get("duration_s"))
    if duration is None:
        duration = _float(meta.get("time"))
    pairs = [
        ("environment", str(meta.get("env_id") or "?")),
        ("env args", _compact(meta.get("env_args"))),
        ("model", str(meta.get("model") or "?")),
        ("sampling", _compact(sampling)),
        ("system prompt sha256", str(meta.get("system_prompt_sha256") or "")[:12]),
        ("date", str(meta.get("date") or "")),
        ("duration", f"{duration:.1f} s" if duration is not None else ""),
        ("status", str(meta.get("status") or ("incomplete" if not meta else "unknown"))),
        ("version", version_text(meta)),
        ("run dir", str(run.path)),
    ]
    return [(name, value) for name, value in pairs if value]


def version_text(meta: dict[str, Any]) -> str:
    """``version`` (ours) and/or ``version_info`` (verifiers: vf_version, env_version, commits)."""
    parts = [f"primekit {meta['version']}"] if meta.get("version") else []
    info = meta.get("version_info")
    if isinstance(info, dict):
        parts += [f"{key} {value}" for key, value in info.items() if value not in (None, "")]
    elif info:
        parts.append(str(info))
    return ", ".join(parts)


def examples(run: EvalRun) -> list[ExampleStat]:
    """Per example: rewards of its rollouts, passes (reward ≥ threshold) and errors, by example id."""
    threshold = run.summary.get("pass_threshold", 1.0)
    stats: dict[ExampleId, ExampleStat] = {}
    for row in run.rows:
        eid = row["example_id"]
        stat = stats.get(eid)
        if stat is None:
            stat = stats[eid] = ExampleStat(eid, question_text(row), text_of(row.get("answer")))
        stat.errors += bool(row.get("error"))
        if not is_scored(row):  # errors are not scores (evalkit.core.errors)
            continue
        reward = _float(row.get("reward")) or 0.0
        stat.rewards.append(reward)
        stat.passed += reward >= threshold
    return [stats[eid] for eid in sorted(stats, key=id_order)]


def error_kind_and_message(row: dict[str, Any]) -> tuple[str, str]:
    """Whose fault a row's error is and its message (the row must have an ``error``).

    The kind is the one the run recorded (:func:`evalkit.core.errors.error_kind`: ``unknown`` when a row has
    none), or the type of an error written as verifiers' ``{"error": TYPE, "message": ...}``; the message
    is never parsed for it. The message goes through redaction again: errors are where servers echo
    credentials, and a run written by another tool (or an older primekit) may not have scrubbed them.
    """
    from evalkit.core.redact import redact

    error = row["error"]
    if isinstance(error, dict):
        kind = str(error.get("error") or error.get("type") or error.get("kind") or "error")
        return kind, redact(str(error.get("message") or error.get("error_chain_str") or kind))
    return str(error_kind(row)), redact(str(error))


def error_groups(rows: list[dict[str, Any]], limit: int = 50) -> list[ErrorGroup]:
    """Errors grouped by (kind, first 200 chars of the message), most frequent first."""
    groups: dict[tuple[str, str], ErrorGroup] = {}
    for row in rows:
        if not row.get("error"):
            continue
        kind, message = error_kind_and_message(row)
        key = (kind, message[:200])
        group = groups.setdefault(key, ErrorGroup(kind, message[:200], 0, []))
        group.count += 1
        if row["example_id"] not in group.example_ids:
            group.example_ids.append(row["example_id"])
    return sorted(groups.values(), key=lambda g: -g.count)[:limit]


def stop_conditions(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How rollouts ended (completed, length, max_turns, error, ...), most frequent first."""
    counts: dict[str, int] = {}
    for row in rows:
        key = str(row.get("stop_condition") or ("error" if row.get("error") else "unknown"))
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def question_text(row: dict[str, Any]) -> str:
    """The last user message of the prompt (what the example asks), as plain text."""
    for message in reversed(row.get("prompt") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return text_of(message.get("content"))
    prompt = row.get("prompt")
    return prompt if isinstance(prompt, str) else ""


def text_of(content: Any) -> str:
    """Message content as text: strings as they are, multimodal part lists joined, the rest as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def _compact(value: Any) -> str:
    if not value:
        return ""
    return (
        json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        if isinstance(value, (dict, list))
        else str(value)
    )


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None
